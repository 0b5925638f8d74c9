// `tera tokenize train|encode` (and the command itself; decode, stats and
// convert are cmd_tokenize_read.cpp's): train a byte-level BPE on text or
// JSONL files, encode a corpus into checked token shards (or a Megatron
// dataset). A text file is one document; a JSONL line gives one per
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
#include "cli/tokenize_common.h"
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

}  // namespace

TokenizeSubcommand add_tokenize_train(CLI::App* parent) {
  auto ta = std::make_shared<TrainArgs>();
  auto* tr = parent->add_subcommand("train", "Train a byte-level BPE tokenizer on text files");
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
  return {tr, [ta] { return run_train(*ta); }};
}

TokenizeSubcommand add_tokenize_encode(CLI::App* parent) {
  auto ea = std::make_shared<EncodeArgs>();
  auto* en = parent->add_subcommand("encode", "Encode text or JSONL files into token shards or a Megatron dataset");
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
  return {en, [ea] { return run_encode(*ea); }};
}

Command add_tokenize_command(CLI::App& parent) {
  auto* sub = parent.add_subcommand("tokenize", "Train a BPE tokenizer; encode text into token shards and back");
  sub->require_subcommand(1);
  const std::vector<TokenizeSubcommand> subs = {add_tokenize_train(sub), add_tokenize_encode(sub),
                                                add_tokenize_decode(sub), add_tokenize_stats(sub),
                                                add_tokenize_convert(sub)};
  return {sub, [subs] {
            for (const TokenizeSubcommand& s : subs) {
              if (s.app->parsed()) return s.run();
            }
            return kExitBadInput;  // require_subcommand(1): CLI11 refuses before this
          }};
}

}  // namespace tera::cli
