// GPT-2 forward and backward on one pipeline stage of one tensor-parallel
// rank. The block math, the communication pairs and the head's eager backward
// are documented in gpt.h and model/tensor_parallel.h; the accumulation
// contract of each op is in kernels/ops.h; the unit protocol in
// model/param_memory.h.
#include "model/gpt.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include "core/check.h"

namespace tera {

Gpt::Gpt(const ModelSpec& spec, const Backend& backend, int64_t max_batch)
    : spec_(spec),
      be_(backend),
      max_batch_(max_batch),
      own_table_(std::make_unique<ParamTable>(spec_)),
      own_rank_memory_(std::make_unique<RankMemory>(backend, single_process_plan(spec_, *own_table_, max_batch))),
      own_memory_(std::make_unique<LocalParamMemory>(*own_table_, backend, *own_rank_memory_)),
      own_tp_(std::make_unique<SingleRankTensorParallel>(backend)),
      table_(*own_table_),
      mem_(*own_memory_),
      tp_(*own_tp_),
      rank_memory_(*own_rank_memory_) {
  init_buffers(1);
}

Gpt::Gpt(const ModelSpec& spec, const Backend& backend, int64_t max_batch, const ParamTable& table,
         ParamMemory& memory, TensorParallel& tp, const Options& options, RankMemory& rank_memory)
    : spec_(spec), be_(backend), max_batch_(max_batch), table_(table), mem_(memory), tp_(tp), rank_memory_(rank_memory) {
  TERA_ASSERT(options.recompute != Recompute::selective, "the CPU runtime recomputes none or full blocks");
  TERA_ASSERT(options.plan.chunks.empty() || options.plan.chunks.size() == table.plan().chunks.size(),
              "the table was built for another stage plan");
  opts_.recompute = options.recompute;
  opts_.gemm = options.gemm;
  init_buffers(std::max(1, options.slots));
}

MemoryPlan Gpt::single_process_plan(const ModelSpec& spec, const ParamTable& table, int64_t max_batch) {
  MemoryPlan plan = resident_memory_plan(spec, table, max_batch);
  plan.mutable_arena(MemoryClass::optimizer) = ArenaLayout(memory_class_name(MemoryClass::optimizer));
  return plan;
}

void Gpt::init_buffers(int slot_count) {
  TERA_ASSERT(max_batch_ > 0);
  TERA_ASSERT(table_.tp() == tp_.size() && table_.tp_rank() == tp_.rank(), "table built for another tensor-parallel rank");
  derive_local_sizes();
  const DeviceArena& acts = rank_memory_.arena(MemoryClass::activations);
  bind_recompute_working_set(acts);
  bind_slots(acts, slot_count);
  bind_workspace(rank_memory_.arena(MemoryClass::workspace));
  bind_block_weight_offsets();
  bind_wte_io_offsets();
}

// This rank's activation options and local widths: hidden, heads and FFN
// split over the tensor-parallel group; its vocabulary columns [v0, v0 + Vl),
// of which valid_vocab are real (the rest is padding).
void Gpt::derive_local_sizes() {
  const int64_t p = tp_.size();
  llama_ = spec_.config().arch == Arch::llama;
  gated_ = spec_.config().mlp == MlpKind::gated;
  opts_ = ActivationOptions{.tp = p,
                            .sequence_parallel = tp_.sequence_parallel(),
                            .recompute = opts_.recompute,
                            .flash_attention = spec_.config().attention == AttentionKind::flash,
                            .gemm = opts_.gemm};
  Cl_ = divide(spec_.config().hidden, p);
  Hl_ = divide(spec_.config().heads, p);
  KVl_ = spec_.kv_heads_local(p);  // one, replicated, when tp > kv_heads
  hs_ = spec_.config().head_size();
  Ql_ = spec_.qkv_width_local(p);
  Fl_ = divide(spec_.config().ffn(), p);
  Vl_ = spec_.padded_vocab(p) / p;
  v0_ = tp_.rank() * Vl_;
  valid_vocab_ = std::clamp(spec_.config().vocab - v0_, int64_t{0}, Vl_);
}

// The device views of one table's buffers: names and pointers, copy k of
// "<prefix><name>" in the activation arena.
namespace {
struct NamedViews {
  std::vector<std::string> names;
  std::vector<float*> ptrs;          // an fp32 buffer's, else null
  std::vector<uint16_t*> bf16_ptrs;  // a bf16 buffer's (an activation kept in bf16), else null
};
NamedViews views_of(const DeviceArena& acts, const std::string& prefix, const std::vector<BufferInfo>& table,
                    int64_t k) {
  NamedViews v;
  for (const BufferInfo& b : table) {
    const ArenaLayout::Entry* e = acts.layout().find(prefix + b.name);
    TERA_ASSERT(e != nullptr, "the memory plan has no activation buffer " + prefix + b.name);
    v.names.push_back(b.name);
    const bool bf16 = b.dtype == DType::bf16;
    v.ptrs.push_back(bf16 ? nullptr : acts.at<float>(*e, k));
    v.bf16_ptrs.push_back(bf16 ? acts.at<uint16_t>(*e, k) : nullptr);
  }
  return v;
}
}  // namespace

// Full recompute: the one block-sized working set that each block's forward
// reruns into just before its backward (its `out` a scratch), the plan's
// "recompute.<name>" buffers.
void Gpt::bind_recompute_working_set(const DeviceArena& acts) {
  if (opts_.recompute != Recompute::full || plan().num_layers() == 0) return;
  const NamedViews v = views_of(acts, "recompute.", spec_.block_activations(max_batch_, spec_.config().seq_len, opts_), 0);
  recompute_acts_ = bind_by_name(kBlockActRows, v.names, v.ptrs, v.bf16_ptrs, "block_activations");
  check_attention_buffers(recompute_acts_);
}

// Each slot's views (memory_plan.h names them): the stage's boundary
// buffers "slot.<name>", copy k, by name (null where no chunk of the stage
// uses one), and one BlockActs per layer i of the largest chunk: the saved
// tables "slot.h.<name>", copy k * layers + i, or under full recompute its
// saved output over the working set.
void Gpt::bind_slots(const DeviceArena& acts, int slot_count) {
  const int64_t B = max_batch_, T = spec_.config().seq_len;
  const int64_t layers = largest_chunk_layers(plan());
  const std::vector<BufferInfo> saved = spec_.saved_block_activations(B, T, opts_);
  auto boundary = [&](std::string_view name) -> const ArenaLayout::Entry* {
    const ArenaLayout::Entry* e = acts.layout().find("slot." + std::string(name));
    TERA_ASSERT(e == nullptr || e->repeat == slot_count, "the memory plan has another slot count");
    return e;
  };
  // Every boundary buffer a chunk of this stage uses must be there.
  for (const ChunkPlan& ch : plan().chunks) {
    for (const BufferInfo& b : spec_.chunk_activations(B, T, opts_, ch.embedding, ch.head)) {
      TERA_ASSERT(boundary(b.name) != nullptr, "the memory plan has no slot." + b.name);
    }
  }
  slots_.clear();
  for (int k = 0; k < slot_count; ++k) {
    auto f32 = [&](std::string_view name) -> float* {
      const ArenaLayout::Entry* e = boundary(name);
      return e == nullptr ? nullptr : acts.at<float>(*e, k);
    };
    auto i32 = [&](std::string_view name) -> int32_t* {
      const ArenaLayout::Entry* e = boundary(name);
      return e == nullptr ? nullptr : acts.at<int32_t>(*e, k);
    };
    Slot s;
    s.tokens = i32("tokens");
    s.input = f32("input");
    s.targets = i32("targets");
    s.losses = f32("losses");
    s.dx_head = f32("dx_head");
    s.grad_in = f32("grad_in");
    s.grad_out = f32("grad_out");
    for (int64_t i = 0; i < layers; ++i) {
      const NamedViews v = views_of(acts, "slot.h.", saved, k * layers + i);
      if (opts_.recompute == Recompute::full) {
        s.blocks.push_back(bind_by_name(kFullRecomputeSavedRows, v.names, v.ptrs, v.bf16_ptrs,
                                        "saved_block_activations (full recompute)", recompute_acts_));
      } else {
        s.blocks.push_back(bind_by_name(kBlockActRows, v.names, v.ptrs, v.bf16_ptrs, "saved_block_activations"));
        check_attention_buffers(s.blocks.back());
      }
    }
    slots_.push_back(std::move(s));
  }
}

// The attention keeps what its kind needs for backward: the probabilities
// (naive) or the row log-sum-exp (flash).
void Gpt::check_attention_buffers(const BlockActs& a) const {
  TERA_ASSERT(opts_.flash_attention ? a.lse != nullptr : a.probs != nullptr,
              std::string("the memory plan has no ") + (opts_.flash_attention ? "softmax_lse" : "probs") + " buffer");
  TERA_ASSERT((a.qkv_bf16 != nullptr) == (opts_.flash_attention && opts_.gemm == DType::bf16) &&
                  (a.atty_bf16 != nullptr) == (a.qkv_bf16 != nullptr),
              "qkv and atty are kept in bf16 exactly when bf16 GEMMs run flash attention");
}

// Scratch shared by all micro-batches (ModelSpec::workspace; the head-only
// buffers exist on the stage with the head), and the step's scalars.
void Gpt::bind_workspace(const DeviceArena& work) {
  ws_.lnf = work.get<float>("lnf");
  ws_.lnf_mean = work.get<float>("lnf_mean");
  ws_.lnf_rstd = work.get<float>("lnf_rstd");
  ws_.logits = work.get<float>("logits");
  ws_.ce_stats = work.get<float>("ce_stats");
  ws_.dres = work.get<float>("dres");
  ws_.dwide = work.get<float>("dwide");
  ws_.dnarrow = work.get<float>("dnarrow");
  ws_.lnf_shard = work.get<float>("lnf_shard");  // sequence parallel only
  ws_.full = work.get<float>("full");            // sequence parallel only
  ws_.dgate = work.get<float>("dgate");          // SwiGLU only
  ws_.cast = {work.get<uint16_t>("gemm_cast_x"), work.get<uint16_t>("gemm_cast_dy")};  // bf16 GEMMs only
  ws_.cast_head = {work.get<uint16_t>("gemm_cast_head_x"), work.get<uint16_t>("gemm_cast_head_dy")};
  TERA_ASSERT(opts_.gemm != DType::bf16 || (ws_.cast.x != nullptr && ws_.cast.dy != nullptr &&
                                            (!plan().has_head() || ws_.cast_head.x != nullptr)),
              "the workspace plan lacks the bf16 GEMM cast buffers");
  TERA_ASSERT(opts_.gemm != DType::bf16 || missing_bf16_ops(be_).empty(),
              std::string(be_.name) + " lacks the bf16 ops " + missing_bf16_ops(be_));
  TERA_ASSERT(ws_.dres != nullptr && ws_.dwide != nullptr && ws_.dnarrow != nullptr && (!gated_ || ws_.dgate != nullptr),
              "the workspace plan lacks buffers");
  TERA_ASSERT(!plan().has_head() || (ws_.lnf != nullptr && ws_.logits != nullptr && ws_.ce_stats != nullptr),
              "the workspace plan lacks the head's buffers");
  step_scalars_ = work.get<double>("step_scalars");
  step_scalar_count_ = work.count("step_scalars");
  TERA_ASSERT(step_scalars_ != nullptr, "the workspace plan has no step_scalars");
}

// Where each parameter of this stage's blocks sits in its unit: the unit's
// entries (ModelSpec's names less "h.<layer>.") matched to kBlockWeightRows by
// name. The same offsets index the unit's gradients (block_weights).
void Gpt::bind_block_weight_offsets() {
  BlockWeightOffsets none;
  none.fill(-1);  // a row the block has no tensor for (a Llama block's biases): a null view
  block_offsets_.assign(static_cast<size_t>(spec_.config().layers), none);
  for (int64_t l = 0; l < spec_.config().layers; ++l) {
    const int u = table_.unit_of_layer(l);
    if (u < 0) continue;
    const ParamUnit& unit = table_.units()[static_cast<size_t>(u)];
    const std::string prefix = "h." + std::to_string(l) + ".";
    std::vector<std::string> names;
    std::vector<int64_t> offsets;
    for (int i = unit.first_entry; i < unit.end_entry; ++i) {
      const ParamEntry& e = table_.entries()[static_cast<size_t>(i)];
      TERA_ASSERT(e.info->name.rfind(prefix, 0) == 0, e.info->name + " is not a tensor of block " + unit.name);
      names.push_back(e.info->name.substr(prefix.size()));
      offsets.push_back(e.offset - unit.begin);
    }
    const std::vector<size_t> row = match_rows(kBlockWeightRows, names, "the parameters of " + unit.name);
    for (size_t i = 0; i < names.size(); ++i) block_offsets_[static_cast<size_t>(l)][row[i]] = offsets[i];
  }
}

// Where wte sits in its unit, wpe, ln_f.weight and ln_f.bias in io, and the
// untied lm_head in its unit (-1: not on this stage or not in the model).
void Gpt::bind_wte_io_offsets() {
  auto unit_offset = [&](const char* name, int unit) {
    const ParamEntry* e = unit < 0 ? nullptr : table_.find(name);
    return e == nullptr ? int64_t{-1} : e->offset - table_.units()[static_cast<size_t>(unit)].begin;
  };
  io_offsets_.wte = unit_offset("wte.weight", table_.wte_unit());
  io_offsets_.wpe = unit_offset("wpe.weight", table_.io_unit());
  io_offsets_.lnf_g = unit_offset("ln_f.weight", table_.io_unit());
  io_offsets_.lnf_b = unit_offset("ln_f.bias", table_.io_unit());
  io_offsets_.lm_head = unit_offset("lm_head.weight", table_.head_unit());
}

float* Gpt::params() {
  TERA_ASSERT(own_memory_ != nullptr, "params() needs resident memory");
  return own_memory_->params();
}
const float* Gpt::params() const {
  TERA_ASSERT(own_memory_ != nullptr, "params() needs resident memory");
  return own_memory_->params();
}
float* Gpt::grads() {
  TERA_ASSERT(own_memory_ != nullptr, "grads() needs resident memory");
  return own_memory_->grad_base();
}
void Gpt::init_parameters(uint64_t seed) {
  TERA_ASSERT(own_memory_ != nullptr, "init_parameters() needs resident memory");
  const std::vector<float> host = [&] {
    std::vector<float> h(static_cast<size_t>(table_.total_floats()));
    tera::init_parameters(table_, h.data(), seed);
    return h;
  }();
  load_parameters(host.data());
}
void Gpt::zero_grads() {
  TERA_ASSERT(own_memory_ != nullptr, "zero_grads() needs resident memory");
  own_memory_->zero_grads();
}
std::vector<float> Gpt::parameters_to_host() const {
  std::vector<float> h(static_cast<size_t>(table_.total_floats()));
  be_.copy(h.data(), params(), table_.total_floats() * 4, CopyKind::device_to_host);
  return h;
}
std::vector<float> Gpt::gradients_to_host() const {
  TERA_ASSERT(own_memory_ != nullptr, "gradients_to_host() needs resident memory");
  std::vector<float> h(static_cast<size_t>(table_.total_floats()));
  be_.copy(h.data(), own_memory_->grad_base(), table_.total_floats() * 4, CopyKind::device_to_host);
  return h;
}
void Gpt::load_parameters(const float* host) {
  be_.copy(params(), host, table_.total_floats() * 4, CopyKind::host_to_device);
  own_memory_->refresh_compute_weights();
}

BlockWeights Gpt::block_weights(const float* base, int64_t layer) const {
  float* b = const_cast<float*>(base);
  const BlockWeightOffsets& o = block_offsets_[static_cast<size_t>(layer)];
  BlockWeights w{};
  for (size_t r = 0; r < kBlockWeightRows.size(); ++r) w.*kBlockWeightRows[r].field = o[r] < 0 ? nullptr : b + o[r];
  w.base = base;
  return w;
}

Gpt::Weights Gpt::wte_io(const float* wte_base, const float* io_base, const float* head_base) const {
  auto at = [](const float* base, int64_t off) { return base == nullptr || off < 0 ? nullptr : const_cast<float*>(base) + off; };
  Weights w{at(wte_base, io_offsets_.wte), at(io_base, io_offsets_.wpe), at(io_base, io_offsets_.lnf_g),
            at(io_base, io_offsets_.lnf_b), at(head_base, io_offsets_.lm_head)};
  if (w.head == nullptr) w.head = w.wte;  // tied: the LM head is the token embedding
  return w;
}

Gpt::Weights Gpt::acquire_wte_io(Pass pass) {
  auto acquire = [&](int unit) { return unit < 0 ? nullptr : mem_.acquire(unit, pass); };
  Weights w = wte_io(acquire(table_.wte_unit()), acquire(table_.io_unit()), acquire(table_.head_unit()));
  if (opts_.gemm == DType::bf16 && plan().has_head()) {
    // The head's matrix in bf16: the untied lm_head's unit, else the tied wte's (as wte_io chose).
    const bool untied = io_offsets_.lm_head >= 0;
    const int unit = untied ? table_.head_unit() : table_.wte_unit();
    const uint16_t* base = mem_.compute_weights(unit);
    TERA_ASSERT(base != nullptr, "bf16 GEMMs without a bf16 copy of the LM head");
    w.head_bf16 = base + (untied ? io_offsets_.lm_head : io_offsets_.wte);
  }
  return w;
}

Gpt::Weights Gpt::wte_io_grads() {
  auto grads = [&](int unit) { return unit < 0 ? nullptr : mem_.grads(unit); };
  return wte_io(grads(table_.wte_unit()), grads(table_.io_unit()), grads(table_.head_unit()));
}

void Gpt::release_wte_io(Pass pass) {
  for (int unit : {table_.wte_unit(), table_.io_unit(), table_.head_unit()}) {
    if (unit >= 0) mem_.release(unit, pass);
  }
}

const float* Gpt::gathered(const float* x_tokens, int64_t N) {
  if (!opts_.sequence_parallel) return x_tokens;
  const int64_t C = spec_.config().hidden;
  tp_.gather_forward(x_tokens, ws_.full, rows(N) * C);
  return ws_.full;
}

Gpt::LinearInput Gpt::norm_output(const float* f32, const uint16_t* bf16, int64_t N) {
  if (bf16 == nullptr) return {gathered(f32, N), nullptr};
  if (!opts_.sequence_parallel) return {nullptr, bf16};
  tp_.gather_forward_bf16(bf16, ws_.cast.x, rows(N) * spec_.config().hidden);
  return {nullptr, ws_.cast.x};
}

void Gpt::keep_bf16(uint16_t* bf16, const float* staged, int64_t n) {
  if (bf16 != nullptr) be_.cast(bf16, DType::bf16, staged, DType::f32, n);
}

float* Gpt::partial_sum_buffer(float* out) { return opts_.sequence_parallel ? ws_.full : out; }

void Gpt::reduce_partial_sum(float* out, int64_t N) {
  const int64_t C = spec_.config().hidden;
  if (opts_.sequence_parallel) {
    tp_.scatter_forward(ws_.full, out, rows(N) * C);  // sp_scatter: reduce-scatter into this rank's token shard
  } else {
    tp_.reduce_forward(out, N * C);  // tp_reduce: all-reduce in place
  }
}

void Gpt::embed_forward(const Weights& w, Slot& s, int64_t B, int64_t T) {
  const int64_t C = spec_.config().hidden, N = B * T, Nt = rows(N);
  be_.embedding_lookup(partial_sum_buffer(s.input), s.tokens, w.wte, v0_, v0_ + Vl_, N, C);
  reduce_partial_sum(s.input, N);
  if (w.wpe != nullptr) be_.position_add(s.input, w.wpe, first_token(N), Nt, T, C);  // GPT-2's learned positions
}

void Gpt::embed_backward(const Weights& g, const Slot& s, const float* dres, int64_t B, int64_t T) {
  const int64_t C = spec_.config().hidden, N = B * T, Nt = rows(N);
  if (g.wpe != nullptr) be_.position_add_backward(g.wpe, dres, first_token(N), Nt, T, C);
  const float* dfull = dres;
  if (opts_.sequence_parallel) {
    tp_.scatter_backward(dres, ws_.full, Nt * C);  // sp_scatter backward: all-gather
    dfull = ws_.full;
  }
  be_.embedding_lookup_backward(g.wte, dfull, s.tokens, v0_, v0_ + Vl_, N, C);
}

void Gpt::norm_forward(float* out, uint16_t* out_bf16, float* mean, float* rstd, const float* x, const float* g,
                       const float* b, int64_t rows_) {
  const int64_t C = spec_.config().hidden;
  const float eps = static_cast<float>(spec_.config().norm_eps);
  if (out_bf16 != nullptr) {
    if (llama_) {
      be_.rmsnorm_forward_bf16(out_bf16, rstd, x, g, rows_, C, eps);
    } else {
      be_.layernorm_forward_bf16(out_bf16, mean, rstd, x, g, b, rows_, C);
    }
  } else if (llama_) {
    be_.rmsnorm_forward(out, rstd, x, g, rows_, C, eps);
  } else {
    be_.layernorm_forward(out, mean, rstd, x, g, b, rows_, C);
  }
}

void Gpt::norm_backward(float* dx, float* dg, float* db, const float* dout, const float* x, const float* g,
                        const float* mean, const float* rstd, int64_t rows_) {
  const int64_t C = spec_.config().hidden;
  if (llama_) {
    be_.rmsnorm_backward(dx, dg, dout, x, g, rstd, rows_, C);
  } else {
    be_.layernorm_backward(dx, dg, db, dout, x, g, mean, rstd, rows_, C);
  }
}

void Gpt::block_forward(const BlockActs& a, const BlockWeights& w, const float* x, int64_t B, int64_t T) {
  const int64_t C = spec_.config().hidden, N = B * T, Nt = rows(N);
  // Attention: column-parallel QKV over local heads (rotated on a Llama
  // block), row-parallel output projection.
  norm_forward(a.ln1, a.ln1_bf16, a.ln1_mean, a.ln1_rstd, x, w.ln1_g, w.ln1_b, Nt);
  // bf16 GEMMs with flash attention keep qkv (rotated first on a Llama
  // block) and atty in bf16 and the attention's products take bf16
  // operands; naive attention stays fp32.
  float* qkv = staged(a.qkv, a.qkv_bf16, ws_.dwide);
  linear_fwd(qkv, norm_output(a.ln1, a.ln1_bf16, N), w.qkv_w, w.bf16(w.qkv_w), w.qkv_b, N, C, Ql_, ws_.cast);
  if (llama_) be_.rope_forward(qkv, N, T, Hl_, KVl_, hs_, spec_.config().rope());
  keep_bf16(a.qkv_bf16, qkv, N * Ql_);
  if (a.qkv_bf16 != nullptr) {
    float* atty = ws_.dnarrow;  // [N, Cl] fp32, then kept in bf16
    be_.flash_attention_forward_bf16(atty, a.lse, a.qkv_bf16, B, T, Hl_, KVl_, hs_);
    keep_bf16(a.atty_bf16, atty, N * Cl_);
  } else if (opts_.flash_attention) {
    be_.flash_attention_forward(a.atty, a.lse, a.qkv, B, T, Hl_, KVl_, hs_);
  } else {
    be_.attention_forward(a.atty, a.probs, a.qkv, B, T, Hl_, KVl_, hs_);
  }
  linear_fwd(partial_sum_buffer(a.res1), {a.atty, a.atty_bf16}, w.proj_w, w.bf16(w.proj_w), nullptr, N, Cl_, C,
             ws_.cast);
  reduce_partial_sum(a.res1, N);
  be_.bias_residual(a.res1, a.res1, w.proj_b, x, Nt, C);
  // MLP: column-parallel FC (and gate), row-parallel projection.
  norm_forward(a.ln2, a.ln2_bf16, a.ln2_mean, a.ln2_rstd, a.res1, w.ln2_g, w.ln2_b, Nt);
  const LinearInput ln2 = norm_output(a.ln2, a.ln2_bf16, N);
  // bf16 GEMMs: fch (and the gate) are rounded to bf16 as the linear layers
  // write them, and the activation reads and writes bf16 (fp32 inside).
  const bool bf16 = a.fch_bf16 != nullptr;
  if (fused_gelu(a, w)) {
    // One op: fch and its GELU in bf16 (a GEMM epilogue on cuda), no fp32 fch.
    be_.linear_gelu_forward_bf16(a.fch_gelu_bf16, a.fch_bf16, bf16_input(ln2, N, C, ws_.cast.x), w.bf16(w.fc_w), w.fc_b,
                                 N, C, Fl_, ws_.dwide);
  } else {
    float* fch = staged(a.fch, a.fch_bf16, ws_.dwide);
    linear_fwd(fch, ln2, w.fc_w, w.bf16(w.fc_w), w.fc_b, N, C, Fl_, ws_.cast);
    keep_bf16(a.fch_bf16, fch, N * Fl_);
    if (gated_) {
      float* gate = staged(a.fch_gate, a.fch_gate_bf16, ws_.dgate);
      linear_fwd(gate, ln2, w.gate_w, w.bf16(w.gate_w), w.gate_b, N, C, Fl_, ws_.cast);
      keep_bf16(a.fch_gate_bf16, gate, N * Fl_);
      if (bf16) {
        be_.swiglu_forward_bf16(a.fch_swiglu_bf16, a.fch_gate_bf16, a.fch_bf16, N * Fl_);
      } else {
        be_.swiglu_forward(a.fch_swiglu, a.fch_gate, a.fch, N * Fl_);
      }
    } else {
      if (bf16) {
        be_.gelu_forward_bf16(a.fch_gelu_bf16, a.fch_bf16, N * Fl_);
      } else {
        be_.gelu_forward(a.fch_gelu, a.fch, N * Fl_);
      }
    }
  }
  linear_fwd(partial_sum_buffer(a.out), mlp_activation(a), w.fcp_w, w.bf16(w.fcp_w), nullptr, N, Fl_, C, ws_.cast);
  reduce_partial_sum(a.out, N);
  be_.bias_residual(a.out, a.out, w.fcp_b, a.res1, Nt, C);
}

void Gpt::block_backward(const BlockActs& a, const BlockWeights& w, const BlockWeights& g, const float* x, float* dres,
                         int64_t B, int64_t T) {
  const int64_t C = spec_.config().hidden, N = B * T, Nt = rows(N);
  const bool sp = opts_.sequence_parallel;
  float* dwide = ws_.dwide;      // [N, max(Fl, Ql)]
  float* dnarrow = ws_.dnarrow;  // [N, C]
  // The gradient of a row-parallel output, over all N tokens: dres itself, or
  // all-gathered from the token shards (sp_scatter's backward).
  auto full_tokens = [&](const float* d) -> const float* {
    if (!sp) return d;
    tp_.scatter_backward(d, ws_.full, Nt * C);
    return ws_.full;
  };
  // The gradient w.r.t. a norm output that fed a column-parallel GEMM:
  // partial over the group; summed (tp_copy) or summed and sharded (sp_gather).
  auto reduce_input_grad = [&]() -> const float* {
    if (!sp) {
      tp_.copy_backward(dnarrow, N * C);
      return dnarrow;
    }
    tp_.gather_backward(dnarrow, ws_.full, Nt * C);
    return ws_.full;
  };
  // MLP: out = res1 + reduce(act @ Wfp^T) + b; dres = d(out) = d(res1) through the skip.
  const bool fused = fused_gelu(a, w);
  if (fused) {
    // d(fch) = (d(out) @ Wfp) * gelu'(fch) in one op (a GEMM epilogue on cuda).
    be_.linear_backward_gelu_bf16(dwide, g.fcp_w, g.fcp_b, full_tokens(dres), a.fch_gelu_bf16, w.bf16(w.fcp_w),
                                  a.fch_bf16, N, Fl_, C, ws_.cast.dy);
  } else {
    linear_bwd(dwide, g.fcp_w, g.fcp_b, full_tokens(dres), mlp_activation(a), w.fcp_w, w.bf16(w.fcp_w), N, Fl_, C,
               false, ws_.cast);
  }
  const LinearInput ln2 = norm_output(a.ln2, a.ln2_bf16, N);
  if (gated_) {
    // act = silu(gate) * up: d(up) over d(act) in place, d(gate) beside it; d(ln2) from both projections.
    float* dgate = ws_.dgate;
    if (a.fch_bf16 != nullptr) {
      be_.swiglu_backward_bf16(dgate, dwide, a.fch_gate_bf16, a.fch_bf16, dwide, N * Fl_);
    } else {
      be_.swiglu_backward(dgate, dwide, a.fch_gate, a.fch, dwide, N * Fl_);
    }
    linear_bwd(dnarrow, g.fc_w, g.fc_b, dwide, ln2, w.fc_w, w.bf16(w.fc_w), N, C, Fl_, false, ws_.cast);
    linear_bwd(dnarrow, g.gate_w, g.gate_b, dgate, ln2, w.gate_w, w.bf16(w.gate_w), N, C, Fl_, true, ws_.cast);
  } else {
    if (a.fch_bf16 == nullptr) {
      be_.gelu_backward(dwide, a.fch, dwide, N * Fl_);
    } else if (!fused) {  // fused: dwide holds d(fch) already
      be_.gelu_backward_bf16(dwide, a.fch_bf16, dwide, N * Fl_);
    }
    linear_bwd(dnarrow, g.fc_w, g.fc_b, dwide, ln2, w.fc_w, w.bf16(w.fc_w), N, C, Fl_, false, ws_.cast);
  }
  norm_backward(dres, g.ln2_g, g.ln2_b, reduce_input_grad(), a.res1, w.ln2_g, a.ln2_mean, a.ln2_rstd, Nt);
  // Attention: res1 = x + reduce(atty @ Wo^T) + b; dres now holds d(res1) = d(x) through the skip.
  linear_bwd(dnarrow, g.proj_w, g.proj_b, full_tokens(dres), {a.atty, a.atty_bf16}, w.proj_w, w.bf16(w.proj_w), N, Cl_,
             C, false, ws_.cast);
  if (a.qkv_bf16 != nullptr) {
    be_.flash_attention_backward_bf16(dwide, dnarrow, a.qkv_bf16, a.atty_bf16, a.lse, B, T, Hl_, KVl_, hs_);
  } else if (opts_.flash_attention) {
    be_.flash_attention_backward(dwide, dnarrow, a.qkv, a.atty, a.lse, B, T, Hl_, KVl_, hs_);
  } else {
    be_.attention_backward(dwide, dnarrow, a.qkv, a.probs, B, T, Hl_, KVl_, hs_);
  }
  // The rotary embedding is a rotation: its backward rotates d(q), d(k) back.
  if (llama_) be_.rope_backward(dwide, N, T, Hl_, KVl_, hs_, spec_.config().rope());
  linear_bwd(dnarrow, g.qkv_w, g.qkv_b, dwide, norm_output(a.ln1, a.ln1_bf16, N), w.qkv_w, w.bf16(w.qkv_w), N, C, Ql_,
             false, ws_.cast);
  norm_backward(dres, g.ln1_g, g.ln1_b, reduce_input_grad(), x, w.ln1_g, a.ln1_mean, a.ln1_rstd, Nt);
}

void Gpt::head_forward(const Weights& w, const float* x, Slot& s, int64_t B, int64_t T, float dloss, bool backward,
                       bool count_loss) {
  const int64_t C = spec_.config().hidden, N = B * T, Nt = rows(N);
  const bool sp = opts_.sequence_parallel;
  float* lnf_tokens = sp ? ws_.lnf_shard : ws_.lnf;
  norm_forward(lnf_tokens, nullptr, ws_.lnf_mean, ws_.lnf_rstd, x, w.lnf_g, w.lnf_b, Nt);
  if (sp) tp_.gather_forward(ws_.lnf_shard, ws_.lnf, Nt * C);
  // Vocab-parallel logits and loss: the max and the sums are reduced over the group.
  linear_fwd(ws_.logits, {ws_.lnf}, w.head, w.head_bf16, nullptr, N, C, Vl_, ws_.cast_head);
  const CeStats ce = ws_.ce(N);
  be_.ce_max(ce.rowmax, ws_.logits, N, valid_vocab_, Vl_);
  tp_.all_max(ce.rowmax, N);
  be_.ce_exp_sum(ce.sums, ce.target_logit, ws_.logits, s.targets, ce.rowmax, N, valid_vocab_, Vl_, v0_);
  tp_.all_sum(ce.sums, 2 * N);  // the sums and the target logits
  be_.ce_finalize(s.losses, ws_.logits, s.targets, ce.rowmax, ce.sums, ce.target_logit, N, valid_vocab_, Vl_, v0_,
                  backward ? dloss : 0.0f);
  if (count_loss) be_.accumulate_sum(step_scalars_ + StepScalars::loss, s.losses, N);  // the loss stays on the device
  if (backward) {
    // logits = lnf @ head^T (head: the tied wte, or lm_head): d(lnf) = dlogits @ head (partial over
    // the vocab split), d(head) += dlogits^T @ lnf.
    const Weights g = wte_io_grads();
    linear_bwd(ws_.dnarrow, g.head, nullptr, ws_.logits, {ws_.lnf}, w.head, w.head_bf16, N, C, Vl_, false, ws_.cast_head);
    const float* dlnf = ws_.dnarrow;
    if (sp) {
      tp_.gather_backward(ws_.dnarrow, ws_.lnf_shard, Nt * C);
      dlnf = ws_.lnf_shard;
    } else {
      tp_.copy_backward(ws_.dnarrow, N * C);
    }
    be_.fill(s.dx_head, DType::f32, 0.0, Nt * C);
    norm_backward(s.dx_head, g.lnf_g, g.lnf_b, dlnf, x, w.lnf_g, ws_.lnf_mean, ws_.lnf_rstd, Nt);
  }
}

bool Gpt::fused_gelu(const BlockActs& a, const BlockWeights& w) const {
  return !gated_ && a.fch_bf16 != nullptr && a.fch_gelu_bf16 != nullptr && w.bf16(w.fc_w) != nullptr &&
         has_op(be_, KernelOp::linear_gelu_forward_bf16) && has_op(be_, KernelOp::linear_backward_gelu_bf16);
}

const uint16_t* Gpt::bf16_input(LinearInput x, int64_t N, int64_t I, uint16_t* cast) {
  if (x.bf16 != nullptr) return x.bf16;
  TERA_ASSERT(x.f32 != nullptr && I <= spec_.config().hidden, "an fp32 linear input wider than the cast buffer's front");
  be_.cast(cast, DType::bf16, x.f32, DType::f32, N * I);
  return cast;
}

void Gpt::linear_fwd(float* y, LinearInput x, const float* W, const uint16_t* Wb, const float* b, int64_t N, int64_t I,
                     int64_t O, const GemmCast& cast) {
  TERA_ASSERT((Wb != nullptr) == (opts_.gemm == DType::bf16), "a linear layer without the GEMM dtype's weights");
  if (Wb != nullptr) {
    be_.linear_forward_bf16(y, bf16_input(x, N, I, cast.x), Wb, b, N, I, O);
  } else {
    TERA_ASSERT(x.f32 != nullptr, "a bf16 linear input without bf16 GEMMs");
    be_.linear_forward(y, x.f32, W, b, N, I, O);
  }
}

void Gpt::linear_bwd(float* dx, float* dW, float* db, const float* dy, LinearInput x, const float* W,
                     const uint16_t* Wb, int64_t N, int64_t I, int64_t O, bool accumulate_dx, const GemmCast& cast) {
  TERA_ASSERT((Wb != nullptr) == (opts_.gemm == DType::bf16), "a linear layer without the GEMM dtype's weights");
  if (Wb != nullptr) {
    be_.linear_backward_bf16(dx, dW, db, dy, bf16_input(x, N, I, cast.x), Wb, N, I, O, accumulate_dx, cast.dy);
  } else {
    TERA_ASSERT(x.f32 != nullptr, "a bf16 linear input without bf16 GEMMs");
    be_.linear_backward(dx, dW, db, dy, x.f32, W, N, I, O, accumulate_dx);
  }
}

void Gpt::forward_body(int c, int k, const int32_t* tokens, int64_t B, int64_t T) {
  TERA_ASSERT(B <= max_batch_ && T <= spec_.config().seq_len);
  TERA_ASSERT(!opts_.sequence_parallel || (B * T) % tp_.size() == 0);
  const ChunkPlan& ch = plan().chunks[static_cast<size_t>(c)];
  Slot& s = slot(c, k);
  if (ch.embedding) {
    be_.copy(s.tokens, tokens, B * T * static_cast<int64_t>(sizeof(int32_t)), CopyKind::host_to_device);
    const Weights w = acquire_wte_io(Pass::forward);
    embed_forward(w, s, B, T);
    release_wte_io(Pass::forward);
  }
  for (size_t i = 0; i < static_cast<size_t>(ch.num_layers); ++i) {
    const int64_t l = ch.first_layer + static_cast<int64_t>(i);
    const int u = table_.unit_of_layer(l);
    BlockWeights w = block_weights(mem_.acquire(u, Pass::forward), l);
    w.base_bf16 = mem_.compute_weights(u);
    block_forward(s.blocks[i], w, block_input(s, i), B, T);
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
  const Weights w = acquire_wte_io(train ? Pass::backward : Pass::forward);
  head_forward(w, chunk_output(s, ch.num_layers), s, B, T, dloss, train, count_loss);
  release_wte_io(train ? Pass::backward : Pass::forward);
}

void Gpt::backward(int c, int k, int64_t B, int64_t T) {
  const ChunkPlan& ch = plan().chunks[static_cast<size_t>(c)];
  const Slot& s = slot(c, k);
  const int64_t n = activation_floats(B, T);
  be_.copy(ws_.dres, ch.head ? s.dx_head : s.grad_in, n * static_cast<int64_t>(sizeof(float)), CopyKind::device_to_device);
  for (size_t i = static_cast<size_t>(ch.num_layers); i-- > 0;) {
    const int64_t l = ch.first_layer + static_cast<int64_t>(i);
    const int u = table_.unit_of_layer(l);
    BlockWeights w = block_weights(mem_.acquire(u, Pass::backward), l);
    w.base_bf16 = mem_.compute_weights(u);
    const BlockWeights g = block_weights(mem_.grads(u), l);
    if (opts_.recompute == Recompute::full) {
      // Rerun the block's forward from its saved input into the working set
      // (its output goes to the scratch `out`: the saved one is the next block's input).
      block_forward(recompute_acts_, w, block_input(s, i), B, T);
    }
    block_backward(s.blocks[i], w, g, block_input(s, i), ws_.dres, B, T);
    mem_.release(u, Pass::backward);
    mem_.grads_done(u);
    mem_.poll();
  }
  if (ch.embedding) {
    acquire_wte_io(Pass::backward);
    embed_backward(wte_io_grads(), s, ws_.dres, B, T);
    release_wte_io(Pass::backward);
  } else {
    be_.copy(s.grad_out, ws_.dres, n * static_cast<int64_t>(sizeof(float)), CopyKind::device_to_device);
  }
  if (ch.embedding || ch.head) {
    for (int unit : {table_.wte_unit(), table_.io_unit(), table_.head_unit()}) {
      if (unit >= 0) mem_.grads_done(unit);
    }
  }
}

float* Gpt::input(int c, int k) { return slot(c, k).input; }
const float* Gpt::output(int c, int k) const { return chunk_output(slot(c, k), chunk_layers(c)); }
float* Gpt::grad_in(int c, int k) { return slot(c, k).grad_in; }
const float* Gpt::grad_out(int c, int k) const { return slot(c, k).grad_out; }

namespace {
// Zeroes the loss scalar, runs f, and copies the loss sum to the host.
template <typename F>
double loss_of(const Backend& be, double* loss, F&& f) {
  be.fill(loss, DType::f64, 0.0, 1);
  f();
  double sum = 0;
  be.copy(&sum, loss, sizeof(double), CopyKind::device_to_host);
  return sum;
}
}  // namespace

double Gpt::forward_backward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T, float dloss) {
  TERA_ASSERT(chunks() == 1 && plan().chunks[0].embedding && plan().chunks[0].head, "needs the whole model on this stage");
  return loss_of(be_, step_scalars_ + StepScalars::loss, [&] {
    forward(0, 0, tokens, targets, B, T, dloss, true);
    backward(0, 0, B, T);
  });
}

double Gpt::forward_loss(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T) {
  TERA_ASSERT(chunks() == 1 && plan().chunks[0].embedding && plan().chunks[0].head, "needs the whole model on this stage");
  return loss_of(be_, step_scalars_ + StepScalars::loss, [&] { forward(0, 0, tokens, targets, B, T, 0.0f, false); });
}

void Gpt::head_logits(const float* x, int64_t N) {
  const int64_t C = spec_.config().hidden;
  const Weights w = acquire_wte_io(Pass::forward);
  norm_forward(ws_.lnf, nullptr, ws_.lnf_mean, ws_.lnf_rstd, x, w.lnf_g, w.lnf_b, N);
  linear_fwd(ws_.logits, {ws_.lnf}, w.head, w.head_bf16, nullptr, N, C, Vl_, ws_.cast_head);
  release_wte_io(Pass::forward);
}

std::vector<float> Gpt::logits(const int32_t* tokens, int64_t B, int64_t T) {
  TERA_ASSERT(tp_.size() == 1 && chunks() == 1, "full logits exist only on one rank holding the whole model");
  forward_body(0, 0, tokens, B, T);
  head_logits(chunk_output(slot(0, 0), chunk_layers(0)), B * T);
  std::vector<float> host(static_cast<size_t>(B * T * Vl_));
  be_.copy(host.data(), ws_.logits, B * T * Vl_ * static_cast<int64_t>(sizeof(float)), CopyKind::device_to_host);
  return host;
}

void Gpt::next_token_scores(const int32_t* tokens, int64_t T, int64_t V, float temperature, float* host_out) {
  TERA_ASSERT(tp_.size() == 1 && chunks() == 1, "full logits exist only on one rank holding the whole model");
  TERA_ASSERT(T >= 1 && T <= spec_.config().seq_len && V >= 1 && V <= Vl_);
  forward_body(0, 0, tokens, 1, T);
  head_logits(chunk_output(slot(0, 0), chunk_layers(0)) + (T - 1) * spec_.config().hidden, 1);
  if (temperature > 0) be_.softmax_row(ws_.logits, ws_.logits, V, temperature);  // in place
  be_.copy(host_out, ws_.logits, V * static_cast<int64_t>(sizeof(float)), CopyKind::device_to_host);
}

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
