// ZeroMemory: buffers per ZeRO stage, carved from the rank's memory plan,
// the parameters' initial values and updates. The parameter gathers are
// zero_gather.cpp, the gradient reductions zero_grads.cpp. See zero.h for
// the stages.
#include "parallel/zero.h"

#include <algorithm>

#include "core/check.h"

namespace tera {

ZeroMemory::ZeroMemory(const ParamTable& table, const RankPlan& plan, Communicator& dp_host, Communicator& dp_dev,
                       const Backend& be, RankMemory& memory, Communicator* tp_dev, Communicator* kv_dev)
    : table_(table),
      dp_host_(dp_host),
      dp_(dp_dev),
      tp_sums_(table, tp_dev, plan.act.sequence_parallel, kv_dev),
      zero_(plan.layout.zero),
      be_(be) {
  TERA_ASSERT(zero_ >= 0 && zero_ <= 3);
  TERA_ASSERT(dp_host.size() == dp_dev.size() && dp_host.rank() == dp_dev.rank(), "two communicators of one group");
  TERA_ASSERT(dp_.size() == plan.zero_group && dp_.rank() == plan.zero_rank, "the rank plan is for another ZeRO group");
  TERA_ASSERT(table_.units().size() == static_cast<size_t>(plan.unit_count), "the table is not the rank plan's");
  const int64_t p = dp_.size();
  const auto& units = table_.units();
  sizes_ = plan.zero;  // the rank plan's buffers (partition/memory_plan.h ZeroSizes)
  staging_of_unit_.assign(units.size(), nullptr);
  dedicated_staging_.assign(units.size(), nullptr);
  dedicated_gather_.assign(units.size(), Gather{});
  for (const auto& u : units) {
    shard_offset_.push_back(shard_floats_);
    shard_floats_ += u.size() / p;
  }
  int64_t max_block = 0, max_chunk = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    if (dedicated(static_cast<int>(u))) {
      first_block_unit_ = static_cast<int>(u) + 1;
    } else {
      max_block = std::max(max_block, units[u].size());
    }
    max_chunk = std::max(max_chunk, units[u].size() / p);
  }
  max_block_ = max_block;
  max_chunk_ = max_chunk;
  const int64_t pool = max_block > 0 ? 2 : 0;  // block buffers: the one in use and the next

  // The plan's buffers, checked against the sizes this stage needs.
  auto bind = [&](MemoryClass c, const char* name, int64_t want) -> float* {
    const DeviceArena& a = memory.arena(c);
    TERA_ASSERT(a.count(name) == want, std::string("the memory plan's ") + name + " has " + std::to_string(a.count(name)) +
                                           " floats; ZeRO-" + std::to_string(zero_) + " needs " + std::to_string(want));
    return a.get<float>(name);
  };
  params_ = bind(MemoryClass::parameters, "params", sizes_.params);
  grads_ = bind(MemoryClass::gradients, "grads", sizes_.grads);
  grad_shard_ = bind(MemoryClass::gradients, "grad_shard", sizes_.grad_shard);
  staging_ = bind(MemoryClass::zero_staging, "grad_staging", sizes_.staging);
  temps_ = bind(MemoryClass::comm_buckets, "reduce_scatter_out", sizes_.temps);
  gathered_ = bind(MemoryClass::zero_gather, "gathered_params", sizes_.gathered);
  compute_ = memory.arena(MemoryClass::parameters).get<uint16_t>("compute_weights");
  gathered_compute_ = memory.arena(MemoryClass::zero_gather).get<uint16_t>("gathered_compute_weights");
  TERA_ASSERT(compute_ == nullptr || memory.arena(MemoryClass::parameters).count("compute_weights") == sizes_.params,
              "the memory plan's compute_weights do not match params");
  carve_pools(pool);
  // What this rank updates: everything (zero 0) or its chunk of every unit.
  if (zero_ == 0) {
    ranges_.push_back({0, table_.total_floats()});
  } else {
    for (size_t u = 0; u < units.size(); ++u) ranges_.push_back({chunk_begin(static_cast<int>(u)), chunk_begin(static_cast<int>(u)) + chunk(static_cast<int>(u))});
  }
}

ZeroMemory::~ZeroMemory() {
  while (!pending_.empty()) complete_oldest();
  for (Gather& g : dedicated_gather_) dp_.wait(g.req);
  for (Gather& g : block_gathers_) dp_.wait(g.req);
}

void ZeroMemory::carve_pools(int64_t pool) {
  const auto& units = table_.units();
  if (zero_ >= 2) {
    // Staging: [dedicated units' buffers, pool x max_block_]; a temp per staging buffer.
    float* next = staging_;
    for (size_t u = 0; u < units.size(); ++u) {
      if (!dedicated(static_cast<int>(u))) continue;
      dedicated_staging_[u] = next;
      staging_buffers_.push_back(next);
      next += units[u].size();
    }
    for (int64_t k = 0; k < pool; ++k) {
      free_staging_.push_back(next);
      staging_buffers_.push_back(next);
      next += max_block_;
    }
    for (size_t k = 0; k < staging_buffers_.size(); ++k) temp_of_staging_.push_back(temps_ + k * max_chunk_);
  }
  if (zero_ == 3) {
    // Gathers: [dedicated units' buffers, pool x max_block_].
    float* next = gathered_;
    for (size_t u = 0; u < units.size(); ++u) {
      if (!dedicated(static_cast<int>(u))) continue;
      dedicated_gather_[u].buf = next;
      next += units[u].size();
    }
    for (int64_t k = 0; k < pool; ++k) {
      block_gathers_[k].buf = next;
      next += max_block_;
    }
  }
}

float* ZeroMemory::temp_for(const float* staging) const {
  for (size_t k = 0; k < staging_buffers_.size(); ++k) {
    if (staging_buffers_[k] == staging) return temp_of_staging_[k];
  }
  TERA_ASSERT(false, "unknown staging buffer");
  return nullptr;
}

void ZeroMemory::init_parameters(uint64_t seed) {
  // A unit at a time through one host buffer: the whole unit (zero 0-2) or
  // this rank's chunk of it (zero 3).
  std::vector<float> host(static_cast<size_t>(table_.max_unit_floats()));
  for (size_t u = 0; u < table_.units().size(); ++u) {
    const int ui = static_cast<int>(u);
    const ParamUnit& unit = table_.units()[u];
    const int64_t b = zero_ < 3 ? unit.begin : chunk_begin(ui), n = zero_ < 3 ? unit.size() : chunk(ui);
    tera::init_parameters(table_, seed, b, b + n, host.data());
    float* dst = zero_ < 3 ? params_ + unit.begin : shard_ptr(params_, ui);
    be_.copy(dst, host.data(), n * 4, CopyKind::host_to_device);
  }
  refresh_compute_weights();
}

void ZeroMemory::refresh_compute_weights() {
  if (compute_ != nullptr) be_.cast(compute_, DType::bf16, params_, DType::f32, sizes_.params);
}

std::vector<ZeroMemory::Shard> ZeroMemory::shards() {
  std::vector<Shard> out;
  if (zero_ == 0) {
    out.push_back({0, table_.total_floats(), params_, grads_, compute_});
    return out;
  }
  const auto& units = table_.units();
  out.reserve(units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    const int ui = static_cast<int>(u);
    const int64_t b = chunk_begin(ui);
    float* prm = zero_ == 3 ? shard_ptr(params_, ui) : params_ + b;
    out.push_back({b, b + chunk(ui), prm, shard_ptr(grad_shard_, ui)});
  }
  return out;
}

void ZeroMemory::shards_updated() {
  // The shards changed: gathered embedding units are stale from here on.
  for (Gather& g : dedicated_gather_) {
    dp_.wait(g.req);
    g.in_use = false;
  }
  if (zero_ == 1 || zero_ == 2) {
    // Every rank updated its chunk of each unit: gather the units back in place.
    const auto& units = table_.units();
    std::vector<Request> reqs;
    for (size_t k = 0; k < units.size(); ++k) {
      const int ki = static_cast<int>(k);
      reqs.push_back(dp_.iall_gather(params_ + chunk_begin(ki), params_ + units[k].begin, chunk(ki), CommType::f32));
    }
    for (auto& r : reqs) dp_.wait(r);
  }
  // ZeRO-0: the optimizer wrote the bf16 copy with the update (shards()).
  if (zero_ != 0) refresh_compute_weights();
}

}  // namespace tera
