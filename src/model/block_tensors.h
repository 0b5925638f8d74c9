// The tensors of one block (GPT-2 or Llama) as the model binds them: its
// parameters (BlockWeights; the same struct views their gradients) and its
// activations (BlockActs, one typed view per tensor). Each struct has one
// table of {ModelSpec name, field}, the only place that says which tensor a
// field is. Tables are matched to ModelSpec's lists by name, never by
// position: match_rows asserts that every listed tensor has a row and every
// row a tensor. Shape legend: model/gpt.h.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"

namespace tera {

// One block's parameters on this tensor-parallel rank, or their gradients
// (fp32: the master weights and their gradients). Biases are GPT-2's (null
// on a Llama block), the gate Llama's.
struct BlockWeights {
  float* ln1_g;   // [C]       LayerNorm / RMSNorm gain
  float* ln1_b;   // [C]
  float* qkv_w;   // [Ql, C]   column-parallel: this rank's heads of q | k | v (Ql = (Hl + 2 KVl) hs)
  float* qkv_b;   // [Ql]
  float* proj_w;  // [C, Cl]   row-parallel
  float* proj_b;  // [C]       replicated: added once, after the reduction
  float* ln2_g;   // [C]
  float* ln2_b;   // [C]
  float* fc_w;    // [Fl, C]   column-parallel (Llama's up_proj)
  float* fc_b;    // [Fl]
  float* gate_w;  // [Fl, C]   column-parallel (Llama's gate_proj)
  float* gate_b;  // [Fl]
  float* fcp_w;   // [C, Fl]   row-parallel (Llama's down_proj)
  float* fcp_b;   // [C]       replicated
  // The unit the views point into and, with bf16 GEMMs, its bf16 copy in the
  // same layout (ParamMemory::compute_weights; null otherwise).
  const float* base = nullptr;
  const uint16_t* base_bf16 = nullptr;
  // The bf16 copy of one of the matrices above (null without one).
  const uint16_t* bf16(const float* matrix) const { return base_bf16 == nullptr ? nullptr : base_bf16 + (matrix - base); }
};

// What one block's forward writes for a micro-batch (ModelSpec::
// block_activations of a block without dropout), one view per tensor, in
// the dtype the block plan keeps it in (model/block_plan.h: the norm
// outputs, qkv and atty with flash attention, and the MLP's tensors are bf16
// under bf16 GEMMs; the rest fp32). The attention keeps its probabilities
// (naive) or its row log-sum-exp (flash), not both; an empty view is a
// tensor this block does not have.
struct BlockActs {
  TypedView ln1;         // [Nt, C]        LN_1(x), this rank's tokens under sp
  TypedView ln1_mean;    // [Nt]           (LayerNorm only)
  TypedView ln1_rstd;    // [Nt]
  TypedView qkv;         // [N, Ql]        after the rotary embedding on a Llama block
  TypedView probs;       // [B, Hl, T, T]  attention probabilities (naive attention)
  TypedView lse;         // [B, Hl, T]     row log-sum-exp of the scores (flash attention)
  TypedView atty;        // [N, Cl]        attention output of the local heads
  TypedView res1;        // [Nt, C]        x + attention
  TypedView ln2;         // [Nt, C]
  TypedView ln2_mean;    // [Nt]           (LayerNorm only)
  TypedView ln2_rstd;    // [Nt]
  TypedView fch;         // [N, Fl]        FC output before the GELU; Llama: up_proj's
  TypedView fch_gelu;    // [N, Fl]        GELU of it (GPT-2)
  TypedView fch_gate;    // [N, Fl]        gate_proj's output (Llama)
  TypedView fch_swiglu;  // [N, Fl]        silu(gate) * up, down_proj's input (Llama)
  TypedView out;         // [Nt, C]        res1 + MLP: the next block's input
  // zb-h1 (BlockPlan::split_backward): what the block's B pass leaves for its
  // W pass, fp32. Each linear layer's output gradient over all N tokens:
  TypedView dw_qkv;      // [N, Ql]        d(qkv) as the QKV projection produced it (unrotated)
  TypedView dw_proj;     // [N, C]         d(res1) through the attention's projection
  TypedView dw_fc;       // [N, Fl]        d(fch)
  TypedView dw_gate;     // [N, Fl]        d(gate) (Llama)
  TypedView dw_fcp;      // [N, C]         d(out) through the MLP's projection
  // The norms' parameter gradients of this micro-batch (partial over the
  // group under sp), added to the unit's gradient at W:
  TypedView dw_ln1_g;    // [C]
  TypedView dw_ln1_b;    // [C]            (LayerNorm only)
  TypedView dw_ln2_g;    // [C]
  TypedView dw_ln2_b;    // [C]            (LayerNorm only)
};

// A table row: the tensor's ModelSpec name and the field of S it binds to.
template <typename S, typename F>
struct TensorRow {
  std::string_view name;
  F S::*field;
  bool optional = false;  // a list may lack it (then the field stays null / empty)
  bool may_be_bf16 = false;  // a view field that a list may hold in bf16
};

// Parameters, named as in ModelSpec::params() less the "h.<layer>." prefix.
inline constexpr auto kBlockWeightRows = std::to_array<TensorRow<BlockWeights, float*>>({
    {"ln_1.weight", &BlockWeights::ln1_g},
    {"ln_1.bias", &BlockWeights::ln1_b, true},
    {"attn.c_attn.weight", &BlockWeights::qkv_w},
    {"attn.c_attn.bias", &BlockWeights::qkv_b, true},
    {"attn.c_proj.weight", &BlockWeights::proj_w},
    {"attn.c_proj.bias", &BlockWeights::proj_b, true},
    {"ln_2.weight", &BlockWeights::ln2_g},
    {"ln_2.bias", &BlockWeights::ln2_b, true},
    {"mlp.c_fc.weight", &BlockWeights::fc_w},
    {"mlp.c_fc.bias", &BlockWeights::fc_b, true},
    {"mlp.c_gate.weight", &BlockWeights::gate_w, true},
    {"mlp.c_gate.bias", &BlockWeights::gate_b, true},
    {"mlp.c_proj.weight", &BlockWeights::fcp_w},
    {"mlp.c_proj.bias", &BlockWeights::fcp_b, true},
});
// Offsets of a block's parameters from the start of its unit, in kBlockWeightRows order.
using BlockWeightOffsets = std::array<int64_t, kBlockWeightRows.size()>;

// Activations, named as in ModelSpec::block_activations (which is also what
// saved_block_activations keeps without recomputation).
inline constexpr auto kBlockActRows = std::to_array<TensorRow<BlockActs, TypedView>>({
    {"ln1", &BlockActs::ln1, false, true},
    {"ln1_mean", &BlockActs::ln1_mean, true},
    {"ln1_rstd", &BlockActs::ln1_rstd},
    {"qkv", &BlockActs::qkv, false, true},
    {"probs", &BlockActs::probs, true},
    {"softmax_lse", &BlockActs::lse, true},
    {"atty", &BlockActs::atty, false, true},
    {"res1", &BlockActs::res1},
    {"ln2", &BlockActs::ln2, false, true},
    {"ln2_mean", &BlockActs::ln2_mean, true},
    {"ln2_rstd", &BlockActs::ln2_rstd},
    {"fch", &BlockActs::fch, false, true},
    {"fch_gelu", &BlockActs::fch_gelu, true, true},
    {"fch_gate", &BlockActs::fch_gate, true, true},
    {"fch_swiglu", &BlockActs::fch_swiglu, true, true},
    {"out", &BlockActs::out},
    {"dw_qkv", &BlockActs::dw_qkv, true},
    {"dw_proj", &BlockActs::dw_proj, true},
    {"dw_fc", &BlockActs::dw_fc, true},
    {"dw_gate", &BlockActs::dw_gate, true},
    {"dw_fcp", &BlockActs::dw_fcp, true},
    {"dw_ln1_g", &BlockActs::dw_ln1_g, true},
    {"dw_ln1_b", &BlockActs::dw_ln1_b, true},
    {"dw_ln2_g", &BlockActs::dw_ln2_g, true},
    {"dw_ln2_b", &BlockActs::dw_ln2_b, true},
});

// Under full recomputation a block keeps one buffer (saved_block_activations:
// "x_in", one block input). The runtime keeps each block's output there, which
// is the next block's input (the first block's is the chunk's input); the
// rest of the block's BlockActs is the shared recompute working set.
inline constexpr auto kFullRecomputeSavedRows = std::to_array<TensorRow<BlockActs, TypedView>>({
    {"x_in", &BlockActs::out},
});

// For each of `names` (a ModelSpec list), the index of its row in `rows`.
// Asserts that every name has a row and every row exactly one name; `what`
// names the list in the message.
template <typename S, typename F, size_t R>
std::vector<size_t> match_rows(const std::array<TensorRow<S, F>, R>& rows, const std::vector<std::string>& names,
                               std::string_view what) {
  std::array<bool, R> matched{};
  std::vector<size_t> index;
  for (const std::string& name : names) {
    size_t r = 0;
    while (r < R && rows[r].name != name) ++r;
    TERA_ASSERT(r < R, std::string(what) + ": " + name + " has no row in model/block_tensors.h");
    TERA_ASSERT(!matched[r], std::string(what) + ": " + name + " is listed twice");
    matched[r] = true;
    index.push_back(r);
  }
  for (size_t r = 0; r < R; ++r) {
    TERA_ASSERT(matched[r] || rows[r].optional,
                std::string(what) + ": the row " + std::string(rows[r].name) + " of model/block_tensors.h is not in the list");
  }
  return index;
}

// `s` with the field of each named buffer's row set to its view (names[i]
// -> views[i], matched by match_rows). A bf16 view binds only to a row that
// may hold bf16 (asserted).
template <typename S, size_t R>
S bind_by_name(const std::array<TensorRow<S, TypedView>, R>& rows, const std::vector<std::string>& names,
               const std::vector<TypedView>& views, std::string_view what, S s = {}) {
  TERA_ASSERT(names.size() == views.size());
  const std::vector<size_t> index = match_rows(rows, names, what);
  for (size_t i = 0; i < names.size(); ++i) {
    const TensorRow<S, TypedView>& row = rows[index[i]];
    TERA_ASSERT(views[i].dtype() != DType::bf16 || row.may_be_bf16,
                std::string(what) + ": " + names[i] + " is bf16 but its row binds only fp32");
    s.*row.field = views[i];
  }
  return s;
}

}  // namespace tera
