// Enumeration order: cp, tp (divisors of both gpus and the node's GPU
// count), pp (divisors of gpus/tp up to the layer count), dp = gpus/(tp*pp*cp)
// dividing the global batch, micro-batch (divisors of the per-replica batch),
// chunks, schedule, ZeRO 0-3 (0 alone without dp or cp), sequence parallelism
// (with tp), recompute. Every candidate passes two rules, each named once:
// check_layout (partition/layout_check.h: what the runtime runs, the check
// --explain, simulate and `tera train` apply) and megatron_narrowing below
// (the search's conventions: equal interleaved chunks, as Megatron requires,
// key/value groups divided over tp, cp only where it pays). A layout a rule
// drops is neither priced nor counted.
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

// Context parallelism is searched for long sequences on stacks with fused
// attention: cp = 2, 4, ... while each rank keeps >= kMinCpTokens tokens
// (shorter shares only add K/V traffic to what tp and dp already do).
constexpr int64_t kMinCpTokens = 4096;

// The search's own narrowing, Megatron's conventions rather than the
// runtime's limits (check_layout decides what runs): tensor-parallel groups
// inside a node, the key/value heads split over them, sequence parallelism
// only with tp dividing the sequence; interleaving only when the
// micro-batches are a multiple of pp and the layers split evenly over the
// pp * vpp chunks; context
// parallelism only on a stack with fused attention and >= kMinCpTokens per
// rank, never for tera's runtime; selective recompute only without fused
// attention (where it would equal none) and never for tera's runtime.
bool megatron_narrowing(const ParallelLayout& l, const Workload& w, const Cluster& cl, const SearchSpace& space) {
  const ModelConfig& m = w.model;
  if (cl.node.gpus % l.tp) return false;
  // Megatron divides the key/value groups over tp (the runtime can replicate them).
  if (m.kv() % l.tp) return false;
  if (l.sequence_parallel && (l.tp < 2 || (m.seq_len / l.cp) % l.tp)) return false;
  // A fixed vpp (a published run's own, split as its stack splits) keeps uneven chunks.
  if (l.vpp > 1 && (l.pp < 2 || micro_batches(l, w) % l.pp ||
                    (!space.vpp && m.layers % (static_cast<int64_t>(l.pp) * l.vpp)))) {
    return false;
  }
  // What the space fixes (a published run's own cp or recompute) is kept.
  if (!space.cp && l.cp > 1 && (!cl.stack.flash_attention || m.seq_len / l.cp < kMinCpTokens)) {
    return false;
  }
  if (!space.recompute && l.recompute == Recompute::selective && (cl.stack.flash_attention || space.tera_runtime)) {
    return false;
  }
  return true;
}

// The schedules searched for a layout's pp and vpp: interleaved with virtual
// chunks; else 1F1B, and ZB-H1 beside it where there is a pipeline and the
// stack runs it (check_layout then keeps zb-h1 without recomputation only:
// its W reads each block's saved activations). GPipe is never faster nor smaller
// than 1F1B; `--explain ...,schedule=` prices any.
std::vector<ScheduleKind> schedule_choices(const ParallelLayout& l, const Cluster& cl) {
  if (l.vpp > 1) return {ScheduleKind::interleaved};
  if (l.pp > 1 && cl.stack.zero_bubble) return {ScheduleKind::one_f_one_b, ScheduleKind::zb_h1};
  return {ScheduleKind::one_f_one_b};
}

// Every layout of the space on `gpus` GPUs that the runtime's check accepts
// and the search's narrowing keeps, in the order of the file comment.
std::vector<ParallelLayout> enumerate_layouts(const Workload& w, const Cluster& cl, int gpus, const SearchSpace& space) {
  const ModelConfig& m = w.model;
  std::vector<int> cps = {1};
  for (int c = 2; m.seq_len / c >= kMinCpTokens && m.seq_len % (2 * c) == 0; c *= 2) cps.push_back(c);
  std::vector<ParallelLayout> out;
  ParallelLayout l;
  for (int cp : choices(space.cp, cps)) {
    if (gpus % cp) continue;
    l.cp = cp;
    for (int tp : choices(space.tp, divisors(gpus / cp, cl.node.gpus))) {
      l.tp = tp;
      for (int pp : choices(space.pp, divisors(gpus / (tp * cp), m.layers))) {
        if ((gpus / (tp * cp)) % pp) continue;
        l.pp = pp;
        l.dp = gpus / (tp * pp * cp);
        if ((space.dp && *space.dp != l.dp) || w.global_batch % l.dp) continue;
        const int64_t per_replica = w.global_batch / l.dp;
        for (int mb : choices(space.micro_batch, divisors(per_replica, space.max_micro_batch))) {
          l.micro_batch = mb;
          std::vector<int> vpps = {1};
          for (int v = 2; pp >= 2 && v <= m.layers / pp; ++v) vpps.push_back(v);
          for (int vpp : choices(space.vpp, vpps)) {
            l.vpp = vpp;
            for (ScheduleKind kind : schedule_choices(l, cl)) {
              l.schedule = kind;
              for (int zero : choices(space.zero, l.dp * cp > 1 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0})) {
                l.zero = zero;
                l.reshard_after_forward = zero < 3 || space.reshard_after_forward.value_or(true);
                for (int shard : shard_choices(l, cl, space)) {
                  l.shard = shard;
                  for (bool sp : choices(space.sequence_parallel, tp > 1 ? std::vector<bool>{false, true}
                                                                         : std::vector<bool>{false})) {
                    l.sequence_parallel = sp;
                    for (Recompute rc : choices(space.recompute, {Recompute::none, Recompute::selective, Recompute::full})) {
                      l.recompute = rc;
                      if (megatron_narrowing(l, w, cl, space) && check_layout(l, w, gpus)) out.push_back(l);
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace

std::vector<int> shard_choices(const ParallelLayout& l, const Cluster& cl, const SearchSpace& space) {
  using S = SearchSpace::Sharding;
  const int n = l.dp_cp();
  if (space.zero_replicas) {
    const int r = *space.zero_replicas;
    if (r <= 1) return {0};
    if (l.zero < 1 || n % r != 0 || n / r < 2) return {};
    return {n / r};
  }
  if (space.sharding == S::whole || l.zero < 1) return {0};
  const int node_group = l.tp < cl.node.gpus && cl.node.gpus % l.tp == 0 ? cl.node.gpus / l.tp : 0;
  const bool hybrid = node_group >= 2 && n > node_group && n % node_group == 0;
  if (space.sharding == S::node) return hybrid ? std::vector<int>{node_group} : std::vector<int>{};
  return hybrid ? std::vector<int>{0, node_group} : std::vector<int>{0};
}

SearchResult search_layouts(const ModelSpec& spec, const Workload& w, const Cluster& cl, int gpus,
                            const SearchSpace& space, int top) {
  SearchResult r;
  std::vector<Candidate> cands;
  double smallest = 1e300;
  // Pass prices depend on (tp, cp, micro-batch, sp, recompute) only; the
  // memory tables cache what they reuse (memory_model.h).
  using Key = std::tuple<int, int, int, bool, Recompute>;
  MemoryTables tables(spec, w, cl);
  std::map<int, ParamSplit> splits;
  std::map<Key, PartCosts> parts;
  for (const ParallelLayout& l : enumerate_layouts(w, cl, gpus, space)) {
    ++r.enumerated;
    const MemoryBreakdown mem = tables.per_gpu(l);
    if (mem.total() < smallest) {
      smallest = mem.total();
      r.smallest = l;
      r.smallest_memory = mem;
    }
    if (mem.total() > cl.gpu.memory_bytes) continue;
    ++r.fitting;
    const Key key{l.tp, l.cp, l.micro_batch, l.sequence_parallel, l.recompute};
    auto p = parts.find(key);
    if (p == parts.end()) p = parts.emplace(key, price_parts(spec, l, w, cl)).first;
    auto split = splits.find(l.tp);
    if (split == splits.end()) {
      ParamSplit ps = param_split(spec, l.tp);
      ps.untied = w.untied_embeddings;
      split = splits.emplace(l.tp, ps).first;
    }
    const StepCosts costs = price_step(p->second, split->second, spec.config().layers, l, w, cl);
    cands.push_back({l, step_time_lower_bound(costs, l.pp, l.vpp, micro_batches(l, w), !cl.stack.p2p_overlap,
                                              splits_backward(l.schedule))});
  }
  // The k fastest by simulation, bounds first: a candidate whose lower bound
  // is no better than the k-th simulated time cannot enter.
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
