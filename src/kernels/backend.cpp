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

bool kernel_op_required(KernelOp op) {
  constexpr bool required = true, optional = false;
  (void)required;
  (void)optional;
  switch (op) {
#define TERA_KERNEL_OP_NEED(o, Fn, need) \
  case KernelOp::o: return need;
    TERA_BACKEND_OPS(TERA_KERNEL_OP_NEED)
#undef TERA_KERNEL_OP_NEED
  }
  return true;
}

std::string missing_required_ops(const Backend& b) {
  std::string out;
#define TERA_KERNEL_OP_MISSING(o, Fn, need)                                \
  if (kernel_op_required(KernelOp::o) && b.o == nullptr) out += (out.empty() ? "" : ", ") + std::string(#o);
  TERA_BACKEND_OPS(TERA_KERNEL_OP_MISSING)
#undef TERA_KERNEL_OP_MISSING
  return out;
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
