// Emitters. A tera config is what `tera train` allocates and runs: every
// model key the plan priced, the precision, attention and recompute it
// priced, or a refusal where the runtime has no such thing (selective
// recompute, fp8; context parallelism without flash attention). Megatron has no ZeRO-2; ZeRO-1 is
// its distributed optimizer and ZeRO-3 maps to Megatron-Core's torch FSDP2
// path; lines starting with '#' say so where the mapping is not one to one.
#include "plan/emit.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tera {

Expected<std::string> emit_tera_config(const ParallelLayout& l, const Workload& w, const Cluster& cl) {
  const ModelConfig& m = w.model;
  const std::string layout = layout_string(l);
  if (l.cp > 1 && !cl.stack.flash_attention) {
    return Status::error(fmt::format("--emit tera: {} uses context parallelism (cp = {}) without flash attention; tera's "
                                     "ring attention runs the flash kernels: plan with --emit tera or --explain cp=1",
                                     layout, l.cp));
  }
  if (l.recompute == Recompute::selective) {
    return Status::error(fmt::format("--emit tera: {} recomputes selectively, which tera's runtime does not "
                                     "(train.recompute is \"none\" or \"full\"); plan with --emit tera or --explain "
                                     "recompute=full",
                                     layout));
  }
  if (w.fp8_gemms) return Status::error("--emit tera: the plan prices fp8 GEMMs, which tera's runtime does not have");
  if (l.hybrid_shard()) {
    return Status::error(fmt::format("--emit tera: {} shards ZeRO's states over groups of {} ranks and replicates them "
                                     "(hybrid sharding), which tera's runtime does not (it shards over all {} ranks "
                                     "holding the same parameters); plan with --explain without shard",
                                     layout, l.shard, l.dp_cp()));
  }
  if (!l.reshard_after_forward) {
    return Status::error(fmt::format("--emit tera: {} keeps FSDP's gathered parameters from forward to backward "
                                     "(reshard=0), which tera's runtime does not (its ZeRO-3 gathers each block again "
                                     "for the backward); plan with --explain ...,reshard=1",
                                     layout));
  }
  // Precision bf16 is train.precision = "bf16"; on a stack without
  // activations_16bit the plan priced exactly what the runtime allocates.
  const bool bf16 = w.precision == Precision::bf16;
  std::string s = "# Written by tera plan --emit tera: layout " + layout + "\n[model]\n";
  s += fmt::format("arch = \"{}\"\nlayers = {}\nhidden = {}\nheads = {}\nseq_len = {}\nvocab = {}\nvocab_align = {}\n",
                   arch_name(m.arch), m.layers, m.hidden, m.heads, m.seq_len, m.vocab, m.vocab_align);
  if (m.ffn_hidden > 0) s += fmt::format("ffn_hidden = {}\n", m.ffn_hidden);
  if (m.kv() != m.heads) s += fmt::format("kv_heads = {}\n", m.kv());
  if (m.mlp != MlpKind::standard) s += fmt::format("mlp = \"{}\"\n", mlp_kind_name(m.mlp));
  if (m.arch == Arch::llama) s += fmt::format("rope_theta = {}\nnorm_eps = {}\n", m.rope_theta, m.norm_eps);
  if (m.arch == Arch::llama && m.rope_scaling.llama3) {
    const auto& r = m.rope_scaling;
    s += fmt::format("rope_scaling = \"llama3\"\nrope_factor = {}\nrope_low_freq_factor = {}\nrope_high_freq_factor = {}\n"
                     "rope_original_seq_len = {}\n",
                     r.factor, r.low_freq_factor, r.high_freq_factor, r.original_max_positions);
  }
  s += fmt::format("tie_embeddings = {}\n", w.untied_embeddings ? "false" : "true");
  s += fmt::format("attention = \"{}\"\n", cl.stack.flash_attention ? "flash" : "naive");
  s += fmt::format("\n[train]\nmicro_batch = {}\nglobal_batch = {}\nrecompute = \"{}\"\nprecision = \"{}\"\n",
                   l.micro_batch, w.global_batch, recompute_name(l.recompute), bf16 ? "bf16" : "fp32");
  if (bf16 && cl.stack.activations_16bit) {
    s += "# priced as the cluster's stack runs bf16 (every activation in 16 bits); tera's bf16 keeps fp32 "
         "activations where docs/precision.md says: plan with --stack tera to price what this config allocates\n";
  }
  if (cl.stack.dropout) s += "# priced with dropout masks, which tera's runtime does not keep\n";
  s += fmt::format("\n[parallel]\ntp = {}\npp = {}\ndp = {}\nzero = {}\nsequence_parallel = {}\nschedule = \"{}\"\n",
                   l.tp, l.pp, l.dp, l.zero, l.sequence_parallel ? "true" : "false", schedule_kind_name(l.schedule));
  if (l.cp > 1) s += fmt::format("cp = {}\n", l.cp);
  if (l.vpp > 1) s += fmt::format("vpp = {}\n", l.vpp);
  if (!l.stage_layers.empty()) s += fmt::format("stage_layers = [{}]\n", fmt::join(l.stage_layers, ", "));
  s += "\n[data]\n# train = \"shards/\"  (required: token shards from `tera tokenize encode`, or a text file)\n";
  return s;
}

std::string emit_megatron_args(const ParallelLayout& l, const Workload& w, const Cluster& cl) {
  const ModelConfig& m = w.model;
  std::string s;
  auto arg = [&](const std::string& a) { s += (s.empty() || s.back() == '\n' ? "" : " ") + a; };
  arg(fmt::format("--num-layers {} --hidden-size {} --num-attention-heads {} --ffn-hidden-size {}", m.layers,
                  m.hidden, m.heads, m.ffn()));
  arg(fmt::format("--seq-length {} --max-position-embeddings {}", m.seq_len, m.seq_len));
  if (m.kv() != m.heads) arg(fmt::format("--group-query-attention --num-query-groups {}", m.kv()));
  if (m.mlp == MlpKind::gated) arg("--swiglu");
  if (m.arch == Arch::llama) {
    // Llama: rotary positions (rotate-half), RMSNorm, no biases.
    arg(fmt::format("--position-embedding-type rope --rotary-base {} --normalization RMSNorm --norm-epsilon {} "
                    "--disable-bias-linear",
                    m.rope_theta, m.norm_eps));
  }
  if (w.untied_embeddings) arg("--untie-embeddings-and-output-weights");
  if (!cl.stack.dropout) arg("--attention-dropout 0 --hidden-dropout 0");
  arg(fmt::format("--tensor-model-parallel-size {} --pipeline-model-parallel-size {}", l.tp, l.pp));
  if (l.cp > 1) arg(fmt::format("--context-parallel-size {}", l.cp));
  const bool even = l.stage_layers.empty() && m.layers % (int64_t{l.pp} * l.vpp) == 0;
  if (l.vpp > 1) arg(fmt::format("--num-layers-per-virtual-pipeline-stage {}", m.layers / (l.pp * l.vpp)));
  if (!even && l.pp > 1) {
    s += fmt::format("\n# note: this layout's virtual stages hold unequal layer counts ({}); Megatron-LM splits "
                     "layers evenly (uneven first/last stages only through --decoder-first/last-pipeline-num-layers)\n",
                     layout_string(l));
  }
  if (l.hybrid_shard()) {
    s += fmt::format("\n# note: shard={} is hybrid sharding (ZeRO's states sharded over groups of {} data-parallel "
                     "ranks, replicated {} times); these arguments shard over the whole data-parallel group: set your "
                     "stack's own option for it (Megatron-Core's partial distributed optimizer, FSDP2's HSDP)\n",
                     l.shard, l.shard, l.zero_replicas());
  }
  if (!l.reshard_after_forward) {
    s += "\n# note: reshard=0 is FSDP's reshard_after_forward=False (torchtitan, PyTorch FSDP2); Megatron-Core's torch "
         "FSDP2 path takes it from its FSDP configuration, not from these arguments\n";
  }
  if (l.schedule == ScheduleKind::zb_h1) {
    s += "\n# note: Megatron-LM has no ZB-H1 schedule (these arguments run 1F1B); sail-sg's zero-bubble fork of "
         "Megatron-LM and Megatron-DeepSpeed (--enable-zbh1-pipeline) have one\n";
  }
  if (l.sequence_parallel) arg("--sequence-parallel");
  arg(fmt::format("--micro-batch-size {} --global-batch-size {}", l.micro_batch, w.global_batch));
  if (l.recompute == Recompute::selective) arg("--recompute-activations");
  if (l.recompute == Recompute::full) arg("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
  if (l.zero == 1) arg("--use-distributed-optimizer");
  if (l.zero == 2) {
    arg("--use-distributed-optimizer");
    s += "\n# note: Megatron-LM has no ZeRO-2; the distributed optimizer (ZeRO-1) is the nearest\n";
  }
  if (l.zero == 3) {
    arg("--use-torch-fsdp2");
    s += "\n# note: ZeRO-3 maps to Megatron-Core's torch FSDP2 path (--use-torch-fsdp2)\n";
  }
  if (w.precision == Precision::bf16) arg("--bf16");
  if (w.fp8_gemms) arg("--fp8-format hybrid");
  if (s.back() != '\n') s += '\n';
  return s;
}

}  // namespace tera
