// Device communicators by capability (device_comm.h): the choice, and the
// small ones (mapped, local, GPU-aware MPI); the staged one is
// staged_comm.cpp, NCCL's nccl_comm.cpp.
#include "comm/device_comm.h"

#include <cstdlib>

#include "comm/world.h"
#include "core/check.h"
#if defined(TERA_HAVE_NCCL)
#include "comm/nccl_comm.h"
#endif

namespace tera {

namespace {

// Forwards every operation to the host communicator with its buffer pointers
// mapped to host addresses. Bytes and calls are counted by the host
// communicator (which really sends them); waits on this one's requests are
// timed here, so a group's statistics are the sum of the two.
class MappedCommunicator final : public Communicator {
 public:
  MappedCommunicator(Communicator& host, void* (*to_host)(const void*)) : host_(host), to_host_(to_host) {}
  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  std::string name() const override { return host_.name(); }
  int world_rank(int r) const override { return host_.world_rank(r); }

  Request iall_reduce(void* buf, int64_t count, CommType t, ReduceOp op) override {
    return host_.iall_reduce(map(buf), count, t, op);
  }
  Request ireduce_scatter(const void* send, void* recv, int64_t recv_count, CommType t, ReduceOp op) override {
    return host_.ireduce_scatter(map(send), map(recv), recv_count, t, op);
  }
  Request iall_gather(const void* send, void* recv, int64_t send_count, CommType t) override {
    return host_.iall_gather(map(send), map(recv), send_count, t);
  }
  Request ibroadcast(void* buf, int64_t count, CommType t, int root) override {
    return host_.ibroadcast(map(buf), count, t, root);
  }
  Request isend(const void* buf, int64_t bytes, int dst, int tag) override { return host_.isend(map(buf), bytes, dst, tag); }
  Request irecv(void* buf, int64_t bytes, int src, int tag) override { return host_.irecv(map(buf), bytes, src, tag); }
  Status open_routes(const std::vector<P2pRoute>& routes) override { return host_.open_routes(routes); }
  void barrier() override { host_.barrier(); }
  // Groups are split from the host communicators (comm/groups.h), then mapped.
  std::unique_ptr<Communicator> split(int, int, const std::string&) override {
    TERA_ASSERT(false, "split the host communicator, then make its device communicator");
    return nullptr;
  }

 private:
  void* map(const void* p) const { return p == nullptr ? nullptr : to_host_(p); }
  Communicator& host_;
  void* (*to_host_)(const void*);
};

// A group of one rank on a device backend: every collective is the identity
// (a copy on the compute stream where the result lands apart from the
// input), so one GPU needs no communication library and no host stall.
class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(Communicator& host, DeviceQueue& q) : host_(host), q_(q) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return host_.name(); }
  int world_rank(int r) const override { return host_.world_rank(r); }

  Request iall_reduce(void*, int64_t, CommType, ReduceOp) override { return {}; }
  Request ireduce_scatter(const void* send, void* recv, int64_t recv_count, CommType t, ReduceOp) override {
    copy(recv, send, recv_count * comm_type_bytes(t));
    return {};
  }
  Request iall_gather(const void* send, void* recv, int64_t send_count, CommType t) override {
    copy(recv, send, send_count * comm_type_bytes(t));
    return {};
  }
  Request ibroadcast(void*, int64_t, CommType, int) override { return {}; }
  Request isend(const void*, int64_t, int dst, int) override { return no_peer(dst); }
  Request irecv(void*, int64_t, int src, int) override { return no_peer(src); }
  void barrier() override {}
  std::unique_ptr<Communicator> split(int, int, const std::string&) override {
    TERA_ASSERT(false, "split the host communicator, then make its device communicator");
    return nullptr;
  }

 private:
  void copy(void* dst, const void* src, int64_t bytes) {
    if (dst != src && bytes > 0) q_.copy_async(dst, src, bytes, CopyKind::device_to_device, DeviceStream::compute);
  }
  Request no_peer(int r) {
    TERA_ASSERT(false, "the " + name() + " group has one rank: there is no rank " + std::to_string(r) + " to message");
    return {};
  }
  Communicator& host_;
  DeviceQueue& q_;
};

// GPU-aware MPI: the host communicator given device pointers. MPI cannot
// wait for a stream, so each operation first waits (on the host) for the
// compute stream's work so far; its results are in device memory when MPI
// completes, before anything later is queued.
class GpuAwareMpiCommunicator final : public Communicator {
 public:
  GpuAwareMpiCommunicator(Communicator& host, DeviceQueue& q) : host_(host), q_(q), ready_(q.event_create()) {}
  ~GpuAwareMpiCommunicator() override { q_.event_destroy(ready_); }
  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  std::string name() const override { return host_.name(); }
  int world_rank(int r) const override { return host_.world_rank(r); }

  Request iall_reduce(void* buf, int64_t count, CommType t, ReduceOp op) override {
    after_compute();
    return host_.iall_reduce(buf, count, t, op);
  }
  Request ireduce_scatter(const void* send, void* recv, int64_t recv_count, CommType t, ReduceOp op) override {
    after_compute();
    return host_.ireduce_scatter(send, recv, recv_count, t, op);
  }
  Request iall_gather(const void* send, void* recv, int64_t send_count, CommType t) override {
    after_compute();
    return host_.iall_gather(send, recv, send_count, t);
  }
  Request ibroadcast(void* buf, int64_t count, CommType t, int root) override {
    after_compute();
    return host_.ibroadcast(buf, count, t, root);
  }
  Request isend(const void* buf, int64_t bytes, int dst, int tag) override {
    after_compute();
    return host_.isend(buf, bytes, dst, tag);
  }
  Request irecv(void* buf, int64_t bytes, int src, int tag) override {
    after_compute();  // the buffer's last readers come first
    return host_.irecv(buf, bytes, src, tag);
  }
  void barrier() override { host_.barrier(); }
  std::unique_ptr<Communicator> split(int, int, const std::string&) override {
    TERA_ASSERT(false, "split the host communicator, then make its device communicator");
    return nullptr;
  }

 private:
  void after_compute() {
    q_.event_record(ready_, DeviceStream::compute);
    q_.event_wait(ready_);
  }
  Communicator& host_;
  DeviceQueue& q_;
  DeviceQueue::Event ready_;
};

// TERA_COMM_STRICT=1 asks for NCCL's rules on a real device too (debugging).
bool strict_requested() {
  const char* v = std::getenv("TERA_COMM_STRICT");
  return v != nullptr && std::string(v) == "1";
}

}  // namespace

bool vendor_collectives_built(const std::string& vendor) {
#if defined(TERA_HAVE_NCCL)
  if (vendor == "cuda") return true;
#endif
  (void)vendor;
  return false;  // RCCL: no HIP backend is built (Debian 12 has no RCCL)
}

bool mpi_takes_device_pointers(const std::string& vendor) {
#if defined(TERA_HAVE_MPI)
  return mpi_library_takes_device_pointers(vendor);
#else
  (void)vendor;
  return false;
#endif
}

Expected<DeviceCommKind> choose_device_comm(const DeviceAddressing& a, const DeviceCommOptions& o,
                                            const std::string& backend) {
  const std::string& want = o.choice;
  if (want != "auto" && want != "nccl" && want != "rccl" && want != "mpi" && want != "staged") {
    return Status::error("train.device_comm = \"" + want + "\" is not a device communicator: give auto, nccl, rccl, mpi "
                         "or staged");
  }
  if (a.kind == DeviceAddressing::Kind::host) return DeviceCommKind::host;
  if (a.kind == DeviceAddressing::Kind::mapped_host) {
    if (a.to_host == nullptr) return Status::error("the " + backend + " backend maps its memory but gives no to_host");
    return DeviceCommKind::mapped;
  }
  if (a.queue == nullptr) return Status::error("the " + backend + " backend keeps device memory but gives no DeviceQueue");
  const std::string vendor = a.queue->vendor();
  const std::string library = vendor == "cuda" ? "nccl" : vendor == "hip" ? "rccl" : "";
  const bool has_library = !library.empty() && vendor_collectives_built(vendor);
  const bool has_mpi = mpi_takes_device_pointers(vendor);
  const std::string choices = std::string("this build offers for it: ") + (has_library ? library + ", " : "") +
                              (has_mpi ? "mpi, " : "") + "staged";
  if (want == "auto") {
    if (has_library) return library == "nccl" ? DeviceCommKind::nccl : DeviceCommKind::rccl;
    if (has_mpi) return DeviceCommKind::mpi;
    return DeviceCommKind::staged;
  }
  if (want == "staged") return DeviceCommKind::staged;
  if (want == "mpi") {
    // Said by the user: the MPI library is trusted to take device pointers
    // (Cray MPICH with MPICH_GPU_SUPPORT_ENABLED=1), which gpu-emu's are not.
    if (vendor.empty()) {
      return Status::error("train.device_comm = \"mpi\": the " + backend + " backend's device memory is emulated, so no "
                           "MPI library can take its pointers; " + choices);
    }
    return DeviceCommKind::mpi;
  }
  if (want != library || !has_library) {
    return Status::error("train.device_comm = \"" + want + "\": " +
                         (want == library ? "this binary was built without " + want
                                          : "the " + backend + " backend's memory is not " +
                                                (want == "nccl" ? std::string("CUDA") : std::string("HIP")) + " memory") +
                         "; " + choices);
  }
  return want == "nccl" ? DeviceCommKind::nccl : DeviceCommKind::rccl;
}

std::string device_comm_description(DeviceCommKind kind) {
  switch (kind) {
    case DeviceCommKind::host: return "host memory; collectives by the host communicator";
    case DeviceCommKind::mapped: return "device memory mapped to the host; collectives by the host communicator";
    case DeviceCommKind::local: return "device memory; one rank per group, no collectives cross a rank";
    case DeviceCommKind::nccl: return "device memory; collectives by NCCL";
    case DeviceCommKind::rccl: return "device memory; collectives by RCCL";
    case DeviceCommKind::mpi: return "device memory; collectives by GPU-aware MPI (device pointers)";
    case DeviceCommKind::staged: return "device memory; collectives staged through host memory over MPI";
  }
  return "?";
}

int64_t device_comm_reserved_bytes(DeviceCommKind kind) {
  // NCCL (and RCCL): NCCL_BUFFSIZE (4 MiB) per channel and direction, about
  // 16 channels on a Hopper node's NVLink ring: 2 x 16 x 4 MiB.
  return kind == DeviceCommKind::nccl || kind == DeviceCommKind::rccl ? int64_t{128} << 20 : 0;
}

Expected<std::unique_ptr<Communicator>> make_device_communicator(Communicator& host, DeviceCommContext& c) {
  switch (c.kind) {
    case DeviceCommKind::host: return std::unique_ptr<Communicator>();
    case DeviceCommKind::mapped:
      return std::unique_ptr<Communicator>(std::make_unique<MappedCommunicator>(host, c.addressing.to_host));
    default: break;
  }
  DeviceQueue& q = *c.addressing.queue;
  if (host.size() == 1) return std::unique_ptr<Communicator>(std::make_unique<LocalCommunicator>(host, q));
  switch (c.kind) {
    case DeviceCommKind::mpi:
      return std::unique_ptr<Communicator>(std::make_unique<GpuAwareMpiCommunicator>(host, q));
    case DeviceCommKind::staged: {
      if (c.staged == nullptr) c.staged = make_staged_progress(q);
      StagedOptions so;
      so.timeout_s = c.options.timeout_s;
      so.strict = q.emulated() || strict_requested();
      return make_staged_communicator(host, c.staged, so);
    }
    case DeviceCommKind::nccl:
#if defined(TERA_HAVE_NCCL)
      return make_nccl_communicator(host, q, c.options.timeout_s);
#else
      return Status::error("the " + host.name() + " group: this binary was built without NCCL");
#endif
    default: break;
  }
  return Status::error("the " + host.name() + " group: no device communicator of this kind in this build (RCCL needs a "
                       "HIP build with RCCL)");
}

}  // namespace tera
