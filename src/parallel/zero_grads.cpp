// ZeroMemory's gradient reductions (see zero.h): each unit's gradient,
// once complete, summed over tensor-parallel ranks where it must be
// (tp_grad_sums.h), then all-reduced (ZeRO-0) or reduce-scattered (1-3)
// over the data-parallel group without blocking; completed in order by poll
// and finish_gradients. Also the reduced gradient's norm and finiteness.
#include <algorithm>

#include "core/check.h"
#include "parallel/zero.h"

namespace tera {

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
  tp_sums_.sum(unit, g);  // over tensor-parallel ranks first (tp_grad_sums.h)
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

}  // namespace tera
