// Data-pipeline benchmark: BPE training time, encode throughput (MB/s of
// source text, 1 and 2 threads) and loader throughput (tokens/s delivered as
// training windows) against what the demo model consumes. The corpus is the
// text files found under --input (by default Debian's fortunes and the Python
// sources installed with python3 and python3-torch), concatenated up to --mb
// megabytes; files with a NUL byte in their first 4 KiB are skipped.
// Usage: data_bench [--input DIR_OR_FILE ...] [--mb 24] [--vocab 8192] [--seq 128] [--micro-batch 16]
//                   [--metrics out/demo/metrics.jsonl]
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/bpe_trainer.h"
#include "data/corpus_encode.h"
#include "data/shard_dataset.h"
#include "data/token_loader.h"
#include "data/token_shard.h"

namespace fs = std::filesystem;
using namespace tera;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// CPU seconds used by this process so far (all threads).
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Concatenates text files (no NUL byte in their first 4 KiB) under inputs into `out`, up to max_bytes.
int64_t build_corpus(const std::vector<std::string>& inputs, int64_t max_bytes, const std::string& out) {
  std::vector<std::string> present;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (fs::exists(in, ec)) present.push_back(in);
  }
  auto files = list_input_files(present);
  if (!files) return 0;
  std::ofstream o(out, std::ios::binary);
  int64_t total = 0;
  std::string buf;
  for (const auto& f : *files) {
    if (total >= max_bytes) break;
    std::ifstream in(f, std::ios::binary);
    buf.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (buf.empty() || buf.substr(0, 4096).find('\0') != std::string::npos) continue;
    if (static_cast<int64_t>(buf.size()) > max_bytes - total) buf.resize(static_cast<size_t>(max_bytes - total));
    o << buf;
    total += static_cast<int64_t>(buf.size());
  }
  return total;
}

// Median tokens/s of a training run's metrics JSONL (0 when unreadable).
double consumption(const std::string& metrics) {
  std::ifstream f(metrics);
  std::vector<double> v;
  for (std::string line; std::getline(f, line);) {
    try {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("tokens_per_s")) v.push_back(j["tokens_per_s"].get<double>());
    } catch (const nlohmann::json::exception&) {
    }
  }
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tera data-pipeline benchmark"};
  std::vector<std::string> inputs = {"/usr/share/games/fortunes", "/usr/lib/python3.11",
                                     "/usr/lib/python3/dist-packages"};
  int64_t mb = 24, vocab = 8192, T = 128, micro = 16;
  std::string metrics = "out/demo/metrics.jsonl";
  app.add_option("--input", inputs, "Text files or directories for the corpus")->capture_default_str();
  app.add_option("--mb", mb, "Corpus size in MB (10^6 bytes)")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--vocab", vocab, "Tokenizer vocabulary to train")
      ->capture_default_str()
      ->check(CLI::Range(257, 1 << 20));
  app.add_option("--seq", T, "Loader window (model.seq_len)")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  app.add_option("--micro-batch", micro, "Windows per loader call")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--metrics", metrics, "Training metrics (JSONL) whose tokens/s the loader is compared with")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const fs::path dir = fs::temp_directory_path() / fmt::format("tera_data_bench.{}", getpid());
  fs::create_directories(dir);
  const std::string corpus = (dir / "corpus.txt").string();
  const int64_t bytes = build_corpus(inputs, mb * 1000000, corpus);
  if (bytes < mb * 1000000) {
    fmt::print(stderr, "data_bench: found only {:.1f} MB of text under --input; pass more inputs or a smaller --mb\n",
               bytes / 1e6);
    fs::remove_all(dir);
    return 2;
  }
  fmt::print("corpus: {:.1f} MB of text from {}\n", bytes / 1e6, fmt::join(inputs, ", "));

  auto t0 = Clock::now();
  auto words = count_words({corpus}, 2);
  const double count_s = since(t0);
  BpeTrainOptions opt;
  opt.vocab_size = vocab;
  t0 = Clock::now();
  auto tok = train_bpe(*words, opt);
  const double merge_s = since(t0);
  if (!tok) {
    fmt::print(stderr, "data_bench: {}\n", tok.error());
    return 1;
  }
  fmt::print("train:  vocab {} in {:.2f} s = count {:.2f} s (2 threads, {} distinct pieces) + merges {:.2f} s\n",
             tok->vocab_size(), count_s + merge_s, count_s, words->size(), merge_s);

  int64_t tokens = 0;
  for (int threads : {1, 2}) {
    EncodeOptions eo;
    eo.threads = threads;
    tokens = 0;
    t0 = Clock::now();
    const double cpu0 = cpu_seconds();
    auto st = encode_corpus({corpus}, *tok, eo, [&](int, const int32_t*, size_t n) {
      tokens += static_cast<int64_t>(n);
      return ok_status();
    });
    const double s = since(t0), cpu = cpu_seconds() - cpu0;
    fmt::print("encode: {} thread{}: {:.1f} MB/s ({:.2f} s wall, {:.2f} s CPU; {} tokens, {:.2f} bytes/token)\n",
               threads, threads == 1 ? " " : "s", bytes / 1e6 / s, s, cpu, tokens, static_cast<double>(bytes) / tokens);
  }

  EncodeOptions eo;
  eo.threads = 2;
  auto m = encode_to_shards({corpus}, *tok, (dir / "shards").string(), eo);
  t0 = Clock::now();
  auto ds = ShardDataset::open((dir / "shards").string(), "train");
  const double open_s = since(t0);
  if (!m || !ds) {
    fmt::print(stderr, "data_bench: {}{}\n", m.ok() ? "" : m.error(), ds.ok() ? "" : ds.error());
    return 1;
  }
  auto loader = TokenLoader::create(**ds, T, 1234, "bench");
  std::vector<int32_t> tok_buf(static_cast<size_t>(micro * T)), tgt_buf(tok_buf.size());
  int64_t samples = 0;
  t0 = Clock::now();
  while (since(t0) < 2.0) {
    for (int k = 0; k < 64; ++k, samples += micro) (*loader)->fill(samples, micro, tok_buf.data(), tgt_buf.data());
  }
  const double loader_tps = static_cast<double>(samples * T) / since(t0);
  fmt::print("loader: opened and checked {} tokens of shards in {:.3f} s ({:.2f} GB/s)\n", (*ds)->num_tokens(), open_s,
             static_cast<double>((*ds)->num_tokens()) * shard_token_bytes(tok->vocab_size()) / 1e9 / open_s);
  fmt::print("loader: {:.3g} tokens/s (windows of {} tokens, {} per call, random order over {} windows, 1 thread)\n",
             loader_tps, T, micro, (*loader)->windows_per_epoch());
  const double need = consumption(metrics);
  if (need > 0) {
    fmt::print("        the demo model consumes {:.0f} tokens/s (median of {}): the loader is {:.0f}x faster\n", need,
               metrics, loader_tps / need);
  } else {
    fmt::print("        (no {} to compare with: run scripts/demo first)\n", metrics);
  }
  fs::remove_all(dir);
  return 0;
}
