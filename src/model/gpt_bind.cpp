// Binding the model's views before step 1: each activation slot, the
// recompute working set and the workspace, by name, from the rank's memory
// plan (partition/memory_plan.h names the buffers), checked against the block
// plan; and where each parameter sits in its unit (partition/param_table.h).
#include <algorithm>
#include <string>
#include <string_view>

#include "core/check.h"
#include "model/gpt.h"

namespace tera {

// The plan must be the one the table and rank memory were made from, for
// this tensor-parallel rank: checked here, where a mismatch would bind wrong views.
void Gpt::init_buffers(const RankPlan& plan) {
  TERA_ASSERT(max_batch_ > 0 && plan.seq_len * plan.layout.cp == spec_.config().seq_len,
              "one micro-batch of whole sequences (their cp-th part under context parallelism)");
  TERA_ASSERT(plan.act.cp == plan.layout.cp &&
                  (cp_ == nullptr ? plan.layout.cp == 1 : cp_->size() == split_.cp && cp_->rank() == split_.rank),
              "the rank plan is for another context-parallel group");
  TERA_ASSERT(table_.tp() == tp_.size() && table_.tp_rank() == tp_.rank(), "table built for another tensor-parallel rank");
  TERA_ASSERT(plan.act.tp == tp_.size() && plan.act.sequence_parallel == tp_.sequence_parallel(),
              "the rank plan is for another tensor-parallel group");
  TERA_ASSERT(plan.stage.chunks.size() == table_.plan().chunks.size(), "the table was built for another stage plan");
  TERA_ASSERT(plan.act.recompute != Recompute::selective, "the runtime recomputes none or full blocks");
  TERA_ASSERT(plan.act.dtype == DType::f32 && !plan.act.dropout, "the runtime keeps fp32 activations, no dropout");
  TERA_ASSERT(plan.act.flash_attention == (spec_.config().attention == AttentionKind::flash),
              "the rank plan's attention is the model's (model.attention)");
  opts_ = plan.act;
  TERA_ASSERT(!opts_.defer_weight_grads || opts_.recompute == Recompute::none,
              "the split backward (zb-h1) reads each block's saved inputs at W: no full recompute");
  block_plan_ = make_block_plan(spec_.config(), opts_.gemm, be_, opts_.cp);
  block_plan_.split_backward = opts_.defer_weight_grads;
  const DeviceArena& acts = rank_memory_.arena(MemoryClass::activations);
  bind_recompute_working_set(acts);
  bind_slots(acts, std::max(1, plan.slots));
  bind_workspace(rank_memory_.arena(MemoryClass::workspace));
  bind_block_weight_offsets();
  bind_io_offsets();
}

namespace {
// The device views of one table's buffers: names and views, copy k of
// "<prefix><name>" in the activation arena.
struct NamedViews {
  std::vector<std::string> names;
  std::vector<TypedView> views;
};
TypedView view_at(const DeviceArena& arena, const ArenaLayout::Entry& e, int64_t k) {
  switch (e.dtype) {
    case DType::f32: return TypedView(arena.at<float>(e, k));
    case DType::bf16: return TypedView(arena.at<uint16_t>(e, k));
    default: TERA_ASSERT(false, "activation " + e.name + " is neither fp32 nor bf16");
  }
  return {};
}
NamedViews views_of(const DeviceArena& acts, const std::string& prefix, const std::vector<BufferInfo>& table,
                    int64_t k) {
  NamedViews v;
  for (const BufferInfo& b : table) {
    const ArenaLayout::Entry* e = acts.layout().find(prefix + b.name);
    TERA_ASSERT(e != nullptr, "the memory plan has no activation buffer " + prefix + b.name);
    v.names.push_back(b.name);
    v.views.push_back(view_at(acts, *e, k));
  }
  return v;
}
}  // namespace

// Full recompute: the one block-sized working set that each block's forward
// reruns into just before its backward (its `out` a scratch), the plan's
// "recompute.<name>" buffers.
void Gpt::bind_recompute_working_set(const DeviceArena& acts) {
  if (opts_.recompute != Recompute::full || plan().num_layers() == 0) return;
  const NamedViews v = views_of(acts, "recompute.", spec_.block_activations(max_batch_, local_seq_len(), opts_), 0);
  recompute_acts_ = bind_by_name(kBlockActRows, v.names, v.views, "block_activations");
  check_block_acts(block_plan_, recompute_acts_, "the recompute working set");
}

// Each slot's views (memory_plan.h names them): the stage's boundary
// buffers "slot.<name>", copy k, by name (null where no chunk of the stage
// uses one), and one BlockActs per layer i of the largest chunk: the saved
// tables "slot.h.<name>", copy k * layers + i, or under full recompute its
// saved output over the working set.
void Gpt::bind_slots(const DeviceArena& acts, int slot_count) {
  const int64_t B = max_batch_, T = local_seq_len();
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
        s.blocks.push_back(bind_by_name(kFullRecomputeSavedRows, v.names, v.views,
                                        "saved_block_activations (full recompute)", recompute_acts_));
        TERA_ASSERT(s.blocks.back().out.dtype() == DType::f32, "a block's saved input is fp32");
      } else {
        s.blocks.push_back(bind_by_name(kBlockActRows, v.names, v.views, "saved_block_activations"));
        check_block_acts(block_plan_, s.blocks.back(), "saved_block_activations");
      }
    }
    slots_.push_back(std::move(s));
  }
}

// Scratch shared by all micro-batches (ModelSpec::workspace; the head-only
// buffers exist on the stage with the head), the step's scalars, and the
// math over them.
void Gpt::bind_workspace(const DeviceArena& work) {
  const Workspace ws = tera::bind_workspace(work);
  TERA_ASSERT(opts_.gemm != DType::bf16 || !plan().has_head() || ws.cast_head.x != nullptr,
              "the workspace plan lacks the LM head's bf16 GEMM cast buffers");
  TERA_ASSERT(!plan().has_head() || (ws.lnf != nullptr && ws.logits != nullptr && ws.ce_stats != nullptr),
              "the workspace plan lacks the head's buffers");
  step_scalars_ = work.get<double>("step_scalars");
  step_scalar_count_ = work.count("step_scalars");
  TERA_ASSERT(step_scalars_ != nullptr, "the workspace plan has no step_scalars");
  const LocalDims dims = local_dims(spec_, tp_.size(), tp_.rank());
  if (opts_.cp > 1) {
    const RingBuffers ring{work.get<float>("ring_kv"), work.get<float>("ring_dkv"), work.get<int32_t>("ring_positions")};
    ring_ = std::make_unique<RingAttention>(be_, *cp_, split_, dims.Hl, dims.KVl, dims.hs, ring);
  }
  layers_ = std::make_unique<GptLayers>(spec_.config(), be_, tp_, block_plan_, dims, ws, step_scalars_ + StepScalars::loss,
                                        ring_.get());
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

void Gpt::bind_io_offsets() {
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

BlockWeights Gpt::block_weights(const float* base, int64_t layer) const {
  float* b = const_cast<float*>(base);
  const BlockWeightOffsets& o = block_offsets_[static_cast<size_t>(layer)];
  BlockWeights w{};
  for (size_t r = 0; r < kBlockWeightRows.size(); ++r) w.*kBlockWeightRows[r].field = o[r] < 0 ? nullptr : b + o[r];
  w.base = base;
  return w;
}

IoWeights Gpt::io_weights(const float* wte_base, const float* io_base, const float* head_base) const {
  auto at = [](const float* base, int64_t off) { return base == nullptr || off < 0 ? nullptr : const_cast<float*>(base) + off; };
  IoWeights w;
  w.wte = at(wte_base, io_offsets_.wte);
  w.wpe = at(io_base, io_offsets_.wpe);
  w.lnf_g = at(io_base, io_offsets_.lnf_g);
  w.lnf_b = at(io_base, io_offsets_.lnf_b);
  w.head = at(head_base, io_offsets_.lm_head);
  if (w.head == nullptr) w.head = w.wte;  // tied: the LM head is the token embedding
  return w;
}

}  // namespace tera
