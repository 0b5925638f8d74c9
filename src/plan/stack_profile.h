// Software stacks as named profiles (issue 19). A published run's throughput
// depends on its software as much as on its hardware: which kernels exist
// (fused/flash attention, dropout), which overlaps (tensor-parallel
// collectives behind GEMMs, FSDP's prefetched parameter gathers) and how close
// its kernels get to the hardware. A profile is chosen per run from its
// `framework` text; it states the software facts (not fitted) and carries a
// handful of physical parameters that `tera plan validate` fits by source
// (never per row):
//   gemm_scale      achievable GEMM and fused-attention rate, relative to the
//                   cluster preset's (kernel library, fusion, torch.compile);
//   overhead_scale  fixed time per kernel, relative to the preset's;
//   overlap_loss    what an overlapped collective takes from compute (hardware.h);
//   link_scale      achievable fraction of link bandwidth of its collectives,
//                   relative to the preset's (NCCL channels and buffer sizes,
//                   message sizes its bucketing produces).
// The preset values stand for the stack its calibration runs used (Megatron),
// so the Megatron profiles' defaults leave the preset unchanged.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/hardware.h"

namespace tera {

struct StackParams {
  double gemm_scale = 1;
  double overhead_scale = 1;
  double overlap_loss = -1;  // < 0: the preset's
  double link_scale = 1;
  // The rowwise-scaled fp8 GEMM's rate relative to the tensorwise one
  // (Efficiency::fp8_rowwise); only rows with rowwise fp8 constrain it.
  double fp8_rowwise_scale = 1;
  // The fp8 GEMMs' efficiency relative to the 16-bit ones' (Efficiency::fp8);
  // only rows with fp8 GEMMs constrain it.
  double fp8_scale = 1;
};

struct StackProfile {
  std::string name;
  std::optional<bool> flash_attention, dropout, tp_comm_overlap;  // unset: the preset's
  // Pipeline sends beside compute (hardware.h Stack::p2p_overlap); unset: the preset's.
  std::optional<bool> p2p_overlap;
  std::optional<bool> p2p_scatter_gather;  // hardware.h Stack::p2p_scatter_gather; unset: the preset's
  std::optional<bool> activations_16bit;  // hardware.h Stack; unset: the preset's
  // The highest ZeRO stage the stack implements (unset: any). Megatron-LM
  // before 2022 had none (its distributed optimizer came in 2022).
  std::optional<int> zero_stages;
  // Whether the stack has sequence parallelism (Korthikanti et al. 2022;
  // unset: it has). Megatron-LM before 2022 and the Megatron-DeepSpeed of
  // 2021-2022 runs had none: a run that does not say is priced without it.
  std::optional<bool> sequence_parallel;
  bool zero_per_tensor = false;  // ZeRO-3 collectives tensor by tensor (hardware.h Stack)
  // Whether the stack runs the ZB-H1 schedule (hardware.h Stack::zero_bubble;
  // unset: the preset's). False where the stack has no such schedule:
  // Megatron-LM and Megatron-Core (none in their mainline), torchtitan (its
  // zero-bubble schedules, InterleavedZeroBubble and ZBVZeroBubble, are the
  // multi-chunk ones tera does not build), DeepSpeed's ZeRO-3 runs and llm.c
  // (no pipeline); `plan --explain ...,schedule=zb-h1` still prices any
  // layout. True for tera (its runtime splits the backward: model/gpt.h).
  // Megatron-DeepSpeed has had an opt-in ZB-H1 (--enable-zbh1-pipeline)
  // since 2024, after the runs its profile was fitted on: unset, so a preset
  // with stack.zero_bubble = true prices it.
  std::optional<bool> zero_bubble;
  bool op_level_sac = false;  // hardware.h Stack::op_level_sac
  // The stack's own defaults for pipeline settings a run's description may
  // leave out (published_row.cpp reads them only where the row is silent):
  // micro-batches per step equal to the pipeline stages (torchtitan's
  // n_microbatches), and model chunks per stage of its interleaved schedule
  // (torchtitan's Interleaved1F1B: 2; 0: no default).
  bool microbatches_default_to_stages = false;
  int interleaved_vpp_default = 0;
  StackParams params;
};

// The profile a `framework` cell names: megatron-lm (2020-2022 Megatron-LM),
// megatron-core (Megatron-Core with Transformer Engine), megatron-deepspeed,
// torchtitan (torch FSDP2, SDPA flash attention, no dropout; AsyncTP when the
// text says "AsyncTP ON"; torchtitan-compile when it says "torch.compile ON"), llm.c (cuDNN flash attention, no dropout),
// deepspeed-zero3 (a row whose sharding column names DeepSpeed's ZeRO-3); any
// other text: "preset" (the cluster preset's stack unchanged). Every one of
// them keeps activations in 16 bits under bf16 (activations_16bit). The
// profile "tera" (no framework text selects it) is tera's own runtime: flash
// attention, no dropout, no TP overlap, tera's bf16.
StackProfile profile_for_framework(const std::string& framework, const std::string& sharding = "");
// A profile by name (profile_names()); an unknown name is an error naming them.
Expected<StackProfile> stack_profile(const std::string& name);
// Names of every profile, for fits and reports.
const std::vector<std::string>& profile_names();
// The engine a profile's stack runs on: profiles of one family share the
// runtime that schedules the passes, moves the data and steps the
// optimizer. "deepspeed": megatron-deepspeed and deepspeed-zero3 (both run
// under DeepSpeed's engine); "megatron": megatron-lm and megatron-core (the
// library Megatron-LM's schedules and optimizers were moved into);
// "torchtitan": torchtitan, eager or compiled. Any other profile is its own
// family. Leave-one-source-out prices a held-out profile that no other
// source ran with a fit on its family's other rows (validate.h).
std::string profile_family(const std::string& profile);
// The parameters fitted on the calibration files (docs/plan_validation.md;
// `tera plan validate --fit` recomputes them); neutral for a profile never fitted.
StackParams fitted_params(const std::string& profile);
// The cluster as the profile's stack runs on it.
Cluster apply_profile(const Cluster& cl, const StackProfile& p);

}  // namespace tera
