// Cluster presets: one accelerator type, its node (links inside a node, NICs
// per node), the calibrated efficiencies and the software stack the cost model
// assumes. Read from TOML (configs/clusters/*.toml); every field is checked
// and a bad one is named with its file and key. Units inside: SI (FLOP/s,
// bytes, bytes/s, seconds); the TOML files use TFLOP/s, GB/s, GiB and us.
#pragma once

#include <string>

#include "core/status.h"

namespace tera {

// Bytes in a GiB: memory sizes are read and printed in GiB.
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct GpuSpec {
  std::string name;
  double peak_flops_16 = 0;  // dense bf16/fp16 tensor FLOP/s; 0: no 16-bit support
  double peak_flops_32 = 0;  // dense fp32 FLOP/s
  double peak_flops_8 = 0;   // dense fp8 tensor FLOP/s; 0: no fp8 support
  double memory_bytes = 0;   // device memory per GPU
  double hbm_bw = 0;         // bytes/s
  // A board run below the power its peaks assume (the H100 of Meta's Grand
  // Teton servers: 500 W against the SXM5 board's 700 W). Both 0: unstated,
  // a board at its full power. A capped board lowers its clocks under dense
  // tensor work (Efficiency::tensor_clock, power_capped_clock).
  double power_limit_w = 0;
  double board_power_w = 0;
  // Streaming multiprocessors (AMD: compute units) a GEMM's output tiles are
  // spread over (A100 108, H100/H200 SXM 132, an MI250X GCD 110). 0: unstated
  // (a CPU): GEMMs priced on the smooth curve alone (Efficiency::gemm_half_dim).
  int sms = 0;
  bool power_capped() const { return power_limit_w > 0 && board_power_w > 0 && power_limit_w < board_power_w; }
};

// The clock a power-capped board sustains under dense tensor work, as a
// fraction of the nominal one its peaks assume: a chip's dynamic power is
// C V^2 f, and across its DVFS range the voltage follows the clock, so the
// power goes as f^3 and a board held to P_limit where dense GEMMs draw
// P_board at the nominal clock runs at (P_limit / P_board)^(1/3) of it
// (500 W of 700 W: 0.894). Every watt is taken to scale so; the static and
// memory power that does not would lower the clock further, so this is the
// smallest slowdown the cap can cause. 1 for an uncapped board.
double power_capped_clock(const GpuSpec& gpu);

// Tile and wave quantization of a GEMM C[m,n] (`batch` of them): its output
// tiles (gemm_tile_m x gemm_tile_n, the last row and column of tiles
// partly empty) run in waves of one tile per SM, the last wave partly idle:
//   tiles = batch ceil(m / tm) ceil(n / tn),  waves = ceil(tiles / sms),
//   efficiency = tiles / (waves sms) * m n / (ceil(m / tm) tm ceil(n / tn) tn).
// 1 when sms = 0 (no SM count: the smooth curve prices m and n instead).
double wave_efficiency(double m, double n, double batch, int sms, double tile_m, double tile_n);

// Links inside a node: GPUs in one package (MI250X: the two GCDs) talk over
// package_bw, any other pair over intra_bw; NICs serve the whole node.
struct NodeSpec {
  int gpus = 1;
  int package_gpus = 1;
  double package_bw = 0;  // bytes/s per direction between GPUs of one package
  double intra_bw = 0;    // bytes/s per direction per GPU to any other GPU of the node
  int nics = 1;
  double nic_bw = 0;      // bytes/s per direction per NIC
  double inter_bw_per_gpu() const { return nic_bw * nics / gpus; }
};

// The handful of calibrated, physically meaningful parameters (docs/plan.md).
struct Efficiency {
  double gemm_max = 0.7;        // achievable fraction of peak for large GEMMs
  // A GEMM dim d contributes d / (d + gemm_half_dim): on a GPU with its SM
  // count (GpuSpec::sms) only the reduction dim k (each output tile's
  // prologue and epilogue against its k loop), m and n being priced by
  // wave_efficiency; without one, every dim.
  double gemm_half_dim = 128;
  // The output tile a GEMM library kernel computes per SM: rows of C (m:
  // tokens) by columns (n: output features). 128 x 256 is cuBLAS's large
  // bf16/fp8 tile on A100 and H100 (its "256x128" names the column-major C,
  // features first).
  double gemm_tile_m = 128, gemm_tile_n = 256;
  double hbm = 0.8;             // achievable fraction of HBM bandwidth
  double flash = 0.5;           // fused attention: fraction of peak on the FLOPs it performs
  // The clock dense tensor work (GEMMs, fused attention) sustains, as a
  // fraction of the one the peaks assume: 1 on a board at its full power;
  // on a power-capped one (GpuSpec::power_capped), where the tensor cores hit
  // the power limit before the clock limit, power_capped_clock unless the
  // preset gives a measured value. It scales gemm_max and flash, not the
  // memory-bound ops or the links.
  double tensor_clock = 1;
  // Unfused attention matmuls (scores, context): fraction of peak; 0 prices
  // them on the GEMM curve like any GEMM. Set by `tera calibrate` for a
  // runtime whose attention kernel is not a GEMM library call.
  double attention = 0;
  // Unfused softmax / mask / dropout over the attention scores: fraction of
  // HBM bandwidth on the bytes they move; 0: `hbm`, as any memory-bound op.
  double softmax = 0;
  double intra_link = 0.8;      // achievable fraction of intra-node link bandwidth (bus bandwidth)
  double inter_link = 0.8;      // achievable fraction of NIC bandwidth
  double alpha_intra = 5e-6;    // seconds per collective step inside a node
  double alpha_inter = 10e-6;   // seconds per collective step across nodes
  double kernel_overhead = 4e-6;  // seconds per kernel launch (idle SMs between kernels)
  // Two activities overlapped take max(a, b) + overlap_loss * min(a, b):
  // communication kernels take SMs and memory bandwidth from the compute
  // they hide behind (0: perfect overlap, 1: none).
  double overlap_loss = 0.3;
  double step_overhead = 0;     // seconds per step outside the model (data loading, logging)
  // fp8 GEMMs with rowwise scales (Workload::fp8_rowwise): their rate as a
  // fraction of the tensorwise fp8 GEMMs' (a different kernel: CUTLASS's
  // rowwise-scaled GEMM against cuBLAS's tensorwise one). Set by the stack
  // profile (StackParams::fp8_rowwise_scale).
  double fp8_rowwise = 1;
  // fp8 GEMMs (tensorwise scales): the fraction of gemm_max they reach on the
  // fp8 peak (fp8 kernels reach less of their doubled peak than 16-bit ones
  // of theirs). Set by the stack profile (StackParams::fp8_scale).
  double fp8 = 1;
};

// What the training software does (not the hardware): which kernels and
// overlaps exist. A preset describes the stack its calibration runs used.
struct Stack {
  bool flash_attention = false;  // fused attention kernel (no T x T scores in memory)
  bool tp_comm_overlap = false;  // tensor-parallel collectives overlapped with GEMMs
  bool dp_overlap = true;        // gradient reduction overlapped with backward (all but the last bucket)
  bool p2p_overlap = true;       // pipeline sends run beside compute (else the sender waits for each transfer)
  // Megatron's scatter/gather pipeline sends (Narayanan et al. 2021, sec.
  // 4.1): without sequence parallelism each tensor-parallel rank sends 1/tp
  // of the activation and the receivers all-gather it over NVLink. Off: each
  // rank sends the whole activation over its own link (DeepSpeed's
  // PipelineEngine).
  bool p2p_scatter_gather = true;
  bool dropout = true;           // attention/hidden dropout masks kept (Megatron GPT default)
  // Mixed precision as Megatron-LM, DeepSpeed, torchtitan and llm.c run it:
  // with Precision::bf16, every activation and the working weights in 16
  // bits. Off: tera's bf16 (plan/layout.h), what `tera train` allocates.
  bool activations_16bit = false;
  // ZeRO-3 gathers and reduces each parameter tensor on its own (DeepSpeed)
  // rather than a block's parameters as one flat buffer (FSDP): one
  // collective's latency per tensor of the block.
  bool zero_per_tensor = false;
  // The stack runs the ZB-H1 pipeline schedule (backward split into input
  // and weight gradients; partition/schedule.h): the search tries it where
  // pp > 1 and vpp = 1. `stack.zero_bubble` in a preset; a profile may
  // override it (stack_profile.h).
  bool zero_bubble = false;
  // What "selective" recomputation re-runs. Off: Megatron's (Korthikanti et
  // al. 2022): the attention core only, nothing with a fused attention
  // kernel. On: PyTorch's op-level selective activation checkpointing as
  // torchtitan configures it (`selective_ac_option = "op"`): the attention
  // kernel's output and every other matmul's are saved, the rest re-run in
  // the backward, so on average half of each linear layer's forward GEMM
  // and every memory-bound op of the block.
  bool op_level_sac = false;
};

struct MemoryPolicy {
  double reserved_bytes = 0;  // CUDA/HIP context, NCCL/RCCL and library workspaces
  double fragmentation = 0.1; // allocator allowance on top of everything the model holds
};

// Time of two overlapped activities under the cluster's overlap_loss.
inline double overlapped(double a, double b, const Efficiency& e) {
  return (a > b ? a : b) + e.overlap_loss * (a < b ? a : b);
}

struct Cluster {
  std::string name;
  std::string source;  // file it came from
  GpuSpec gpu;
  NodeSpec node;
  Efficiency eff;
  Stack stack;
  MemoryPolicy memory;
};

// Parses a cluster preset; `where` names the file in messages.
Expected<Cluster> parse_cluster_toml(const std::string& text, const std::string& where);
// Writes a cluster back as TOML (same keys and units as the presets).
std::string cluster_to_toml(const Cluster& c, const std::string& header_comment);

}  // namespace tera
