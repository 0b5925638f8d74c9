// A collective verdict over a communicator; see agree.h.
#include "comm/agree.h"

namespace tera {

Status agree(Communicator& comm, const Status& local, const std::string& peer_message, AgreeReport report) {
  // The max over ranks of (size - rank) for failed ranks, -1 for ok ones:
  // positive when any failed, and it names the lowest failed rank.
  const int n = comm.size(), me = comm.rank();
  const double lowest = comm.all_reduce_max(local ? -1.0 : static_cast<double>(n - me));
  if (lowest < 0) return ok_status();
  const bool mine = report == AgreeReport::every_failed_rank || n - me == static_cast<int>(lowest);
  if (!local && mine) return local;
  return Status::peer_failed(peer_message);
}

bool any_rank(Communicator& comm, bool flag) { return comm.all_reduce_max(flag ? 1.0 : 0.0) > 0; }

}  // namespace tera
