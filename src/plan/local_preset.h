// The `local` cluster preset fitted to what `tera calibrate` measured
// (plan/calibration_measurements.h), in order: the GEMM curve from the
// linear layers alone; the links (under MPI: alpha and the link efficiency
// from the all-reduces); memory-bound ops alone (per-op overhead, a first
// hbm efficiency); then, inside the two reference training runs, gemm_max,
// hbm and the attention efficiency (flash, or naive attention's matmuls and
// softmax). Each fit appends the lines `tera calibrate` prints to a report.
#pragma once

#include <string>

#include "plan/calibration_fit.h"
#include "plan/calibration_measurements.h"
#include "plan/hardware.h"

namespace tera {

// GEMM curve: a linear layer's forward is the cost model's GEMM (m=N, n=O,
// k=I); its backward two GEMMs of the same dims (the curve is symmetric).
// `rates` gets one line per layer, `record` the preset's table of them.
GemmFit fit_linear_layers(const RuntimeTimings& rt, std::string* rates, std::string* record);

// The lines for the MPI link, the GEMM fit and the triad bandwidth.
std::string measured_summary(const CalibrationMeasurements& m, const GemmFit& fit);

// The preset fitted from the measurements (see above); `report` gets each fit's lines.
Cluster fit_local_cluster(const CalibrationMeasurements& m, const GemmFit& fit, std::string* report);

// The preset file's text: a header saying how it was measured, the cluster,
// and a [calibration] table (the linear layers' record, the memory ops').
std::string local_preset_text(const Cluster& c, const CalibrationMeasurements& m, const GemmFit& fit,
                              const std::string& linear_record);

}  // namespace tera
