// Incremental BPE training; see bpe_trainer.h. Each distinct word is a linked
// list of symbols in one flat array (sym/prev/next, global indices). The heap
// holds (count, pair) entries lazily: an entry whose count is stale is
// re-pushed with the current count, and every count increase pushes a fresh
// entry, so the top valid entry is always the most frequent pair.
#include "data/bpe_trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "data/pair_map.h"

namespace tera {

namespace {

struct PairStat {
  int64_t count = 0;
  int64_t pushed_at = -1;      // merge step whose increase already pushed a heap entry
  std::vector<int32_t> words;  // may hold words that lost the pair since (checked on use)
};

struct HeapEntry {
  int64_t count;
  uint64_t key;
};

// Max-heap order: larger count first, then the smaller pair key.
bool heap_less(const HeapEntry& a, const HeapEntry& b) {
  return a.count != b.count ? a.count < b.count : a.key > b.key;
}

class Trainer {
 public:
  explicit Trainer(const WordCounts& wc) : pairs_(wc.size() * 4) {
    std::vector<std::pair<std::string_view, int64_t>> words;
    words.reserve(wc.size());
    wc.for_each([&](std::string_view w, int64_t n) { words.emplace_back(w, n); });
    std::sort(words.begin(), words.end());  // a fixed order, whatever the hash map's
    size_t total = 0;
    for (const auto& w : words) total += w.first.size();
    TERA_ASSERT(total < static_cast<size_t>(std::numeric_limits<int32_t>::max()), "corpus has too many distinct bytes");
    sym_.resize(total);
    prev_.resize(total);
    next_.resize(total);
    for (const auto& [w, n] : words) {
      const int32_t begin = end_;
      for (size_t i = 0; i < w.size(); ++i) {
        const int32_t g = begin + static_cast<int32_t>(i);
        sym_[static_cast<size_t>(g)] = static_cast<uint8_t>(w[i]);
        prev_[static_cast<size_t>(g)] = i == 0 ? -1 : g - 1;
        next_[static_cast<size_t>(g)] = i + 1 < w.size() ? g + 1 : -1;
      }
      start_.push_back(begin);
      freq_.push_back(n);
      end_ = begin + static_cast<int32_t>(w.size());
    }
    seen_.assign(start_.size(), -1);
    for (size_t w = 0; w < start_.size(); ++w) {
      for (int32_t g = start_[w]; next_[static_cast<size_t>(g)] >= 0; g = next_[static_cast<size_t>(g)]) {
        add(sym_[static_cast<size_t>(g)], sym_[static_cast<size_t>(next_[static_cast<size_t>(g)])], freq_[w],
            static_cast<int32_t>(w));
      }
    }
    pairs_.for_each([&](uint64_t key, const PairStat& s) { heap_.push_back({s.count, key}); });
    std::make_heap(heap_.begin(), heap_.end(), heap_less);
  }

  // Pops the most frequent pair; false when none reaches min_count.
  bool best(int64_t min_count, uint64_t* key) {
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), heap_less);
      const HeapEntry e = heap_.back();
      heap_.pop_back();
      const int64_t now = pairs_.find(e.key)->count;
      if (now == e.count) {
        if (now < min_count) return false;
        *key = e.key;
        return true;
      }
      if (now < e.count && now >= min_count) push(now, e.key);  // a larger count has its own entry
    }
    return false;
  }

  // Replaces every occurrence of (a, b) by z in the words that hold it.
  void merge(uint64_t key, int32_t z) {
    ++step_;
    const int32_t a = pair_left(key), b = pair_right(key);
    std::vector<int32_t> words = std::move(pairs_[key].words);
    for (const int32_t w : words) {
      if (seen_[static_cast<size_t>(w)] == step_) continue;
      seen_[static_cast<size_t>(w)] = step_;
      const int64_t f = freq_[static_cast<size_t>(w)];
      for (int32_t i = start_[static_cast<size_t>(w)]; i >= 0;) {
        const int32_t j = next_[static_cast<size_t>(i)];
        if (j < 0) break;
        if (sym_[static_cast<size_t>(i)] != a || sym_[static_cast<size_t>(j)] != b) {
          i = j;
          continue;
        }
        const int32_t x = prev_[static_cast<size_t>(i)], y = next_[static_cast<size_t>(j)];
        if (x >= 0) add(sym_[static_cast<size_t>(x)], a, -f, w);
        if (y >= 0) add(b, sym_[static_cast<size_t>(y)], -f, w);
        sym_[static_cast<size_t>(i)] = z;
        sym_[static_cast<size_t>(j)] = -1;
        next_[static_cast<size_t>(i)] = y;
        if (y >= 0) prev_[static_cast<size_t>(y)] = i;
        if (x >= 0) add(sym_[static_cast<size_t>(x)], z, f, w);
        if (y >= 0) add(z, sym_[static_cast<size_t>(y)], f, w);
        i = y;
      }
    }
    pairs_[key].count = 0;
    pairs_[key].words.clear();
    for (const uint64_t k : increased_) push(pairs_.find(k)->count, k);
    increased_.clear();
  }

 private:
  void add(int32_t left, int32_t right, int64_t delta, int32_t word) {
    const uint64_t k = pair_key(left, right);
    PairStat& s = pairs_[k];
    s.count += delta;
    if (delta > 0) {
      if (s.words.empty() || s.words.back() != word) s.words.push_back(word);
      if (s.pushed_at != step_ && step_ > 0) {
        s.pushed_at = step_;
        increased_.push_back(k);
      }
    }
  }
  void push(int64_t count, uint64_t key) {
    heap_.push_back({count, key});
    std::push_heap(heap_.begin(), heap_.end(), heap_less);
  }

  std::vector<int32_t> sym_, prev_, next_;  // symbol id (-1: merged away), neighbours (-1: none)
  std::vector<int32_t> start_;              // first symbol of each word (never merged away)
  std::vector<int64_t> freq_;
  std::vector<int64_t> seen_;  // last merge step that rewrote each word
  int32_t end_ = 0;
  PairMap<PairStat> pairs_;
  std::vector<HeapEntry> heap_;
  std::vector<uint64_t> increased_;
  int64_t step_ = 0;
};

}  // namespace

Expected<BpeTokenizer> train_bpe(const WordCounts& words, const BpeTrainOptions& opt, const TrainProgress& progress) {
  const auto n_special = static_cast<int64_t>(opt.specials.size());
  if (opt.vocab_size < 256 + n_special) {
    return Status::error(
        fmt::format("vocabulary size {} is too small: it must hold the 256 byte tokens and {} special "
                    "token(s); use at least {}",
                    opt.vocab_size, n_special, 256 + n_special));
  }
  if (opt.vocab_size > (int64_t{1} << 24)) {
    return Status::error(fmt::format("vocabulary size {} is too large (at most {})", opt.vocab_size, int64_t{1} << 24));
  }
  const int64_t wanted = opt.vocab_size - 256 - n_special;
  std::vector<std::string> tokens(256);
  for (int b = 0; b < 256; ++b) tokens[static_cast<size_t>(b)] = std::string(1, static_cast<char>(b));
  std::vector<BpeMerge> merges;
  Trainer tr(words);
  uint64_t key = 0;
  while (static_cast<int64_t>(merges.size()) < wanted && tr.best(std::max<int64_t>(1, opt.min_frequency), &key)) {
    const int32_t a = pair_left(key), b = pair_right(key), z = static_cast<int32_t>(tokens.size());
    tokens.push_back(tokens[static_cast<size_t>(a)] + tokens[static_cast<size_t>(b)]);
    merges.push_back({a, b});
    tr.merge(key, z);
    if (progress) progress(static_cast<int64_t>(merges.size()), wanted);
  }
  std::vector<int32_t> specials;
  for (const auto& s : opt.specials) {
    specials.push_back(static_cast<int32_t>(tokens.size()));
    tokens.push_back(s);
  }
  return BpeTokenizer::create(std::move(tokens), std::move(merges), std::move(specials), "trained tokenizer");
}

}  // namespace tera
