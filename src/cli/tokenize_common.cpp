// What the `tera tokenize` subcommands share (tokenize_common.h).
#include "cli/tokenize_common.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "cli/commands.h"
#include "cli/output_paths.h"
#include "core/format.h"
#include "data/text_chunks.h"

namespace tera::cli {

namespace fs = std::filesystem;

ProgressBar::ProgressBar(std::string label, bool bytes) : label_(std::move(label)), bytes_(bytes), tty_(isatty(2) != 0) {}

void ProgressBar::update(int64_t done, int64_t total) {
  if (!tty_) return;
  const auto now = Clock::now();
  if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double frac = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int width = 24, full = static_cast<int>(frac * width);
  const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
  const double eta = rate > 0 ? static_cast<double>(total - done) / rate : 0;
  const std::string amount = bytes_
                                 ? fmt::format("{:.1f}/{:.1f} MB  {:.1f} MB/s", done / 1e6, total / 1e6, rate / 1e6)
                                 : fmt::format("{}/{}  {:.0f}/s", done, total, rate);
  fmt::print(stderr, "\r{:<8} [{}{}] {:3.0f}%  {}  eta {}   ", label_, std::string(static_cast<size_t>(full), '#'),
             std::string(static_cast<size_t>(width - full), '.'), 100 * frac, amount, human_duration(eta));
  drawn_ = true;
}

ProgressBar::~ProgressBar() {
  if (drawn_) fmt::print(stderr, "\n");
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int default_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

int fail(const std::string& msg) {
  print_error(msg);
  return kExitBadInput;
}

Expected<std::vector<std::string>> inputs_with_bytes(const std::vector<std::string>& inputs) {
  auto files = list_input_files(inputs);
  if (!files) return files.status();
  int64_t bytes = 0;
  for (const auto& f : *files) {
    std::error_code ec;
    bytes += static_cast<int64_t>(fs::file_size(f, ec));
  }
  if (bytes == 0) {
    return Status::error(
        fmt::format("--input {}: empty corpus ({} files, 0 bytes of text)", fmt::join(inputs, " "), files->size()));
  }
  return files;
}

void add_jsonl_flags(CLI::App* app, JsonlArgs& a) {
  app->add_option("--input-format", a.format,
                  "auto: a file named *.jsonl or *.jsonl.gz is JSONL (one JSON object per line; gzip found by its "
                  "magic bytes), any other file is text (one document per file); jsonl or text: every input is")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "jsonl", "text"}));
  app->add_option("--json-key,--json-keys", a.keys,
                  "JSONL: the key(s) whose string values are documents, as Megatron's preprocess_data; several keys "
                  "give several documents per line, in key order (--format megatron: a dataset PREFIX_<key> each)")
      ->capture_default_str();
  app->add_flag("--skip-bad-lines", a.skip_bad_lines,
                "JSONL: skip malformed lines (not JSON, not an object, a key missing or not a string), count them and "
                "name the first; without it the first one stops the command (exit 2). Blank lines are always skipped");
}

Expected<JsonlOptions> jsonl_options(const JsonlArgs& a) {
  JsonlOptions o;
  auto f = parse_input_format(a.format);
  if (!f) return f.status();
  o.format = *f;
  o.keys = a.keys;
  o.skip_bad_lines = a.skip_bad_lines;
  TERA_RETURN_IF_ERROR(check_json_keys(o.keys));
  return o;
}

void report_jsonl(const ChunkReport& r) {
  if (r.bad_lines == 0) return;
  fmt::print(stderr, "tera: warning: skipped {} malformed JSONL line{} of {} (first: {})\n", r.bad_lines,
             r.bad_lines == 1 ? "" : "s", r.jsonl_lines, r.first_bad);
}

}  // namespace tera::cli
