// Emitters. Megatron has no ZeRO-2; ZeRO-1 is its distributed optimizer and
// ZeRO-3 maps to Megatron-Core's torch FSDP2 path; lines starting with '#'
// say so where the mapping is not one to one.
#include "plan/emit.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tera {

std::string emit_tera_config(const ParallelLayout& l, const Workload& w) {
  const ModelConfig& m = w.model;
  std::string s = "# Written by tera plan --emit tera\n[model]\n";
  s += fmt::format("layers = {}\nhidden = {}\nheads = {}\nseq_len = {}\nvocab = {}\n", m.layers, m.hidden, m.heads,
                   m.seq_len, m.vocab);
  if (m.ffn_hidden > 0) s += fmt::format("ffn_hidden = {}\n", m.ffn_hidden);
  if (m.kv() != m.heads) s += fmt::format("kv_heads = {}\n", m.kv());
  if (m.mlp != MlpKind::standard) s += fmt::format("mlp = \"{}\"\n", mlp_kind_name(m.mlp));
  s += fmt::format("\n[train]\nmicro_batch = {}\nglobal_batch = {}\nrecompute = \"{}\"\n", l.micro_batch,
                   w.global_batch, recompute_name(l.recompute));
  s += fmt::format("\n[parallel]\ntp = {}\npp = {}\ndp = {}\nzero = {}\nsequence_parallel = {}\nschedule = \"{}\"\n",
                   l.tp, l.pp, l.dp, l.zero, l.sequence_parallel ? "true" : "false", schedule_kind_name(l.schedule));
  if (l.vpp > 1) s += fmt::format("vpp = {}\n", l.vpp);
  if (!l.stage_layers.empty()) s += fmt::format("stage_layers = [{}]\n", fmt::join(l.stage_layers, ", "));
  return s;
}

std::string emit_megatron_args(const ParallelLayout& l, const Workload& w) {
  const ModelConfig& m = w.model;
  std::string s;
  auto arg = [&](const std::string& a) { s += (s.empty() || s.back() == '\n' ? "" : " ") + a; };
  arg(fmt::format("--num-layers {} --hidden-size {} --num-attention-heads {} --ffn-hidden-size {}", m.layers,
                  m.hidden, m.heads, m.ffn()));
  arg(fmt::format("--seq-length {} --max-position-embeddings {}", m.seq_len, m.seq_len));
  if (m.kv() != m.heads) arg(fmt::format("--group-query-attention --num-query-groups {}", m.kv()));
  if (m.mlp == MlpKind::gated) arg("--swiglu");
  arg(fmt::format("--tensor-model-parallel-size {} --pipeline-model-parallel-size {}", l.tp, l.pp));
  const bool even = l.stage_layers.empty() && m.layers % (int64_t{l.pp} * l.vpp) == 0;
  if (l.vpp > 1) arg(fmt::format("--num-layers-per-virtual-pipeline-stage {}", m.layers / (l.pp * l.vpp)));
  if (!even && l.pp > 1) {
    s += fmt::format("\n# note: this layout's virtual stages hold unequal layer counts ({}); Megatron-LM splits "
                     "layers evenly (uneven first/last stages only through --decoder-first/last-pipeline-num-layers)\n",
                     layout_string(l));
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
  if (w.precision == Precision::mixed) arg("--bf16");
  if (s.back() != '\n') s += '\n';
  return s;
}

}  // namespace tera
