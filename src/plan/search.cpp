// Enumeration order: tp (divisors of both gpus and the node's GPU count,
// dividing heads, kv_heads, hidden and ffn), pp (divisors of gpus/tp up to the layer count),
// dp = gpus/(tp*pp) dividing the global batch, micro-batch (divisors of the
// per-replica batch), chunks (1, or every vpp >= 2 whose pp*vpp divides the
// layers when the micro-batch count is a multiple of pp: the search proposes
// equal chunks, as Megatron requires, while --explain, simulate and
// check_layout take any split the runtime runs), ZeRO 0-3 (0 alone
// without dp), sequence parallelism (with tp), recompute (selective only
// without flash attention, where it would equal none).
#include "plan/search.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace tera {

Evaluation evaluate_layout(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl) {
  Evaluation e;
  e.layout = l;
  const int64_t M = micro_batches(l, w);
  Schedule sch = make_schedule(l.schedule, l.pp, static_cast<int>(M), l.vpp).value();
  e.memory = memory_per_gpu(spec, l, w, cl);
  e.fits = e.memory.total() <= cl.gpu.memory_bytes;
  const StepCosts costs = price_step(spec, l, w, cl);
  e.sim = simulate_step(sch, costs, SimOptions{cl.stack.dp_overlap, cl.stack.p2p_overlap, cl.eff.overlap_loss});
  e.step_time_s = e.sim.step_time;
  const double tokens = static_cast<double>(w.global_batch * spec.config().seq_len);
  e.tokens_per_s = tokens / e.step_time_s;
  // Hardware FLOPs add what recompute re-runs: every block's forward (full)
  // or its attention scores and context, 4 T C per token per layer (selective).
  const ModelConfig& mc = spec.config();
  const double model_flops = tokens * spec.train_flops_per_token(false);
  double hw_flops = model_flops;
  if (l.recompute == Recompute::full) hw_flops = tokens * spec.train_flops_per_token(true);
  if (l.recompute == Recompute::selective) {
    hw_flops += tokens * 4.0 * static_cast<double>(mc.layers * mc.seq_len * mc.hidden);
  }
  e.tflops_per_gpu = model_flops / e.step_time_s / l.world() / 1e12;
  e.mfu = e.tflops_per_gpu * 1e12 / costs.peak_flops;
  e.hfu = hw_flops / e.step_time_s / l.world() / costs.peak_flops;
  e.bubble = e.sim.stages[static_cast<size_t>(e.sim.critical_stage)].wait / e.step_time_s;
  return e;
}

namespace {

std::vector<int> divisors(int64_t n, int64_t cap) {
  std::vector<int> d;
  for (int64_t i = 1; i <= std::min(n, cap); ++i) {
    if (n % i == 0) d.push_back(static_cast<int>(i));
  }
  return d;
}

template <typename T>
std::vector<T> choices(const std::optional<T>& fixed, std::vector<T> all) {
  if (fixed) return {*fixed};
  return all;
}

struct Candidate {
  ParallelLayout layout;
  double bound;
};

}  // namespace

SearchResult search_layouts(const ModelSpec& spec, const Workload& w, const Cluster& cl, int gpus,
                            const SearchSpace& space, int top) {
  const ModelConfig& m = spec.config();
  SearchResult r;
  std::vector<Candidate> cands;
  double smallest = 1e300;
  // Pass prices depend on (tp, cp, micro-batch, sp, recompute) only; the
  // memory tables cache what they reuse (memory_model.h).
  using Key = std::tuple<int, int, int, bool, Recompute>;
  MemoryTables tables(spec, w, cl);
  std::map<int, ParamSplit> splits;
  std::map<Key, PartCosts> parts;
  auto consider = [&](const ParallelLayout& l) {
    ++r.enumerated;
    const Key key{l.tp, l.cp, l.micro_batch, l.sequence_parallel, l.recompute};
    const MemoryBreakdown mem = tables.per_gpu(l);
    if (mem.total() < smallest) {
      smallest = mem.total();
      r.smallest = l;
      r.smallest_memory = mem;
    }
    if (mem.total() > cl.gpu.memory_bytes) return;
    ++r.fitting;
    auto p = parts.find(key);
    if (p == parts.end()) p = parts.emplace(key, price_parts(spec, l, w, cl)).first;
    auto split = splits.find(l.tp);
    if (split == splits.end()) {
      ParamSplit ps = param_split(spec, l.tp);
      ps.untied = w.untied_embeddings;
      split = splits.emplace(l.tp, ps).first;
    }
    const StepCosts costs = price_step(p->second, split->second, m.layers, l, w, cl);
    cands.push_back({l, step_time_lower_bound(costs, l.pp, l.vpp, micro_batches(l, w), !cl.stack.p2p_overlap)});
  };
  // Context parallelism is searched for long sequences on stacks with fused
  // attention: cp = 2, 4, ... while each rank keeps >= kMinCpTokens tokens
  // (shorter shares only add K/V traffic to what tp and dp already do).
  constexpr int64_t kMinCpTokens = 4096;
  std::vector<int> cps = {1};
  if (cl.stack.flash_attention && !space.tera_runtime) {
    for (int c = 2; m.seq_len / c >= kMinCpTokens && m.seq_len % (2 * c) == 0; c *= 2) cps.push_back(c);
  }
  for (int cp : choices(space.cp, cps)) {
  if (gpus % cp) continue;
  for (int tp : choices(space.tp, divisors(gpus / cp, cl.node.gpus))) {
    // Tensor-parallel groups stay inside a node: tp divides the node's GPUs.
    if (cl.node.gpus % tp || m.heads % tp || m.kv() % tp || m.hidden % tp || m.ffn() % tp || (gpus / cp) % tp) continue;
    for (int pp : choices(space.pp, divisors(gpus / (tp * cp), m.layers))) {
      if ((gpus / (tp * cp)) % pp || pp > m.layers) continue;
      const int dp = gpus / (tp * pp * cp);
      if (space.dp && *space.dp != dp) continue;
      if (w.global_batch % dp) continue;
      const int64_t per_replica = w.global_batch / dp;
      for (int mb : choices(space.micro_batch, divisors(per_replica, space.max_micro_batch))) {
        if (per_replica % mb) continue;
        const int64_t M = per_replica / mb;
        std::vector<int> vpps = {1};
        if (pp >= 2 && M % pp == 0) {
          for (int v = 2; v <= m.layers / pp; ++v) {
            if (m.layers % (static_cast<int64_t>(pp) * v) == 0) vpps.push_back(v);
          }
        }
        for (int vpp : choices(space.vpp, vpps)) {
          if (vpp > 1 && (pp < 2 || M % pp || m.layers % (static_cast<int64_t>(pp) * vpp))) continue;
          for (int zero : choices(space.zero, dp * cp > 1 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0})) {
            const bool sp_ok = tp > 1 && (m.seq_len / cp) % tp == 0;
            for (bool sp : choices(space.sequence_parallel, sp_ok ? std::vector<bool>{false, true} : std::vector<bool>{false})) {
              if (sp && !sp_ok) continue;
              std::vector<Recompute> rcs = {Recompute::none, Recompute::full};
              if (!cl.stack.flash_attention && !space.tera_runtime) rcs.insert(rcs.begin() + 1, Recompute::selective);
              for (Recompute rc : choices(space.recompute, rcs)) {
                ParallelLayout l;
                l.tp = tp;
                l.pp = pp;
                l.dp = dp;
                l.cp = cp;
                l.vpp = vpp;
                l.micro_batch = mb;
                l.zero = zero;
                l.sequence_parallel = sp;
                l.recompute = rc;
                l.schedule = vpp > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
                consider(l);
              }
            }
          }
        }
      }
    }
  }
  }
  std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) { return a.bound < b.bound; });
  const size_t k = static_cast<size_t>(std::max(top, 1));
  for (const Candidate& c : cands) {
    if (r.best.size() >= k && c.bound >= r.best.back().step_time_s) break;
    Evaluation e = evaluate_layout(spec, c.layout, w, cl);
    ++r.simulated;
    auto at = std::upper_bound(r.best.begin(), r.best.end(), e.step_time_s,
                               [](double t, const Evaluation& x) { return t < x.step_time_s; });
    r.best.insert(at, std::move(e));
    if (r.best.size() > k) r.best.pop_back();
  }
  return r;
}

}  // namespace tera
