// The op list's names and completeness check; see backend.h.
#include "kernels/backend.h"

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
  if (kernel_op_need(KernelOp::o) == need && b.o == nullptr) out += (out.empty() ? "" : ", ") + std::string(#o);
  TERA_BACKEND_OPS(TERA_KERNEL_OP_MISSING)
#undef TERA_KERNEL_OP_MISSING
  return out;
}
}  // namespace

std::string missing_required_ops(const Backend& b) { return missing_ops(b, OpNeed::required); }
std::string missing_bf16_ops(const Backend& b) { return missing_ops(b, OpNeed::bf16); }

int device_for_rank(int local_rank, int local_size, int devices) {
  if (devices <= 0 || local_rank < 0 || local_rank >= local_size) return -1;
  if (devices == 1) return 0;
  return local_size <= devices ? local_rank : -1;
}

bool has_op(const Backend& b, KernelOp op) {
  switch (op) {
#define TERA_KERNEL_OP_HAS(o, Fn, need) \
  case KernelOp::o: return b.o != nullptr;
    TERA_BACKEND_OPS(TERA_KERNEL_OP_HAS)
#undef TERA_KERNEL_OP_HAS
  }
  return false;
}

}  // namespace tera
