// The op list's names and completeness check; see backend.h.
#include "kernels/backend.h"

#include <map>

namespace tera {

const char* kernel_op_name(KernelOp op) {
  switch (op) {
#define TERA_KERNEL_OP_NAME(o, Fn, need) \
  case KernelOp::o: return #o;
    TERA_BACKEND_OPS(TERA_KERNEL_OP_NAME)
#undef TERA_KERNEL_OP_NAME
  }
  return "?";
}

OpNeed kernel_op_need(KernelOp op) {
  switch (op) {
#define TERA_KERNEL_OP_NEED(o, Fn, need) \
  case KernelOp::o: return OpNeed::need;
    TERA_BACKEND_OPS(TERA_KERNEL_OP_NEED)
#undef TERA_KERNEL_OP_NEED
  }
  return OpNeed::required;
}

namespace {
// The ops of class `need` that b leaves null, comma-separated.
std::string missing_ops(const Backend& b, OpNeed need) {
  std::string out;
#define TERA_KERNEL_OP_MISSING(o, Fn, n)                                \
  if (kernel_op_need(KernelOp::o) == need && b.ops().o == nullptr) out += (out.empty() ? "" : ", ") + std::string(#o);
  TERA_BACKEND_OPS(TERA_KERNEL_OP_MISSING)
#undef TERA_KERNEL_OP_MISSING
  return out;
}
}  // namespace

std::string missing_required_ops(const Backend& b) { return missing_ops(b, OpNeed::required); }
std::string missing_bf16_ops(const Backend& b) { return missing_ops(b, OpNeed::bf16); }
std::string missing_cp_ops(const Backend& b) { return missing_ops(b, OpNeed::cp); }

int device_for_rank(int local_rank, int local_size, int devices) {
  if (devices <= 0 || local_rank < 0 || local_rank >= local_size) return -1;
  if (devices == 1) return 0;
  return local_size <= devices ? local_rank : -1;
}

std::string too_few_devices(int local_size, int devices) {
  return std::to_string(local_size) + " ranks run on this node but it has " + std::to_string(devices) +
         " GPUs visible to each: start one rank per GPU (mpirun -n, srun --ntasks-per-node) or give each rank "
         "its own GPU (srun --gpus-per-task=1)";
}

std::pair<int, int> ranks_sharing_a_device(const std::vector<std::string>& identities) {
  std::map<std::string, int> first_rank;
  for (int r = 0; r < static_cast<int>(identities.size()); ++r) {
    const std::string& id = identities[static_cast<size_t>(r)];
    if (id.empty()) continue;
    const auto [it, fresh] = first_rank.emplace(id, r);
    if (!fresh) return {it->second, r};
  }
  return {-1, -1};
}

bool Backend::has(KernelOp op) const {
  switch (op) {
#define TERA_KERNEL_OP_HAS(o, Fn, need) \
  case KernelOp::o: return ops_.o != nullptr;
    TERA_BACKEND_OPS(TERA_KERNEL_OP_HAS)
#undef TERA_KERNEL_OP_HAS
  }
  return false;
}

}  // namespace tera
