// `tera calibrate`: measures this machine into a `local` cluster preset by
// timing the CPU runtime's own kernels at transformer-block shapes
// (train/runtime_timings.h, train/calibration_measure.h; fitted by
// plan/local_preset.h): linear layers fitted to the planner's GEMM
// efficiency curve, memory-bound ops to a per-op overhead, and two profiled
// training runs for the in-training GEMM, memory-bound and attention
// efficiencies (docs/plan.md, "Cluster presets"). Run alone, one process
// using every core is one "GPU" and the link keys hold shared-memory
// estimates (mpi_measured = false). Run under `mpirun -n K` (K >= 2), every
// rank is one "GPU" with the threads `tera train` would give it (cores / K),
// all ranks measure at once (they share the cores as training ranks do),
// ranks 0 and 1 ping-pong through the Communicator for the link bandwidth,
// all-reduces over every rank give alpha and the link efficiency, and rank 0
// writes the preset with node.gpus = K (mpi_measured = true).
// The preset goes to the user's configuration directory by default
// ($XDG_CONFIG_HOME/tera/clusters/local.toml, else ~/.config/tera/...), never
// into the source tree; --out is checked before any measuring, and an
// existing file is replaced only with --force.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/output_paths.h"
#include "comm/agree.h"
#include "comm/world.h"
#include "core/file_util.h"
#include "kernels/backend.h"
#include "plan/local_preset.h"
#include "plan/presets.h"
#include "train/calibration_measure.h"

namespace tera::cli {

namespace {

struct CalibrateArgs {
  std::string out;
  double seconds_per_shape = 0.2;
  bool force = false;
};

// <user config dir>/clusters/local.toml (plan/presets.h: where `--cluster
// local` looks first); empty when neither XDG_CONFIG_HOME nor HOME is set.
std::string default_preset_path() {
  const std::string dir = user_config_dir();
  return dir.empty() ? "" : (std::filesystem::path(dir) / "clusters/local.toml").string();
}

// Under MPI without OMP_NUM_THREADS, as `tera train`: the node's cores shared evenly among its ranks.
void set_rank_threads(const CommWorld& world, bool mpi) {
  if (mpi && std::getenv("OMP_NUM_THREADS") == nullptr) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    omp_set_num_threads(std::max(1, cores / std::max(1, world.local_size())));
  }
}

// Checks --out before any measuring (rank 0 checks; every rank stops
// together); false, printed by rank 0, when it is unusable.
bool check_out(const CalibrateArgs& a, Communicator& comm) {
  const bool first = comm.rank() == 0;
  Status out = ok_status();
  if (first) {
    out = a.out.empty() ? Status::error("--out: no default location (neither XDG_CONFIG_HOME nor HOME is set); pass "
                                        "--out FILE")
                        : check_output_file(a.out, "--out", a.force, /*create_parent=*/true);
  }
  if (Status s = agree(comm, out, "rank 0 refused --out (see its message)"); !s) {
    if (first) print_error(s.message());
    return false;
  }
  return true;
}

// Writes the preset atomically to `out` once it reads back (same parser as every preset); the exit code.
int write_preset(const std::string& out, const std::string& text) {
  if (auto back = parse_cluster_toml(text, out); !back.ok()) {
    print_error("calibrate produced an unreadable preset: " + back.error());
    return kExitFailure;
  }
  auto f = AtomicFile::create(out);
  if (!f.ok()) {
    print_error("--out " + out + ": " + f.error());
    return kExitBadInput;
  }
  Status st = f->write(text.data(), text.size());
  if (st) st = f->commit();
  if (!st) {
    print_error("--out " + out + ": " + st.message());
    return kExitFailure;
  }
  fmt::print("wrote {}; plan with it as --cluster {}\n", out, out);
  return kExitOk;
}

// `tera calibrate`: every rank measures; rank 0 fits the preset and writes it.
int run_calibrate(const CalibrateArgs& a) {
  auto world = CommWorld::init();
  Communicator& comm = world->world();
  CalibrationMeasurements m;
  m.mpi = world->is_mpi() && comm.size() >= 2;
  m.ranks = m.mpi ? comm.size() : 1;
  const bool first = comm.rank() == 0;
  set_rank_threads(*world, m.mpi);
  m.threads = omp_get_max_threads();
  m.gemm_library = cpu_backend().gemm_library;
  m.memory_bytes = system_memory_bytes();
  const CreatedDirsGuard created(first && !a.out.empty() ? parent_dir(a.out) : std::string());
  if (!check_out(a, comm)) return kExitBadInput;
  if (first) {
    fmt::print("tera calibrate: {} threads{}, GEMM library {}\n", m.threads,
               m.mpi ? fmt::format(" per rank, {} MPI ranks measuring at once", comm.size()) : "",
               cpu_backend().gemm_library);
  }
  m.rt = measure_runtime(comm, m.mpi, a.seconds_per_shape);
  std::string rates, record;
  const GemmFit fit = fit_linear_layers(m.rt, &rates, &record);
  if (first) fmt::print("{}", rates);
  const std::string failure = time_in_training(comm, &m.insitu);
  // Every rank stops together (a lone early return would leave the others in a collective).
  if (any_rank(comm, !failure.empty())) {
    if (!failure.empty()) print_error("calibrate: " + failure);
    return kExitFailure;
  }
  if (m.mpi) mean_over_ranks(comm, &m.insitu);
  measure_links(comm, a.seconds_per_shape, &m);
  if (!first) return kExitOk;
  fmt::print("{}", measured_summary(m, fit));
  std::string report;
  const Cluster c = fit_local_cluster(m, fit, &report);
  fmt::print("{}", report);
  return write_preset(a.out, local_preset_text(c, m, fit, record));
}

}  // namespace

Command add_calibrate_command(CLI::App& parent) {
  auto a = std::make_shared<CalibrateArgs>();
  a->out = default_preset_path();
  auto* sub = parent.add_subcommand("calibrate",
                                    "Measure this machine (the runtime's kernels alone and inside training steps, "
                                    "memory bandwidth; under mpirun the MPI links) into the local cluster preset");
  sub->add_option("--out", a->out, "Where to write the preset (default: the user's configuration directory)")
      ->capture_default_str();
  sub->add_flag("--force", a->force, "Replace an existing --out (atomically)");
  sub->add_option("--seconds", a->seconds_per_shape,
                  "Measuring time per kernel shape (the in-training runs take a fixed few seconds)")
      ->capture_default_str()
      ->check(real_in(0.01, 60));
  return {sub, [a] { return run_calibrate(*a); }};
}

}  // namespace tera::cli
