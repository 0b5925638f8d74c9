// RFC 4180 CSV parsing (see csv.h).
#include "plan/csv.h"

#include <fmt/format.h>

namespace tera {

Expected<CsvTable> parse_csv(const std::string& text, const std::string& where) {
  std::vector<std::vector<std::string>> records;
  std::vector<int> lines;
  std::vector<std::string> rec;
  std::string field;
  bool quoted = false, field_started = false;
  int line = 1, rec_line = 1, quote_line = 0;
  auto end_field = [&] {
    rec.push_back(field);
    field.clear();
    field_started = false;
  };
  auto end_record = [&] {
    end_field();
    if (!(rec.size() == 1 && rec[0].empty())) {  // skip blank lines
      records.push_back(rec);
      lines.push_back(rec_line);
    }
    rec.clear();
  };
  // A UTF-8 byte-order mark (what spreadsheet programs write) is not part of the first column's name.
  const size_t start = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  for (size_t i = start; i < text.size(); ++i) {
    const char ch = text[i];
    if (quoted) {
      if (ch == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (ch == '\n') ++line;
        field += ch;
      }
      continue;
    }
    if (ch == '"' && !field_started) {
      quoted = true;
      field_started = true;
      quote_line = line;
    } else if (ch == ',') {
      end_field();
    } else if (ch == '\n' || ch == '\r') {
      if (ch == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      end_record();
      ++line;
      rec_line = line;
    } else {
      field += ch;
      field_started = true;
    }
  }
  if (quoted) return Status::error(fmt::format("{}:{}: unterminated quoted field; close the quote", where, quote_line));
  if (field_started || !rec.empty()) end_record();
  if (records.empty()) return Status::error(where + ": empty CSV file; expected a header row and data rows");
  CsvTable t;
  t.header = records[0];
  for (size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != t.header.size()) {
      return Status::error(fmt::format("{}:{}: row has {} fields but the header has {}; quote fields that contain commas",
                                       where, lines[r], records[r].size(), t.header.size()));
    }
    std::map<std::string, std::string> row;
    for (size_t c = 0; c < t.header.size(); ++c) row[t.header[c]] = records[r][c];
    t.rows.push_back(std::move(row));
    t.row_lines.push_back(lines[r]);
  }
  return t;
}

}  // namespace tera
