// Analytic checks of every Communicator operation, shared by the in-process
// test (threads) and the MPI test (run under mpirun): inputs are small
// integers, so every reduction is exact and results are compared with ==.
#pragma once

#include "comm/communicator.h"

namespace tera::testing {

void check_all_reduce(Communicator& c);
void check_reduce_scatter(Communicator& c);
void check_concurrent_reduce_scatters(Communicator& c);
void check_all_gather(Communicator& c);
void check_broadcast(Communicator& c);
void check_send_recv_ring(Communicator& c);
void check_split(Communicator& c);
void check_nonblocking_overlap(Communicator& c);
void check_byte_accounting(Communicator& c);

inline void check_everything(Communicator& c) {
  check_all_reduce(c);
  check_reduce_scatter(c);
  check_concurrent_reduce_scatters(c);
  check_all_gather(c);
  check_broadcast(c);
  check_send_recv_ring(c);
  check_split(c);
  check_nonblocking_overlap(c);
  check_byte_accounting(c);
}

}  // namespace tera::testing
