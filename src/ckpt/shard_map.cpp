// Global <-> local copies of a parameter; see shard_map.h.
#include "ckpt/shard_map.h"

#include <algorithm>
#include <cstring>

namespace tera {

void ShardMap::scatter(const ParamEntry& e, const float* global, float* local) const {
  if (whole(e)) {
    const int64_t n = numel(e.info->shape);
    std::copy(global, global + n, local);
    std::fill(local + n, local + e.count, 0.0f);
    return;
  }
  for (int64_t i = 0; i < e.count; ++i) {
    const int64_t g = table_.global_index(e, i);
    local[i] = g >= 0 ? global[g] : 0.0f;
  }
}

void ShardMap::gather(const ParamEntry& e, const void* local, float* global, uint8_t* covered) const {
  const int64_t n = numel(e.info->shape);
  const auto* src = static_cast<const unsigned char*>(local);
  if (whole(e)) {
    std::memcpy(global, src, static_cast<size_t>(n) * sizeof(float));
    if (covered != nullptr) std::fill(covered, covered + n, uint8_t{1});
    return;
  }
  for (int64_t i = 0; i < e.count; ++i) {
    const int64_t g = table_.global_index(e, i);
    if (g < 0 || g >= n) continue;  // padding
    std::memcpy(global + g, src + i * static_cast<int64_t>(sizeof(float)), sizeof(float));
    if (covered != nullptr) covered[g] = 1;
  }
}

}  // namespace tera
