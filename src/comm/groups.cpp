// Group construction by color/key splits of the world (Megatron rank order).
#include "comm/groups.h"

#include "comm/device_comm.h"
#include "core/check.h"

namespace tera {

namespace {

// The device communicator of a group: made over the host one, or the host one itself.
Communicator* device_of(Communicator* host, const DeviceAddressing& addressing, std::unique_ptr<Communicator>& own) {
  if (host == nullptr) return nullptr;
  auto made = make_device_communicator(*host, addressing);
  TERA_ASSERT(made.ok(), made.ok() ? std::string() : made.error());
  own = std::move(*made);
  return own != nullptr ? own.get() : host;
}

}  // namespace

ProcessGroups::ProcessGroups(Communicator& world, const ParallelLayout& layout, const DeviceAddressing& addressing,
                             int kv_replicas) {
  TERA_ASSERT(world.size() == layout.world(), "layout " + layout_string(layout) + " does not match the world size");
  TERA_ASSERT(layout.cp == 1, "the runtime has no context parallelism (cp = 1)");
  g_.layout = layout;
  g_.rank = world.rank();
  g_.coord = layout.coord(g_.rank);
  g_.world = &world;
  const auto c = g_.coord;
  tp_ = world.split(c.pp * layout.dp + c.dp, c.tp, "tp");
  dp_ = world.split(c.pp * layout.tp + c.tp, c.dp, "dp");
  pp_ = world.split(c.dp * layout.tp + c.tp, c.pp, "pp");
  const bool in_embedding = layout.pp > 1 && (c.pp == 0 || c.pp == layout.pp - 1);
  // Ranks outside the embedding group each get a singleton group they never use.
  auto emb = world.split(in_embedding ? c.dp * layout.tp + c.tp : layout.world() + g_.rank, c.pp, "embedding");
  if (in_embedding) embedding_ = std::move(emb);
  TERA_ASSERT(kv_replicas >= 1 && layout.tp % kv_replicas == 0, "kv_replicas must divide tp");
  kv_ = tp_->split(c.tp / kv_replicas, c.tp, "kv");
  g_.tp = tp_.get();
  g_.dp = dp_.get();
  g_.pp = pp_.get();
  g_.embedding = embedding_.get();
  g_.kv = kv_.get();
  g_.tp_dev = device_of(g_.tp, addressing, tp_dev_);
  g_.dp_dev = device_of(g_.dp, addressing, dp_dev_);
  g_.pp_dev = device_of(g_.pp, addressing, pp_dev_);
  g_.embedding_dev = device_of(g_.embedding, addressing, embedding_dev_);
  g_.kv_dev = device_of(g_.kv, addressing, kv_dev_);
}

std::vector<Communicator*> ProcessGroups::owned() const {
  return {tp_.get(),     dp_.get(),     pp_.get(),     embedding_.get(),     kv_.get(),
          tp_dev_.get(), dp_dev_.get(), pp_dev_.get(), embedding_dev_.get(), kv_dev_.get()};
}

CommStats ProcessGroups::stats() const {
  CommStats s = g_.world->stats();
  for (const Communicator* c : owned()) {
    if (c != nullptr) s += c->stats();
  }
  return s;
}

void ProcessGroups::set_trace(Trace* trace) {
  g_.world->set_trace(trace);
  for (Communicator* c : owned()) {
    if (c != nullptr) c->set_trace(trace);
  }
}

void ProcessGroups::reset_stats() {
  g_.world->reset_stats();
  for (Communicator* c : owned()) {
    if (c != nullptr) c->reset_stats();
  }
}

}  // namespace tera
