// libFuzzer target: the JSONL corpus reader (byte_source.h, jsonl.h) over
// plain or gzip bytes. Lines tile the input exactly (each line then its \n or
// \r\n), line numbers count up from 1, errors name the source, and every
// document is a non-empty value of a requested key, in key order, that reads
// back the same from a line JSON writes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "data/byte_source.h"
#include "data/jsonl.h"

namespace {

const std::vector<std::string> kKeys = {"text", "title"};

void check_documents(std::string_view line) {
  std::vector<tera::JsonlDocument> docs;
  const std::string why = tera::parse_jsonl_line(line, kKeys, docs);
  if (!why.empty() && !docs.empty()) std::abort();
  int last = -1;
  for (const auto& d : docs) {
    if (d.key <= last || d.key >= static_cast<int>(kKeys.size()) || d.text.empty()) std::abort();
    last = d.key;
    std::vector<tera::JsonlDocument> again;
    const std::string line2 = nlohmann::json{{kKeys[0], d.text}, {kKeys[1], d.text}}.dump();
    if (!tera::parse_jsonl_line(line2, kKeys, again).empty() || again.size() != 2 || again[0].text != d.text) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto src = tera::open_memory_source(in, "fuzz.jsonl");
  if (!src.ok()) return 0;
  const bool plain = !tera::has_gzip_magic(in);
  // Small bound and reads, so that long lines and lines across reads are met.
  tera::LineReader reader(std::move(*src), "fuzz.jsonl", 256, 1 + size % 61);
  size_t pos = 0;  // plain input: where the next line starts
  for (int64_t n = 1;; ++n) {
    auto more = reader.next();
    if (!more.ok()) {
      if (more.error().rfind("fuzz.jsonl", 0) != 0) std::abort();
      return 0;
    }
    if (!*more) break;
    const std::string_view line = reader.line();
    if (reader.line_number() != n || line.find('\n') != std::string_view::npos) std::abort();
    if (plain) {
      if (in.substr(pos, line.size()) != line) std::abort();
      pos += line.size();
      if (in.substr(pos, 2) == "\r\n") {
        pos += 2;
      } else if (pos < in.size()) {
        if (in[pos] != '\n') std::abort();
        ++pos;
      }
    }
    check_documents(line);
  }
  if (plain && pos != in.size()) std::abort();
  return 0;
}
