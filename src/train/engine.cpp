// Engine: the step protocol of trainer.h over the pipeline executor, ZeRO and
// the tensor-parallel model.
#include "train/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "ckpt/shard_map.h"
#include "comm/agree.h"
#include "core/check.h"
#include "core/strings.h"
#include "optim/grad_clip.h"
#include "partition/layout_check.h"

namespace tera {

Engine::Engine(const RunConfig& cfg, const Backend& backend, const Groups& groups, Trace* trace,
               EngineOptions engine_options)
    : cfg_(cfg), be_(backend), g_(groups), spec_(cfg.model), poison_steps_(std::move(engine_options.nonfinite_steps)) {
  const ParallelLayout& p = cfg.parallel;
  // One layout: the groups are made from the config's (dp derived).
  TERA_ASSERT(g_.layout == with_world_size(p, g_.layout.world()),
              "process groups of layout " + layout_string(g_.layout) + " for a config of layout " + layout_string(p));
  // Everything this rank holds is its rank plan's; each part binds from it.
  rank_ = tera::rank_plan(cfg, g_.layout, g_.coord);
  auto sched = rank_.schedule();
  TERA_ASSERT(sched.ok(), sched.error());  // validated with the config
  schedule_ = *sched;
  TERA_ASSERT(schedule_.max_in_flight(g_.coord.pp) == rank_.slots, "the schedule keeps another number in flight");
  tp_ = std::make_unique<CommTensorParallel>(*g_.tp_dev, p.sequence_parallel);
  cp_ = std::make_unique<CommContextParallel>(*g_.cp_dev);
  table_ = std::make_unique<ParamTable>(rank_.param_table(spec_));
  const Status units = rank_.check_table(*table_);
  TERA_ASSERT(units.is_ok(), units.message());
  memory_ = std::make_unique<RankMemory>(backend, rank_.memory_plan(spec_));
  // Every rank holding the same parameters (dp * cp) reduces and shards them.
  zero_ = std::make_unique<ZeroMemory>(*table_, rank_, *g_.zero, *g_.zero_dev, backend, *memory_, g_.tp_dev, g_.kv_dev);
  adam_ = std::make_unique<AdamW>(cfg.train.adamw, AdamW::segments_of(*table_, zero_->update_ranges()), backend,
                                  *memory_);
  model_ = std::make_unique<Gpt>(spec_, backend, *table_, *zero_, *tp_, *cp_, rank_, *memory_);
  TERA_ASSERT(model_->step_scalar_count() == StepScalars::count(static_cast<int64_t>(table_->units().size())),
              "the step scalars hold 4 + one per unit");
  executor_ = std::make_unique<PipelineExecutor>(schedule_, *model_, *zero_, g_, trace);
}

Engine::~Engine() = default;

void Engine::local_batch(const BatchFn& batch, int64_t first, int64_t count, int32_t* tokens, int32_t* targets) {
  const ContextSplit split = rank_.context_split();
  if (split.cp == 1) {
    batch(first, count, tokens, targets);
    return;
  }
  // Whole sequences, then this rank's chunks of each.
  const size_t n = static_cast<size_t>(count * split.seq_len);
  full_tokens_.resize(n);
  full_targets_.resize(n);
  batch(first, count, full_tokens_.data(), full_targets_.data());
  split.take(full_tokens_.data(), tokens, count);
  split.take(full_targets_.data(), targets, count);
}

std::vector<double> Engine::scalars_to_host(int64_t first, int64_t count) const {
  std::vector<double> h(static_cast<size_t>(count));
  be_.copy(h.data(), scalars() + first, count * static_cast<int64_t>(sizeof(double)), CopyKind::device_to_host);
  return h;
}

std::vector<AdamW::Span> Engine::adam_spans() {
  // Segments lie inside the shards, both in table order.
  const std::vector<ZeroMemory::Shard> shards = zero_->shards();
  std::vector<AdamW::Span> out;
  out.reserve(adam_->segments().size());
  size_t k = 0;
  for (const AdamW::Segment& s : adam_->segments()) {
    while (s.begin >= shards[k].end) ++k;
    const ZeroMemory::Shard& sh = shards[k];
    TERA_ASSERT(s.begin >= sh.begin && s.end <= sh.end);
    out.push_back({sh.param + (s.begin - sh.begin), sh.grad + (s.begin - sh.begin),
                   sh.compute == nullptr ? nullptr : sh.compute + (s.begin - sh.begin)});
  }
  return out;
}

void Engine::gather_state(float* params, float* m, float* v) {
  zero_->gather_parameters(params);
  const int64_t total = table_->total_floats();
  std::fill(m, m + total, 0.0f);
  std::fill(v, v + total, 0.0f);
  // This rank's moments, copied to their arena offsets, then the other ranks' chunks.
  const auto& segs = adam_->segments();
  for (size_t i = 0; i < segs.size(); ++i) {
    const int64_t bytes = (segs[i].end - segs[i].begin) * static_cast<int64_t>(sizeof(float));
    be_.copy(m + segs[i].begin, adam_->m() + adam_->state_offset(i), bytes, CopyKind::device_to_host);
    be_.copy(v + segs[i].begin, adam_->v() + adam_->state_offset(i), bytes, CopyKind::device_to_host);
  }
  zero_->all_gather_ranges(m);
  zero_->all_gather_ranges(v);
}

void Engine::load_state(const float* params, const float* m, const float* v) {
  zero_->load_parameters(params);
  const auto& segs = adam_->segments();
  for (size_t i = 0; i < segs.size(); ++i) {
    const int64_t bytes = (segs[i].end - segs[i].begin) * static_cast<int64_t>(sizeof(float));
    be_.copy(adam_->m() + adam_->state_offset(i), m + segs[i].begin, bytes, CopyKind::host_to_device);
    be_.copy(adam_->v() + adam_->state_offset(i), v + segs[i].begin, bytes, CopyKind::host_to_device);
  }
}

std::vector<std::string> Engine::nonfinite_groups() {
  // One flag per group (wte, io, lm_head, then every global layer); summed over the world.
  const int64_t L = cfg_.model.layers;
  const int64_t units = static_cast<int64_t>(table_->units().size());
  zero_->count_nonfinite_grads(scalars() + StepScalars::nonfinite_units);
  const std::vector<double> counts = scalars_to_host(StepScalars::nonfinite_units, units);
  constexpr size_t kFirstLayer = 3;
  std::vector<double> bad(static_cast<size_t>(L) + kFirstLayer, 0.0);
  for (size_t u = 0; u < table_->units().size(); ++u) {
    if (counts[u] == 0) continue;
    const ParamUnit& unit = table_->units()[u];
    const int ui = static_cast<int>(u);
    const size_t slot = unit.layer >= 0 ? kFirstLayer + static_cast<size_t>(unit.layer)
                        : ui == table_->wte_unit() ? 0
                        : ui == table_->io_unit()  ? 1
                                                   : 2;
    bad[std::min(slot, bad.size() - 1)] = 1.0;
  }
  g_.world->all_reduce(bad.data(), static_cast<int64_t>(bad.size()), CommType::f64, ReduceOp::max);
  std::vector<std::string> names;
  for (size_t i = 0; i < bad.size(); ++i) {
    if (bad[i] > 0) names.push_back(i == 0 ? "wte" : i == 1 ? "io" : i == 2 ? "lm_head" : "h." + std::to_string(i - kFirstLayer));
  }
  return names;
}

StepResult Engine::train_step(int64_t step, float lr, const BatchFn& batch) {
  const TrainConfig& tc = cfg_.train;
  const int64_t T = cfg_.model.seq_len, mb = cfg_.parallel.micro_batch, G = tc.global_batch;
  const int64_t per_rank = G / g_.layout.dp;
  zero_->begin_step();
  be_.fill(scalars(), DType::f64, 0.0, StepScalars::nonfinite_units);  // all but the per-unit counts
  // The gradient of the mean over every token of the step: each context-
  // parallel rank's share of a sequence adds its part.
  const float dloss = static_cast<float>(1.0 / static_cast<double>(G * T));
  executor_->run_step(
      [&](int k, int32_t* tok, int32_t* tgt) {
        local_batch(batch, step * G + g_.coord.dp * per_rank + k * mb, mb, tok, tgt);
        return mb;
      },
      mb, rank_.seq_len, dloss);
  StepResult r;
  if (g_.world->rank() == 0 && std::find(poison_steps_.begin(), poison_steps_.end(), step + 1) != poison_steps_.end()) {
    int64_t count = 0;
    float* gr = zero_->reduced_grads(0, &count);
    if (count > 0) be_.fill(gr, DType::f32, std::numeric_limits<double>::quiet_NaN(), 1);
  }
  // The squared gradient norm beside the loss sum on the device, then one
  // copy of both to the host.
  static_assert(StepScalars::loss == 0 && StepScalars::grad_norm_parts == 1, "one copy reads the loss and both parts");
  zero_->grad_sum_squares(scalars() + StepScalars::grad_norm_parts, holds_tied_copy() ? table_->wte_unit() : -1);
  const std::vector<double> h = scalars_to_host(StepScalars::loss, 3);
  // The loss lives on the last stage, identical on its tp ranks: count tp
  // rank 0's (each context-parallel rank's holds its tokens' share).
  const double mine = rank_.stage.has_head() && g_.coord.tp == 0 ? h[StepScalars::loss] : 0.0;
  r.loss = g_.world->all_reduce_sum(mine) / static_cast<double>(G * T);
  // Global norm: under ZeRO >= 1 each dp rank holds a chunk (sum over dp);
  // split tensors' squares summed over the tensor-parallel group, replicated
  // ones counted once, then summed over pipeline stages (the tied embedding
  // counted on the first stage only).
  double parts[2] = {h[StepScalars::grad_norm_parts], h[StepScalars::grad_norm_parts + 1]};
  if (zero_->grads_sharded()) g_.zero->all_reduce(parts, 2, CommType::f64, ReduceOp::sum);
  const double stage_sq = g_.tp->all_reduce_sum(parts[0]) + parts[1];
  r.grad_norm = std::sqrt(g_.pp->all_reduce_sum(stage_sq));
  // Agreed over the world: a replicated tensor (LayerNorm) poisoned on one
  // tensor-parallel rank only would otherwise split the ranks' decisions.
  const bool bad_here = !std::isfinite(r.grad_norm) || !std::isfinite(r.loss);
  if (any_rank(*g_.world, bad_here)) {
    r.skipped = true;
    r.bad_groups = nonfinite_groups();
    return r;
  }
  // The update itself must leave the parameters finite (an enormous
  // learning rate overflows them from finite gradients): checked before it
  // is applied, so a refused step leaves parameters and moments unchanged.
  const float scale = clip_coefficient(r.grad_norm, tc.clip);
  const std::vector<AdamW::Span> spans = adam_spans();  // one walk of the shards per step
  if (!adam_->update_certainly_finite(lr, scale, r.grad_norm, step + 1)) {
    adam_->count_nonfinite_update(spans, lr, scale, step + 1, scalars() + StepScalars::nonfinite_update);
    const bool ok = scalars_to_host(StepScalars::nonfinite_update, 1)[0] == 0;
    if (any_rank(*g_.world, !ok)) {
      r.skipped = true;
      r.update_nonfinite = true;
      r.bad_groups = {"the optimizer update: the learning rate is too large for the parameters"};
      return r;
    }
  }
  adam_->step(spans, lr, scale, step + 1);
  zero_->shards_updated();
  return r;
}

std::optional<double> Engine::eval_loss_sum(int64_t sequences, const BatchFn& batch, const EvalControl& control) {
  const int64_t mb = cfg_.parallel.micro_batch;
  const int64_t batches = (sequences + mb - 1) / mb;
  const int dp = g_.layout.dp;
  // Micro-batch k (sequences [k*mb, min((k+1)*mb, sequences))) goes to
  // data-parallel rank k % dp; every rank runs the same number of forwards
  // (ZeRO-3 gathers are collective) and discards its padding rounds.
  const int64_t rounds = (batches + dp - 1) / dp;
  // Rounds run in groups, between which the world agrees whether to stop:
  // one round without a pipeline, 2 pp rounds with one (the forwards of a
  // group overlap across stages; the agreement drains the pipeline).
  const int64_t group = g_.layout.pp == 1 ? 1 : 2 * int64_t{g_.layout.pp};
  // The loss sum accumulates on the device over the real micro-batches; one copy at the end.
  be_.fill(scalars() + StepScalars::loss, DType::f64, 0.0, 1);
  for (int64_t r0 = 0; r0 < rounds; r0 += group) {
    const int n = static_cast<int>(std::min(group, rounds - r0));
    executor_->run_forward(
        n,
        [&](int i, int32_t* tok, int32_t* tgt) {
          const int64_t k = (r0 + i) * dp + g_.coord.dp;
          const bool real = k < batches;
          const int64_t first = real ? k * mb : 0;
          const int64_t count = real ? std::min(mb, sequences - k * mb) : std::min(mb, sequences);
          local_batch(batch, first, count, tok, tgt);
          return count;
        },
        rank_.seq_len, [&](int i) { return (r0 + i) * dp + g_.coord.dp < batches; });
    if (r0 + n < rounds && control.stop) {
      if (any_rank(*g_.world, control.stop())) return std::nullopt;
    }
    if (control.progress) control.progress(std::min(sequences, (r0 + n) * dp * mb));
  }
  const double sum = scalars_to_host(StepScalars::loss, 1)[0];
  const double mine = rank_.stage.has_head() && g_.coord.tp == 0 ? sum : 0.0;
  return g_.world->all_reduce_sum(mine);
}

std::vector<float> Engine::gather_parameters() {
  std::vector<float> full(static_cast<size_t>(table_->total_floats()));
  zero_->gather_parameters(full.data());
  return full;
}

std::vector<std::pair<const ParamInfo*, std::vector<float>>> Engine::gather_global_parameters() {
  // 1. Every tp rank's local parameters (whole, after the dp gather); the
  //    stage's first rank scatters each shard's elements to global indices.
  const std::vector<float> local = gather_parameters();
  const int p = g_.layout.tp;
  std::vector<float> all(local.size() * static_cast<size_t>(p));
  g_.tp->all_gather(local.data(), all.data(), static_cast<int64_t>(local.size()), CommType::f32);
  std::vector<std::pair<const ParamInfo*, std::vector<float>>> mine;
  const bool stage_root = g_.coord.tp == 0 && g_.coord.dp == 0 && g_.coord.cp == 0;
  if (stage_root) {
    std::vector<ParamTable> tables;
    for (int r = 0; r < p; ++r) tables.emplace_back(spec_, rank_.unit_align(), p, r, rank_.stage);
    for (size_t k = 0; k < table_->entries().size(); ++k) {
      const ParamEntry& here = table_->entries()[k];
      std::vector<float> global(static_cast<size_t>(numel(here.info->shape)));
      for (int r = 0; r < p; ++r) {
        const ParamTable& table = tables[static_cast<size_t>(r)];
        const ParamEntry& e = table.entries()[k];
        ShardMap(table).gather(e, all.data() + static_cast<size_t>(r) * local.size() + e.offset, global.data());
      }
      mine.emplace_back(here.info, std::move(global));
    }
  }
  // 2. Each later stage's root sends its tensors to stage 0's root (world
  //    rank 0), which keeps the first copy of the tied embedding.
  if (g_.layout.pp == 1 || !stage_root) return g_.world->rank() == 0 ? mine : decltype(mine){};
  constexpr int kTag = 91;
  if (g_.coord.pp > 0) {
    for (const auto& [info, data] : mine) g_.pp->send(data.data(), static_cast<int64_t>(data.size() * sizeof(float)), 0, kTag);
    return {};
  }
  for (int s = 1; s < g_.layout.pp; ++s) {
    auto plan = stage_plan_of(g_.layout, cfg_.model.layers, s);
    ParamTable other(spec_, 16, 1, 0, *plan);
    for (const ParamEntry& e : other.entries()) {
      std::vector<float> data(static_cast<size_t>(numel(e.info->shape)));
      g_.pp->recv(data.data(), static_cast<int64_t>(data.size() * sizeof(float)), s, kTag);
      const bool have = std::any_of(mine.begin(), mine.end(), [&](const auto& m) { return m.first->name == e.info->name; });
      if (!have) mine.emplace_back(e.info, std::move(data));
    }
  }
  // The table's order (every tensor once).
  std::vector<std::pair<const ParamInfo*, std::vector<float>>> ordered;
  for (const ParamInfo& info : spec_.params()) {
    for (auto& m : mine) {
      if (m.first == &info || m.first->name == info.name) {
        ordered.emplace_back(&info, std::move(m.second));
        break;
      }
    }
  }
  return ordered;
}

MemoryReport Engine::memory() const { return memory_->report(); }

}  // namespace tera
