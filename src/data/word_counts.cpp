// Word counts: distinct pre-token pieces of a corpus and their frequencies,
// counted per thread and summed.
#include <algorithm>

#include "data/bpe_trainer.h"
#include "data/pretokenize.h"

namespace tera {

void WordCounts::add(std::string_view piece, int64_t n) {
  auto it = map_.find(piece);
  if (it == map_.end()) {
    map_.emplace(std::string(piece), n);
  } else {
    it->second += n;
  }
  total_ += n;
}

void WordCounts::merge_from(WordCounts&& other) {
  if (map_.empty()) {
    map_ = std::move(other.map_);
    total_ = other.total_;
  } else {
    for (auto& [piece, n] : other.map_) add(piece, n);
  }
  other.map_.clear();
  other.total_ = 0;
}

Expected<WordCounts> count_words(const std::vector<std::string>& files, int threads, const ByteProgress& progress,
                                 const JsonlOptions& jsonl, ChunkReport* report) {
  std::vector<WordCounts> per_thread(static_cast<size_t>(std::max(1, threads)));
  ChunkOptions co;
  co.threads = threads;
  co.jsonl = jsonl;
  auto r = process_text_chunks(
      files, co,
      [&](TextChunk& c, int t) {
        WordCounts& wc = per_thread[static_cast<size_t>(t)];
        for_each_pretoken(c.text, [&](std::string_view piece) { wc.add(piece); });
      },
      [](TextChunk&) { return ok_status(); }, progress);
  if (!r) return r.status();
  if (report != nullptr) *report = std::move(*r);
  for (size_t t = 1; t < per_thread.size(); ++t) per_thread[0].merge_from(std::move(per_thread[t]));
  return std::move(per_thread[0]);
}

}  // namespace tera
