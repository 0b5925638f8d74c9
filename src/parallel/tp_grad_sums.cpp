// Tensor-parallel gradient sums; see tp_grad_sums.h.
#include "parallel/tp_grad_sums.h"

#include "core/check.h"

namespace tera {

TpGradSums::TpGradSums(const ParamTable& table, Communicator* tp_dev, bool sequence_parallel, Communicator* kv_dev)
    : table_(table),
      tp_(tp_dev),
      sp_(sequence_parallel && tp_dev != nullptr && tp_dev->size() > 1),
      kv_(table.kv_replicas() > 1 ? kv_dev : nullptr) {
  TERA_ASSERT(table.kv_replicas() == 1 || (kv_dev != nullptr && kv_dev->size() == table.kv_replicas()),
              "replicated key/value heads need the group of their replicas (ProcessGroups' kv_replicas)");
  kv_rows_.resize(table_.units().size());
  table_.for_each([&](const ParamEntry& e) {
    if (e.replicated_end > e.replicated_begin) {
      const int64_t at = e.offset - table_.units()[static_cast<size_t>(e.unit)].begin;
      kv_rows_[static_cast<size_t>(e.unit)].push_back({at + e.replicated_begin, at + e.replicated_end});
    }
  });
}

void TpGradSums::sum(int unit, float* g) {
  const ParamUnit& u = table_.units()[static_cast<size_t>(unit)];
  if (sp_ && u.sp_partial_end > u.begin) {
    // Sequence parallelism: LayerNorm / position gradients saw only this
    // rank's tokens; sum them over the tensor-parallel group first.
    tp_->all_reduce(g, u.sp_partial_end - u.begin, CommType::f32, ReduceOp::sum);
  }
  if (kv_ != nullptr) {
    // A replicated key/value head's gradient on each rank covers only its
    // own query heads' share: sum over the head's replicas.
    for (const auto& [b, e] : kv_rows_[static_cast<size_t>(unit)]) kv_->all_reduce(g + b, e - b, CommType::f32, ReduceOp::sum);
  }
}

}  // namespace tera
