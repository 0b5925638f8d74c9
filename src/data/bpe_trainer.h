// Training a byte-level BPE from word counts (distinct pre-token pieces and
// their frequencies). The incremental algorithm keeps every adjacent pair's
// count and the words it occurs in; a merge rewrites only those words and
// adjusts the counts of the pairs around each occurrence, so a merge costs
// the occurrences it touches, not a recount of the corpus. Ties between equal
// counts go to the smaller (left id, right id), so training is deterministic.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "core/strings.h"
#include "data/bpe_tokenizer.h"
#include "data/text_chunks.h"

namespace tera {

class WordCounts {
 public:
  void add(std::string_view piece, int64_t n = 1);
  void merge_from(WordCounts&& other);
  size_t size() const { return map_.size(); }
  int64_t total() const { return total_; }  // pieces counted, with multiplicity
  template <typename F>
  void for_each(F&& f) const {  // f(std::string_view piece, int64_t count)
    for (const auto& [piece, n] : map_) f(std::string_view(piece), n);
  }

 private:
  StringMap<int64_t> map_;
  int64_t total_ = 0;
};

// Counts the pre-token pieces of every document: text files, and the values
// of JSONL lines as jsonl says (parallel over chunks; the counts do not
// depend on the thread count). report, when given, receives the JSONL lines
// read and the malformed ones skipped.
Expected<WordCounts> count_words(const std::vector<std::string>& files, int threads, const ByteProgress& progress = {},
                                 const JsonlOptions& jsonl = {}, ChunkReport* report = nullptr);

struct BpeTrainOptions {
  int64_t vocab_size = 32768;  // bytes + merges + special tokens
  int64_t min_frequency = 2;   // a pair occurring fewer times is never merged
  std::vector<std::string> specials = {kEndOfText};
};

// progress(merges done, merges wanted), called after each merge.
using TrainProgress = std::function<void(int64_t, int64_t)>;

// Fails only on impossible options (vocab_size below 256 + specials). When the
// words run out of pairs the vocabulary is smaller than asked for.
Expected<BpeTokenizer> train_bpe(const WordCounts& words, const BpeTrainOptions& opt,
                                 const TrainProgress& progress = {});

}  // namespace tera
