// How a device communicator ends the job when it cannot go on (a peer that
// stopped answering, an asynchronous library error, ranks that disagree on
// the order of collectives): one message naming the rank, the group, the
// peer and the operation, then every rank ends (MPI_Abort where MPI runs,
// registered by the MPI world; else this process exits).
#pragma once

#include <string>

#include "comm/communicator.h"

namespace tera {

// The MPI world registers MPI_Abort here at start-up.
void set_job_abort(void (*abort_job)(int code));

// "tera: error: rank W (host H, pid P): <message>; ending the job" on
// stderr, then ends every rank with exit code 1.
[[noreturn]] void end_job(const Communicator& c, const std::string& message);

// The watchdog's message: `op` on group c has waited `waited` seconds for
// peer (a rank of c; -1: any rank of the group), past timeout_s.
[[noreturn]] void end_job_after_hang(const Communicator& c, int peer, const std::string& op, double waited,
                                     double timeout_s, const std::string& hint = "");

}  // namespace tera
