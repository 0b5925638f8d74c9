// Byte-level dataset and samplers (vocab 256: token = byte value).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "data/dataset.h"

namespace tera {

Expected<std::unique_ptr<ByteDataset>> ByteDataset::open(const std::string& path, double begin_fraction,
                                                         double end_fraction) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::error(path + ": cannot open (" + std::strerror(errno) + ")");
  std::vector<uint8_t> all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return Status::error(path + ": read error");
  const auto n = static_cast<double>(all.size());
  const auto b = static_cast<size_t>(n * begin_fraction), e = static_cast<size_t>(n * end_fraction);
  auto ds = std::unique_ptr<ByteDataset>(new ByteDataset());
  ds->path_ = path;
  ds->bytes_.assign(all.begin() + static_cast<std::ptrdiff_t>(b), all.begin() + static_cast<std::ptrdiff_t>(e));
  return ds;
}

void ByteDataset::read(int64_t offset, int64_t n, int32_t* out) const {
  TERA_ASSERT(offset >= 0 && offset + n <= num_tokens());
  for (int64_t i = 0; i < n; ++i) out[i] = bytes_[static_cast<size_t>(offset + i)];
}

std::string ByteDataset::describe() const {
  return path_ + " (" + std::to_string(bytes_.size()) + " bytes as byte tokens)";
}

RandomWindowSampler::RandomWindowSampler(const TokenDataset& data, int64_t seq_len, uint64_t seed)
    : data_(data), T_(seq_len), seed_(seed) {}

void RandomWindowSampler::fill(int64_t first, int64_t count, int32_t* tokens, int32_t* targets) const {
  const PhiloxKey key = philox_key(seed_, "data.train.window");
  const uint64_t starts = static_cast<uint64_t>(data_.num_tokens() - T_);  // window needs T + 1 tokens
  std::vector<int32_t> buf(static_cast<size_t>(T_ + 1));
  for (int64_t i = 0; i < count; ++i) {
    const auto off = static_cast<int64_t>(philox_below(key, static_cast<uint64_t>(first + i), starts));
    data_.read(off, T_ + 1, buf.data());
    std::copy(buf.begin(), buf.end() - 1, tokens + i * T_);
    std::copy(buf.begin() + 1, buf.end(), targets + i * T_);
  }
}

void fill_sequential_windows(const TokenDataset& data, int64_t seq_len, int64_t first, int64_t count,
                             int32_t* tokens, int32_t* targets) {
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
  return Status::ok();
}

}  // namespace tera
