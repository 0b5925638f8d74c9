// The measurements of `tera calibrate` that run on this machine's ranks
// (plan/calibration_measurements.h holds what they return; plan/local_preset.h
// fits them): the runtime's kernels alone (the mean over ranks under MPI), two
// reference training runs, STREAM triad bandwidth and, under MPI, a ping-pong
// between ranks 0 and 1 and all-reduces over every rank. Each function taking
// a Communicator is collective over it.
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.h"
#include "plan/calibration_measurements.h"

namespace tera {

// The runtime's own kernels at transformer-block shapes; with MPI every
// rank measures at once (they share the cores as training ranks do) and
// the mean over ranks is what a rank gets.
RuntimeTimings measure_runtime(Communicator& comm, bool mpi, double seconds_per_shape);

// The same kernels inside real training steps (one rank each; with MPI all
// ranks at once), on two reference shapes unlike any benchmark's, in a
// scratch directory removed afterwards. Returns what failed ("" when none
// did). Not collective: the caller agrees on the outcome.
std::string time_in_training(Communicator& comm, std::vector<InSituTimes>* insitu);

// Each in-training time replaced by its mean over the ranks.
void mean_over_ranks(Communicator& comm, std::vector<InSituTimes>* insitu);

// Memory bandwidth (m->bw), and with m->mpi the ping-pong link and the all-reduces.
void measure_links(Communicator& comm, double seconds_per_shape, CalibrationMeasurements* m);

// The node's memory (MemTotal of /proc/meminfo; 8 GiB where unreadable).
double system_memory_bytes();

}  // namespace tera
