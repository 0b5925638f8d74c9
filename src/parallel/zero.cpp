// ZeroMemory: buffers per ZeRO stage, per-unit reductions launched from
// grads_done and completed in poll / finish_gradients, just-in-time gathers
// with one-unit prefetch for stage 3. See zero.h for the stages.
#include "parallel/zero.h"

#include <algorithm>

#include "core/check.h"

namespace tera {

ZeroMemory::ZeroMemory(const ParamTable& table, Communicator& dp_host, Communicator& dp_dev, int zero_stage,
                       const Backend& be, RankMemory& memory, Communicator* tp_dev, bool sequence_parallel,
                       Communicator* kv_dev)
    : table_(table),
      dp_host_(dp_host),
      dp_(dp_dev),
      tp_(tp_dev),
      sp_(sequence_parallel && tp_dev != nullptr && tp_dev->size() > 1),
      kv_(table.kv_replicas() > 1 ? kv_dev : nullptr),
      zero_(zero_stage),
      be_(be) {
  TERA_ASSERT(zero_ >= 0 && zero_ <= 3);
  TERA_ASSERT(table.kv_replicas() == 1 || (kv_dev != nullptr && kv_dev->size() == table.kv_replicas()),
              "replicated key/value heads need the group of their replicas (ProcessGroups' kv_replicas)");
  kv_rows_.resize(table_.units().size());
  table_.for_each([&](const ParamEntry& e) {
    if (e.replicated_end > e.replicated_begin) {
      const int64_t at = e.offset - table_.units()[static_cast<size_t>(e.unit)].begin;
      kv_rows_[static_cast<size_t>(e.unit)].push_back({at + e.replicated_begin, at + e.replicated_end});
    }
  });
  TERA_ASSERT(dp_host.size() == dp_dev.size() && dp_host.rank() == dp_dev.rank(), "two communicators of one group");
  const int64_t p = dp_.size();
  const auto& units = table_.units();
  sizes_ = zero_sizes(unit_shapes(table_), dp_.size(), dp_.rank(), zero_);
  staging_of_unit_.assign(units.size(), nullptr);
  dedicated_staging_.assign(units.size(), nullptr);
  dedicated_gather_.assign(units.size(), Gather{});
  for (const auto& u : units) {
    shard_offset_.push_back(shard_floats_);
    shard_floats_ += u.size() / p;
  }
  int64_t max_block = 0, max_chunk = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    if (dedicated(static_cast<int>(u))) {
      first_block_unit_ = static_cast<int>(u) + 1;
    } else {
      max_block = std::max(max_block, units[u].size());
    }
    max_chunk = std::max(max_chunk, units[u].size() / p);
  }
  max_block_ = max_block;
  max_chunk_ = max_chunk;
  const int64_t pool = max_block > 0 ? 2 : 0;  // block buffers: the one in use and the next

  // The plan's buffers, checked against the sizes this stage needs.
  auto bind = [&](MemoryClass c, const char* name, int64_t want) -> float* {
    const DeviceArena& a = memory.arena(c);
    TERA_ASSERT(a.count(name) == want, std::string("the memory plan's ") + name + " has " + std::to_string(a.count(name)) +
                                           " floats; ZeRO-" + std::to_string(zero_) + " needs " + std::to_string(want));
    return a.get<float>(name);
  };
  params_ = bind(MemoryClass::parameters, "params", sizes_.params);
  grads_ = bind(MemoryClass::gradients, "grads", sizes_.grads);
  grad_shard_ = bind(MemoryClass::gradients, "grad_shard", sizes_.grad_shard);
  staging_ = bind(MemoryClass::zero_staging, "grad_staging", sizes_.staging);
  temps_ = bind(MemoryClass::comm_buckets, "reduce_scatter_out", sizes_.temps);
  gathered_ = bind(MemoryClass::zero_gather, "gathered_params", sizes_.gathered);
  compute_ = memory.arena(MemoryClass::parameters).get<uint16_t>("compute_weights");
  gathered_compute_ = memory.arena(MemoryClass::zero_gather).get<uint16_t>("gathered_compute_weights");
  TERA_ASSERT(compute_ == nullptr || memory.arena(MemoryClass::parameters).count("compute_weights") == sizes_.params,
              "the memory plan's compute_weights do not match params");
  if (zero_ >= 2) {
    float* next = staging_;
    for (size_t u = 0; u < units.size(); ++u) {
      if (!dedicated(static_cast<int>(u))) continue;
      dedicated_staging_[u] = next;
      staging_buffers_.push_back(next);
      next += units[u].size();
    }
    for (int64_t k = 0; k < pool; ++k) {
      free_staging_.push_back(next);
      staging_buffers_.push_back(next);
      next += max_block;
    }
    for (size_t k = 0; k < staging_buffers_.size(); ++k) temp_of_staging_.push_back(temps_ + k * max_chunk);
  }
  if (zero_ == 3) {
    float* next = gathered_;
    for (size_t u = 0; u < units.size(); ++u) {
      if (!dedicated(static_cast<int>(u))) continue;
      dedicated_gather_[u].buf = next;
      next += units[u].size();
    }
    for (int64_t k = 0; k < pool; ++k) {
      block_gathers_[k].buf = next;
      next += max_block;
    }
  }
  // What this rank updates: everything (zero 0) or its chunk of every unit.
  if (zero_ == 0) {
    ranges_.push_back({0, table_.total_floats()});
  } else {
    for (size_t u = 0; u < units.size(); ++u) ranges_.push_back({chunk_begin(static_cast<int>(u)), chunk_begin(static_cast<int>(u)) + chunk(static_cast<int>(u))});
  }
}

ZeroMemory::~ZeroMemory() {
  while (!pending_.empty()) complete_oldest();
  for (Gather& g : dedicated_gather_) dp_.wait(g.req);
  for (Gather& g : block_gathers_) dp_.wait(g.req);
}

float* ZeroMemory::temp_for(const float* staging) const {
  for (size_t k = 0; k < staging_buffers_.size(); ++k) {
    if (staging_buffers_[k] == staging) return temp_of_staging_[k];
  }
  TERA_ASSERT(false, "unknown staging buffer");
  return nullptr;
}

void ZeroMemory::init_parameters(uint64_t seed) {
  // A unit at a time through one host buffer: the whole unit (zero 0-2) or
  // this rank's chunk of it (zero 3).
  std::vector<float> host(static_cast<size_t>(table_.max_unit_floats()));
  for (size_t u = 0; u < table_.units().size(); ++u) {
    const int ui = static_cast<int>(u);
    const ParamUnit& unit = table_.units()[u];
    const int64_t b = zero_ < 3 ? unit.begin : chunk_begin(ui), n = zero_ < 3 ? unit.size() : chunk(ui);
    tera::init_parameters(table_, seed, b, b + n, host.data());
    float* dst = zero_ < 3 ? params_ + unit.begin : shard_ptr(params_, ui);
    be_.copy(dst, host.data(), n * 4, CopyKind::host_to_device);
  }
  refresh_compute_weights();
}

void ZeroMemory::refresh_compute_weights() {
  if (compute_ != nullptr) be_.cast(compute_, DType::bf16, params_, DType::f32, sizes_.params);
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

// ---- parameters -------------------------------------------------------------

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

// ---- gradients --------------------------------------------------------------

float* ZeroMemory::take_staging(int unit) {
  const ParamUnit& u = table_.units()[static_cast<size_t>(unit)];
  float* s = dedicated_staging_[static_cast<size_t>(unit)];
  if (s != nullptr) {
    // A dedicated buffer is reused every micro-batch: its previous
    // reduce-scatter may still be reading it (non-blocking MPI).
    while (std::any_of(pending_.begin(), pending_.end(), [&](const Pending& p) { return p.staging == s; })) {
      complete_oldest();
    }
  } else {
    while (free_staging_.empty()) complete_oldest();
    s = free_staging_.back();
    free_staging_.pop_back();
  }
  be_.fill(s, DType::f32, 0.0, u.size());
  staging_of_unit_[static_cast<size_t>(unit)] = s;
  return s;
}

float* ZeroMemory::grads(int unit) {
  if (zero_ <= 1) return grads_ + table_.units()[static_cast<size_t>(unit)].begin;
  float* s = staging_of_unit_[static_cast<size_t>(unit)];
  return s != nullptr ? s : take_staging(unit);
}

void ZeroMemory::grads_done(int unit) {
  const ParamUnit& u = table_.units()[static_cast<size_t>(unit)];
  // ZeRO 0/1 accumulate over micro-batches and reduce after the last one;
  // ZeRO 2/3 reduce every micro-batch's staging buffer.
  if (zero_ <= 1 && !last_micro_batch_) return;
  float* g = zero_ <= 1 ? grads_ + u.begin : staging_of_unit_[static_cast<size_t>(unit)];
  // Under zero 2/3 a unit may report twice for gradients it collected once
  // (the head's gradients of several micro-batches, reduced together).
  if (g == nullptr) return;
  if (sp_ && u.sp_partial_end > u.begin) {
    // Sequence parallelism: LayerNorm / position gradients saw only this
    // rank's tokens; sum them over the tensor-parallel group first.
    tp_->all_reduce(g, u.sp_partial_end - u.begin, CommType::f32, ReduceOp::sum);
  }
  if (kv_ != nullptr) {
    // A replicated key/value head's gradient on each rank covers only its
    // own query heads' share: sum over the head's replicas.
    for (const auto& [b, e] : kv_rows_[static_cast<size_t>(unit)]) kv_->all_reduce(g + b, e - b, CommType::f32, ReduceOp::sum);
  }
  if (zero_ == 0) {
    if (dp_.size() > 1) {
      pending_.push_back({unit, dp_.iall_reduce(g, u.size(), CommType::f32, ReduceOp::sum), nullptr, nullptr});
    }
    return;
  }
  if (zero_ == 1) {
    pending_.push_back({unit,
                        dp_.ireduce_scatter(g, shard_ptr(grad_shard_, unit), chunk(unit), CommType::f32,
                                            ReduceOp::sum),
                        nullptr, nullptr});
    return;
  }
  staging_of_unit_[static_cast<size_t>(unit)] = nullptr;
  float* temp = temp_for(g);
  pending_.push_back({unit, dp_.ireduce_scatter(g, temp, chunk(unit), CommType::f32, ReduceOp::sum), g, temp});
}

void ZeroMemory::complete(Pending& p) {
  dp_.wait(p.req);
  if (p.temp != nullptr) {
    float* acc = shard_ptr(grad_shard_, p.unit);
    be_.residual_forward(acc, acc, p.temp, chunk(p.unit));
    if (!dedicated(p.unit)) free_staging_.push_back(p.staging);
  }
}

void ZeroMemory::complete_oldest() {
  TERA_ASSERT(!pending_.empty());
  Pending p = std::move(pending_.front());
  pending_.pop_front();
  complete(p);
}

void ZeroMemory::poll() {
  // Progress every outstanding operation; retire the completed ones in order.
  for (auto& p : pending_) dp_.test(p.req);
  for (Gather& g : block_gathers_) dp_.test(g.req);
  while (!pending_.empty() && !pending_.front().req.pending()) complete_oldest();
}

void ZeroMemory::begin_step() {
  TERA_ASSERT(pending_.empty());
  if (zero_ <= 1) be_.fill(grads_, DType::f32, 0.0, sizes_.grads);
  if (zero_ >= 1) be_.fill(grad_shard_, DType::f32, 0.0, sizes_.grad_shard);
}

void ZeroMemory::finish_gradients() {
  while (!pending_.empty()) complete_oldest();
}

std::vector<ZeroMemory::Shard> ZeroMemory::shards() {
  std::vector<Shard> out;
  if (zero_ == 0) {
    out.push_back({0, table_.total_floats(), params_, grads_, compute_});
    return out;
  }
  const auto& units = table_.units();
  out.reserve(units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    const int ui = static_cast<int>(u);
    const int64_t b = chunk_begin(ui);
    float* prm = zero_ == 3 ? shard_ptr(params_, ui) : params_ + b;
    out.push_back({b, b + chunk(ui), prm, shard_ptr(grad_shard_, ui)});
  }
  return out;
}

float* ZeroMemory::reduced_grads(int unit, int64_t* count) {
  const ParamUnit& u = table_.units()[static_cast<size_t>(unit)];
  if (zero_ == 0) {
    *count = u.size();
    return grads_ + u.begin;
  }
  *count = chunk(unit);
  return shard_ptr(grad_shard_, unit);
}

void ZeroMemory::grad_sum_squares(double* out, int skip_unit) {
  // Over the parameters in the shards this rank updates (all, or its
  // chunks), tensor by tensor: group 0 tensors split over tp, group 1
  // replicated ones; one device reduction over every piece.
  std::vector<SegmentRef> segs;
  const ParamUnit* skip = skip_unit >= 0 ? &table_.units()[static_cast<size_t>(skip_unit)] : nullptr;
  for (const Shard& sh : shards()) {
    auto piece = [&](int64_t begin, int64_t end, int64_t group) {
      const int64_t b = std::max(sh.begin, begin), x = std::min(sh.end, end);
      if (b >= x || (skip != nullptr && b >= skip->begin && b < skip->end)) return;
      segs.push_back({sh.grad + (b - sh.begin), x - b, group});
    };
    table_.for_each([&](const ParamEntry& e) {
      if (e.replicated_end <= e.replicated_begin) {
        piece(e.offset, e.offset + e.count, e.tp_split() ? 0 : 1);
        return;
      }
      // Replicated key/value rows: counted once per head, on its first replica.
      piece(e.offset, e.offset + e.replicated_begin, 0);
      if (table_.kv_replica_leader()) piece(e.offset + e.replicated_begin, e.offset + e.replicated_end, 0);
      piece(e.offset + e.replicated_end, e.offset + e.count, 0);
    });
  }
  be_.sum_squares(out, segs.data(), static_cast<int64_t>(segs.size()), 2);
}

void ZeroMemory::count_nonfinite_grads(double* out) {
  std::vector<SegmentRef> segs;
  for (size_t u = 0; u < table_.units().size(); ++u) {
    int64_t count = 0;
    const float* g = reduced_grads(static_cast<int>(u), &count);
    segs.push_back({g, count, static_cast<int64_t>(u)});
  }
  be_.count_nonfinite(out, segs.data(), static_cast<int64_t>(segs.size()), static_cast<int64_t>(segs.size()));
}

void ZeroMemory::shards_updated() {
  // The shards changed: gathered embedding units are stale from here on.
  for (Gather& g : dedicated_gather_) {
    dp_.wait(g.req);
    g.in_use = false;
  }
  if (zero_ == 1 || zero_ == 2) {
    // Every rank updated its chunk of each unit: gather the units back in place.
    const auto& units = table_.units();
    std::vector<Request> reqs;
    for (size_t k = 0; k < units.size(); ++k) {
      const int ki = static_cast<int>(k);
      reqs.push_back(dp_.iall_gather(params_ + chunk_begin(ki), params_ + units[k].begin, chunk(ki), CommType::f32));
    }
    for (auto& r : reqs) dp_.wait(r);
  }
  // ZeRO-0: the optimizer wrote the bf16 copy with the update (shards()).
  if (zero_ != 0) refresh_compute_weights();
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
