// `tera tokenize train|encode|decode|stats`: train a byte-level BPE on text
// or JSONL files, encode a corpus into checked token shards (or a Megatron
// dataset), decode shards back to text, and print token counts and
// compression. A text file is one document; a JSONL line gives one per
// --json-key. Progress bars (MB/s, ETA) are drawn on stderr only when it is a
// terminal. Bad input exits 2. Every output is checked before any work: an
// existing --out file is replaced only with --force (atomically), and an
// output is never one of the inputs.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/output_paths.h"
#include "cli/tokenizer_flags.h"
#include "core/file_util.h"
#include "core/format.h"
#include "data/bpe_trainer.h"
#include "data/corpus_encode.h"
#include "data/megatron_dataset.h"
#include "data/megatron_index.h"
#include "data/shard_dataset.h"
#include "data/shard_manifest.h"
#include "data/token_shard.h"
#include "data/tokenizer_file.h"

namespace tera::cli {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// One self-overwriting status line on a terminal; silent otherwise.
class ProgressBar {
 public:
  ProgressBar(std::string label, bool bytes) : label_(std::move(label)), bytes_(bytes), tty_(isatty(2) != 0) {}
  void update(int64_t done, int64_t total) {
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
  ~ProgressBar() {
    if (drawn_) fmt::print(stderr, "\n");
  }

 private:
  std::string label_;
  bool bytes_, tty_, drawn_ = false;
  Clock::time_point start_ = Clock::now(), last_{};
};

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

// ---- JSONL input, shared by train, encode and stats ----
struct JsonlArgs {
  std::string format = "auto";
  std::vector<std::string> keys = {"text"};
  bool skip_bad_lines = false;
};

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

// "skipped 3 malformed JSONL lines of 1000 (first: a.jsonl:17: ...)" on stderr, when lines were skipped.
void report_jsonl(const ChunkReport& r) {
  if (r.bad_lines == 0) return;
  fmt::print(stderr, "tera: warning: skipped {} malformed JSONL line{} of {} (first: {})\n", r.bad_lines,
             r.bad_lines == 1 ? "" : "s", r.jsonl_lines, r.first_bad);
}

// ---- train ----
struct TrainArgs {
  JsonlArgs jsonl;
  std::vector<std::string> inputs;
  std::string out;
  int64_t vocab = 0;
  int64_t min_frequency = 2;
  int threads = default_threads();
  bool force = false;
};

int run_train(const TrainArgs& a) {
  auto jsonl = jsonl_options(a.jsonl);
  if (!jsonl) return fail(jsonl.error());
  auto files = inputs_with_bytes(a.inputs);
  if (!files) return fail(files.error());
  if (Status s = check_output_file(a.out, "--out", a.force); !s) return fail(s.message());
  if (Status s = refuse_overlapping_paths({{a.out, "--out", {}}}, inputs_named(*files, "--input")); !s) {
    return fail(s.message());
  }
  const auto t0 = Clock::now();
  Expected<WordCounts> words = Status::error("not counted");
  ChunkReport read;
  {
    ProgressBar bar("count", true);
    words = count_words(*files, a.threads, [&](int64_t d, int64_t t) { bar.update(d, t); }, *jsonl, &read);
  }
  if (!words) return fail(words.error());
  report_jsonl(read);
  if (words->total() == 0) {
    return fail(fmt::format("--input {}: empty corpus: no document has text ({} JSONL lines read, {} malformed "
                            "skipped); check --json-key",
                            fmt::join(a.inputs, " "), read.jsonl_lines, read.bad_lines));
  }
  const double count_s = seconds_since(t0);
  fmt::print("counted {} pieces ({} distinct) in {} files in {:.1f} s\n", words->total(), words->size(), files->size(),
             count_s);
  BpeTrainOptions opt;
  opt.vocab_size = a.vocab;
  opt.min_frequency = a.min_frequency;
  const auto t1 = Clock::now();
  Expected<BpeTokenizer> tok = Status::error("not trained");
  {
    ProgressBar bar("merge", false);
    tok = train_bpe(*words, opt, [&](int64_t d, int64_t t) { bar.update(d, t); });
  }
  if (!tok) return fail("--vocab: " + tok.error());
  if (Status s = save_tokenizer(*tok, a.out); !s) return fail(s.message());
  fmt::print("learned {} merges in {:.1f} s; vocabulary {} (256 bytes + merges + {} special){}\n", tok->merges().size(),
             seconds_since(t1), tok->vocab_size(), tok->specials().size(),
             tok->vocab_size() < a.vocab ? fmt::format(" -- fewer than the {} asked for: the corpus ran out of pairs "
                                                       "occurring >= {} times",
                                                       a.vocab, a.min_frequency)
                                         : "");
  fmt::print("wrote {} in {:.1f} s total\n", a.out, seconds_since(t0));
  return kExitOk;
}

// ---- encode ----
struct EncodeArgs {
  JsonlArgs jsonl;
  std::vector<std::string> inputs;
  std::string tokenizer, out;
  TokenizerFlags tokenizer_flags;
  double val_fraction = 0;
  int64_t shard_tokens = int64_t{1} << 25;
  int threads = default_threads();
  bool force = false;
  std::string format = "shards";  // or "megatron"
};

// --format megatron: --out is a prefix; PREFIX.bin and PREFIX.idx are written
// (each atomically), one document per input text file or JSONL line; with
// several --json-key, PREFIX_<key>.bin/.idx per key.
int run_encode_megatron(const EncodeArgs& a, const BpeTokenizer& tok, const std::vector<std::string>& files,
                        const JsonlOptions& jsonl) {
  if (a.val_fraction != 0) {
    return fail("--val-fraction: a Megatron dataset holds one split; encode the val text to a prefix of its own");
  }
  auto prefixes = megatron_prefixes(a.out, jsonl.keys);
  if (!prefixes) return fail(prefixes.error());
  std::vector<InputPath> inputs = inputs_named(files, "--input");
  if (a.tokenizer != "bytes") inputs.push_back({a.tokenizer, "--tokenizer"});
  std::vector<OutputPath> outputs;
  for (const auto& prefix : *prefixes) {
    for (const std::string& path : {megatron_bin(prefix), megatron_idx(prefix)}) {
      if (Status s = check_output_file(path, "--out", a.force); !s) return fail(s.message());
      outputs.push_back({path, "--out", {}});
    }
  }
  if (Status s = refuse_overlapping_paths(outputs, inputs); !s) return fail(s.message());
  EncodeOptions opts;
  opts.threads = a.threads;
  opts.jsonl = jsonl;
  const auto t0 = Clock::now();
  Expected<EncodeStats> st = Status::error("not encoded");
  {
    ProgressBar bar("encode", true);
    st = encode_to_megatron(files, tok, a.out, opts, [&](int64_t d, int64_t t) { bar.update(d, t); });
  }
  if (!st) return fail(st.error());
  report_jsonl(st->input);
  const double secs = seconds_since(t0);
  const int64_t bytes = st->bytes[0];
  fmt::print("megatron: {} tokens ({}), {} documents, {} bytes ({:.2f} bytes/token) into {}\n", st->tokens[0],
             tok.vocab_size() <= 65536 ? "uint16" : "int32", st->documents[0], bytes,
             st->tokens[0] > 0 ? static_cast<double>(bytes) / static_cast<double>(st->tokens[0]) : 0.0,
             prefixes->size() == 1 ? megatron_bin(a.out) + " and " + megatron_idx(a.out)
                                   : fmt::format("{} datasets {}_<key>.bin/.idx", prefixes->size(), a.out));
  if (prefixes->size() > 1) {
    for (size_t k = 0; k < prefixes->size(); ++k) {
      fmt::print("{}: {} documents, {} tokens (--json-key {})\n", (*prefixes)[k], st->key_documents[k],
                 st->key_tokens[k], jsonl.keys[k]);
    }
  }
  fmt::print("encoded {} file{} ({:.1f} MB) in {:.1f} s ({:.1f} MB/s, {} thread{}) into {}\n", files.size(),
             files.size() == 1 ? "" : "s", bytes / 1e6, secs, secs > 0 ? bytes / 1e6 / secs : 0.0, a.threads,
             a.threads == 1 ? "" : "s", a.out);
  return kExitOk;
}

int run_encode(const EncodeArgs& a) {
  auto jsonl = jsonl_options(a.jsonl);
  if (!jsonl) return fail(jsonl.error());
  auto tok = open_tokenizer(tokenizer_spec(a.tokenizer_flags, a.tokenizer));
  if (!tok) return fail("--tokenizer: " + tok.error());
  auto files = inputs_with_bytes(a.inputs);
  if (!files) return fail(files.error());
  if (a.format == "megatron") return run_encode_megatron(a, *tok, *files, *jsonl);
  // The shard directory is rewritten (old shards removed): no input may live
  // in it, or a re-encode would read its own earlier output.
  std::vector<InputPath> inputs = inputs_named(*files, "--input");
  if (a.tokenizer != "bytes") inputs.push_back({a.tokenizer, "--tokenizer"});
  if (Status s = refuse_overlapping_paths({{a.out, "--out", {"*"}}}, inputs); !s) return fail(s.message());
  // Another encode's shards are replaced only when asked.
  std::error_code ec;
  if (!a.force && fs::is_directory(a.out, ec) && !fs::is_empty(a.out, ec)) {
    return fail("--out " + a.out + ": already holds files" +
                (is_shard_dir(a.out) ? std::string(" (a token-shard directory)") : std::string()) +
                "; pass --force to replace its shards, or choose an empty or new directory");
  }
  const CreatedDirsGuard created(a.out);
  if (Status s = probe_output_dir(a.out, "--out"); !s) return fail(s.message());
  EncodeOptions opts;
  opts.threads = a.threads;
  opts.val_fraction = a.val_fraction;
  opts.shard_tokens = a.shard_tokens;
  opts.jsonl = *jsonl;
  const auto t0 = Clock::now();
  Expected<ShardManifest> m = Status::error("not encoded");
  ChunkReport read;
  {
    ProgressBar bar("encode", true);
    m = encode_to_shards(*files, *tok, a.out, opts, [&](int64_t d, int64_t t) { bar.update(d, t); }, &read);
  }
  if (!m) return fail(m.error());
  report_jsonl(read);
  const double secs = seconds_since(t0);
  int64_t bytes = 0;
  for (const auto& [name, s] : m->splits) {
    bytes += s.bytes;
    fmt::print("{}: {} tokens in {} shard(s), {} documents, {} bytes ({:.2f} bytes/token)\n", name, s.tokens,
               s.shards.size(), s.documents, s.bytes, s.tokens > 0 ? static_cast<double>(s.bytes) / s.tokens : 0.0);
  }
  // A val split shorter than a sequence cannot be evaluated on: say so now, not when a run refuses it.
  constexpr int64_t kSequence = 1024;  // GPT-2's context
  if (auto v = m->splits.find("val"); a.val_fraction > 0 && v != m->splits.end() && v->second.tokens <= kSequence) {
    fmt::print(stderr,
               "tera: warning: the val split holds {} tokens, not one sequence of {} (GPT-2's context) plus its "
               "target; a run with model.seq_len >= {} cannot evaluate on it. Raise --val-fraction, or give the run "
               "a data.val of its own\n",
               v->second.tokens, kSequence, v->second.tokens);
  }
  fmt::print("encoded {} file{} ({:.1f} MB) in {:.1f} s ({:.1f} MB/s, {} thread{}) into {}\n", files->size(),
             files->size() == 1 ? "" : "s", bytes / 1e6, secs, secs > 0 ? bytes / 1e6 / secs : 0.0, a.threads,
             a.threads == 1 ? "" : "s", a.out);
  return kExitOk;
}

// The shard files an --input names (a shard file, or a directory's split) and
// the tokenizer to read them with (--tokenizer, else the directory's).
struct ShardInput {
  std::vector<std::string> paths;
  std::string tok_path;  // the tokenizer file or directory read
  BpeTokenizer tok = BpeTokenizer::bytes();
};

Expected<ShardInput> open_shard_input(const std::string& input, const std::string& tokenizer,
                                      const std::string& split) {
  ShardInput in;
  std::error_code ec;
  std::string tok_path = tokenizer;
  if (fs::is_directory(input, ec)) {
    auto m = read_manifest(input);
    if (!m) return m.status();
    for (const auto& [name, s] : m->splits) {
      if (split != "all" && name != split) continue;
      for (const auto& e : s.shards) in.paths.push_back((fs::path(input) / e.file).string());
    }
    if (split != "all" && m->splits.count(split) == 0) return Status::error(input + ": has no '" + split + "' split");
    if (tok_path.empty()) tok_path = (fs::path(input) / m->tokenizer_file).string();
  } else {
    in.paths.push_back(input);
    if (tok_path.empty()) tok_path = (fs::path(input).parent_path() / "tokenizer.json").string();
  }
  auto tok = open_tokenizer(tok_path);
  if (!tok) return Status::error("tokenizer: " + tok.error());
  in.tok = std::move(*tok);
  in.tok_path = tok_path;
  return in;
}

// ---- decode ----
struct DecodeArgs {
  std::string input, tokenizer, out, split = "all";
  bool force = false;
};

int run_decode(const DecodeArgs& a) {
  auto in = open_shard_input(a.input, a.tokenizer, a.split);
  if (!in) return fail(in.error());
  // Never one of the inputs (a shard, the manifest, a tokenizer), even with --force.
  std::vector<InputPath> inputs = inputs_named(in->paths, "--input");
  inputs.push_back({in->tok_path, "the tokenizer"});
  std::error_code ec;
  const bool dir_input = fs::is_directory(a.input, ec);
  if (dir_input) inputs.push_back({a.input, "--input"});  // the manifest and everything else in it
  if (Status s = refuse_overlapping_paths({{a.out, "--out", {}}}, inputs); !s) return fail(s.message());
  if (dir_input) {
    // A file named like a shard in the shard directory is taken for one (a
    // later encode there removes it as a stale shard).
    const std::string name = fs::path(a.out).filename().string();
    const bool shard_name = (name.starts_with("train-") || name.starts_with("val-")) && name.ends_with(".tok");
    if (shard_name && is_within(a.out, a.input)) {
      return fail("--out " + a.out + ": is named like a shard of the directory " + a.input +
                  " it decodes; write the text elsewhere");
    }
  }
  if (Status s = check_output_file(a.out, "--out", a.force); !s) return fail(s.message());
  auto f = AtomicFile::create(a.out);
  if (!f) return fail("--out " + f.error());
  std::vector<int32_t> ids;
  std::string text;
  for (const auto& path : in->paths) {
    auto shard = TokenShard::open(path);
    if (!shard) return fail(shard.error());
    if (shard->header().tokenizer_fingerprint != in->tok.fingerprint()) {
      return fail(path + ": was encoded with a different tokenizer than the one given; pass the matching --tokenizer");
    }
    constexpr int64_t kBlock = int64_t{1} << 20;
    for (int64_t at = 0; at < shard->size(); at += kBlock) {
      const int64_t n = std::min(kBlock, shard->size() - at);
      ids.resize(static_cast<size_t>(n));
      shard->read(at, n, ids.data());
      text.clear();
      in->tok.decode(ids.data(), ids.size(), text);
      if (Status s = f->write(text.data(), text.size()); !s) return fail(s.message());
    }
  }
  if (Status s = f->commit(); !s) return fail(s.message());
  fmt::print("decoded {} shard(s) into {} ({} bytes)\n", in->paths.size(), a.out, f->bytes_written());
  return kExitOk;
}

// ---- convert ----
struct ConvertArgs {
  std::string tokenizer, out;
  TokenizerFlags tokenizer_flags;
  bool force = false;
};

// Any tokenizer tera reads, written as a Hugging Face tokenizer.json (a
// tiktoken rank file with its pattern and special tokens, GPT-2's pair).
int run_convert(const ConvertArgs& a) {
  auto tok = open_tokenizer(tokenizer_spec(a.tokenizer_flags, a.tokenizer));
  if (!tok) return fail("--tokenizer: " + tok.error());
  if (Status s = check_output_file(a.out, "--out", a.force); !s) return fail(s.message());
  if (Status s = refuse_overlapping_paths({{a.out, "--out", {}}}, {{a.tokenizer, "--tokenizer"}}); !s) {
    return fail(s.message());
  }
  if (Status s = save_tokenizer(*tok, a.out); !s) return fail(s.message());
  int64_t unused = 0;
  for (const int32_t s : tok->specials()) unused += tok->token(s).empty() ? 1 : 0;
  fmt::print("wrote {}: {} ids ({} unused), {} merges, {} pre-tokenizer, {} special token(s){}{}\n", a.out,
             tok->vocab_size(), unused, tok->merges().size(), pretokenizer_name(tok->rules().pretokenizer),
             static_cast<int64_t>(tok->specials().size()) - unused,
             tok->rules().whole_piece_first ? ", whole pieces first (ignore_merges)" : "",
             tok->bos() >= 0 ? fmt::format(", {} before each document", tok->token(tok->bos())) : "");
  return kExitOk;
}

// ---- stats ----
struct StatsArgs {
  JsonlArgs jsonl;
  std::vector<std::string> inputs;
  std::string tokenizer;
  TokenizerFlags tokenizer_flags;
  int threads = default_threads();
};

int run_stats(const StatsArgs& a) {
  if (a.inputs.size() == 1 && is_shard_dir(a.inputs[0])) {
    auto m = read_manifest(a.inputs[0]);
    if (!m) return fail(m.error());
    fmt::print("{}: vocabulary {}, tokenizer {} (fingerprint {:016x})\n", a.inputs[0], m->vocab_size, m->tokenizer_file,
               m->tokenizer_fingerprint);
    for (const auto& [name, s] : m->splits) {
      // Every shard read and checked (header, size, checksum, token ids, the manifest's counts), as training reads it.
      auto ds = ShardDataset::open(a.inputs[0], name);
      if (!ds) return fail(ds.error());
      fmt::print("{}: {} tokens in {} shard(s) (verified), {} documents, {} source bytes, {:.3f} bytes/token\n", name,
                 s.tokens, s.shards.size(), s.documents, s.bytes,
                 s.tokens > 0 ? static_cast<double>(s.bytes) / s.tokens : 0.0);
    }
    return kExitOk;
  }
  if (a.inputs.size() == 1 && is_megatron_prefix(a.inputs[0])) {
    // Every token read and checked, as training reads them; with --tokenizer, ids must lie in its vocabulary.
    Expected<BpeTokenizer> tok = Status::error("no tokenizer");
    if (!a.tokenizer.empty()) {
      tok = open_tokenizer(tokenizer_spec(a.tokenizer_flags, a.tokenizer));
      if (!tok) return fail("--tokenizer: " + tok.error());
    }
    const int64_t limit = tok ? tok->vocab_size() : int64_t{INT32_MAX};
    auto ds = MegatronDataset::open(a.inputs[0], limit,
                                    tok ? fmt::format("the {}-token vocabulary of --tokenizer", limit) : "int32");
    if (!ds) return fail(ds.error());
    const MegatronIndex& ix = (*ds)->index();
    fmt::print("{}: Megatron indexed dataset (verified): {} tokens of {}, {} sequences, {} documents, largest id {}\n",
               a.inputs[0], ix.total_tokens, megatron_dtype_name(ix.dtype), ix.sequences, ix.documents(),
               (*ds)->vocab() - 1);
    if (tok && tok->eot() >= 0) {
      // Document boundaries: sequences closed by the tokenizer's end-of-text (Megatron's --append-eod).
      uint64_t closed = 0;
      int64_t at = 0;
      for (uint64_t i = 0; i < ix.sequences; ++i) {
        at += ix.length(i);
        int32_t last = -1;
        if (ix.length(i) > 0) (*ds)->read(at - 1, 1, &last);
        closed += last == tok->eot() ? 1 : 0;
      }
      fmt::print("{} of {} sequences end with the end-of-text token {}\n", closed, ix.sequences, tok->eot());
    }
    return kExitOk;
  }
  if (a.tokenizer.empty()) {
    return fail("--tokenizer is required for text input (or pass one token-shard directory or Megatron prefix)");
  }
  auto jsonl = jsonl_options(a.jsonl);
  if (!jsonl) return fail(jsonl.error());
  auto tok = open_tokenizer(tokenizer_spec(a.tokenizer_flags, a.tokenizer));
  if (!tok) return fail("--tokenizer: " + tok.error());
  auto files = inputs_with_bytes(a.inputs);
  if (!files) return fail(files.error());
  std::vector<uint8_t> used(static_cast<size_t>(tok->vocab_size()), 0);
  EncodeOptions opts;
  opts.threads = a.threads;
  opts.jsonl = *jsonl;
  Expected<EncodeStats> st = Status::error("not encoded");
  {
    ProgressBar bar("stats", true);
    st = encode_corpus(
        *files, *tok, opts,
        [&](int, const int32_t* t, size_t n) {
          for (size_t i = 0; i < n; ++i) used[static_cast<size_t>(t[i])] = 1;
          return ok_status();
        },
        [&](int64_t d, int64_t t) { bar.update(d, t); });
  }
  if (!st) return fail(st.error());
  report_jsonl(st->input);
  int64_t distinct = 0;
  for (uint8_t u : used) distinct += u;
  fmt::print(
      "{} files, {} bytes, {} documents -> {} tokens ({} with end-of-text separators): {:.3f} bytes/token; "
      "{} of {} vocabulary entries used\n",
      files->size(), st->bytes[0], st->documents[0], st->tokens[0] - (tok->eot() >= 0 ? st->documents[0] : 0),
      st->tokens[0], st->tokens[0] > 0 ? static_cast<double>(st->bytes[0]) / st->tokens[0] : 0.0, distinct,
      tok->vocab_size());
  if (st->input.jsonl_lines > 0) {
    fmt::print("JSONL: {} lines, {} malformed skipped", st->input.jsonl_lines, st->input.bad_lines);
    for (size_t k = 0; k < jsonl->keys.size(); ++k) {
      fmt::print("; {}: {} documents, {} tokens", nlohmann::json(jsonl->keys[k]).dump(), st->key_documents[k],
                 st->key_tokens[k]);
    }
    fmt::print("\n");
  }
  return kExitOk;
}

}  // namespace

Command add_tokenize_command(CLI::App& parent) {
  auto* sub = parent.add_subcommand("tokenize", "Train a BPE tokenizer; encode text into token shards and back");
  sub->require_subcommand(1);
  auto ta = std::make_shared<TrainArgs>();
  auto* tr = sub->add_subcommand("train", "Train a byte-level BPE tokenizer on text files");
  tr->add_option("-i,--input", ta->inputs,
                 "Text or JSONL files (.jsonl, .jsonl.gz: see --input-format) or directories (read recursively)")
      ->required();
  add_jsonl_flags(tr, ta->jsonl);
  tr->add_option("--vocab", ta->vocab, "Vocabulary size: 256 bytes + merges + <|endoftext|>")
      ->required()
      ->check(int_in(257, int64_t{1} << 24));
  tr->add_option("-o,--out", ta->out, "Tokenizer file to write (Hugging Face tokenizer.json format)")->required();
  tr->add_option("--min-frequency", ta->min_frequency, "Never merge a pair seen fewer times")
      ->capture_default_str()
      ->check(int_in(1, int64_t{1} << 40));
  tr->add_option("-j,--threads", ta->threads, "Threads for counting")->capture_default_str()->check(int_in(1, 256));
  tr->add_flag("--force", ta->force, "Replace an existing --out (atomically)");

  auto ea = std::make_shared<EncodeArgs>();
  auto* en = sub->add_subcommand("encode", "Encode text or JSONL files into token shards or a Megatron dataset");
  en->add_option("-t,--tokenizer", ea->tokenizer,
                 "Tokenizer: a tokenizer.json (Hugging Face's or tera's), a tiktoken rank file (with --pattern), "
                 "a directory with tokenizer.json or GPT-2's vocab.json + merges.txt, or 'bytes'")
      ->required();
  add_tokenizer_flags(en, ea->tokenizer_flags);
  en->add_option("-i,--input", ea->inputs,
                 "Text files (one document per file), JSONL files (one per line and --json-key) or directories")
      ->required();
  add_jsonl_flags(en, ea->jsonl);
  en->add_option("-o,--out", ea->out, "Output directory (shards + manifest.json + tokenizer.json)")->required();
  en->add_option("--val-fraction", ea->val_fraction,
                 "Tail of each text file held out as the val split; of a JSONL file, every (1/fraction)-th line")
      ->capture_default_str()
      ->check(real_in(0, 0.99));
  en->add_option("--shard-tokens", ea->shard_tokens, "Tokens per shard file")
      ->capture_default_str()
      ->check(int_in(1, int64_t{1} << 30));
  en->add_option("-j,--threads", ea->threads, "Encoding threads")->capture_default_str()->check(int_in(1, 256));
  en->add_flag("--force", ea->force, "Replace the shards of an existing --out directory (or the .bin/.idx)");
  en->add_option("--format", ea->format,
                 "shards: a token-shard directory; megatron: --out is a prefix, PREFIX.bin + PREFIX.idx "
                 "(Megatron-LM's indexed dataset, one document per text file or JSONL line)")
      ->capture_default_str()
      ->check(CLI::IsMember({"shards", "megatron"}));

  auto da = std::make_shared<DecodeArgs>();
  auto* de = sub->add_subcommand("decode", "Decode token shards back into text");
  de->add_option("-i,--input", da->input, "A shard file or a shard directory")->required();
  de->add_option("-t,--tokenizer", da->tokenizer, "Tokenizer (default: the shard directory's tokenizer.json)");
  de->add_option("-o,--out", da->out, "Text file to write")->required();
  de->add_option("--split", da->split, "train, val or all (directories only)")
      ->capture_default_str()
      ->check(CLI::IsMember({"train", "val", "all"}));
  de->add_flag("--force", da->force, "Replace an existing --out (atomically; never one of the inputs)");

  auto sa = std::make_shared<StatsArgs>();
  auto* st = sub->add_subcommand("stats", "Token counts and compression (bytes per token)");
  st->add_option("-i,--input", sa->inputs,
                 "A shard directory, a Megatron .bin/.idx prefix, or text / JSONL files / directories")
      ->required();
  add_jsonl_flags(st, sa->jsonl);
  st->add_option("-t,--tokenizer", sa->tokenizer, "Tokenizer for text input");
  add_tokenizer_flags(st, sa->tokenizer_flags);
  st->add_option("-j,--threads", sa->threads, "Encoding threads")->capture_default_str()->check(int_in(1, 256));

  auto ca = std::make_shared<ConvertArgs>();
  auto* cv = sub->add_subcommand("convert", "Write any tokenizer tera reads as a Hugging Face tokenizer.json");
  cv->add_option("-t,--tokenizer", ca->tokenizer,
                 "Tokenizer: a tokenizer.json, a tiktoken rank file (with --pattern), or a directory with "
                 "tokenizer.json or GPT-2's vocab.json + merges.txt")
      ->required();
  add_tokenizer_flags(cv, ca->tokenizer_flags);
  cv->add_option("-o,--out", ca->out, "tokenizer.json to write (atomically)")->required();
  cv->add_flag("--force", ca->force, "Replace an existing --out");

  return {sub, [=] {
            if (tr->parsed()) return run_train(*ta);
            if (cv->parsed()) return run_convert(*ca);
            if (en->parsed()) return run_encode(*ea);
            if (de->parsed()) return run_decode(*da);
            return run_stats(*sa);
          }};
}

}  // namespace tera::cli
