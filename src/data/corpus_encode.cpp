// Corpus -> token streams -> shard files; see corpus_encode.h.
#include "data/corpus_encode.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "data/megatron_index.h"
#include "data/token_shard.h"
#include "data/tokenizer_file.h"

namespace tera {

namespace fs = std::filesystem;

namespace {

// sink and document end with the --json-key index of the document (0 for text files).
using KeyedSink = std::function<Status(int part, int key, const int32_t* tokens, size_t n)>;
using KeyedDocumentEnd = std::function<Status(int part, int key)>;

Expected<EncodeStats> encode_keyed(const std::vector<std::string>& files, const BpeTokenizer& tok,
                                   const EncodeOptions& opts, const KeyedSink& sink, const ByteProgress& progress,
                                   const KeyedDocumentEnd& document_end) {
  if (!(opts.val_fraction >= 0 && opts.val_fraction < 1)) {
    return Status::error(fmt::format("val fraction {} must lie in [0, 1)", opts.val_fraction));
  }
  std::vector<EncodeCache> caches(static_cast<size_t>(std::max(1, opts.threads)));
  EncodeStats st;
  st.key_documents.assign(opts.jsonl.keys.size(), 0);
  st.key_tokens.assign(opts.jsonl.keys.size(), 0);
  const int32_t eot = tok.eot();
  ChunkOptions co;
  co.threads = opts.threads;
  co.chunk_bytes = opts.chunk_bytes;
  co.hold_out = opts.val_fraction;
  co.jsonl = opts.jsonl;
  co.split_at_spaces = tok.splits_at_spaces();
  const int32_t bos = tok.bos();
  bool starts[2] = {true, true};  // the next chunk of the part begins a document
  auto report = process_text_chunks(
      files, co, [&](TextChunk& c, int thread) { tok.encode(c.text, c.tokens, caches[static_cast<size_t>(thread)]); },
      [&](TextChunk& c) -> Status {
        const int p = c.part;
        const auto k = static_cast<size_t>(c.key);
        const bool jsonl_key = c.line > 0 && k < st.key_tokens.size();
        if (starts[p] && bos >= 0) {  // a tokenizer.json's template: its token before each document
          ++st.tokens[p];
          if (jsonl_key) ++st.key_tokens[k];
          TERA_RETURN_IF_ERROR(sink(p, c.key, &bos, 1));
        }
        starts[p] = c.last;
        const int64_t tokens = static_cast<int64_t>(c.tokens.size()) + (c.last && eot >= 0 ? 1 : 0);
        st.bytes[p] += static_cast<int64_t>(c.text.size());
        st.tokens[p] += tokens;
        TERA_RETURN_IF_ERROR(sink(p, c.key, c.tokens.data(), c.tokens.size()));
        if (jsonl_key) st.key_tokens[k] += tokens;
        if (c.last) {
          ++st.documents[p];
          if (jsonl_key) ++st.key_documents[k];
          if (eot >= 0) TERA_RETURN_IF_ERROR(sink(p, c.key, &eot, 1));
          if (document_end) TERA_RETURN_IF_ERROR(document_end(p, c.key));
        }
        return ok_status();
      },
      progress);
  if (!report) return report.status();
  st.input = std::move(*report);
  return st;
}

}  // namespace

Expected<EncodeStats> encode_corpus(const std::vector<std::string>& files, const BpeTokenizer& tok,
                                    const EncodeOptions& opts, const TokenSink& sink, const ByteProgress& progress,
                                    const DocumentEnd& document_end) {
  return encode_keyed(
      files, tok, opts, [&](int part, int, const int32_t* t, size_t n) { return sink(part, t, n); }, progress,
      [&](int part, int) { return document_end ? document_end(part) : ok_status(); });
}

namespace {

constexpr int64_t kMaxShards = 100000;  // names are <split>-NNNNN.tok

// Buffers one split's tokens and writes a shard whenever shard_tokens are in.
class ShardWriter {
 public:
  ShardWriter(std::string dir, std::string split, const BpeTokenizer& tok, int64_t shard_tokens)
      : dir_(std::move(dir)), split_(std::move(split)), tok_(tok), cap_(shard_tokens) {}

  Status append(const int32_t* t, size_t n) {
    while (n > 0) {
      const size_t take = std::min(n, static_cast<size_t>(cap_) - buf_.size());
      buf_.insert(buf_.end(), t, t + take);
      t += take;
      n -= take;
      if (static_cast<int64_t>(buf_.size()) == cap_) TERA_RETURN_IF_ERROR(flush());
    }
    return ok_status();
  }
  Status flush() {
    if (buf_.empty()) return ok_status();
    if (static_cast<int64_t>(info_.shards.size()) >= kMaxShards) {
      return Status::error(fmt::format("{}: more than {} {} shards; raise --shard-tokens", dir_, kMaxShards, split_));
    }
    const std::string name = fmt::format("{}-{:05d}.tok", split_, info_.shards.size());
    auto crc = write_shard((fs::path(dir_) / name).string(), buf_.data(), static_cast<int64_t>(buf_.size()),
                           tok_.vocab_size(), tok_.fingerprint(), tok_.eot());
    if (!crc) return crc.status();
    info_.shards.push_back({name, static_cast<int64_t>(buf_.size()), *crc});
    info_.tokens += static_cast<int64_t>(buf_.size());
    buf_.clear();
    return ok_status();
  }
  SplitInfo& info() { return info_; }

 private:
  std::string dir_, split_;
  const BpeTokenizer& tok_;
  int64_t cap_;
  std::vector<int32_t> buf_;
  SplitInfo info_;
};

}  // namespace

Expected<ShardManifest> encode_to_shards(const std::vector<std::string>& files, const BpeTokenizer& tok,
                                         const std::string& out_dir, const EncodeOptions& opts,
                                         const ByteProgress& progress, ChunkReport* read) {
  if (opts.shard_tokens <= 0) return Status::error("--shard-tokens must be positive");
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (!fs::is_directory(out_dir, ec)) return Status::error(out_dir + ": cannot create the output directory");
  ShardManifest m;
  TERA_RETURN_IF_ERROR(save_tokenizer(tok, (fs::path(out_dir) / m.tokenizer_file).string()));
  ShardWriter writers[2] = {{out_dir, "train", tok, opts.shard_tokens}, {out_dir, "val", tok, opts.shard_tokens}};
  auto stats = encode_corpus(
      files, tok, opts, [&](int part, const int32_t* t, size_t n) { return writers[part].append(t, n); }, progress);
  if (!stats) return stats.status();
  if (read != nullptr) *read = stats->input;
  for (int p = 0; p < 2; ++p) TERA_RETURN_IF_ERROR(writers[p].flush());
  m.tokenizer_fingerprint = tok.fingerprint();
  m.vocab_size = tok.vocab_size();
  m.eot = tok.eot();
  m.inputs = files;
  const char* names[2] = {"train", "val"};
  for (int p = 0; p < 2; ++p) {
    if (p == 1 && opts.val_fraction <= 0) continue;
    SplitInfo info = std::move(writers[p].info());
    info.bytes = stats->bytes[p];
    info.documents = stats->documents[p];
    m.splits[names[p]] = std::move(info);
  }
  TERA_RETURN_IF_ERROR(write_manifest(out_dir, m));
  std::set<std::string> keep;
  for (const auto& [name, s] : m.splits) {
    for (const auto& e : s.shards) keep.insert(e.file);
  }
  for (const auto& entry : fs::directory_iterator(out_dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool ours = (name.starts_with("train-") || name.starts_with("val-")) && name.ends_with(".tok");
    if (ours && keep.count(name) == 0) fs::remove(entry.path(), ec);
  }
  return m;
}

Expected<std::vector<std::string>> megatron_prefixes(const std::string& prefix,
                                                     const std::vector<std::string>& keys) {
  if (keys.size() <= 1) return std::vector<std::string>{prefix};
  std::vector<std::string> out;
  for (const auto& k : keys) {
    const bool plain = !k.empty() && std::all_of(k.begin(), k.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == '-';
    }) && k != "." && k != "..";
    if (!plain) {
      return Status::error("--json-key " + k + ": with several keys each gets a dataset PREFIX_<key>, and this key "
                           "is not a plain file-name part ([A-Za-z0-9_.-]); encode it on its own with one --json-key");
    }
    out.push_back(prefix + "_" + k);
  }
  return out;
}

Expected<EncodeStats> encode_to_megatron(const std::vector<std::string>& files, const BpeTokenizer& tok,
                                         const std::string& prefix, const EncodeOptions& opts,
                                         const ByteProgress& progress) {
  if (opts.val_fraction != 0) return Status::error("a Megatron dataset holds one split; encode the val text separately");
  auto prefixes = megatron_prefixes(prefix, opts.jsonl.keys);
  if (!prefixes) return prefixes.status();
  std::vector<MegatronWriter> writers;
  for (const auto& p : *prefixes) {
    auto w = MegatronWriter::create(p, tok.vocab_size());
    if (!w) return w.status();
    writers.push_back(std::move(*w));
  }
  auto st = encode_keyed(
      files, tok, opts,
      [&](int, int key, const int32_t* t, size_t n) { return writers[static_cast<size_t>(key)].add(t, n); }, progress,
      [&](int, int key) {
        writers[static_cast<size_t>(key)].end_document();
        return ok_status();
      });
  if (!st) return st.status();
  for (auto& w : writers) TERA_RETURN_IF_ERROR(w.finish());
  return st;
}

}  // namespace tera
