// The ring's shifts over the context-parallel communicator; see cp_comm.h.
#include "parallel/cp_comm.h"

#include "core/check.h"

namespace tera {

CommContextParallel::CommContextParallel(Communicator& cp) : c_(cp) {
  std::vector<P2pRoute> routes;
  for (int r = 0; r < cp.size() && cp.size() > 1; ++r) {
    for (Stream s : {blocks, block_grads}) routes.push_back({r, (r + 1) % cp.size(), tag(s)});
  }
  const Status st = c_.open_routes(routes);
  TERA_ASSERT(st.is_ok(), "the context-parallel ring: " + st.message());
}

void CommContextParallel::start_shift(Stream stream, const float* send, float* recv, int64_t count) {
  const int64_t bytes = count * static_cast<int64_t>(sizeof(float));
  const int n = c_.size(), r = c_.rank();
  auto& pending = pending_[static_cast<int>(stream)];
  pending.push_back(c_.irecv(recv, bytes, (r + n - 1) % n, tag(stream)));
  pending.push_back(c_.isend(send, bytes, (r + 1) % n, tag(stream)));
}

void CommContextParallel::finish_shift(Stream stream) {
  auto& pending = pending_[static_cast<int>(stream)];
  for (Request& q : pending) c_.wait(q);
  pending.clear();
}

}  // namespace tera
