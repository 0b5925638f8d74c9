// The calibration's measurements on this machine; see calibration_measure.h.
#include "train/calibration_measure.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>

#include "core/file_util.h"
#include "core/timer.h"
#include "kernels/backend.h"
#include "train/runtime_timings.h"

namespace tera {

namespace {

// STREAM-style triad a = b + s c over arrays far larger than the caches;
// bytes counted as STREAM does (two reads, one write); best of the repeats.
double triad_bandwidth(double budget) {
  const size_t n = size_t{1} << 24;  // 64 MiB per array
  std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
  std::vector<double> rates;
  Stopwatch total;
  while (total.seconds() < budget || rates.size() < 3) {
    Stopwatch t;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
    rates.push_back(3.0 * 4.0 * static_cast<double>(n) / t.seconds());
  }
  return *std::max_element(rates.begin(), rates.end());
}

// Ping-pong between ranks 0 and 1 (others wait at the barrier): the best
// one-way time over repeats (at least 50), 8 B for alpha and 1-16 MiB for bw. Collective
// over `world`; the result is valid on rank 0.
MpiLink measure_mpi_link(Communicator& world, double budget) {
  constexpr int kTag = 91;
  const int r = world.rank();
  auto one_way = [&](int64_t bytes) {
    std::vector<char> buf(static_cast<size_t>(bytes), 1);
    double best = 1e300;
    // Rank 0 decides when to stop; rank 1 learns it from the first byte.
    Stopwatch total;
    for (int rep = 0;; ++rep) {
      char go = 0;
      if (r == 0) go = (total.seconds() < budget || rep < 50) ? 1 : 0;
      if (r <= 1) {
        if (r == 0) world.send(&go, 1, 1, kTag);
        else world.recv(&go, 1, 0, kTag);
      }
      if (!go) break;
      if (r == 0) {
        Stopwatch t;
        world.send(buf.data(), bytes, 1, kTag);
        world.recv(buf.data(), bytes, 1, kTag);
        best = std::min(best, t.seconds() / 2);
      } else if (r == 1) {
        world.recv(buf.data(), bytes, 0, kTag);
        world.send(buf.data(), bytes, 0, kTag);
      }
    }
    return best;
  };
  MpiLink link;
  if (r <= 1) {
    link.alpha = one_way(8);
    // MiB messages: the latency is noise next to the transfer, so bw = n / t
    // (subtracting a latency measured on a loaded machine could go negative).
    for (int64_t n : {int64_t{1} << 20, int64_t{4} << 20, int64_t{16} << 20}) {
      link.bw = std::max(link.bw, static_cast<double>(n) / one_way(n));
    }
  }
  world.barrier();
  return link;
}

// Blocking all-reduces over the whole world, as tensor parallelism issues
// them (back to back, every rank at once), at sizes from 4 KiB to 4 MiB: the
// median time per size (seconds, valid on every rank), fitted later to
// latency + bytes / bus bandwidth.
std::vector<TimedBytes> time_all_reduces(Communicator& world, double budget) {
  std::vector<TimedBytes> out;
  for (int64_t bytes : {int64_t{4} << 10, int64_t{64} << 10, int64_t{256} << 10, int64_t{1} << 20, int64_t{4} << 20}) {
    std::vector<float> buf(static_cast<size_t>(bytes / 4), 1.0f);
    std::vector<double> t;
    world.barrier();
    Stopwatch total;
    for (int rep = 0;; ++rep) {
      // Rank 0 decides when to stop (the same count on every rank).
      double go = world.rank() == 0 && (total.seconds() < budget || rep < 20) ? 1.0 : 0.0;
      world.broadcast(&go, 1, CommType::f64, 0);
      if (go == 0) break;
      Stopwatch w;
      world.all_reduce(buf.data(), static_cast<int64_t>(buf.size()), CommType::f32, ReduceOp::sum);
      t.push_back(w.seconds());
      std::fill(buf.begin(), buf.end(), 1.0f);
    }
    std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
    double med = t[t.size() / 2];
    // The slowest rank's median: a collective ends when its last rank does.
    med = world.all_reduce_max(med);
    out.push_back({static_cast<double>(bytes), med});
  }
  return out;
}

// A deterministic text corpus (words from a small list) for the in-training
// calibration runs: the byte vocabulary needs no tokenizer.
Status write_calibration_corpus(const std::string& path) {
  static const char* kWords[] = {"the", "model", "trains", "on", "a", "cluster", "of", "many", "ranks", "and",
                                 "every", "layer", "is", "split", "across", "them", "while", "data", "flows", "through"};
  std::string text;
  uint64_t x = 88172645463325252ull;
  while (text.size() < (256u << 10)) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    text += kWords[x % (sizeof(kWords) / sizeof(kWords[0]))];
    text += (x >> 20) % 11 == 0 ? ".\n" : " ";
  }
  auto f = AtomicFile::create(path);
  if (!f.ok()) return f.status();
  Status st = f->write(text.data(), text.size());
  if (st) st = f->commit();
  return st;
}

}  // namespace

double system_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  double kb = 0;
  while (f >> key >> kb) {
    if (key == "MemTotal:") return kb * 1024;
    f.ignore(256, '\n');
  }
  return 8.0 * (1 << 30);
}

RuntimeTimings measure_runtime(Communicator& comm, bool mpi, double seconds_per_shape) {
  RuntimeTimings rt = time_runtime_ops(cpu_backend(), seconds_per_shape, 3);
  if (mpi) {
    std::vector<double> flat = rt.flat();
    comm.all_reduce(flat.data(), static_cast<int64_t>(flat.size()), CommType::f64, ReduceOp::sum);
    for (double& x : flat) x /= comm.size();
    rt.set_flat(flat);
  }
  return rt;
}

std::string time_in_training(Communicator& comm, std::vector<InSituTimes>* insitu) {
  const std::filesystem::path work = std::filesystem::temp_directory_path() /
                                     fmt::format("tera-calibrate-{}-{}", static_cast<long>(getpid()), comm.rank());
  std::filesystem::create_directories(work);
  const std::string corpus = (work / "corpus.txt").string();
  std::string failure;
  if (Status st = write_calibration_corpus(corpus); !st) failure = "cannot write " + corpus + ": " + st.message();
  for (const auto& [layers, hidden, heads, seq, mb] : {std::array<int64_t, 5>{2, 96, 3, 128, 2}, {2, 384, 6, 256, 1}}) {
    if (!failure.empty()) break;
    ModelConfig mc;
    mc.layers = layers;
    mc.hidden = hidden;
    mc.heads = heads;
    mc.seq_len = seq;
    mc.vocab = 256;
    auto t = time_training(cpu_backend(), mc, mb, 2, 2, 6, corpus, (work / "out").string());
    if (!t) failure = "the in-training run failed: " + t.error();
    else insitu->push_back(*t);
  }
  std::error_code ignored;
  std::filesystem::remove_all(work, ignored);
  return failure;
}

void mean_over_ranks(Communicator& comm, std::vector<InSituTimes>* insitu) {
  for (InSituTimes& t : *insitu) {
    double v[4] = {t.gemm_s, t.attention_s, t.memory_s, t.step_s};
    comm.all_reduce(v, 4, CommType::f64, ReduceOp::sum);
    t.gemm_s = v[0] / comm.size();
    t.attention_s = v[1] / comm.size();
    t.memory_s = v[2] / comm.size();
    t.step_s = v[3] / comm.size();
  }
}

void measure_links(Communicator& comm, double seconds_per_shape, CalibrationMeasurements* m) {
  m->bw = triad_bandwidth(4 * seconds_per_shape);
  if (m->mpi) {
    m->bw = comm.all_reduce_sum(m->bw) / comm.size();
    m->link = measure_mpi_link(comm, 2 * seconds_per_shape);
    m->all_reduces = time_all_reduces(comm, seconds_per_shape);
  }
}

}  // namespace tera
