// TensorParallel (model/tensor_parallel.h) over a Communicator: the
// tensor-parallel group of a Groups. Every pair is one collective; the bytes
// they send are counted by the communicator (ring model) and must equal
// ModelSpec::tp_bytes_per_micro_batch.
#pragma once

#include "comm/communicator.h"
#include "model/tensor_parallel.h"

namespace tera {

class CommTensorParallel final : public TensorParallel {
 public:
  CommTensorParallel(Communicator& tp, bool sequence_parallel) : c_(tp), sp_(sequence_parallel) {}
  int size() const override { return c_.size(); }
  int rank() const override { return c_.rank(); }
  bool sequence_parallel() const override { return sp_; }
  void copy_backward(float* dx, int64_t n) override { c_.all_reduce(dx, n, CommType::f32, ReduceOp::sum); }
  void reduce_forward(float* x, int64_t n) override { c_.all_reduce(x, n, CommType::f32, ReduceOp::sum); }
  void gather_forward(const float* shard, float* full, int64_t count) override {
    c_.all_gather(shard, full, count, CommType::f32);
  }
  void gather_forward_bf16(const uint16_t* shard, uint16_t* full, int64_t count) override {
    c_.all_gather(shard, full, 2 * count, CommType::u8);  // an all-gather moves bits: bf16 as its two bytes
  }
  void gather_backward(const float* dfull, float* dshard, int64_t count) override {
    c_.reduce_scatter(dfull, dshard, count, CommType::f32, ReduceOp::sum);
  }
  void scatter_forward(const float* full, float* shard, int64_t count) override {
    c_.reduce_scatter(full, shard, count, CommType::f32, ReduceOp::sum);
  }
  void scatter_backward(const float* dshard, float* dfull, int64_t count) override {
    c_.all_gather(dshard, dfull, count, CommType::f32);
  }
  void all_max(float* x, int64_t n) override { c_.all_reduce(x, n, CommType::f32, ReduceOp::max); }
  void all_sum(float* x, int64_t n) override { c_.all_reduce(x, n, CommType::f32, ReduceOp::sum); }

 private:
  Communicator& c_;
  bool sp_;
};

}  // namespace tera
