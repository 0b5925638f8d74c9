// The layout check; see layout_check.h.
#include "partition/layout_check.h"

#include <fmt/format.h>

#include "partition/context_split.h"
#include "partition/stage_plan.h"

namespace tera {

namespace {

// The degrees' own ranges; the other checks assume they hold.
void check_ranges(const ParallelLayout& l, std::vector<std::string>& bad) {
  if (l.tp < 1 || l.tp > 4096) bad.push_back(fmt::format("parallel.tp = {} must lie in [1, 4096]", l.tp));
  if (l.pp < 1 || l.pp > 4096) bad.push_back(fmt::format("parallel.pp = {} must lie in [1, 4096]", l.pp));
  if (l.dp < 0 || l.dp > 1000000) {
    bad.push_back(fmt::format("parallel.dp = {} must lie in [1, 1000000] (or 0 / left out to derive it from the world "
                              "size)", l.dp));
  }
  if (l.cp < 1 || l.cp > 4096) bad.push_back(fmt::format("context parallelism cp = {} must lie in [1, 4096]", l.cp));
  if (l.vpp < 1 || l.vpp > 4096) bad.push_back(fmt::format("parallel.vpp = {} must lie in [1, 4096]", l.vpp));
  if (l.micro_batch < 1) bad.push_back(fmt::format("train.micro_batch = {} must be positive", l.micro_batch));
  if (l.zero < 0 || l.zero > 3) bad.push_back(fmt::format("parallel.zero = {} must be 0, 1, 2 or 3", l.zero));
}

// tp x cp x pp x dp against the world size.
void check_world(const ParallelLayout& l, int world, std::vector<std::string>& bad) {
  const int fixed = l.tp * l.cp * l.pp;
  const std::string cp = l.cp > 1 ? fmt::format(" * cp ({})", l.cp) : "";
  if (l.dp == 0) {
    if (world % fixed != 0) {
      bad.push_back(fmt::format(
          "world size {} is not divisible by parallel.tp ({}) * parallel.pp ({}){} = {}, so parallel.dp cannot be "
          "derived; launch a multiple of {} ranks or change tp/pp",
          world, l.tp, l.pp, cp, fixed, fixed));
    }
  } else if (l.world() != world) {
    bad.push_back(fmt::format(
        "parallel.tp ({}) * parallel.pp ({}) * parallel.dp ({}){} = {} != world size {}; launch {} ranks or change "
        "the degrees (leave parallel.dp out to derive it)",
        l.tp, l.pp, l.dp, cp, l.world(), world, l.world()));
  }
}

// Tensor parallelism splits heads, key/value heads, the hidden width and the
// MLP width; sequence and context parallelism split the sequence.
void check_model_split(const ParallelLayout& l, const ModelConfig& m, std::vector<std::string>& bad) {
  std::vector<std::string> undivided;
  auto need = [&](const std::string& what, int64_t n) {
    if (n % l.tp != 0) undivided.push_back(fmt::format("{} = {}", what, n));
  };
  need("model.heads", m.heads);
  need("model.hidden", m.hidden);
  need("the MLP width (model.ffn_hidden, or 4 * hidden)", m.ffn());
  if (!undivided.empty()) {
    std::string list;
    for (size_t i = 0; i < undivided.size(); ++i) {
      list += (i == 0 ? "" : (i + 1 == undivided.size() ? " or " : ", ")) + undivided[i];
    }
    bad.push_back(fmt::format("parallel.tp = {} does not divide {}; choose a tp that divides {}", l.tp, list,
                              undivided.size() == 1 ? "it" : "them"));
  }
  if (m.kv() != m.heads && m.heads % l.tp == 0 && m.kv() % l.tp != 0 && l.tp % m.kv() != 0) {
    // Each rank holds whole key/value heads: kv_heads / tp of them, or (tp a
    // multiple of kv_heads) the one its query heads read, replicated.
    bad.push_back(fmt::format("parallel.tp = {} neither divides model.kv_heads = {} (each rank holding kv_heads / tp "
                              "key/value heads) nor is a multiple of it (each key/value head replicated on tp / "
                              "kv_heads ranks); choose a tp that divides or is a multiple of {}",
                              l.tp, m.kv(), m.kv()));
  }
  if (const std::string why = ContextSplit::check(m.seq_len, l.cp); l.cp >= 1 && !why.empty()) {
    bad.push_back(fmt::format("parallel.cp = {} with model.seq_len = {}: {}; change seq_len or cp", l.cp, m.seq_len, why));
  }
  if (l.sequence_parallel && (m.seq_len / l.cp) % l.tp != 0) {
    bad.push_back(fmt::format(
        "parallel.sequence_parallel = true needs model.seq_len{} = {} divisible by parallel.tp = {}; change seq_len or "
        "tp, or turn sequence parallelism off",
        l.cp > 1 ? fmt::format(" / cp ({})", l.cp) : "", m.seq_len / l.cp, l.tp));
  }
}

// The pipeline: schedule kind against vpp, and the layers of each virtual stage.
void check_pipeline(const ParallelLayout& l, const ModelConfig& m, std::vector<std::string>& bad) {
  if (l.schedule == ScheduleKind::interleaved && (l.pp < 2 || l.vpp < 2)) {
    bad.push_back(fmt::format(
        "parallel.schedule = \"interleaved\" needs parallel.pp >= 2 and parallel.vpp >= 2 virtual chunks per stage "
        "(got pp {}, vpp {})", l.pp, l.vpp));
  }
  if (l.schedule != ScheduleKind::interleaved && l.vpp != 1) {
    bad.push_back(fmt::format("parallel.vpp = {} needs parallel.schedule = \"interleaved\"", l.vpp));
  }
  if (l.shard > 0 && l.dp_cp() > 0) {
    if (l.dp_cp() % l.shard != 0) {
      bad.push_back(fmt::format("shard = {} (hybrid sharding) must divide the ranks holding the same parameters, dp x "
                                "cp = {}; choose a divisor of {} (one node's worth of them, as a rule)",
                                l.shard, l.dp_cp(), l.dp_cp()));
    } else if (l.hybrid_shard() && l.shard < 2) {
      bad.push_back("shard = 1 shards nothing (every rank a replica); leave shard out and use zero = 0");
    } else if (l.hybrid_shard() && l.zero < 1) {
      bad.push_back(fmt::format("shard = {} (hybrid sharding) splits ZeRO's states; it needs zero >= 1 (got zero = 0)",
                                l.shard));
    }
  }
  if (!l.reshard_after_forward && l.zero != 3) {
    bad.push_back(fmt::format("reshard=0 (FSDP's reshard_after_forward off) keeps ZeRO-3's gathered parameters; it "
                              "needs zero = 3 (got zero = {})", l.zero));
  }
  if (l.schedule == ScheduleKind::zb_h1 && l.recompute != Recompute::none) {
    // W reads each block's saved activations after its B; recomputation drops them.
    bad.push_back(fmt::format("parallel.schedule = \"zb-h1\" with train.recompute = \"{}\": zb-h1 computes each "
                              "block's weight gradients after its backward, from the block's saved activations, "
                              "which recomputation drops; set train.recompute = \"none\" or parallel.schedule = "
                              "\"1f1b\"",
                              recompute_name(l.recompute)));
  }
  if (auto per = layers_per_virtual_stage(m.layers, l.pp, l.vpp, l.stage_layers); !per) bad.push_back(per.error());
}

// The global batch against micro-batch x dp, and the schedule's micro-batch count.
// dp 0: not known yet (only the micro-batch is checked).
void check_batch(const ParallelLayout& l, int dp, int64_t G, std::vector<std::string>& bad) {
  if (dp <= 0) {
    if (G % l.micro_batch != 0) {
      const int64_t lo = G / l.micro_batch * l.micro_batch;
      bad.push_back(fmt::format(
          "train.global_batch = {} is not a multiple of train.micro_batch = {}; set train.global_batch to a "
          "multiple such as {}",
          G, l.micro_batch, lo > 0 ? lo : l.micro_batch));
    }
    return;
  }
  const int64_t per_step = int64_t{l.micro_batch} * dp;
  if (G % per_step != 0) {
    bad.push_back(fmt::format(
        "train.global_batch = {} is not a multiple of train.micro_batch ({}) x data-parallel degree ({}) = {}; "
        "every data-parallel rank needs a whole number of micro-batches",
        G, l.micro_batch, dp, per_step));
    return;
  }
  const int64_t M = G / per_step;
  if (Status s = check_schedule(l.schedule, l.pp, M, l.vpp); !s) {
    bad.push_back(fmt::format("the pipeline schedule for {} micro-batches per data-parallel rank "
                              "(train.global_batch / (micro_batch x dp)): {}",
                              M, s.message()));
  }
}

}  // namespace

Status check_layout(const ParallelLayout& l, const ModelConfig& m, int64_t global_batch, int world) {
  std::vector<std::string> bad;
  check_ranges(l, bad);
  if (bad.empty()) {
    if (world > 0) check_world(l, world, bad);
    check_model_split(l, m, bad);
    check_pipeline(l, m, bad);
    if (global_batch > 0) {
      const int fixed = l.tp * l.cp * l.pp;
      const int dp = l.dp > 0 ? l.dp : (world > 0 && world % fixed == 0 ? world / fixed : 0);
      check_batch(l, dp, global_batch, bad);
    }
  }
  if (bad.empty()) return ok_status();
  std::string msg = bad[0];
  for (size_t i = 1; i < bad.size(); ++i) msg += "; also, " + bad[i];
  return Status::error(msg);
}

int64_t micro_batches_per_step(const ParallelLayout& l, int64_t global_batch) {
  return global_batch / (int64_t{l.dp} * l.micro_batch);
}

std::vector<int64_t> virtual_stage_layers(const ParallelLayout& l, int64_t layers) {
  std::vector<int64_t> out(static_cast<size_t>(l.virtual_stages()));
  for (int v = 0; v < l.virtual_stages(); ++v) out[static_cast<size_t>(v)] = layers_in_virtual_stage(l, layers, v);
  return out;
}

int64_t layers_in_virtual_stage(const ParallelLayout& l, int64_t layers, int v) {
  if (!l.stage_layers.empty()) return l.stage_layers[static_cast<size_t>(v)];
  const int64_t V = l.virtual_stages();
  return layers / V + (v < layers % V ? 1 : 0);
}

}  // namespace tera
