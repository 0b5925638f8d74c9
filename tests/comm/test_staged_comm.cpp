// The staged device communicator (comm/staged_comm.h) over real MPI, on
// gpu-emu's device memory (lazy streams: work runs only as far as something
// waits for it, so a missing order shows as stale data every time). Run by
// ctest under mpirun with 2 and 3 ranks. Inputs are small integers, so every
// reduction is exact and results are compared with ==.
//
// With --mode=order-mismatch or --mode=unopened-routes the binary instead
// breaks one of NCCL's rules that strict mode enforces; ctest expects the
// job to end with the message naming it.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/staged_comm.h"
#include "comm/world.h"
#include "mpi_gtest.h"
#include "kernels/gpu/emu/backend_gpu_emu.h"

namespace tera {
namespace {

CommWorld* g_world = nullptr;

// A gpu-emu device and a staged communicator over the world.
struct Rig {
  explicit Rig(int64_t chunk_bytes = int64_t{4} << 20, double timeout_s = 60) : be(make_gpu_emu_backend({})) {
    StagedOptions o;
    o.chunk_bytes = chunk_bytes;
    o.timeout_s = timeout_s;
    o.strict = true;
    comm = make_staged_communicator(g_world->world(), make_staged_progress(*be->addressing.queue), o);
  }
  template <typename T>
  T* device(const std::vector<T>& host) {
    auto* d = static_cast<T*>(be->alloc(static_cast<int64_t>(host.size() * sizeof(T))));
    be->copy(d, host.data(), static_cast<int64_t>(host.size() * sizeof(T)), CopyKind::host_to_device);
    owned.push_back(d);
    return d;
  }
  template <typename T>
  std::vector<T> host(const T* d, size_t n) {
    std::vector<T> h(n);
    be->copy(h.data(), d, static_cast<int64_t>(n * sizeof(T)), CopyKind::device_to_host);
    return h;
  }
  ~Rig() {
    comm.reset();
    for (void* p : owned) be->release(p);
  }
  std::unique_ptr<Backend> be;
  std::unique_ptr<Communicator> comm;
  std::vector<void*> owned;
};

class StagedComm : public ::testing::TestWithParam<int64_t> {};  // the chunk size

TEST_P(StagedComm, CollectivesMatchClosedForms) {
  Rig rig(GetParam());
  Communicator& c = *rig.comm;
  const int p = c.size(), r = c.rank();
  const int64_t n = 1000;
  // all_reduce sum (f32) and max (f64)
  std::vector<float> a(n);
  for (int64_t i = 0; i < n; ++i) a[static_cast<size_t>(i)] = static_cast<float>((r + 1) * (i % 7));
  float* da = rig.device(a);
  c.all_reduce(da, n, CommType::f32, ReduceOp::sum);
  const auto ha = rig.host(da, n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(ha[static_cast<size_t>(i)], static_cast<float>(p * (p + 1) / 2 * (i % 7))) << i;
  std::vector<double> m(n);
  for (int64_t i = 0; i < n; ++i) m[static_cast<size_t>(i)] = static_cast<double>((i + r) % p);
  double* dm = rig.device(m);
  c.all_reduce(dm, n, CommType::f64, ReduceOp::max);
  for (double v : rig.host(dm, n)) ASSERT_EQ(v, p - 1);
  // reduce_scatter: out of place, then in place (recv = send + rank * n)
  std::vector<float> s(static_cast<size_t>(n * p));
  for (int64_t i = 0; i < n * p; ++i) s[static_cast<size_t>(i)] = static_cast<float>(r + i % 11);
  float* ds = rig.device(s);
  float* dr = rig.device(std::vector<float>(n));
  c.reduce_scatter(ds, dr, n, CommType::f32, ReduceOp::sum);
  const auto hr = rig.host(dr, n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(hr[static_cast<size_t>(i)], static_cast<float>(p * (p - 1) / 2 + p * ((r * n + i) % 11))) << i;
  }
  c.reduce_scatter(ds, ds + r * n, n, CommType::f32, ReduceOp::sum);
  EXPECT_EQ(rig.host(ds + r * n, n), hr);
  // all_gather: out of place, then in place
  std::vector<int32_t> g(n);
  for (int64_t i = 0; i < n; ++i) g[static_cast<size_t>(i)] = static_cast<int32_t>(r * 100000 + i);
  int32_t* dg = rig.device(g);
  int32_t* dall = rig.device(std::vector<int32_t>(static_cast<size_t>(n * p), -1));
  c.all_gather(dg, dall, n, CommType::i32);
  const auto hall = rig.host(dall, static_cast<size_t>(n * p));
  for (int q = 0; q < p; ++q)
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hall[static_cast<size_t>(q * n + i)], q * 100000 + i);
  std::vector<int32_t> in_place(static_cast<size_t>(n * p), -1);
  std::copy(g.begin(), g.end(), in_place.begin() + r * n);
  int32_t* dip = rig.device(in_place);
  c.all_gather(dip + r * n, dip, n, CommType::i32);
  EXPECT_EQ(rig.host(dip, static_cast<size_t>(n * p)), hall);
  // broadcast from the last rank
  std::vector<double> b(n, static_cast<double>(r));
  double* db = rig.device(b);
  c.broadcast(db, n, CommType::f64, p - 1);
  for (double v : rig.host(db, n)) ASSERT_EQ(v, p - 1);
}

// Messages around a ring, two tags at once, after open_routes.
TEST_P(StagedComm, SendReceiveRing) {
  Rig rig(GetParam());
  Communicator& c = *rig.comm;
  const int p = c.size(), r = c.rank(), next = (r + 1) % p, prev = (r + p - 1) % p;
  std::vector<P2pRoute> routes;
  for (int q = 0; q < p; ++q) {
    routes.push_back({q, (q + 1) % p, 5});
    routes.push_back({q, (q + 1) % p, 6});
  }
  ASSERT_TRUE(c.open_routes(routes).is_ok());
  const int64_t n = 3000;
  float* out5 = rig.device(std::vector<float>(n, static_cast<float>(r)));
  float* out6 = rig.device(std::vector<float>(n, static_cast<float>(10 + r)));
  float* in5 = rig.device(std::vector<float>(n, -1.0f));
  float* in6 = rig.device(std::vector<float>(n, -1.0f));
  Request r6 = c.irecv(in6, n * 4, prev, 6), r5 = c.irecv(in5, n * 4, prev, 5);
  Request s5 = c.isend(out5, n * 4, next, 5), s6 = c.isend(out6, n * 4, next, 6);
  c.wait(r5);
  c.wait(s6);
  c.wait(r6);
  c.wait(s5);
  for (float v : rig.host(in5, n)) ASSERT_EQ(v, static_cast<float>(prev));
  for (float v : rig.host(in6, n)) ASSERT_EQ(v, static_cast<float>(10 + prev));
}

// Several collectives in flight, waited for in reverse order; the compute
// stream's writes before each (no host wait between) are what goes down, and
// what comes up is what the compute stream reads after the wait.
TEST_P(StagedComm, OrderedAgainstTheComputeStream) {
  Rig rig(GetParam());
  Communicator& c = *rig.comm;
  const int p = c.size(), r = c.rank();
  const int64_t n = 4096;
  std::vector<float*> bufs;
  std::vector<Request> reqs;
  for (int k = 0; k < 4; ++k) {
    float* d = static_cast<float*>(rig.be->alloc(n * 4));  // NaN until the fill runs
    rig.owned.push_back(d);
    rig.be->fill(d, DType::f32, static_cast<double>(k + r), n);  // queued, not run
    bufs.push_back(d);
    reqs.push_back(c.iall_reduce(d, n, CommType::f32, ReduceOp::sum));
  }
  for (int k = 3; k >= 0; --k) c.wait(reqs[static_cast<size_t>(k)]);
  // A kernel after the waits doubles each result in place: it must read the reduced values.
  for (float* d : bufs) rig.be->residual_forward(d, d, d, n);
  for (int k = 0; k < 4; ++k) {
    const float want = 2.0f * static_cast<float>(p * k + p * (p - 1) / 2);
    for (float v : rig.host(bufs[static_cast<size_t>(k)], n)) ASSERT_EQ(v, want) << "buffer " << k;
  }
  // Bytes as the ring model counts them: 4 all-reduces of n floats.
  EXPECT_EQ(c.stats().bytes, 4 * (2 * (p - 1) * n * 4 / p));
}

INSTANTIATE_TEST_SUITE_P(Chunks, StagedComm, ::testing::Values(int64_t{4} << 20, int64_t{1000}));

// Breaks NCCL's rules on purpose; returns only if strict mode missed it.
int break_a_rule(const std::string& mode) {
  Rig rig(int64_t{4} << 20, /*timeout_s=*/3);
  Communicator& c = *rig.comm;
  if (mode == "order-mismatch") {
    // Rank 0 all-reduces 4 elements, every other rank 5.
    float* d = rig.device(std::vector<float>(5, 1.0f));
    c.all_reduce(d, c.rank() == 0 ? 4 : 5, CommType::f32, ReduceOp::sum);
  } else if (mode == "unopened-routes") {
    // Each rank's first call is a receive on the route its peer calls second:
    // over MPI it would work; NCCL would hang connecting.
    float* d = rig.device(std::vector<float>(8, 1.0f));
    const int peer = 1 - c.rank();
    Request in = c.irecv(d, 32, peer, c.rank() == 0 ? 1 : 2);
    Request out = c.isend(d, 32, peer, c.rank() == 0 ? 2 : 1);
    c.wait(in);
    c.wait(out);
  }
  std::printf("no rule was enforced (%s)\n", mode.c_str());
  return 0;
}

}  // namespace
}  // namespace tera

int main(int argc, char** argv) {
  std::string mode;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--mode=", 7) == 0) mode = argv[i] + 7;
  }
  ::testing::InitGoogleTest(&argc, argv);
  auto world = tera::CommWorld::init();
  tera::g_world = world.get();
  if (!mode.empty()) return tera::break_a_rule(mode);
  return tera::testing::run_all_tests_on_every_rank(*world);
}
