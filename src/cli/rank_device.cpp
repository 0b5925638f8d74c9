// Ranks on devices; see rank_device.h.
#include "cli/rank_device.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "cli/commands.h"
#include "comm/agree.h"

namespace tera::cli {

std::string bind_before_mpi(const Backend& backend, const LocalPlace& place) {
  if (!backend.binds_devices() || place.rank < 0) return "";
  return backend.bind_device(place.rank, place.size);
}

bool bind_rank_device(const Backend& backend, CommWorld& world, const LocalPlace& place) {
  if (!backend.binds_devices()) return true;
  Communicator& comm = world.world();
  std::string why;
  if (place.rank != world.local_rank() || place.size != world.local_size()) {
    why = backend.bind_device(world.local_rank(), world.local_size());
  }
  if (!why.empty()) {
    print_error(fmt::format("train.backend = \"{}\", rank {} ({} of {} on {}): {}", backend.name, comm.rank(),
                            world.local_rank(), world.local_size(), world.host(), why));
  }
  if (any_rank(comm, !why.empty())) return false;
  // Every rank's device and node, in rank order: two ranks on one GPU (each
  // shown the same single GPU) would fail later inside NCCL.
  constexpr int64_t kId = 64, kHost = 192;
  std::vector<uint8_t> mine(kId + kHost, 0), all(static_cast<size_t>((kId + kHost) * comm.size()));
  const std::string id = backend.device_identity(), host = world.host();
  std::copy_n(id.begin(), std::min<size_t>(id.size(), kId - 1), mine.begin());
  std::copy_n(host.begin(), std::min<size_t>(host.size(), kHost - 1), mine.begin() + kId);
  comm.all_gather(mine.data(), all.data(), kId + kHost, CommType::u8);
  const auto field = [&](int r, int64_t at) {
    return std::string(reinterpret_cast<const char*>(all.data() + r * (kId + kHost) + at));
  };
  std::vector<std::string> ids;
  for (int r = 0; r < comm.size(); ++r) ids.push_back(field(r, 0));
  const auto [a, b] = ranks_sharing_a_device(ids);
  if (a < 0) return true;
  if (comm.rank() == 0) {
    print_error(fmt::format("train.backend = \"{}\": ranks {} and {} (on {}) were both given GPU {}: each rank needs a "
                            "GPU of its own; with one GPU visible per rank, make it a different one "
                            "(srun --gpus-per-task=1, or CUDA_VISIBLE_DEVICES per local rank)",
                            backend.name, a, b, field(a, kId), ids[static_cast<size_t>(a)]));
  }
  return false;
}

}  // namespace tera::cli
