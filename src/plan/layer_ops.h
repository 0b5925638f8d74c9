// The operations one GPU runs for one micro-batch: a transformer block, the
// embedding and the LM head, each as forward, backward and the extra work
// recompute adds to backward. GEMMs carry their shapes (the cost model's
// efficiency curve reads them), memory-bound ops their bytes moved, and
// tensor-parallel collectives their buffer sizes. Megatron-LM's kernel
// structure (Narayanan et al. 2021; Korthikanti et al. 2022): fused
// bias-GeLU, bias-dropout-add and scale-mask-softmax; flash attention when
// the stack has it. Shape legend as model_spec.h; N = B*T tokens, Ns = N/tp
// under sequence parallelism (else N), e = activation bytes.
#pragma once

#include <string>
#include <vector>

#include "model/model_spec.h"
#include "plan/collectives.h"

namespace tera {

enum class OpClass { gemm, attention, memory };
const char* op_class_name(OpClass c);

struct Op {
  const char* name;
  OpClass cls;
  double flops = 0;  // FLOPs performed (GEMMs, attention)
  double bytes = 0;  // bytes moved through HBM (memory-bound ops; a GEMM's operands)
  // GEMM C[m,n] += A[m,k] B[k,n], `batch` times; m = 0 for non-GEMMs.
  double m = 0, n = 0, k = 0, batch = 1;
  bool fused_attention = false;  // priced at the flash efficiency
  // A weight gradient (W in ZB-H1's split of the backward): a linear layer's
  // dW GEMM, whose kernel also sums the bias gradient, or the embedding
  // table's row gradients. Everything else in a backward is B.
  bool weight_grad = false;
  bool fp8 = false;          // an fp8 GEMM: priced at Efficiency::fp8 of the fp8 peak's GEMM rate
  bool fp8_rowwise = false;  // with rowwise scales: and at Efficiency::fp8_rowwise of that
};

struct CommOp {
  const char* name;
  Collective kind;
  double bytes;  // full buffer (all-reduce input, all-gather output, reduce-scatter input)
};

struct PassOps {
  std::vector<Op> ops;
  std::vector<CommOp> comm;     // tensor-parallel collectives
  std::vector<CommOp> cp_comm;  // context-parallel K/V exchange (over the cp group)
};

struct OpsOptions {
  int64_t B = 1, T = 1;  // T: this rank's tokens of each sequence (seq_len / cp)
  int tp = 1;
  int cp = 1;            // context parallelism: queries of T tokens attend to cp * T keys
  bool sequence_parallel = false;
  Recompute recompute = Recompute::none;
  bool flash_attention = false;
  bool dropout = false;
  int64_t act_bytes = 2;
  // fp8 linear layers: each GEMM's inputs are scaled and cast first (an amax
  // read, then a read and a 1-byte write per element: 2e + 1 bytes).
  bool fp8_gemms = false;
  // Rowwise scales (Workload::fp8_rowwise): the GEMMs are the rowwise
  // kernel's (Op::fp8_rowwise), and the backward casts each operand again
  // along its other axis (dY twice: rows for dX, columns for dW; X and W once).
  bool fp8_rowwise = false;
  bool op_level_sac = false;  // Stack::op_level_sac: what selective recompute re-runs
};

struct PartOps {
  PassOps fwd;
  PassOps bwd;        // backward proper
  PassOps recompute;  // what the recompute policy re-runs inside backward
};

// A backward as ZB-H1 splits it (partition/schedule.h): W, the ops marked
// weight_grad, with no collective (no W needs one); B, the rest with every
// tensor- and context-parallel collective (the dX GEMMs, attention backward,
// memory-bound ops). B's and W's ops together are the backward's.
struct SplitBackward {
  PassOps input;   // B
  PassOps weight;  // W
};
SplitBackward split_backward(const PassOps& bwd);

PartOps block_ops(const ModelSpec& spec, const OpsOptions& o);
PartOps embedding_ops(const ModelSpec& spec, const OpsOptions& o);
PartOps head_ops(const ModelSpec& spec, const OpsOptions& o);  // final norm, logits, cross-entropy

// Sum of GEMM and attention FLOPs of a pass (tests compare with ModelSpec).
double pass_flops(const PassOps& p);

}  // namespace tera
