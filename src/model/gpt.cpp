// The stage driver: one pipeline stage's chunks, forward and backward of a
// micro-batch in an activation slot, with each parameter unit acquired,
// released and its gradients reported done as model/param_memory.h's
// protocol says. The math is GptLayers' (model/gpt_layers.h); the views it
// runs on are bound in gpt_bind.cpp.
#include "model/gpt.h"

#include <algorithm>

#include "core/check.h"

namespace tera {

Gpt::Gpt(const ModelSpec& spec, const Backend& backend, const ParamTable& table, ParamMemory& memory,
         TensorParallel& tp, ContextParallel& cp, const RankPlan& plan, RankMemory& rank_memory)
    : spec_(spec),
      be_(backend),
      max_batch_(plan.layout.micro_batch),
      split_(plan.context_split()),
      table_(table),
      mem_(memory),
      tp_(tp),
      rank_memory_(rank_memory),
      cp_(&cp) {
  init_buffers(plan);
}

Gpt::~Gpt() = default;

IoWeights Gpt::acquire_io(Pass pass) {
  auto acquire = [&](int unit) { return unit < 0 ? nullptr : mem_.acquire(unit, pass); };
  IoWeights w = io_weights(acquire(table_.wte_unit()), acquire(table_.io_unit()), acquire(table_.head_unit()));
  if (opts_.gemm == DType::bf16 && plan().has_head()) {
    // The head's matrix in bf16: the untied lm_head's unit, else the tied wte's (as io_weights chose).
    const bool untied = io_offsets_.lm_head >= 0;
    const int unit = untied ? table_.head_unit() : table_.wte_unit();
    const uint16_t* base = mem_.compute_weights(unit);
    TERA_ASSERT(base != nullptr, "bf16 GEMMs without a bf16 copy of the LM head");
    w.head_bf16 = base + (untied ? io_offsets_.lm_head : io_offsets_.wte);
  }
  return w;
}

IoWeights Gpt::io_grads() {
  auto grads = [&](int unit) { return unit < 0 ? nullptr : mem_.grads(unit); };
  return io_weights(grads(table_.wte_unit()), grads(table_.io_unit()), grads(table_.head_unit()));
}

void Gpt::release_io(Pass pass) {
  for (int unit : {table_.wte_unit(), table_.io_unit(), table_.head_unit()}) {
    if (unit >= 0) mem_.release(unit, pass);
  }
}

void Gpt::forward_body(int c, int k, const int32_t* tokens, int64_t B, int64_t T) {
  TERA_ASSERT(B <= max_batch_ && T <= local_seq_len());
  TERA_ASSERT(!opts_.sequence_parallel || (B * T) % tp_.size() == 0);
  const ChunkPlan& ch = plan().chunks[static_cast<size_t>(c)];
  Slot& s = slot(c, k);
  if (ch.embedding) {
    be_.copy(s.tokens, tokens, B * T * static_cast<int64_t>(sizeof(int32_t)), CopyKind::host_to_device);
    const IoWeights w = acquire_io(Pass::forward);
    layers_->embed_forward(w, s.input, s.tokens, B, T);
    release_io(Pass::forward);
  }
  for (size_t i = 0; i < static_cast<size_t>(ch.num_layers); ++i) {
    const int64_t l = ch.first_layer + static_cast<int64_t>(i);
    const int u = table_.unit_of_layer(l);
    BlockWeights w = block_weights(mem_.acquire(u, Pass::forward), l);
    w.base_bf16 = mem_.compute_weights(u);
    layers_->block_forward(s.blocks[i], w, block_input(s, i), B, T);
    mem_.release(u, Pass::forward);
    mem_.poll();
  }
}

void Gpt::forward(int c, int k, const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T, float dloss,
                  bool train, bool count_loss) {
  forward_body(c, k, tokens, B, T);
  const ChunkPlan& ch = plan().chunks[static_cast<size_t>(c)];
  Slot& s = slot(c, k);
  if (!ch.head) return;
  be_.copy(s.targets, targets, B * T * static_cast<int64_t>(sizeof(int32_t)), CopyKind::host_to_device);
  const Pass pass = train ? Pass::backward : Pass::forward;
  const IoWeights w = acquire_io(pass);
  const float* x = chunk_output(s, ch.num_layers);
  layers_->head_loss(w, x, s.targets, s.losses, B * T, train ? dloss : 0.0f, count_loss);
  if (train) layers_->head_backward(w, io_grads(), x, s.dx_head, B * T);
  release_io(pass);
}

void Gpt::backward(int c, int k, int64_t B, int64_t T) {
  const ChunkPlan& ch = plan().chunks[static_cast<size_t>(c)];
  const Slot& s = slot(c, k);
  const int64_t n = activation_floats(B, T);
  const bool split = block_plan_.split_backward;
  float* dres = layers_->workspace().dres;
  be_.copy(dres, ch.head ? s.dx_head : s.grad_in, n * static_cast<int64_t>(sizeof(float)), CopyKind::device_to_device);
  for (size_t i = static_cast<size_t>(ch.num_layers); i-- > 0;) {
    const int64_t l = ch.first_layer + static_cast<int64_t>(i);
    const int u = table_.unit_of_layer(l);
    BlockWeights w = block_weights(mem_.acquire(u, Pass::backward), l);
    w.base_bf16 = mem_.compute_weights(u);
    // The split backward (zb-h1's B) adds no gradient to the unit: its
    // gradient is taken and reported done at weight_grad.
    const BlockWeights g = split ? BlockWeights{} : block_weights(mem_.grads(u), l);
    if (opts_.recompute == Recompute::full) {
      // Rerun the block's forward from its saved input into the working set
      // (its output goes to the scratch `out`: the saved one is the next block's input).
      layers_->block_forward(recompute_acts_, w, block_input(s, i), B, T);
    }
    layers_->block_backward(s.blocks[i], w, g, block_input(s, i), dres, B, T);
    mem_.release(u, Pass::backward);
    if (!split) mem_.grads_done(u);
    mem_.poll();
  }
  if (ch.embedding) {
    acquire_io(Pass::backward);
    layers_->embed_backward(io_grads(), dres, s.tokens, B, T);
    release_io(Pass::backward);
  } else {
    be_.copy(s.grad_out, dres, n * static_cast<int64_t>(sizeof(float)), CopyKind::device_to_device);
  }
  if (ch.embedding || ch.head) {
    for (int unit : {table_.wte_unit(), table_.io_unit(), table_.head_unit()}) {
      if (unit >= 0) mem_.grads_done(unit);
    }
  }
}

void Gpt::weight_grad(int c, int k, int64_t B, int64_t T) {
  TERA_ASSERT(block_plan_.split_backward, "weight_grad without the split backward (parallel.schedule = \"zb-h1\")");
  const ChunkPlan& ch = plan().chunks[static_cast<size_t>(c)];
  const Slot& s = slot(c, k);
  for (size_t i = static_cast<size_t>(ch.num_layers); i-- > 0;) {  // backward's order
    const int64_t l = ch.first_layer + static_cast<int64_t>(i);
    const int u = table_.unit_of_layer(l);
    layers_->block_weight_grads(s.blocks[i], block_weights(mem_.grads(u), l), B, T);
    mem_.grads_done(u);
    mem_.poll();
  }
}

float* Gpt::input(int c, int k) { return slot(c, k).input; }
const float* Gpt::output(int c, int k) const { return chunk_output(slot(c, k), chunk_layers(c)); }
float* Gpt::grad_in(int c, int k) { return slot(c, k).grad_in; }
const float* Gpt::grad_out(int c, int k) const { return slot(c, k).grad_out; }

MemoryReport Gpt::memory() const {
  MemoryReport r = rank_memory_.report();
  if (own_memory_ == nullptr) {
    // A stage of a distributed rank: the model holds its activations and workspace only.
    for (MemoryClass c : kAllMemoryClasses) {
      if (c != MemoryClass::activations && c != MemoryClass::workspace) r[c] = 0;
    }
  }
  return r;
}

}  // namespace tera
