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
//   Under the split backward (zb-h1) a block's B is acquire(u, B),
//   release(u, B), and its W later grads(u), grads_done(u) (no acquire).
// A unit's parameters are laid out as in the table: tensor e of unit u is at
// acquire(u) + (e.offset - unit.begin); gradients likewise. Every pointer is
// device memory of the backend. With bf16 GEMMs (the plan's compute_weights
// / gathered_compute_weights) compute_weights(u), between acquire and
// release, is the same layout in bf16: the weights rounded to nearest even,
// remade whenever the parameters change.
#pragma once

#include <cstdint>

#include "kernels/backend.h"
#include "partition/param_table.h"
#include "model/rank_memory.h"

namespace tera {

enum class Pass { forward, backward };

class ParamMemory {
 public:
  virtual ~ParamMemory() = default;
  virtual const float* acquire(int unit, Pass pass) = 0;
  virtual void release(int unit, Pass pass) {}
  // The bf16 copy of an acquired unit's parameters; null when the plan has
  // none (fp32 GEMMs).
  virtual const uint16_t* compute_weights(int unit) { return nullptr; }
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
  const uint16_t* compute_weights(int unit) override {
    return compute_ == nullptr ? nullptr : compute_ + table_.units()[static_cast<size_t>(unit)].begin;
  }
  // Remakes the bf16 copy from the parameters (a no-op without one); whoever
  // writes the parameters calls it.
  void refresh_compute_weights();

  // Device memory: the whole table's parameters and gradients.
  float* params() { return params_; }
  float* grad_base() { return grads_; }
  void zero_grads();

 private:
  const ParamTable& table_;
  const Backend& be_;
  float* params_;
  float* grads_;
  uint16_t* compute_;  // bf16 GEMMs: the bf16 copy of params_, else null
};

}  // namespace tera
