// JSONL corpora, as Megatron-LM's tools/preprocess_data.py reads them: one
// JSON object per line, the documents being the string values of the chosen
// keys (--json-key, "text" by default). Several keys give several documents
// per line, in key order. A blank line (only whitespace) is no document and
// no error; a line that is not a JSON object, lacks a key, or holds a
// non-string value there is malformed. A key whose value is "" gives no
// document, as an empty text file gives none.
// Lines end in \n or \r\n; a line longer than JsonlOptions::max_line_bytes is
// an error naming it, so reading holds at most one line plus a fixed buffer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "data/byte_source.h"

namespace tera {

// Which inputs are JSONL: auto, by name (.jsonl, .jsonl.gz); or all of them.
enum class InputFormat { kText, kJsonl, kAuto };

Expected<InputFormat> parse_input_format(const std::string& name);  // "text", "jsonl" or "auto"

struct JsonlOptions {
  InputFormat format = InputFormat::kText;  // the library's default; the CLI's is kAuto
  std::vector<std::string> keys = {"text"};
  bool skip_bad_lines = false;                // else the first malformed line is an error
  size_t max_line_bytes = size_t{256} << 20;  // longer lines are errors, never read whole
};

// True when path is read as JSONL under format.
bool is_jsonl_input(const std::string& path, InputFormat format);

// Refuses an empty or duplicate key list, naming --json-key.
Status check_json_keys(const std::vector<std::string>& keys);

// Splits a byte stream into lines, without the \n or \r\n that ends them (a
// last line without \n counts too). line() stays valid until the next next().
class LineReader {
 public:
  // read_block: bytes asked of the source at a time (small in the fuzz target, so lines span reads).
  LineReader(std::unique_ptr<ByteSource> src, std::string name, size_t max_line_bytes,
             size_t read_block = size_t{1} << 20);
  // False at the end of the stream; an error names the file and line.
  Expected<bool> next();
  std::string_view line() const { return line_; }
  int64_t line_number() const { return number_; }  // 1-based, of line()
  int64_t raw_bytes() const { return src_->raw_bytes(); }

 private:
  Status fill();

  std::unique_ptr<ByteSource> src_;
  std::string name_;
  size_t max_, block_;
  std::string buf_;   // bytes read and not yet returned start at begin_
  size_t begin_ = 0;  // of the unreturned bytes in buf_
  bool eof_ = false;
  std::string_view line_;
  int64_t number_ = 0;
};

// The documents of one line: the values of keys, in key order, key index
// beside each; "" values left out. A blank line gives none. The error (empty
// when the line is fine) says what is wrong, without the file and line; a
// malformed line gives no document.
struct JsonlDocument {
  int key = 0;
  std::string text;
};
std::string parse_jsonl_line(std::string_view line, const std::vector<std::string>& keys,
                             std::vector<JsonlDocument>& docs);

}  // namespace tera
