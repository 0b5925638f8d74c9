// Cluster preset TOML <-> Cluster. Keys and units are documented in
// docs/plan.md; each preset file cites where its numbers come from.
#include "plan/hardware.h"

#include <fmt/format.h>

#include <cmath>

#include "plan/toml_fields.h"

namespace tera {

double power_capped_clock(const GpuSpec& gpu) {
  return gpu.power_capped() ? std::cbrt(gpu.power_limit_w / gpu.board_power_w) : 1.0;
}

double wave_efficiency(double m, double n, double batch, int sms, double tile_m, double tile_n) {
  if (sms <= 0 || m <= 0 || n <= 0) return 1;
  const double rows = std::ceil(m / tile_m), cols = std::ceil(n / tile_n);
  const double tiles = std::max(1.0, batch) * rows * cols;
  const double waves = std::ceil(tiles / sms);
  return tiles / (waves * sms) * (m * n) / (rows * tile_m * cols * tile_n);
}

Expected<Cluster> parse_cluster_toml(const std::string& text, const std::string& where) {
  TomlFields f(text, where);
  TERA_RETURN_IF_ERROR(f.parse_status());
  Cluster c;
  c.source = where;
  constexpr double kTera = 1e12, kGiga = 1e9, kUs = 1e-6;
  double v = 0;
  std::string description;
  TERA_RETURN_IF_ERROR(f.string("name", &c.name, true));
  TERA_RETURN_IF_ERROR(f.string("description", &description, false));
  // [gpu]
  TERA_RETURN_IF_ERROR(f.string("gpu.name", &c.gpu.name, true));
  v = 0;
  TERA_RETURN_IF_ERROR(f.number("gpu.peak_tflops_16", &v, false, 0, 1e6));
  c.gpu.peak_flops_16 = v * kTera;
  TERA_RETURN_IF_ERROR(f.number("gpu.peak_tflops_32", &v, true, 1e-6, 1e6));
  c.gpu.peak_flops_32 = v * kTera;
  v = 0;
  TERA_RETURN_IF_ERROR(f.number("gpu.peak_tflops_8", &v, false, 0, 1e6));
  c.gpu.peak_flops_8 = v * kTera;
  TERA_RETURN_IF_ERROR(f.number("gpu.memory_gib", &v, true, 0.01, 1e6));
  c.gpu.memory_bytes = v * kGiB;
  TERA_RETURN_IF_ERROR(f.number("gpu.hbm_tb_s", &v, true, 1e-4, 1e4));
  c.gpu.hbm_bw = v * kTera;
  TERA_RETURN_IF_ERROR(f.number("gpu.power_limit_w", &c.gpu.power_limit_w, false, 0, 1e5));
  TERA_RETURN_IF_ERROR(f.number("gpu.board_power_w", &c.gpu.board_power_w, false, 0, 1e5));
  if ((c.gpu.power_limit_w > 0) != (c.gpu.board_power_w > 0)) {
    return Status::error(fmt::format("{}: gpu.power_limit_w and gpu.board_power_w go together (the limit the board "
                                     "runs at and the power its peaks assume); give both or neither",
                                     where));
  }
  int64_t n = 0;
  TERA_RETURN_IF_ERROR(f.integer("gpu.sms", &n, false, 0, 100000));
  c.gpu.sms = static_cast<int>(n);
  // [node]
  n = 1;
  TERA_RETURN_IF_ERROR(f.integer("node.gpus", &n, true, 1, 1024));
  c.node.gpus = static_cast<int>(n);
  n = 1;
  TERA_RETURN_IF_ERROR(f.integer("node.package_gpus", &n, false, 1, 1024));
  c.node.package_gpus = static_cast<int>(n);
  if (c.node.gpus % c.node.package_gpus != 0) {
    return Status::error(fmt::format("{}: node.package_gpus = {} must divide node.gpus = {}", where,
                                     c.node.package_gpus, c.node.gpus));
  }
  TERA_RETURN_IF_ERROR(f.number("node.intra_gb_s", &v, true, 1e-6, 1e6));
  c.node.intra_bw = v * kGiga;
  v = c.node.intra_bw / kGiga;  // package links default to the node links
  TERA_RETURN_IF_ERROR(f.number("node.package_gb_s", &v, false, 1e-6, 1e6));
  c.node.package_bw = v * kGiga;
  n = 1;
  TERA_RETURN_IF_ERROR(f.integer("node.nics", &n, true, 1, 1024));
  c.node.nics = static_cast<int>(n);
  TERA_RETURN_IF_ERROR(f.number("node.nic_gb_s", &v, true, 1e-6, 1e6));
  c.node.nic_bw = v * kGiga;
  // [efficiency]
  Efficiency& e = c.eff;
  TERA_RETURN_IF_ERROR(f.number("efficiency.gemm_max", &e.gemm_max, false, 0.01, 1));
  TERA_RETURN_IF_ERROR(f.number("efficiency.gemm_half_dim", &e.gemm_half_dim, false, 0, 1e6));
  TERA_RETURN_IF_ERROR(f.number("efficiency.gemm_tile_m", &e.gemm_tile_m, false, 1, 4096));
  TERA_RETURN_IF_ERROR(f.number("efficiency.gemm_tile_n", &e.gemm_tile_n, false, 1, 4096));
  TERA_RETURN_IF_ERROR(f.number("efficiency.hbm", &e.hbm, false, 0.01, 1));
  // Measured fractions of peak (tera calibrate): a scalar kernel on a slow
  // or sanitized build may reach well under 1%, so only (0, 1] is physical.
  TERA_RETURN_IF_ERROR(f.number("efficiency.flash", &e.flash, false, 1e-4, 1));
  // Unset: what the board's power cap implies (1 uncapped); set: a measured clock.
  e.tensor_clock = power_capped_clock(c.gpu);
  TERA_RETURN_IF_ERROR(f.number("efficiency.tensor_clock", &e.tensor_clock, false, 0.05, 1));
  TERA_RETURN_IF_ERROR(f.number("efficiency.attention", &e.attention, false, 0, 1));
  TERA_RETURN_IF_ERROR(f.number("efficiency.softmax", &e.softmax, false, 0, 1));
  TERA_RETURN_IF_ERROR(f.number("efficiency.intra_link", &e.intra_link, false, 0.01, 1));
  TERA_RETURN_IF_ERROR(f.number("efficiency.inter_link", &e.inter_link, false, 0.01, 1));
  v = e.alpha_intra / kUs;
  TERA_RETURN_IF_ERROR(f.number("efficiency.alpha_intra_us", &v, false, 0, 1e6));
  e.alpha_intra = v * kUs;
  v = e.alpha_inter / kUs;
  TERA_RETURN_IF_ERROR(f.number("efficiency.alpha_inter_us", &v, false, 0, 1e6));
  e.alpha_inter = v * kUs;
  v = e.kernel_overhead / kUs;
  TERA_RETURN_IF_ERROR(f.number("efficiency.kernel_overhead_us", &v, false, 0, 1e6));
  e.kernel_overhead = v * kUs;
  TERA_RETURN_IF_ERROR(f.number("efficiency.overlap_loss", &e.overlap_loss, false, 0, 1));
  v = e.step_overhead * 1e3;
  TERA_RETURN_IF_ERROR(f.number("efficiency.step_overhead_ms", &v, false, 0, 1e9));
  e.step_overhead = v * 1e-3;
  // [stack]
  TERA_RETURN_IF_ERROR(f.boolean("stack.flash_attention", &c.stack.flash_attention, false));
  TERA_RETURN_IF_ERROR(f.boolean("stack.tp_comm_overlap", &c.stack.tp_comm_overlap, false));
  TERA_RETURN_IF_ERROR(f.boolean("stack.dp_overlap", &c.stack.dp_overlap, false));
  TERA_RETURN_IF_ERROR(f.boolean("stack.dropout", &c.stack.dropout, false));
  TERA_RETURN_IF_ERROR(f.boolean("stack.p2p_overlap", &c.stack.p2p_overlap, false));
  TERA_RETURN_IF_ERROR(f.boolean("stack.activations_16bit", &c.stack.activations_16bit, false));
  TERA_RETURN_IF_ERROR(f.boolean("stack.zero_bubble", &c.stack.zero_bubble, false));
  // Written by tera before the precision vocabulary had tera's bf16 (false:
  // nothing to do; true meant tera's bf16 priced as fp32).
  bool old_bf16_gemm_inputs = false;
  TERA_RETURN_IF_ERROR(f.boolean("stack.bf16_gemm_inputs", &old_bf16_gemm_inputs, false));
  if (old_bf16_gemm_inputs) {
    return Status::error(fmt::format("{}: stack.bf16_gemm_inputs is gone: tera's bf16 is priced with --precision bf16 "
                                     "on a stack without activations_16bit (docs/precision.md); delete the key",
                                     where));
  }
  // [memory]
  v = c.memory.reserved_bytes / kGiB;
  TERA_RETURN_IF_ERROR(f.number("memory.reserved_gib", &v, false, 0, 1e6));
  c.memory.reserved_bytes = v * kGiB;
  TERA_RETURN_IF_ERROR(f.number("memory.fragmentation", &c.memory.fragmentation, false, 0, 1));
  if (c.memory.reserved_bytes >= c.gpu.memory_bytes) {
    return Status::error(fmt::format("{}: memory.reserved_gib must be below gpu.memory_gib", where));
  }
  f.skip_table("calibration");  // measurements behind a calibrated preset, kept for the record
  TERA_RETURN_IF_ERROR(f.finish());
  return c;
}

std::string cluster_to_toml(const Cluster& c, const std::string& header_comment) {
  std::string s = header_comment;
  s += fmt::format("name = \"{}\"\n\n[gpu]\nname = \"{}\"\n", c.name, c.gpu.name);
  if (c.gpu.peak_flops_16 > 0) s += fmt::format("peak_tflops_16 = {:.6g}\n", c.gpu.peak_flops_16 / 1e12);
  if (c.gpu.peak_flops_8 > 0) s += fmt::format("peak_tflops_8 = {:.6g}\n", c.gpu.peak_flops_8 / 1e12);
  s += fmt::format("peak_tflops_32 = {:.6g}\nmemory_gib = {:.6g}\nhbm_tb_s = {:.6g}\n\n", c.gpu.peak_flops_32 / 1e12,
                   c.gpu.memory_bytes / kGiB, c.gpu.hbm_bw / 1e12);
  if (c.gpu.sms > 0) s.insert(s.size() - 1, fmt::format("sms = {}\n", c.gpu.sms));
  if (c.gpu.power_capped()) {
    s.insert(s.size() - 1, fmt::format("power_limit_w = {:.6g}\nboard_power_w = {:.6g}\n", c.gpu.power_limit_w,
                                       c.gpu.board_power_w));
  }
  s += fmt::format("[node]\ngpus = {}\npackage_gpus = {}\nintra_gb_s = {:.6g}\npackage_gb_s = {:.6g}\nnics = {}\n"
                   "nic_gb_s = {:.6g}\n\n",
                   c.node.gpus, c.node.package_gpus, c.node.intra_bw / 1e9, c.node.package_bw / 1e9, c.node.nics,
                   c.node.nic_bw / 1e9);
  const Efficiency& e = c.eff;
  s += fmt::format("[efficiency]\ngemm_max = {:.4g}\ngemm_half_dim = {:.4g}\nhbm = {:.4g}\nflash = {:.4g}\nattention = {:.4g}\nsoftmax = {:.4g}\n"
                   "intra_link = {:.4g}\ninter_link = {:.4g}\nalpha_intra_us = {:.4g}\nalpha_inter_us = {:.4g}\n"
                   "kernel_overhead_us = {:.4g}\noverlap_loss = {:.4g}\nstep_overhead_ms = {:.4g}\n\n",
                   e.gemm_max, e.gemm_half_dim, e.hbm, e.flash, e.attention, e.softmax, e.intra_link, e.inter_link, e.alpha_intra * 1e6,
                   e.alpha_inter * 1e6, e.kernel_overhead * 1e6, e.overlap_loss, e.step_overhead * 1e3);
  if (c.gpu.sms > 0) {
    s.insert(s.size() - 1, fmt::format("gemm_tile_m = {:.4g}\ngemm_tile_n = {:.4g}\n", e.gemm_tile_m, e.gemm_tile_n));
  }
  if (std::fabs(e.tensor_clock - power_capped_clock(c.gpu)) > 1e-9) {  // a measured clock; else derived again on reading
    s.insert(s.size() - 1, fmt::format("tensor_clock = {:.6g}\n", e.tensor_clock));
  }
  s += fmt::format("[stack]\nflash_attention = {}\ntp_comm_overlap = {}\ndp_overlap = {}\np2p_overlap = {}\ndropout = {}\n"
                   "activations_16bit = {}\n\n",
                   c.stack.flash_attention, c.stack.tp_comm_overlap, c.stack.dp_overlap, c.stack.p2p_overlap,
                   c.stack.dropout, c.stack.activations_16bit);
  if (c.stack.zero_bubble) s.insert(s.size() - 1, "zero_bubble = true\n");  // written only when set: older files stay as they were
  s += fmt::format("[memory]\nreserved_gib = {:.4g}\nfragmentation = {:.4g}\n", c.memory.reserved_bytes / kGiB,
                   c.memory.fragmentation);
  return s;
}

}  // namespace tera
