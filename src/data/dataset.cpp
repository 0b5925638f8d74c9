// In-memory and sliced token datasets, evaluation windows and the fits-seq_len check.
#include "data/dataset.h"

#include <algorithm>

#include "core/check.h"
#include "core/file_util.h"

namespace tera {

VectorDataset::VectorDataset(std::vector<int32_t> tokens, int64_t vocab, std::string description)
    : tokens_(std::move(tokens)), vocab_(vocab), description_(std::move(description)) {
  fingerprint_ = (static_cast<uint64_t>(tokens_.size()) << 32) ^ crc32_of(tokens_.data(), tokens_.size() * 4);
}

void VectorDataset::read(int64_t offset, int64_t n, int32_t* out) const {
  TERA_ASSERT(offset >= 0 && offset + n <= num_tokens());
  std::copy_n(tokens_.begin() + offset, n, out);
}

SliceDataset::SliceDataset(std::shared_ptr<const TokenDataset> base, int64_t begin, int64_t end,
                           std::string description)
    : base_(std::move(base)), begin_(begin), end_(end), description_(std::move(description)) {
  TERA_ASSERT(0 <= begin && begin <= end && end <= base_->num_tokens());
}

void SliceDataset::read(int64_t offset, int64_t n, int32_t* out) const {
  TERA_ASSERT(offset >= 0 && offset + n <= num_tokens());
  base_->read(begin_ + offset, n, out);
}

std::vector<int64_t> SliceDataset::segments() const {
  std::vector<int64_t> out;
  int64_t at = 0;
  for (const int64_t n : base_->segments()) {
    const int64_t b = std::max(at, begin_), e = std::min(at + n, end_);
    if (e > b) out.push_back(e - b);
    at += n;
  }
  return out;
}

uint64_t SliceDataset::fingerprint() const {
  return (base_->fingerprint() ^ static_cast<uint64_t>(begin_) * 0x9E3779B97F4A7C15ull) + static_cast<uint64_t>(end_);
}

void fill_sequential_windows(const TokenDataset& data, int64_t seq_len, int64_t first, int64_t count, int32_t* tokens,
                             int32_t* targets) {
  const int64_t windows = std::max<int64_t>(1, (data.num_tokens() - 1) / seq_len);
  std::vector<int32_t> buf(static_cast<size_t>(seq_len + 1));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t off = ((first + i) % windows) * seq_len;
    data.read(off, seq_len + 1, buf.data());
    std::copy(buf.begin(), buf.end() - 1, tokens + i * seq_len);
    std::copy(buf.begin() + 1, buf.end(), targets + i * seq_len);
  }
}

Status check_dataset_fits(const TokenDataset& data, int64_t seq_len, const std::string& what) {
  if (data.num_tokens() < seq_len + 1) {
    return Status::error(what + " holds " + std::to_string(data.num_tokens()) +
                         " tokens, fewer than model.seq_len + 1 = " + std::to_string(seq_len + 1) +
                         "; use a larger file or a shorter model.seq_len");
  }
  return ok_status();
}

}  // namespace tera
