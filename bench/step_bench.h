// Pieces the multi-rank step benchmarks (tp_bench, cp_bench) share: the
// synthetic token stream they train on and the timed steps, each measured
// from a barrier with the groups' statistics reset, the first step dropped
// (page faults and first touch).
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <vector>

#include "comm/groups.h"
#include "core/rng.h"
#include "core/timer.h"
#include "train/engine.h"

namespace tera::bench {

// The benchmarked GPT and its step: command-line options with the
// benchmark's defaults, and the run config of one micro-batch per step.
struct StepModel {
  int64_t layers, hidden, heads, seq, batch, steps;
  void add_options(CLI::App& app, const std::string& seq_help = "") {
    app.add_option("--layers", layers)->capture_default_str();
    app.add_option("--hidden", hidden)->capture_default_str();
    app.add_option("--heads", heads)->capture_default_str();
    app.add_option("--seq", seq, seq_help)->capture_default_str();
    app.add_option("--batch", batch, "sequences per step (one micro-batch)")->capture_default_str();
    app.add_option("--steps", steps)->capture_default_str();
  }
  RunConfig config() const {
    RunConfig cfg;
    cfg.model = ModelConfig{.layers = layers, .hidden = hidden, .heads = heads, .seq_len = seq, .vocab = 256,
                            .ffn_hidden = 0, .vocab_align = 64};
    cfg.parallel.micro_batch = batch;
    cfg.parallel.dp = 1;
    cfg.train.global_batch = batch;
    cfg.train.lr = 1e-3f;
    return cfg;
  }
};

// Tokens and targets drawn uniformly from a vocabulary of 256, by global index.
inline BatchFn synthetic_tokens(int64_t seq) {
  return [seq](int64_t first, int64_t count, int32_t* tok, int32_t* tgt) {
    const PhiloxKey key = philox_key(5, "bench");
    for (int64_t i = 0; i < count * seq; ++i) {
      tok[i] = static_cast<int32_t>(philox_below(key, static_cast<uint64_t>(first * seq + i), 256));
      tgt[i] = static_cast<int32_t>(philox_below(key, static_cast<uint64_t>(first * seq + i + 7), 256));
    }
  };
}

struct StepTimes {
  double median_ms = 0;
  double median_wait_share = 0;  // of the step, blocked in `group`'s communication
  int64_t group_bytes = 0;        // `group` sent in the last step
};

// `steps` timed training steps (after one untimed) of engine at lr.
inline StepTimes timed_steps(Engine& engine, ProcessGroups& groups, Communicator& group, int64_t steps, float lr,
                             const BatchFn& data) {
  std::vector<double> ms, share;
  StepTimes out;
  for (int64_t s = 0; s < steps + 1; ++s) {
    groups.reset_stats();
    groups.groups().world->barrier();
    Stopwatch sw;
    engine.train_step(s, lr, data);
    const double t = sw.seconds();
    if (s == 0) continue;
    ms.push_back(1e3 * t);
    share.push_back(group.stats().wait_seconds / t);
    out.group_bytes = group.stats().bytes;
  }
  std::sort(ms.begin(), ms.end());
  std::sort(share.begin(), share.end());
  out.median_ms = ms[ms.size() / 2];
  out.median_wait_share = share[share.size() / 2];
  return out;
}

}  // namespace tera::bench
