// The conjugate communication pairs of Megatron tensor parallelism (Shoeybi
// et al. 2019; sequence parallelism: Korthikanti et al. 2022). The model's
// hand-written forward calls the forward half and its backward calls the
// backward half of the same pair, so the two can never disagree:
//
//   tp_copy     forward: identity            backward: all-reduce (sum)
//               before a column-parallel GEMM whose input is replicated
//   tp_reduce   forward: all-reduce (sum)    backward: identity
//               after a row-parallel GEMM (partial sums over the input split)
//   sp_gather   forward: all-gather tokens   backward: reduce-scatter
//               sequence-parallel region -> column-parallel GEMM input
//   sp_scatter  forward: reduce-scatter      backward: all-gather
//               row-parallel GEMM partial sums -> sequence-parallel region
//
// Token shards are contiguous: rank r holds flattened tokens [r*N/tp, (r+1)*N/tp)
// of the micro-batch's N = B*T (every op in a sequence-parallel region is
// per token, so any partition works; T % tp == 0 keeps it a sequence split).
// Buffers are [tokens, n] row-major, so a shard of `count` floats per rank is
// simply contiguous. Every buffer is device memory. Implementations:
// SingleRank below (tp = 1), and parallel/tp_comm.h over the group's device
// communicator.
#pragma once

#include <cstdint>

#include "kernels/backend.h"

namespace tera {

class TensorParallel {
 public:
  virtual ~TensorParallel() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  virtual bool sequence_parallel() const = 0;

  // tp_copy backward / tp_reduce forward: in-place sum over the group.
  virtual void copy_backward(float* dx, int64_t n) = 0;
  virtual void reduce_forward(float* x, int64_t n) = 0;
  // sp_gather: shard[count] of each rank -> full[size * count]; backward sums
  // dfull over the group and keeps this rank's shard.
  virtual void gather_forward(const float* shard, float* full, int64_t count) = 0;
  virtual void gather_backward(const float* dfull, float* dshard, int64_t count) = 0;
  // sp_gather's forward of a bf16 shard (a norm output kept in bf16 for
  // bf16 GEMMs; it needs no backward: the reduce-scatter is of fp32 gradients).
  virtual void gather_forward_bf16(const uint16_t* shard, uint16_t* full, int64_t count) = 0;
  // sp_scatter: the reverse pair.
  virtual void scatter_forward(const float* full, float* shard, int64_t count) = 0;
  virtual void scatter_backward(const float* dshard, float* dfull, int64_t count) = 0;
  // The vocab-parallel loss: element-wise max and sum over the group.
  virtual void all_max(float* x, int64_t n) = 0;
  virtual void all_sum(float* x, int64_t n) = 0;
};

// tp = 1: every pair is the identity (a device copy when source and
// destination differ).
class SingleRankTensorParallel final : public TensorParallel {
 public:
  explicit SingleRankTensorParallel(const Backend& be, bool sequence_parallel = false) : be_(be), sp_(sequence_parallel) {}
  int size() const override { return 1; }
  int rank() const override { return 0; }
  bool sequence_parallel() const override { return sp_; }
  void copy_backward(float*, int64_t) override {}
  void reduce_forward(float*, int64_t) override {}
  void gather_forward(const float* shard, float* full, int64_t count) override { copy(shard, full, count); }
  void gather_forward_bf16(const uint16_t* shard, uint16_t* full, int64_t count) override {
    if (shard != full) be_.copy(full, shard, count * 2, CopyKind::device_to_device);
  }
  void gather_backward(const float* dfull, float* dshard, int64_t count) override { copy(dfull, dshard, count); }
  void scatter_forward(const float* full, float* shard, int64_t count) override { copy(full, shard, count); }
  void scatter_backward(const float* dshard, float* dfull, int64_t count) override { copy(dshard, dfull, count); }
  void all_max(float*, int64_t) override {}
  void all_sum(float*, int64_t) override {}

 private:
  void copy(const float* src, float* dst, int64_t n) {
    if (src != dst) be_.copy(dst, src, n * static_cast<int64_t>(sizeof(float)), CopyKind::device_to_device);
  }
  const Backend& be_;
  bool sp_;
};

}  // namespace tera
