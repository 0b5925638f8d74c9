// Each rank on a device of its own (backends that bind devices: one rank per
// GPU): before MPI starts from the launcher's local rank, else after from
// MPI's, then a check that no two ranks were given one device. Messages
// name the rank, its node and the fix; the caller exits with bad input.
#pragma once

#include <string>

#include "comm/world.h"
#include "kernels/backend.h"

namespace tera::cli {

// Puts this process on its device before MPI starts (a CUDA-aware MPI
// would otherwise open a context on device 0 in every rank), from the
// launcher's local rank; "" when done or nothing to do, else why not.
std::string bind_before_mpi(const Backend& backend, const LocalPlace& place);

// Puts this rank on its device of the node (Backend::bind_device: one rank
// per GPU) before anything allocates, where the launcher did not say the
// local rank before MPI started, or said another than MPI's. False when any
// rank cannot: each rank that failed prints why (their nodes may differ),
// every rank learns it. Then no two ranks may hold one device
// (Backend::device_identity): rank 0 names the first pair. Collective.
bool bind_rank_device(const Backend& backend, CommWorld& world, const LocalPlace& place);

}  // namespace tera::cli
