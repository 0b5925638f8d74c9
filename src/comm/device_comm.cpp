// Device communicators: the mapped-host forwarder, and NCCL where built; see device_comm.h.
#include "comm/device_comm.h"

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

}  // namespace

Expected<std::unique_ptr<Communicator>> make_device_communicator(Communicator& host, const DeviceAddressing& addressing) {
  switch (addressing.kind) {
    case DeviceAddressing::Kind::host: return std::unique_ptr<Communicator>();
    case DeviceAddressing::Kind::mapped_host:
      if (addressing.to_host == nullptr) return Status::error("a mapped_host backend must give to_host");
      return std::unique_ptr<Communicator>(std::make_unique<MappedCommunicator>(host, addressing.to_host));
    case DeviceAddressing::Kind::device:
#if defined(TERA_HAVE_NCCL)
      return make_nccl_communicator(host, addressing.compute_stream == nullptr ? nullptr : addressing.compute_stream());
#endif
      return Status::error("this backend's memory is device memory, which needs NCCL/RCCL device communicators; this "
                           "build has none (only MPI), so it cannot run that backend across ranks");
  }
  return Status::error("unknown device addressing");
}

}  // namespace tera
