// `tera tokenize decode|stats|convert`: token shards back to text, token
// counts and compression of shards, Megatron datasets or text, and any
// tokenizer tera reads written as a Hugging Face tokenizer.json. Bad input
// exits 2; an output is never one of the inputs.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/output_paths.h"
#include "cli/tokenize_common.h"
#include "cli/tokenizer_flags.h"
#include "core/file_util.h"
#include "data/megatron_dataset.h"
#include "data/megatron_index.h"
#include "data/shard_dataset.h"
#include "data/shard_manifest.h"
#include "data/token_shard.h"
#include "data/tokenizer_file.h"

namespace tera::cli {

namespace {

namespace fs = std::filesystem;

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

// A token-shard directory: every shard read and checked (header, size,
// checksum, token ids, the manifest's counts), as training reads it.
int stats_of_shard_dir(const StatsArgs& a) {
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

// A Megatron prefix: every token read and checked, as training reads them;
// with --tokenizer, ids must lie in its vocabulary.
int stats_of_megatron(const StatsArgs& a) {
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

// Text or JSONL: encoded (nothing written), counted.
int stats_of_text(const StatsArgs& a) {
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

int run_stats(const StatsArgs& a) {
  if (a.inputs.size() == 1 && is_shard_dir(a.inputs[0])) return stats_of_shard_dir(a);
  if (a.inputs.size() == 1 && is_megatron_prefix(a.inputs[0])) return stats_of_megatron(a);
  return stats_of_text(a);
}

}  // namespace

TokenizeSubcommand add_tokenize_decode(CLI::App* parent) {
  auto da = std::make_shared<DecodeArgs>();
  auto* de = parent->add_subcommand("decode", "Decode token shards back into text");
  de->add_option("-i,--input", da->input, "A shard file or a shard directory")->required();
  de->add_option("-t,--tokenizer", da->tokenizer, "Tokenizer (default: the shard directory's tokenizer.json)");
  de->add_option("-o,--out", da->out, "Text file to write")->required();
  de->add_option("--split", da->split, "train, val or all (directories only)")
      ->capture_default_str()
      ->check(CLI::IsMember({"train", "val", "all"}));
  de->add_flag("--force", da->force, "Replace an existing --out (atomically; never one of the inputs)");
  return {de, [da] { return run_decode(*da); }};
}

TokenizeSubcommand add_tokenize_stats(CLI::App* parent) {
  auto sa = std::make_shared<StatsArgs>();
  auto* st = parent->add_subcommand("stats", "Token counts and compression (bytes per token)");
  st->add_option("-i,--input", sa->inputs,
                 "A shard directory, a Megatron .bin/.idx prefix, or text / JSONL files / directories")
      ->required();
  add_jsonl_flags(st, sa->jsonl);
  st->add_option("-t,--tokenizer", sa->tokenizer, "Tokenizer for text input");
  add_tokenizer_flags(st, sa->tokenizer_flags);
  st->add_option("-j,--threads", sa->threads, "Encoding threads")->capture_default_str()->check(int_in(1, 256));
  return {st, [sa] { return run_stats(*sa); }};
}

TokenizeSubcommand add_tokenize_convert(CLI::App* parent) {
  auto ca = std::make_shared<ConvertArgs>();
  auto* cv = parent->add_subcommand("convert", "Write any tokenizer tera reads as a Hugging Face tokenizer.json");
  cv->add_option("-t,--tokenizer", ca->tokenizer,
                 "Tokenizer: a tokenizer.json, a tiktoken rank file (with --pattern), or a directory with "
                 "tokenizer.json or GPT-2's vocab.json + merges.txt")
      ->required();
  add_tokenizer_flags(cv, ca->tokenizer_flags);
  cv->add_option("-o,--out", ca->out, "tokenizer.json to write (atomically)")->required();
  cv->add_flag("--force", ca->force, "Replace an existing --out");
  return {cv, [ca] { return run_convert(*ca); }};
}

}  // namespace tera::cli
