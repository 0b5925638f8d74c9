// Group construction by color/key splits of the world (Megatron rank order),
// then each group's device communicator (comm/device_comm.h).
#include "comm/groups.h"

#include <utility>

#include "core/check.h"

namespace tera {

Expected<std::unique_ptr<ProcessGroups>> ProcessGroups::create(Communicator& world, const ParallelLayout& layout,
                                                                const DeviceCommSetup& setup, int kv_replicas) {
  auto kind = choose_device_comm(setup.addressing, setup.options, setup.backend);
  if (!kind) return kind.status();
  std::unique_ptr<ProcessGroups> pg(new ProcessGroups());
  pg->device_ = DeviceCommContext{setup.addressing, *kind, setup.options, nullptr};
  pg->make_host_groups(world, layout, kv_replicas);
  TERA_RETURN_IF_ERROR(pg->make_device_groups());
  return pg;
}

ProcessGroups::ProcessGroups(Communicator& world, const ParallelLayout& layout, int kv_replicas) {
  make_host_groups(world, layout, kv_replicas);
  const Status s = make_device_groups();
  TERA_ASSERT(s.is_ok(), s.message());
}

void ProcessGroups::make_host_groups(Communicator& world, const ParallelLayout& layout, int kv_replicas) {
  TERA_ASSERT(world.size() == layout.world(), "layout " + layout_string(layout) + " does not match the world size");
  g_.layout = layout;
  g_.rank = world.rank();
  g_.coord = layout.coord(g_.rank);
  g_.world = &world;
  const auto c = g_.coord;
  const int cp = layout.cp;
  tp_ = world.split((c.pp * layout.dp + c.dp) * cp + c.cp, c.tp, "tp");
  dp_ = world.split((c.pp * layout.tp + c.tp) * cp + c.cp, c.dp, "dp");
  pp_ = world.split((c.dp * cp + c.cp) * layout.tp + c.tp, c.pp, "pp");
  cp_ = world.split((c.pp * layout.dp + c.dp) * layout.tp + c.tp, c.cp, "cp");
  if (cp > 1) zero_ = world.split(c.pp * layout.tp + c.tp, c.dp * cp + c.cp, "zero");
  const bool in_embedding = layout.pp > 1 && (c.pp == 0 || c.pp == layout.pp - 1);
  // Ranks outside the embedding group each get a singleton group they never use.
  auto emb = world.split(in_embedding ? (c.dp * cp + c.cp) * layout.tp + c.tp : layout.world() + g_.rank, c.pp,
                         "embedding");
  if (in_embedding) embedding_ = std::move(emb);
  TERA_ASSERT(kv_replicas >= 1 && layout.tp % kv_replicas == 0, "kv_replicas must divide tp");
  kv_ = tp_->split(c.tp / kv_replicas, c.tp, "kv");
  g_.tp = tp_.get();
  g_.dp = dp_.get();
  g_.pp = pp_.get();
  g_.embedding = embedding_.get();
  g_.kv = kv_.get();
  g_.cp = cp_.get();
  g_.zero = zero_ != nullptr ? zero_.get() : dp_.get();
}

// Each group's device communicator, in one order on every rank (making one
// is collective over its group).
Status ProcessGroups::make_device_groups() {
  const std::pair<Communicator*, std::unique_ptr<Communicator>*> made[] = {
      {g_.tp, &tp_dev_}, {g_.dp, &dp_dev_},     {g_.pp, &pp_dev_},
      {g_.embedding, &embedding_dev_}, {g_.kv, &kv_dev_}, {g_.cp, &cp_dev_},
      {zero_.get(), &zero_dev_}};
  for (const auto& [host, own] : made) {
    if (host == nullptr) continue;
    auto dev = make_device_communicator(*host, device_);
    if (!dev) return Status::error("the " + host->name() + " group's device communicator: " + dev.error());
    *own = std::move(*dev);
  }
  auto pick = [](Communicator* host, const std::unique_ptr<Communicator>& own) { return own != nullptr ? own.get() : host; };
  g_.tp_dev = pick(g_.tp, tp_dev_);
  g_.dp_dev = pick(g_.dp, dp_dev_);
  g_.pp_dev = pick(g_.pp, pp_dev_);
  g_.embedding_dev = g_.embedding == nullptr ? nullptr : pick(g_.embedding, embedding_dev_);
  g_.kv_dev = pick(g_.kv, kv_dev_);
  g_.cp_dev = pick(g_.cp, cp_dev_);
  g_.zero_dev = zero_ != nullptr ? pick(g_.zero, zero_dev_) : g_.dp_dev;
  return ok_status();
}

std::string ProcessGroups::device_comm_description() const {
  // A device backend whose every group has one rank never crosses a rank.
  const bool alone = g_.tp->size() == 1 && g_.dp->size() == 1 && g_.pp->size() == 1 && g_.cp->size() == 1;
  if (alone && device_.kind != DeviceCommKind::host && device_.kind != DeviceCommKind::mapped) {
    return ::tera::device_comm_description(DeviceCommKind::local);
  }
  return ::tera::device_comm_description(device_.kind);
}

int64_t ProcessGroups::device_comm_reserved_bytes() const {
  const int64_t each = ::tera::device_comm_reserved_bytes(device_.kind);
  int64_t groups = 0;
  const Communicator* zero = zero_.get();  // null at cp = 1: the dp group serves
  for (const Communicator* c : std::initializer_list<const Communicator*>{g_.tp, g_.dp, g_.pp, g_.embedding, g_.kv, g_.cp, zero}) {
    groups += c != nullptr && c->size() > 1;
  }
  if (g_.layout.pp > 1) groups += 2;  // the routes to the previous and the next stage (each a communicator of two)
  if (g_.layout.cp > 1) groups += 2;  // the ring's routes to the next and from the previous cp rank
  return groups * each;
}

std::vector<Communicator*> ProcessGroups::owned() const {
  return {tp_.get(),     dp_.get(),     pp_.get(),     embedding_.get(),     kv_.get(),     cp_.get(),     zero_.get(),
          tp_dev_.get(), dp_dev_.get(), pp_dev_.get(), embedding_dev_.get(), kv_dev_.get(), cp_dev_.get(), zero_dev_.get()};
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
