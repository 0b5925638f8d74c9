// ZeroMemory: buffers per ZeRO stage, per-unit reductions launched from
// grads_done and completed in poll / finish_gradients, just-in-time gathers
// with one-unit prefetch for stage 3. See zero.h for the stages.
#include "parallel/zero.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace tera {

namespace {
ArenaLayout single(const char* name, int64_t floats) {
  ArenaLayout l(name);
  l.add(name, floats);
  return l;
}
}  // namespace

ZeroArenaSizes zero_arena_sizes(const ParamTable& table, int dp, int dp_rank, int zero_stage) {
  const int64_t p = dp;
  const auto& units = table.units();
  auto dedicated = [&](size_t u) { return static_cast<int>(u) == table.wte_unit() || static_cast<int>(u) == table.io_unit(); };
  ZeroArenaSizes z;
  int64_t shard = 0, max_block = 0, max_chunk = 0, dedicated_floats = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    TERA_ASSERT(units[u].size() % (p * ArenaLayout::kAlignFloats) == 0, "ParamTable unit_align must be dp * 16");
    shard += units[u].size() / p;
    if (dedicated(u)) {
      dedicated_floats += units[u].size();
    } else {
      max_block = std::max(max_block, units[u].size());
    }
    max_chunk = std::max(max_chunk, units[u].size() / p);
  }
  const int64_t total = table.total_floats();
  const int64_t pool = max_block > 0 ? 2 : 0;  // block buffers: the one in use and the next
  z.params = zero_stage == 3 ? shard : total;
  if (zero_stage <= 1) z.grads = total;
  if (zero_stage >= 1) z.grad_shard = shard;
  if (zero_stage >= 2) {
    z.staging = dedicated_floats + pool * max_block;
    z.temps = ((table.wte_unit() >= 0) + (table.io_unit() >= 0) + pool) * max_chunk;
  }
  if (zero_stage == 3) z.gathered = dedicated_floats + pool * max_block;
  // What this rank updates: everything (zero 0) or its chunk of every unit.
  if (zero_stage == 0) {
    z.ranges.push_back({0, total});
  } else {
    for (const auto& u : units) {
      const int64_t chunk = u.size() / p, begin = u.begin + dp_rank * chunk;
      z.ranges.push_back({begin, begin + chunk});
    }
  }
  for (const auto& [rb, re] : z.ranges) {
    table.for_each([&](const ParamEntry& e) { z.moments += std::max<int64_t>(0, std::min(re, e.offset + e.count) - std::max(rb, e.offset)); });
  }
  return z;
}

ZeroMemory::ZeroMemory(const ParamTable& table, Communicator& dp, int zero_stage, const Backend& be,
                       Communicator* tp, bool sequence_parallel)
    : table_(table), dp_(dp), tp_(tp), sp_(sequence_parallel && tp != nullptr && tp->size() > 1), zero_(zero_stage), be_(be) {
  TERA_ASSERT(zero_ >= 0 && zero_ <= 3);
  const int64_t p = dp_.size();
  const auto& units = table_.units();
  const ZeroArenaSizes sizes = zero_arena_sizes(table_, dp_.size(), dp_.rank(), zero_);
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

  params_ = Arena(single("params", sizes.params));
  if (sizes.grads > 0) grads_ = Arena(single("grads", sizes.grads));
  if (sizes.grad_shard > 0) grad_shard_ = Arena(single("grad_shard", sizes.grad_shard));
  if (zero_ >= 2) {
    staging_ = Arena(single("grad_staging", sizes.staging));
    temps_ = Arena(single("reduce_scatter_out", sizes.temps));
    float* next = staging_.base();
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
    for (size_t k = 0; k < staging_buffers_.size(); ++k) temp_of_staging_.push_back(temps_.base() + k * max_chunk);
  }
  if (zero_ == 3) {
    gathered_ = Arena(single("gathered_params", sizes.gathered));
    float* next = gathered_.base();
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
  ranges_ = sizes.ranges;
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
  if (zero_ < 3) {
    tera::init_parameters(table_, seed, 0, table_.total_floats(), params_.base());
    return;
  }
  for (size_t u = 0; u < table_.units().size(); ++u) {
    const int ui = static_cast<int>(u);
    tera::init_parameters(table_, seed, chunk_begin(ui), chunk_begin(ui) + chunk(ui), shard_ptr(params_.base(), ui));
  }
}

// ---- parameters -------------------------------------------------------------

void ZeroMemory::start_gather(int unit, Gather& g) {
  g.unit = unit;
  g.req = dp_.iall_gather(shard_ptr(params_.base(), unit), g.buf, chunk(unit), CommType::f32);
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
  if (zero_ < 3) return params_.at(table_.units()[static_cast<size_t>(unit)].begin);
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
  std::memset(s, 0, static_cast<size_t>(u.size()) * sizeof(float));
  staging_of_unit_[static_cast<size_t>(unit)] = s;
  return s;
}

float* ZeroMemory::grads(int unit) {
  if (zero_ <= 1) return grads_.at(table_.units()[static_cast<size_t>(unit)].begin);
  float* s = staging_of_unit_[static_cast<size_t>(unit)];
  return s != nullptr ? s : take_staging(unit);
}

void ZeroMemory::grads_done(int unit) {
  const ParamUnit& u = table_.units()[static_cast<size_t>(unit)];
  // ZeRO 0/1 accumulate over micro-batches and reduce after the last one;
  // ZeRO 2/3 reduce every micro-batch's staging buffer.
  if (zero_ <= 1 && !last_micro_batch_) return;
  float* g = zero_ <= 1 ? grads_.at(u.begin) : staging_of_unit_[static_cast<size_t>(unit)];
  // Under zero 2/3 a unit may report twice for gradients it collected once
  // (the head's gradients of several micro-batches, reduced together).
  if (g == nullptr) return;
  if (sp_ && u.sp_partial_end > u.begin) {
    // Sequence parallelism: LayerNorm / position gradients saw only this
    // rank's tokens; sum them over the tensor-parallel group first.
    tp_->all_reduce(g, u.sp_partial_end - u.begin, CommType::f32, ReduceOp::sum);
  }
  if (zero_ == 0) {
    if (dp_.size() > 1) {
      pending_.push_back({unit, dp_.iall_reduce(g, u.size(), CommType::f32, ReduceOp::sum), nullptr, nullptr});
    }
    return;
  }
  if (zero_ == 1) {
    pending_.push_back({unit,
                        dp_.ireduce_scatter(g, shard_ptr(grad_shard_.base(), unit), chunk(unit), CommType::f32,
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
    float* acc = shard_ptr(grad_shard_.base(), p.unit);
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
  if (zero_ <= 1) std::memset(grads_.base(), 0, static_cast<size_t>(grads_.bytes()));
  if (zero_ >= 1) std::memset(grad_shard_.base(), 0, static_cast<size_t>(grad_shard_.bytes()));
}

void ZeroMemory::finish_gradients() {
  while (!pending_.empty()) complete_oldest();
}

std::vector<ZeroMemory::Shard> ZeroMemory::shards() {
  std::vector<Shard> out;
  if (zero_ == 0) {
    out.push_back({0, table_.total_floats(), params_.base(), grads_.base()});
    return out;
  }
  const auto& units = table_.units();
  out.reserve(units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    const int ui = static_cast<int>(u);
    const int64_t b = chunk_begin(ui);
    float* prm = zero_ == 3 ? shard_ptr(params_.base(), ui) : params_.at(b);
    out.push_back({b, b + chunk(ui), prm, shard_ptr(grad_shard_.base(), ui)});
  }
  return out;
}

float* ZeroMemory::reduced_grads(int unit, int64_t* count) {
  const ParamUnit& u = table_.units()[static_cast<size_t>(unit)];
  if (zero_ == 0) {
    *count = u.size();
    return grads_.at(u.begin);
  }
  *count = chunk(unit);
  return shard_ptr(grad_shard_.base(), unit);
}

ZeroMemory::NormParts ZeroMemory::grad_norm_squared(int skip_unit) {
  // Over the parameters in the shards this rank updates (all, or its
  // chunks), tensor by tensor: zero 0 holds the whole reduced gradient on
  // every dp rank, zero >= 1 sums chunks over dp.
  NormParts n;
  const ParamUnit* skip = skip_unit >= 0 ? &table_.units()[static_cast<size_t>(skip_unit)] : nullptr;
  for (const Shard& sh : shards()) {
    table_.for_each([&](const ParamEntry& e) {
      const int64_t b = std::max(sh.begin, e.offset), x = std::min(sh.end, e.offset + e.count);
      if (b >= x || (skip != nullptr && b >= skip->begin && b < skip->end)) return;
      const double sq = be_.sum_squares(sh.grad + (b - sh.begin), x - b);
      (e.tp_split() ? n.split : n.replicated) += sq;
    });
  }
  if (zero_ >= 1) {
    double both[2] = {n.split, n.replicated};
    dp_.all_reduce(both, 2, CommType::f64, ReduceOp::sum);
    n.split = both[0];
    n.replicated = both[1];
  }
  return n;
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
      reqs.push_back(dp_.iall_gather(params_.at(chunk_begin(ki)), params_.at(units[k].begin), chunk(ki), CommType::f32));
    }
    for (auto& r : reqs) dp_.wait(r);
  }
}

void ZeroMemory::gather_parameters(float* out) {
  if (zero_ < 3) {
    std::memcpy(out, params_.base(), static_cast<size_t>(table_.total_floats()) * sizeof(float));
    return;
  }
  for (size_t u = 0; u < table_.units().size(); ++u) {
    const int ui = static_cast<int>(u);
    dp_.all_gather(shard_ptr(params_.base(), ui), out + table_.units()[u].begin, chunk(ui), CommType::f32);
  }
}

void ZeroMemory::load_parameters(const float* full) {
  for (Gather& g : dedicated_gather_) {
    dp_.wait(g.req);
    g.in_use = false;
  }
  if (zero_ < 3) {
    std::memcpy(params_.base(), full, static_cast<size_t>(table_.total_floats()) * sizeof(float));
    return;
  }
  for (size_t u = 0; u < table_.units().size(); ++u) {
    const int ui = static_cast<int>(u);
    std::memcpy(shard_ptr(params_.base(), ui), full + chunk_begin(ui), static_cast<size_t>(chunk(ui)) * sizeof(float));
  }
}

void ZeroMemory::all_gather_ranges(float* full) {
  if (zero_ == 0) return;
  for (size_t u = 0; u < table_.units().size(); ++u) {
    const int ui = static_cast<int>(u);
    dp_.all_gather(full + chunk_begin(ui), full + table_.units()[u].begin, chunk(ui), CommType::f32);
  }
}

MemoryReport ZeroMemory::memory() const {
  MemoryReport r;
  r.params = params_.bytes() + gathered_.bytes();
  r.grads = grads_.bytes() + grad_shard_.bytes() + staging_.bytes() + temps_.bytes();
  return r;
}

}  // namespace tera
