// Opening the run's datasets: shard directories, text files as byte tokens,
// or text files encoded in memory with data.tokenizer; see training_data.h.
#include "data/training_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <thread>

#include "core/file_util.h"
#include "data/blend_loader.h"
#include "data/corpus_encode.h"
#include "data/megatron_dataset.h"
#include "data/shard_dataset.h"
#include "data/shard_manifest.h"
#include "data/tokenizer_file.h"

namespace tera {

namespace {

namespace fs = std::filesystem;

// How errors name a source: a config key (data.train = "x") or a flag (--data x).
std::string keyed(const std::string& key, const std::string& path) {
  return key.starts_with("-") ? key + " " + path : fmt::format("{} = \"{}\"", key, path);
}

// A directory is read as token shards (read_manifest explains a missing manifest).
bool is_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

int encode_threads() { return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u)); }

// The tokenizer of the run: the shard directory's, data.tokenizer, or bytes.
Expected<BpeTokenizer> choose_tokenizer(const TrainingDataOptions& dc) {
  if (is_dir(dc.train)) {
    auto m = read_manifest(dc.train);
    if (!m) return Status::error(keyed("data.train", dc.train) + ": " + m.error());
    const std::string path = (fs::path(dc.train) / m->tokenizer_file).string();
    auto tok = open_tokenizer(path);
    if (!tok) return Status::error(keyed("data.train", dc.train) + ": " + tok.error());
    if (tok->fingerprint() != m->tokenizer_fingerprint) {
      return Status::error(path +
                           ": is not the tokenizer the shards were encoded with (fingerprint differs from "
                           "manifest.json); re-run tera tokenize encode");
    }
    if (!dc.tokenizer.empty()) {
      auto want = open_tokenizer(TokenizerSpec{dc.tokenizer, dc.tokenizer_pattern, dc.tokenizer_specials});
      if (!want) return Status::error("data.tokenizer: " + want.error());
      if (want->fingerprint() != tok->fingerprint()) {
        return Status::error(keyed("data.tokenizer", dc.tokenizer) + " is not the tokenizer " +
                             keyed("data.train", dc.train) + " was encoded with (" + path +
                             "); remove data.tokenizer or re-encode the data with it");
      }
    }
    return tok;
  }
  if (dc.tokenizer.empty()) return BpeTokenizer::bytes();  // a Megatron prefix: checked in open_megatron
  auto tok = open_tokenizer(TokenizerSpec{dc.tokenizer, dc.tokenizer_pattern, dc.tokenizer_specials});
  if (!tok) return Status::error("data.tokenizer: " + tok.error());
  return tok;
}

// Encodes text files in memory; part 1 is the held-out tail when hold_out > 0.
Expected<std::vector<std::unique_ptr<TokenDataset>>> encode_text(const std::string& path, const std::string& key,
                                                                 const BpeTokenizer& tok, double hold_out) {
  // A device (/dev/zero) or FIFO would be read without end: regular files only.
  if (Status s = check_regular_file(path, keyed(key, path) + ": the text file", std::numeric_limits<uint64_t>::max()); !s) {
    return s;
  }
  // A JSONL corpus read as text would train on its braces and escapes.
  if (path.ends_with(".jsonl") || path.ends_with(".jsonl.gz")) {
    return Status::error(keyed(key, path) + ": a JSONL corpus is not read as text; encode it first (tera tokenize "
                         "encode --input " + path + " --json-key text --out shards/) and train on the shards");
  }
  std::vector<int32_t> parts[2];
  EncodeOptions opts;
  opts.threads = encode_threads();
  opts.val_fraction = hold_out;
  auto st = encode_corpus({path}, tok, opts, [&](int p, const int32_t* t, size_t n) {
    parts[p].insert(parts[p].end(), t, t + n);
    return ok_status();
  });
  if (!st) return Status::error(keyed(key, path) + ": " + st.error());
  std::vector<std::unique_ptr<TokenDataset>> out;
  for (int p = 0; p < (hold_out > 0 ? 2 : 1); ++p) {
    const std::string desc = fmt::format("{}{} ({} bytes encoded in memory to {} tokens, vocab {})", path,
                                         hold_out > 0 ? (p == 0 ? " [head]" : " [held-out tail]") : "", st->bytes[p],
                                         parts[p].size(), tok.vocab_size());
    out.push_back(std::make_unique<VectorDataset>(std::move(parts[p]), tok.vocab_size(), desc));
  }
  return out;
}

// A shard directory's split, checked to use the run's tokenizer.
Expected<std::unique_ptr<TokenDataset>> open_shards(const std::string& dir, const std::string& key,
                                                    const std::string& split, const BpeTokenizer& tok) {
  auto ds = ShardDataset::open(dir, split);
  if (!ds) return Status::error(keyed(key, dir) + ": " + ds.error());
  if ((*ds)->manifest().tokenizer_fingerprint != tok.fingerprint()) {
    return Status::error(keyed(key, dir) +
                         ": its shards were encoded with a different tokenizer (fingerprint "
                         "differs); encode the data with the model's tokenizer");
  }
  return std::unique_ptr<TokenDataset>(std::move(*ds));
}

// A Megatron .bin/.idx prefix. Its ids must lie below the tokenizer's
// vocabulary when data.tokenizer names one, else below model.vocab, and a
// prefix with ids >= 256 needs data.tokenizer (a checkpoint records the run's
// tokenizer; "bytes" would be a wrong one).
Expected<std::unique_ptr<TokenDataset>> open_megatron(const std::string& prefix, const std::string& key,
                                                      const BpeTokenizer& tok, int64_t model_vocab) {
  const bool bytes = tok.is_bytes();
  const int64_t limit = bytes ? model_vocab : tok.vocab_size();
  const std::string limit_what = bytes ? fmt::format("model.vocab = {}", model_vocab)
                                       : fmt::format("the {}-token vocabulary of data.tokenizer", tok.vocab_size());
  auto ds = MegatronDataset::open(prefix, limit, limit_what);
  if (!ds) return Status::error(keyed(key, prefix) + ": " + ds.error());
  if (bytes && (*ds)->vocab() > 256) {
    return Status::error(fmt::format("{}: a Megatron dataset names no tokenizer, and its ids reach {}; set "
                                     "data.tokenizer to the tokenizer it was encoded with",
                                     keyed(key, prefix), (*ds)->vocab() - 1));
  }
  return std::unique_ptr<TokenDataset>(std::move(*ds));
}

}  // namespace

Expected<std::unique_ptr<TokenDataset>> open_eval_data(const std::string& path, const BpeTokenizer& tok,
                                                       const std::string& key) {
  if (is_megatron_prefix(path)) return open_megatron(path, key, tok, tok.vocab_size());
  if (is_dir(path)) {
    auto m = read_manifest(path);
    if (!m) return Status::error(keyed(key, path) + ": " + m.error());
    return open_shards(path, key, m->splits.count("val") ? "val" : "train", tok);
  }
  if (tok.is_bytes()) {
    auto b = ByteDataset::open(path);
    if (!b) return b.status();
    return std::unique_ptr<TokenDataset>(std::move(*b));
  }
  auto parts = encode_text(path, key, tok, 0);
  if (!parts) return parts.status();
  return std::move((*parts)[0]);
}

namespace {

// data.blend: each prefix opened as a Megatron dataset, the blend's loader over them, data.val for validation.
Expected<TrainingData> open_blend(const TrainingDataOptions& dc, const BpeTokenizer& tok) {
  TrainingData d;
  std::vector<BlendSource> sources;
  int64_t need = tok.is_bytes() ? 0 : tok.vocab_size();
  for (size_t i = 0; i < dc.blend.size(); ++i) {
    const auto& [weight, prefix] = dc.blend[i];
    const std::string key = fmt::format("data.blend[{}]", i);
    if (!is_megatron_prefix(prefix)) {
      return Status::error(fmt::format("{}: {} = \"{}\": {}.idx does not exist; a blend names Megatron .bin/.idx "
                                       "prefixes (tera tokenize encode --format megatron)",
                                       dc.source, key, prefix, prefix));
    }
    auto ds = open_megatron(prefix, key, tok, dc.vocab);
    if (!ds) return ds.status();
    TERA_RETURN_IF_ERROR(check_dataset_fits(**ds, dc.seq_len, keyed(key, prefix)));
    need = std::max(need, (*ds)->vocab());
    sources.push_back(BlendSource{weight, std::move(*ds), keyed(key, prefix)});
  }
  auto va = open_eval_data(dc.val, tok, "data.val");
  if (!va) return va.status();
  d.val = std::move(*va);
  TERA_RETURN_IF_ERROR(check_dataset_fits(*d.val, dc.seq_len, keyed("data.val", dc.val)));
  if (dc.vocab < need) {
    return Status::error(fmt::format("{}: model.vocab = {} is smaller than the blend's vocabulary ({} tokens); set "
                                     "model.vocab >= {}",
                                     dc.source, dc.vocab, need, need));
  }
  auto loader = BlendLoader::create(std::move(sources), dc.seq_len, dc.seed);
  if (!loader) return Status::error(dc.source + ": " + loader.error());
  std::string desc = "blend of";
  for (size_t i = 0; i < (*loader)->shares().size(); ++i) {
    desc += fmt::format("{} {:.4f} x {}", i > 0 ? "," : "", (*loader)->shares()[i], (*loader)->source(i).describe());
  }
  d.train_description = desc;
  d.sampler = std::move(*loader);
  d.tokenizer = tokenizer_reference(tok);
  return d;
}

// A run's train and val datasets, and the val data's name in messages.
struct DataPair {
  std::unique_ptr<TokenDataset> train, val;
  std::string val_what;
};

std::string held_out_tail_of(const TrainingDataOptions& dc) {
  return "the held-out tail (data.val_fraction) of " + keyed("data.train", dc.train);
}

// Token data already opened (shards, a Megatron prefix): its validation
// data is data.val when given, else its held-out tail.
Expected<DataPair> with_val_or_tail(std::unique_ptr<TokenDataset> all, const TrainingDataOptions& dc,
                                    const BpeTokenizer& tok) {
  DataPair d;
  if (!dc.val.empty()) {
    auto va = open_eval_data(dc.val, tok, "data.val");
    if (!va) return va.status();
    d.train = std::move(all);
    d.val = std::move(*va);
    d.val_what = keyed("data.val", dc.val);
    return d;
  }
  std::shared_ptr<const TokenDataset> base(std::move(all));
  const int64_t n = base->num_tokens();
  const int64_t cut = n - static_cast<int64_t>(static_cast<double>(n) * dc.val_fraction);
  d.train = std::make_unique<SliceDataset>(base, 0, cut, base->describe() + " [head]");
  d.val = std::make_unique<SliceDataset>(base, cut, n, base->describe() + " [held-out tail]");
  d.val_what = held_out_tail_of(dc);
  return d;
}

// data.train a Megatron prefix or a token-shard directory (whose val split
// serves when data.val is not given).
Expected<DataPair> open_token_pair(const TrainingDataOptions& dc, const BpeTokenizer& tok) {
  if (is_megatron_prefix(dc.train)) {
    auto all = open_megatron(dc.train, "data.train", tok, dc.vocab);
    if (!all) return all.status();
    return with_val_or_tail(std::move(*all), dc, tok);
  }
  auto all = open_shards(dc.train, "data.train", "train", tok);
  if (!all) return all.status();
  auto m = read_manifest(dc.train);
  if (!m) return m.status();
  if (!dc.val.empty() || m->splits.count("val") == 0) return with_val_or_tail(std::move(*all), dc, tok);
  auto va = open_shards(dc.train, "data.train", "val", tok);
  if (!va) return va.status();
  return DataPair{std::move(*all), std::move(*va), "the val split of " + keyed("data.train", dc.train)};
}

// data.train a text file: bytes, or encoded with the tokenizer; val from
// data.val, else the file's tail.
Expected<DataPair> open_text_pair(const TrainingDataOptions& dc, const BpeTokenizer& tok) {
  DataPair d;
  if (!dc.val.empty()) {
    if (tok.is_bytes()) {
      auto tr = ByteDataset::open(dc.train);
      if (!tr) return tr.status();
      d.train = std::move(*tr);
    } else {
      auto tr = encode_text(dc.train, "data.train", tok, 0);
      if (!tr) return tr.status();
      d.train = std::move((*tr)[0]);
    }
    auto va = open_eval_data(dc.val, tok, "data.val");
    if (!va) return va.status();
    d.val = std::move(*va);
    d.val_what = keyed("data.val", dc.val);
    return d;
  }
  if (tok.is_bytes()) {
    auto tr = ByteDataset::open(dc.train, 0.0, 1.0 - dc.val_fraction);
    if (!tr) return tr.status();
    auto va = ByteDataset::open(dc.train, 1.0 - dc.val_fraction, 1.0);
    if (!va) return va.status();
    d.train = std::move(*tr);
    d.val = std::move(*va);
  } else {
    auto parts = encode_text(dc.train, "data.train", tok, dc.val_fraction);
    if (!parts) return parts.status();
    d.train = std::move((*parts)[0]);
    d.val = std::move((*parts)[1]);
  }
  d.val_what = held_out_tail_of(dc);
  return d;
}

}  // namespace

Expected<TrainingData> open_training_data(const TrainingDataOptions& dc) {
  auto tok = choose_tokenizer(dc);
  if (!tok) return Status::error(dc.source + ": " + tok.error());
  if (!dc.blend.empty()) {
    if (dc.val.empty()) return Status::error(dc.source + ": data.blend needs a data.val");
    return open_blend(dc, *tok);
  }
  auto pair = is_megatron_prefix(dc.train) || is_dir(dc.train) ? open_token_pair(dc, *tok) : open_text_pair(dc, *tok);
  if (!pair) return pair.status();
  TrainingData d;
  d.train = std::move(pair->train);
  d.val = std::move(pair->val);
  const int64_t T = dc.seq_len;
  TERA_RETURN_IF_ERROR(check_dataset_fits(*d.train, T, keyed("data.train", dc.train)));
  TERA_RETURN_IF_ERROR(check_dataset_fits(*d.val, T, pair->val_what));
  // The tokenizer's vocabulary, not only the ids present (a Megatron dataset's vocab() is its largest id + 1).
  const int64_t need = std::max(d.train->vocab(), tok->is_bytes() ? int64_t{0} : tok->vocab_size());
  if (dc.vocab < need) {
    return Status::error(dc.source + ": model.vocab = " + std::to_string(dc.vocab) +
                         " is smaller than the data's vocabulary (" + std::to_string(need) +
                         (tok->is_bytes() ? " byte tokens" : " tokens") + "); set model.vocab >= " +
                         std::to_string(need));
  }
  auto loader = TokenLoader::create(*d.train, T, dc.seed, keyed("data.train", dc.train));
  if (!loader) return loader.status();
  d.sampler = std::move(*loader);
  d.tokenizer = tokenizer_reference(*tok);
  d.train_description = d.train->describe();
  return d;
}

}  // namespace tera
