// Where a unit's parameters and gradients live during a step. Gpt asks for
// them unit by unit (ParamTable units) and reports when a unit's gradient
// contribution is complete; implementations decide what that costs:
// LocalParamMemory keeps everything resident (one process, ZeRO-0/1), the
// data-parallel memory in parallel/ gathers sharded parameters just in time
// (ZeRO-3) and reduces gradients per unit while backward continues.
//
// Call protocol for one micro-batch (u = unit):
//   acquire(root, F) ... for each block: acquire(u, F), release(u, F) ...
//   [training] grads(root) (head backward), then for each block in reverse:
//   acquire(u, B), grads(u), release(u, B), grads_done(u); then the embedding
//   backward, release(root, B), grads_done(root). [eval] release(root, F).
// A unit's parameters are laid out as in the table: tensor e of unit u is at
// acquire(u) + (e.offset - unit.begin); gradients likewise. Every pointer is
// device memory of the backend.
#pragma once

#include <cstdint>

#include "kernels/backend.h"
#include "model/param_table.h"
#include "model/rank_memory.h"

namespace tera {

enum class Pass { forward, backward };

class ParamMemory {
 public:
  virtual ~ParamMemory() = default;
  virtual const float* acquire(int unit, Pass pass) = 0;
  virtual void release(int unit, Pass pass) {}
  // Gradient contributions of this micro-batch are added (+=) here.
  virtual float* grads(int unit) = 0;
  virtual void grads_done(int unit) {}
  // Gives outstanding communication a chance to progress (between layers).
  virtual void poll() {}
};

// Every parameter and gradient resident: the "params" and "grads" buffers
// of a one-process memory plan, laid out by the table.
class LocalParamMemory final : public ParamMemory {
 public:
  LocalParamMemory(const ParamTable& table, const Backend& be, RankMemory& memory);
  const float* acquire(int unit, Pass) override { return params_ + table_.units()[static_cast<size_t>(unit)].begin; }
  float* grads(int unit) override { return grads_ + table_.units()[static_cast<size_t>(unit)].begin; }

  // Device memory: the whole table's parameters and gradients.
  float* params() { return params_; }
  float* grad_base() { return grads_; }
  void zero_grads();

 private:
  const ParamTable& table_;
  const Backend& be_;
  float* params_;
  float* grads_;
};

}  // namespace tera
