// JSONL lines and their documents; see jsonl.h. The reader keeps one buffer:
// the unreturned bytes, grown only while a line is longer than a read block,
// and never past max_line_bytes plus one block.
#include "data/jsonl.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

namespace tera {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; });
}

// nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 5: ..." as
// "parse error at column 5: ...", at most 200 bytes (a long line's last token can be long).
std::string short_parse_error(const char* what) {
  std::string s = what;
  if (s.rfind("[json.exception.", 0) == 0 && s.find("] ") != std::string::npos) s.erase(0, s.find("] ") + 2);
  if (const size_t at = s.find("at line 1, "); at != std::string::npos) s.erase(at + 3, 8);
  if (s.size() > 200) s = s.substr(0, 200) + "...";
  return s;
}

// "id, meta, content" for the hint on a missing key (at most 8 named).
std::string key_list(const nlohmann::json& obj) {
  std::string out;
  int n = 0;
  for (auto it = obj.begin(); it != obj.end(); ++it, ++n) {
    if (n == 8) return out + ", ...";
    out += (n > 0 ? ", " : "") + nlohmann::json(it.key()).dump();
  }
  return out.empty() ? "none" : out;
}

}  // namespace

Expected<InputFormat> parse_input_format(const std::string& name) {
  if (name == "text") return InputFormat::kText;
  if (name == "jsonl") return InputFormat::kJsonl;
  if (name == "auto") return InputFormat::kAuto;
  return Status::error("--input-format " + name + ": unknown; use auto (JSONL by name: .jsonl, .jsonl.gz), jsonl "
                       "or text");
}

bool is_jsonl_input(const std::string& path, InputFormat format) {
  if (format != InputFormat::kAuto) return format == InputFormat::kJsonl;
  return ends_with(path, ".jsonl") || ends_with(path, ".jsonl.gz");
}

Status check_json_keys(const std::vector<std::string>& keys) {
  if (keys.empty()) return Status::error("--json-key: give at least one key (Megatron's default is text)");
  std::set<std::string> seen;
  for (const auto& k : keys) {
    if (!seen.insert(k).second) return Status::error("--json-key " + k + ": given twice; name each key once");
  }
  return ok_status();
}

LineReader::LineReader(std::unique_ptr<ByteSource> src, std::string name, size_t max_line_bytes, size_t read_block)
    : src_(std::move(src)),
      name_(std::move(name)),
      max_(std::max<size_t>(max_line_bytes, 1)),
      block_(std::max<size_t>(read_block, 1)) {}

Status LineReader::fill() {
  const size_t old = buf_.size();
  buf_.resize(old + block_);
  auto got = src_->read(buf_.data() + old, block_);
  buf_.resize(old + (got ? *got : 0));
  if (!got) return got.status();
  eof_ = *got == 0;
  return ok_status();
}

Expected<bool> LineReader::next() {
  size_t scanned = begin_;  // bytes before it hold no \n
  for (;;) {
    const char* from = buf_.data() + scanned;
    const auto* nl = static_cast<const char*>(std::memchr(from, '\n', buf_.size() - scanned));
    size_t end = nl != nullptr ? static_cast<size_t>(nl - buf_.data()) : buf_.size();
    if (end - begin_ > max_) {
      return Status::error(fmt::format("{}:{}: a line longer than {} bytes; JSONL holds one document per line "
                                       "(is this a JSON array or a text file? pass --input-format text for text)",
                                       name_, number_ + 1, max_));
    }
    if (nl != nullptr || (eof_ && begin_ < buf_.size())) {
      const size_t next = nl != nullptr ? end + 1 : end;
      if (nl != nullptr && end > begin_ && buf_[end - 1] == '\r') --end;  // \r\n; a last lone \r stays
      line_ = std::string_view(buf_.data() + begin_, end - begin_);
      begin_ = next;
      ++number_;
      return true;
    }
    if (eof_) return false;
    // No \n in the unreturned bytes: keep only them (shrinking the buffer
    // after a long line), then read on.
    buf_.erase(0, begin_);
    if (buf_.capacity() > std::max<size_t>(4 * block_, 1 << 16) && buf_.size() < block_) buf_.shrink_to_fit();
    begin_ = 0;
    scanned = buf_.size();
    TERA_RETURN_IF_ERROR(fill());
  }
}

namespace {

std::string documents_of_line(std::string_view line, const std::vector<std::string>& keys,
                              std::vector<JsonlDocument>& docs) {
  if (is_blank(line)) return {};
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line.begin(), line.end());
  } catch (const nlohmann::json::exception& e) {
    return "not valid JSON (" + short_parse_error(e.what()) + ")";
  }
  if (!j.is_object()) return std::string("not a JSON object but ") + j.type_name();
  for (size_t k = 0; k < keys.size(); ++k) {
    auto it = j.find(keys[k]);
    if (it == j.end()) {
      return fmt::format("no key {} (its keys: {}); pass --json-key with the key that holds the text",
                         nlohmann::json(keys[k]).dump(), key_list(j));
    }
    if (!it->is_string()) {
      return fmt::format("the value of {} is {} {}, not a string", nlohmann::json(keys[k]).dump(),
                         it->is_array() || it->is_object() ? "an" : "a", it->type_name());
    }
    std::string& s = it->get_ref<std::string&>();
    if (!s.empty()) docs.push_back({static_cast<int>(k), std::move(s)});
  }
  return {};
}

}  // namespace

std::string parse_jsonl_line(std::string_view line, const std::vector<std::string>& keys,
                             std::vector<JsonlDocument>& docs) {
  docs.clear();
  std::string why = documents_of_line(line, keys, docs);
  if (!why.empty()) docs.clear();  // a malformed line gives no document, not the keys before the bad one
  return why;
}

}  // namespace tera
