// A small RFC 4180 CSV reader: comma-separated, double-quoted fields may hold
// commas, newlines and doubled quotes. The first row is the header; rows are
// read as maps from column name to text. Malformed input (an unterminated
// quote, a row with the wrong number of fields) fails naming file and line.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace tera {

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
  std::vector<int> row_lines;  // line where each row starts, for messages
};

Expected<CsvTable> parse_csv(const std::string& text, const std::string& where);

}  // namespace tera
