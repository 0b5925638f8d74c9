// What the `tera tokenize` subcommands share (cmd_tokenize.cpp: train and
// encode; cmd_tokenize_read.cpp: decode, stats, convert): the progress line,
// the JSONL flags and their report, the input check, and the registration
// each subcommand gives add_tokenize_command.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/corpus_encode.h"

namespace tera::cli {

using Clock = std::chrono::steady_clock;

// One self-overwriting status line on a terminal; silent otherwise.
class ProgressBar {
 public:
  ProgressBar(std::string label, bool bytes);
  void update(int64_t done, int64_t total);
  ~ProgressBar();

 private:
  std::string label_;
  bool bytes_, tty_, drawn_ = false;
  Clock::time_point start_ = Clock::now(), last_{};
};

double seconds_since(Clock::time_point t);
int default_threads();
// Prints msg as tera's error and returns the bad-input exit code.
int fail(const std::string& msg);
// The files the --input arguments name; an error when they hold no byte.
Expected<std::vector<std::string>> inputs_with_bytes(const std::vector<std::string>& inputs);

// JSONL input, shared by train, encode and stats.
struct JsonlArgs {
  std::string format = "auto";
  std::vector<std::string> keys = {"text"};
  bool skip_bad_lines = false;
};
void add_jsonl_flags(CLI::App* app, JsonlArgs& a);
Expected<JsonlOptions> jsonl_options(const JsonlArgs& a);
// "skipped 3 malformed JSONL lines of 1000 (first: a.jsonl:17: ...)" on stderr, when lines were skipped.
void report_jsonl(const ChunkReport& r);

// A subcommand of `tera tokenize`: its flags registered on the parent, and
// what runs it once parsed.
struct TokenizeSubcommand {
  CLI::App* app;
  std::function<int()> run;
};
TokenizeSubcommand add_tokenize_train(CLI::App* parent);
TokenizeSubcommand add_tokenize_encode(CLI::App* parent);
TokenizeSubcommand add_tokenize_decode(CLI::App* parent);
TokenizeSubcommand add_tokenize_stats(CLI::App* parent);
TokenizeSubcommand add_tokenize_convert(CLI::App* parent);

}  // namespace tera::cli
