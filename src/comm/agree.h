// One verdict for every rank: did any rank of a communicator fail? The
// "every rank learns whether any failed, so nobody is left waiting in a
// collective" step that follows local checks (config, files, outputs).
//
// agree(comm, local, peer_message[, report]) is collective over comm (one
// all-reduce of one double); every rank passes its own status:
//   - no rank failed: every rank returns ok;
//   - some failed, report = every_failed_rank: each failed rank returns its
//     own status unchanged, each ok rank Status::peer_failed(peer_message);
//   - report = lowest_failed_rank: only the lowest-numbered failed rank
//     returns its own status; every other rank, failed or not, returns
//     peer_failed(peer_message). For input every rank sees alike (a layout
//     the world cannot take), so its message is printed once per job.
// cli/ prints a peer_failed message on the first rank only (status.h).
#pragma once

#include <string>

#include "comm/communicator.h"
#include "core/status.h"

namespace tera {

enum class AgreeReport { every_failed_rank, lowest_failed_rank };

Status agree(Communicator& comm, const Status& local, const std::string& peer_message,
             AgreeReport report = AgreeReport::every_failed_rank);

// True on every rank when `flag` is true on any rank (collective over comm).
bool any_rank(Communicator& comm, bool flag);

}  // namespace tera
