// Open-addressing hash map keyed by a token pair (left, right) packed into 64
// bits: the merge table of the encoder and the pair counts of the trainer.
// Entries are never erased (a trainer's count may drop to zero and stay);
// the table doubles at 50% load. The key ~0 (pair (-1, -1)) is reserved.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace tera {

inline uint64_t pair_key(int32_t left, int32_t right) {
  return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
}
inline int32_t pair_left(uint64_t key) { return static_cast<int32_t>(key >> 32); }
inline int32_t pair_right(uint64_t key) { return static_cast<int32_t>(key & 0xFFFFFFFFu); }

template <typename V>
class PairMap {
 public:
  explicit PairMap(size_t expected = 16) { rehash(capacity_for(expected)); }

  const V* find(uint64_t key) const {
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &vals_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }
  V* find(uint64_t key) { return const_cast<V*>(static_cast<const PairMap*>(this)->find(key)); }

  // The value for key, inserting V{} first when absent.
  V& operator[](uint64_t key) {
    if (2 * (size_ + 1) > keys_.size()) rehash(keys_.size() * 2);
    size_t i = slot(key);
    while (keys_[i] != key && keys_[i] != kEmpty) i = (i + 1) & mask_;
    if (keys_[i] == kEmpty) {
      keys_[i] = key;
      vals_[i] = V{};
      ++size_;
    }
    return vals_[i];
  }

  size_t size() const { return size_; }

  template <typename F>
  void for_each(F&& f) const {  // f(key, value)
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (keys_[i] != kEmpty) f(keys_[i], vals_[i]);
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static size_t capacity_for(size_t n) {
    size_t c = 16;
    while (c < 2 * n) c *= 2;
    return c;
  }
  size_t slot(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void rehash(size_t capacity) {
    std::vector<uint64_t> old_keys(capacity, kEmpty);
    std::vector<V> old_vals(capacity);
    std::swap(old_keys, keys_);
    std::swap(old_vals, vals_);
    mask_ = capacity - 1;
    shift_ = 64;
    for (size_t c = capacity; c > 1; c >>= 1) --shift_;
    for (size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] == kEmpty) continue;
      size_t j = slot(old_keys[i]);
      while (keys_[j] != kEmpty) j = (j + 1) & mask_;
      keys_[j] = old_keys[i];
      vals_[j] = std::move(old_vals[i]);
    }
  }

  std::vector<uint64_t> keys_;
  std::vector<V> vals_;
  size_t size_ = 0, mask_ = 0;
  int shift_ = 64;
};

}  // namespace tera
