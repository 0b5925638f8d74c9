// Opening a Megatron .bin/.idx pair (mmap, index check, one scan of the
// tokens) and reading windows of its token stream; see megatron_dataset.h.
#include "data/megatron_dataset.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/check.h"
#include "core/file_util.h"
#include "core/unaligned.h"

namespace tera {

namespace {


// Calls f(token_type{}) with the C++ type of an integer dtype (the switch
// is made once per call, not once per token).
template <typename F>
void with_token_type(MegatronDtype d, F&& f) {
  switch (d) {
    case MegatronDtype::uint8: return f(uint8_t{});
    case MegatronDtype::int8: return f(int8_t{});
    case MegatronDtype::int16: return f(int16_t{});
    case MegatronDtype::uint16: return f(uint16_t{});
    case MegatronDtype::int32: return f(int32_t{});
    case MegatronDtype::int64: return f(int64_t{});
    case MegatronDtype::float32:
    case MegatronDtype::float64: break;  // refused by parse_megatron_index
  }
  TERA_ASSERT(false, "float Megatron dtype reached the reader");
}

// The first token of [0, n) outside [0, limit), or n; the largest id seen before it in *max_id.
template <typename T>
uint64_t first_bad_token(const uint8_t* bin, uint64_t n, int64_t limit, int64_t* max_id) {
  int64_t hi = -1;
  for (uint64_t i = 0; i < n; ++i) {
    const auto t = static_cast<int64_t>(load_unaligned<T>(bin + sizeof(T) * i));
    if (t < 0 || t >= limit) {
      *max_id = hi;
      return i;
    }
    hi = std::max(hi, t);
  }
  *max_id = hi;
  return n;
}

}  // namespace

bool is_megatron_prefix(const std::string& path) {
  std::error_code ec;
  return !path.empty() && std::filesystem::exists(megatron_idx(path), ec);
}

Expected<std::unique_ptr<MegatronDataset>> MegatronDataset::open(const std::string& prefix, int64_t max_vocab,
                                                                 const std::string& max_vocab_what) {
  auto ds = std::unique_ptr<MegatronDataset>(new MegatronDataset());
  ds->prefix_ = prefix;
  const std::string idx = megatron_idx(prefix), bin = megatron_bin(prefix);
  TERA_RETURN_IF_ERROR(map_file_readonly(idx, &ds->idx_map_, &ds->idx_bytes_));
  TERA_RETURN_IF_ERROR(map_file_readonly(bin, &ds->bin_map_, &ds->bin_bytes_));
  auto ix = parse_megatron_index(static_cast<const uint8_t*>(ds->idx_map_), ds->idx_bytes_, idx, ds->bin_bytes_);
  if (!ix) return Status::error(fmt::format("{} ({}: {} bytes)", ix.error(), bin, ds->bin_bytes_));  // ds unmaps
  ds->index_ = *ix;
  // One pass over the tokens: ids checked, the largest kept, the content hashed.
  const auto* b = static_cast<const uint8_t*>(ds->bin_map_);
  int64_t max_id = -1;
  uint64_t bad = 0;
  with_token_type(ix->dtype, [&](auto type) {
    bad = first_bad_token<decltype(type)>(b, ix->total_tokens, max_vocab, &max_id);
  });
  if (bad < ix->total_tokens) {
    int64_t t = 0;
    with_token_type(ix->dtype, [&](auto type) { t = load_unaligned<decltype(type)>(b + sizeof(type) * bad); });
    return Status::error(fmt::format("{}: token {} (of {}) is id {}, {}; re-encode the data or fix {}", bin, bad,
                                     ix->total_tokens, t,
                                     t < 0 ? std::string("negative")
                                           : fmt::format("beyond the vocabulary ({})", max_vocab_what),
                                     max_vocab_what));
  }
  ds->max_id_ = max_id;
  const uint32_t bin_crc = crc32_of(b, ds->bin_bytes_);
  const uint32_t idx_crc = crc32_of(ds->idx_map_, ds->idx_bytes_);
  ds->fingerprint_ = (static_cast<uint64_t>(idx_crc) << 32 | bin_crc) ^ (ix->total_tokens * 0x9E3779B97F4A7C15ull);
  return ds;
}

MegatronDataset::~MegatronDataset() {
  if (idx_map_ != nullptr) ::munmap(idx_map_, idx_bytes_);
  if (bin_map_ != nullptr) ::munmap(bin_map_, bin_bytes_);
}

void MegatronDataset::read(int64_t offset, int64_t n, int32_t* out) const {
  TERA_ASSERT(offset >= 0 && n >= 0 && offset + n <= num_tokens(), "Megatron dataset read out of range");
  const auto* b = static_cast<const uint8_t*>(bin_map_);
  with_token_type(index_.dtype, [&](auto type) {
    using T = decltype(type);
    const uint8_t* p = b + sizeof(T) * static_cast<size_t>(offset);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(load_unaligned<T>(p + sizeof(T) * static_cast<size_t>(i)));
  });
}

std::string MegatronDataset::describe() const {
  return fmt::format("{}.bin/.idx (Megatron indexed dataset: {} tokens of {}, {} documents in {} sequences)", prefix_,
                     index_.total_tokens, megatron_dtype_name(index_.dtype), index_.documents(), index_.sequences);
}

}  // namespace tera
