// Stack profiles: the framework text -> profile mapping, and what a profile
// changes in a cluster preset. The default parameters are the fitted values
// (docs/plan_validation.md, `tera plan validate --fit`); a fit overrides them.
#include "plan/stack_profile.h"

#include "core/strings.h"

#include <algorithm>
#include <map>

namespace tera {

namespace {

bool has(const std::string& hay, const char* needle) { return contains_ignore_case(hay, needle); }

}  // namespace

const std::vector<std::string>& profile_names() {
  static const std::vector<std::string> names = {"megatron-lm", "megatron-core", "megatron-deepspeed",
                                                 "deepspeed-zero3", "torchtitan", "torchtitan-compile", "llm.c",
                                                 "tera", "preset"};
  return names;
}

std::string profile_family(const std::string& profile) {
  if (profile == "megatron-deepspeed" || profile == "deepspeed-zero3") return "deepspeed";
  if (profile == "megatron-lm" || profile == "megatron-core") return "megatron";
  if (profile == "torchtitan" || profile == "torchtitan-compile") return "torchtitan";
  return profile;
}

StackParams fitted_params(const std::string& profile) {
  // {gemm_scale, overhead_scale, overlap_loss, link_scale, fp8_rowwise_scale, fp8_scale}, from
  //   tera plan validate configs/calibration/published_runs.csv configs/calibration/published_runs_more.csv --fit
  // (bench/refit_profiles.sh rewrites the table between the markers).
  static const std::map<std::string, StackParams> kFitted = {
      // BEGIN FITTED
      {"deepspeed-zero3", {0.702, 9.979, 0.794, 1.000, 1.000, 1.000}},
      {"llm.c", {1.153, 0.100, 0.597, 1.000, 1.000, 1.000}},
      {"megatron-core", {1.000, 1.176, 0.046, 0.589, 1.000, 1.000}},
      {"megatron-deepspeed", {0.786, 0.996, 0.320, 1.000, 1.000, 1.000}},
      {"megatron-lm", {1.000, 0.427, 0.268, 1.025, 1.000, 1.000}},
      {"torchtitan", {0.859, 0.745, 0.024, 1.299, 1.000, 0.981}},
      {"torchtitan-compile", {0.822, 0.100, 0.217, 1.005, 0.648, 1.023}},
      // END FITTED
  };
  auto it = kFitted.find(profile);
  return it == kFitted.end() ? StackParams{} : it->second;
}

Expected<StackProfile> stack_profile(const std::string& name) {
  if (name == "tera") {
    StackProfile p;
    p.name = "tera";
    p.flash_attention = true;  // the runtime's default attention (model.attention = "flash")
    p.dropout = false;
    p.tp_comm_overlap = false;
    p.activations_16bit = false;
    p.zero_bubble = true;  // the runtime runs gpipe, 1f1b, interleaved and zb-h1
    p.params = fitted_params(p.name);
    return p;
  }
  // Each profile by a framework text that selects it (the facts live in one place).
  static const std::map<std::string, std::pair<const char*, const char*>> kText = {
      {"megatron-lm", {"Megatron-LM", ""}},
      {"megatron-core", {"Megatron-Core", ""}},
      {"megatron-deepspeed", {"DeepSpeed + Megatron-LM", ""}},
      {"deepspeed-zero3", {"DeepSpeed", "ZeRO-3 (DeepSpeed)"}},
      {"torchtitan", {"torchtitan", ""}},
      {"torchtitan-compile", {"torchtitan; torch.compile ON", ""}},
      {"llm.c", {"llm.c", ""}},
      {"preset", {"", ""}}};
  auto it = kText.find(name);
  if (it == kText.end()) {
    std::string names;
    for (const auto& n : profile_names()) names += (names.empty() ? "" : ", ") + n;
    return Status::error("unknown stack profile '" + name + "'; choose one of " + names);
  }
  return profile_for_framework(it->second.first, it->second.second);
}

StackProfile profile_for_framework(const std::string& fw, const std::string& sharding) {
  StackProfile p;
  if (has(sharding, "deepspeed") && has(sharding, "zero-3")) {
    p.name = "deepspeed-zero3";
    p.zero_per_tensor = true;  // DeepSpeed's ZeRO-3 gathers each parameter (no flat per-block buffer)
  } else if (has(fw, "torchtitan")) {
    // torch.compile fuses the elementwise ops into few kernels: a different
    // stack for the fitted parameters (kernel overhead above all).
    p.name = has(fw, "torch.compile on") ? "torchtitan-compile" : "torchtitan";
    p.flash_attention = true;  // SDPA's flash/cuDNN kernels
    p.dropout = false;
    p.tp_comm_overlap = has(fw, "asynctp on");
    p.op_level_sac = true;  // its "selective" activation checkpointing is op-level (hardware.h Stack)
    // Its pipeline defaults (train.py / config_manager.py): n_microbatches =
    // the pipeline degree, two stages per rank for Interleaved1F1B.
    p.microbatches_default_to_stages = true;
    p.interleaved_vpp_default = 2;
  } else if (has(fw, "llm.c")) {
    p.name = "llm.c";
    p.flash_attention = true;  // cuDNN flash attention (USE_CUDNN=1)
    p.dropout = false;
  } else if (has(fw, "deepspeed +") || has(fw, "megatron-deepspeed")) {
    p.name = "megatron-deepspeed";
    // DeepSpeed's PipelineEngine moves activations and gradients with
    // blocking torch.distributed send/recv between its compute steps.
    p.p2p_overlap = false;
    p.p2p_scatter_gather = false;  // and sends whole tensors, without Megatron's scatter/gather
    p.sequence_parallel = false;  // its Megatron fork predates sequence parallelism
  } else if (has(fw, "megatron-core") || contains_word_ignore_case(fw, "NeMo")) {
    // NVIDIA NeMo trains its LLMs on Megatron-Core with Transformer Engine.
    p.name = "megatron-core";
  } else if (has(fw, "megatron")) {
    p.name = "megatron-lm";
    if (has(fw, "2020") || has(fw, "2021")) {
      p.zero_stages = 0;
      p.sequence_parallel = false;
    }
  } else {
    p.name = "preset";
  }
  if (p.name != "preset") p.activations_16bit = true;
  if (p.name != "preset" && p.name != "megatron-deepspeed") p.zero_bubble = false;  // see stack_profile.h
  p.params = fitted_params(p.name);
  return p;
}

Cluster apply_profile(const Cluster& cl, const StackProfile& p) {
  Cluster c = cl;
  if (p.flash_attention) c.stack.flash_attention = *p.flash_attention;
  if (p.dropout) c.stack.dropout = *p.dropout;
  if (p.tp_comm_overlap) c.stack.tp_comm_overlap = *p.tp_comm_overlap;
  if (p.p2p_overlap) c.stack.p2p_overlap = *p.p2p_overlap;
  if (p.p2p_scatter_gather) c.stack.p2p_scatter_gather = *p.p2p_scatter_gather;
  if (p.activations_16bit) c.stack.activations_16bit = *p.activations_16bit;
  if (p.zero_per_tensor) c.stack.zero_per_tensor = true;
  if (p.op_level_sac) c.stack.op_level_sac = true;
  if (p.zero_bubble) c.stack.zero_bubble = *p.zero_bubble;
  c.eff.gemm_max = std::min(1.0, c.eff.gemm_max * p.params.gemm_scale);
  c.eff.flash = std::min(1.0, c.eff.flash * p.params.gemm_scale);
  c.eff.fp8_rowwise = p.params.fp8_rowwise_scale;
  c.eff.fp8 = p.params.fp8_scale;
  c.eff.kernel_overhead *= p.params.overhead_scale;
  if (p.params.overlap_loss >= 0) c.eff.overlap_loss = p.params.overlap_loss;
  c.eff.intra_link = std::min(1.0, c.eff.intra_link * p.params.link_scale);
  c.eff.inter_link = std::min(1.0, c.eff.inter_link * p.params.link_scale);
  return c;
}

}  // namespace tera
