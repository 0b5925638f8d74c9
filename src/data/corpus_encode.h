// Encoding a corpus: each input text file is one document, and each JSONL
// line gives one document per --json-key (jsonl.h), each opened by the
// beginning-of-text token when the tokenizer has one (a tokenizer.json
// template's, as Llama 3's <|begin_of_text|>) and closed by the end-of-text
// token when it has one. With a val fraction, each text file's tail (cut at a
// safe pre-token boundary) goes to the "val" split as its own document, and
// of a JSONL file every (1/fraction)-th line. Chunks are encoded in parallel
// and delivered in order, so the tokens do not depend on the thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/bpe_tokenizer.h"
#include "data/shard_manifest.h"
#include "data/text_chunks.h"

namespace tera {

struct EncodeOptions {
  int threads = 1;
  double val_fraction = 0;                  // of each file's bytes, [0, 1)
  int64_t shard_tokens = int64_t{1} << 25;  // tokens per shard file (the last may hold fewer)
  size_t chunk_bytes = size_t{1} << 20;
  JsonlOptions jsonl;  // which inputs are JSONL and how they are read
};

struct EncodeStats {
  int64_t bytes[2] = {0, 0}, tokens[2] = {0, 0}, documents[2] = {0, 0};  // [train, val]
  std::vector<int64_t> key_documents, key_tokens;  // per --json-key (JSONL documents only, both splits)
  ChunkReport input;                               // JSONL lines read and malformed lines skipped
};

// sink(part, tokens, n) receives each split's stream in order (part 0 train, 1 val).
using TokenSink = std::function<Status(int part, const int32_t* tokens, size_t n)>;
// document_end(part) is called after each document's last token (its end-of-text included).
using DocumentEnd = std::function<Status(int part)>;

Expected<EncodeStats> encode_corpus(const std::vector<std::string>& files, const BpeTokenizer& tok,
                                    const EncodeOptions& opts, const TokenSink& sink,
                                    const ByteProgress& progress = {}, const DocumentEnd& document_end = {});

// Writes a shard directory: tokenizer.json, train-NNNNN.tok (and val-NNNNN.tok),
// then manifest.json; shard files of an earlier encode that the new manifest
// does not list are removed afterwards. read, when given, receives the JSONL
// lines read and the malformed ones skipped.
Expected<ShardManifest> encode_to_shards(const std::vector<std::string>& files, const BpeTokenizer& tok,
                                         const std::string& out_dir, const EncodeOptions& opts,
                                         const ByteProgress& progress = {}, ChunkReport* read = nullptr);

// Writes a Megatron indexed dataset, PREFIX.bin and PREFIX.idx (megatron_index.h):
// one sequence per document (input text file or JSONL value), its end-of-text
// appended when the tokenizer has one, so the .bin holds exactly the token
// stream encode_to_shards writes to its train split. opts.val_fraction must be
// 0 (one split per prefix). With several JSONL keys, one dataset per key, as
// Megatron's preprocess_data writes: see megatron_prefixes; the documents of
// text files go to the first key's.
// The prefixes encode_to_megatron writes: prefix itself for one key, else
// PREFIX_<key> per key (Megatron names them PREFIX_<key>_document). Keys that
// are not plain file-name parts ([A-Za-z0-9_.-]) are refused then.
Expected<std::vector<std::string>> megatron_prefixes(const std::string& prefix, const std::vector<std::string>& keys);

Expected<EncodeStats> encode_to_megatron(const std::vector<std::string>& files, const BpeTokenizer& tok,
                                         const std::string& prefix, const EncodeOptions& opts,
                                         const ByteProgress& progress = {});

}  // namespace tera
