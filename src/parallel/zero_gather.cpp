// ZeroMemory's parameter gathers (see zero.h): ZeRO-3's just-in-time
// all-gather of each unit before its forward and backward, one unit
// prefetched, the embedding units kept for the step; the bf16 copies the
// GEMMs read; and the host copies of the whole table (checkpoints, moments).
#include <algorithm>

#include "core/check.h"
#include "parallel/zero.h"

namespace tera {

void ZeroMemory::start_gather(int unit, Gather& g) {
  g.unit = unit;
  g.rounded = false;
  g.req = dp_.iall_gather(shard_ptr(params_, unit), g.buf, chunk(unit), CommType::f32);
}

ZeroMemory::Gather& ZeroMemory::gather_slot(int unit) {
  for (Gather& g : block_gathers_) {
    if (g.unit == unit) return g;
  }
  // A free slot; a stale prefetch may still be in flight: finish it first.
  for (Gather& g : block_gathers_) {
    if (!g.in_use) {
      dp_.wait(g.req);
      start_gather(unit, g);
      return g;
    }
  }
  TERA_ASSERT(false, "zero-3: both gather buffers are in use");
  return block_gathers_[0];
}

void ZeroMemory::prefetch(int unit) {
  const int n = static_cast<int>(table_.units().size());
  if (unit < first_block_unit_ || unit >= n) return;
  for (Gather& g : block_gathers_) {
    if (g.unit == unit) return;
  }
  for (Gather& g : block_gathers_) {
    if (!g.in_use) {
      dp_.wait(g.req);
      start_gather(unit, g);
      return;
    }
  }
}

const float* ZeroMemory::acquire(int unit, Pass pass) {
  if (zero_ < 3) return params_ + table_.units()[static_cast<size_t>(unit)].begin;
  if (dedicated(unit)) {
    // Gathered on first use in a step and kept: the shards change only in optimizer_step.
    Gather& g = dedicated_gather_[static_cast<size_t>(unit)];
    if (!g.in_use) {
      start_gather(unit, g);
      dp_.wait(g.req);
      g.in_use = true;
      prefetch(first_block_unit_);
    }
    return g.buf;
  }
  Gather& g = gather_slot(unit);
  dp_.wait(g.req);
  g.in_use = true;
  prefetch(pass == Pass::forward ? unit + 1 : unit - 1);
  return g.buf;
}

void ZeroMemory::release(int unit, Pass) {
  if (zero_ < 3 || dedicated(unit)) return;
  for (Gather& g : block_gathers_) {
    if (g.unit == unit && g.in_use) {
      g.in_use = false;
      g.unit = -1;
    }
  }
}

const uint16_t* ZeroMemory::compute_weights(int unit) {
  if (zero_ < 3) return compute_ == nullptr ? nullptr : compute_ + table_.units()[static_cast<size_t>(unit)].begin;
  if (gathered_compute_ == nullptr) return nullptr;
  Gather* g = dedicated(unit) ? &dedicated_gather_[static_cast<size_t>(unit)] : nullptr;
  for (Gather& b : block_gathers_) {
    if (g == nullptr && b.unit == unit && b.in_use) g = &b;
  }
  TERA_ASSERT(g != nullptr && g->in_use, "compute_weights of a unit that is not acquired");
  uint16_t* twin = gathered_compute_ + (g->buf - gathered_);
  if (!g->rounded) {
    be_.cast(twin, DType::bf16, g->buf, DType::f32, table_.units()[static_cast<size_t>(unit)].size());
    g->rounded = true;
  }
  return twin;
}

void ZeroMemory::gather_parameters(float* out) {
  if (zero_ < 3) {
    be_.copy(out, params_, table_.total_floats() * 4, CopyKind::device_to_host);
    return;
  }
  // Each rank's chunk to the host, then gathered into the unit's place over the host communicator.
  std::vector<float> mine(static_cast<size_t>(max_chunk_));
  for (size_t u = 0; u < table_.units().size(); ++u) {
    const int ui = static_cast<int>(u);
    be_.copy(mine.data(), shard_ptr(params_, ui), chunk(ui) * 4, CopyKind::device_to_host);
    dp_host_.all_gather(mine.data(), out + table_.units()[u].begin, chunk(ui), CommType::f32);
  }
}

void ZeroMemory::load_parameters(const float* full) {
  for (Gather& g : dedicated_gather_) {
    dp_.wait(g.req);
    g.in_use = false;
  }
  if (zero_ < 3) {
    be_.copy(params_, full, table_.total_floats() * 4, CopyKind::host_to_device);
    refresh_compute_weights();
    return;
  }
  for (size_t u = 0; u < table_.units().size(); ++u) {
    const int ui = static_cast<int>(u);
    be_.copy(shard_ptr(params_, ui), full + chunk_begin(ui), chunk(ui) * 4, CopyKind::host_to_device);
  }
}

void ZeroMemory::all_gather_ranges(float* full) {
  if (zero_ == 0) return;
  for (size_t u = 0; u < table_.units().size(); ++u) {
    const int ui = static_cast<int>(u);
    dp_host_.all_gather(full + chunk_begin(ui), full + table_.units()[u].begin, chunk(ui), CommType::f32);
  }
}

}  // namespace tera
