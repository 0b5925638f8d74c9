// What the MPI files of comm/ share (mpi_comm.cpp, mpi_watchdog.cpp,
// mpi_world.cpp; it includes <mpi.h>, so nothing else in tera includes it):
// TERA_MPI_CHECK, the hang watchdog's policy, roll calls and wait context
// with wait_all (the one way a request is waited for), and the communicator
// the world is made from. Only the main thread calls MPI (MPI_THREAD_FUNNELED).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/check.h"

#define TERA_MPI_CHECK(expr)                                                                      \
  do {                                                                                            \
    const int _rc = (expr);                                                                       \
    if (_rc != MPI_SUCCESS) {                                                                     \
      char _msg[MPI_MAX_ERROR_STRING];                                                            \
      int _len = 0;                                                                               \
      MPI_Error_string(_rc, _msg, &_len);                                                         \
      ::tera::assert_fail(#expr, __FILE__, __LINE__, std::string("MPI error: ") + _msg);          \
    }                                                                                             \
  } while (0)

namespace tera {

namespace mpi {

// The hang watchdog's setting, shared by the world and every communicator
// split from it.
struct WatchdogPolicy {
  double timeout_s = 600;
};

// Roll call: MPI cannot say which member of a group has not reached a
// collective, so a rank whose collective on a group of more than two times
// out asks every other member over the group's roll-call communicator. A
// rank answers while it waits (wait_all's poll loop answers the roll calls
// of every group it belongs to) with the operation it waits in; a member
// that does not answer within the grace is the one named: stopped, hung,
// dead, or busy outside any wait.
struct RollCall {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;                 // this rank in the group
  std::vector<int> world_ranks;  // the members' world ranks
};

// Every live communicator's roll call (main thread only: MPI_THREAD_FUNNELED).
std::vector<const RollCall*>& roll_calls();

// What a wait is for, so that a wait that times out can say what hung.
struct WaitContext {
  std::shared_ptr<const WatchdogPolicy> policy;
  std::string group;    // "dp (world ranks 1, 3)"
  int world_rank = 0;
  int peer = -1;        // world rank waited for (point-to-point, a pair's other rank); -1: any of the group
  std::shared_ptr<const RollCall> roll;  // the group's roll call, for peer = -1
};

// MPI_Waitall with a deadline: spins on MPI_Testall (what MPI_Wait does
// inside Open MPI), yielding the core after half a second, so a long wait
// (a pipeline bubble, a slow rank) costs no latency and a hung one ends.
void wait_all(int n, MPI_Request* reqs, const WaitContext& c, const std::string& op);

// The communicator over `comm` (mpi_comm.cpp); `owned`: it frees comm.
std::unique_ptr<Communicator> make_mpi_comm(MPI_Comm comm, std::string name, bool owned,
                                            std::shared_ptr<WatchdogPolicy> policy);

}  // namespace mpi

}  // namespace tera
