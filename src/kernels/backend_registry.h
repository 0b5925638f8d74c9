// The backends this binary has, by name, and how to make an instance of
// each: the one place that knows them all (cpu and cpu-guarded always;
// gpu-emu and cuda where built). Every command that takes a backend name
// (train, eval, generate, calibrate, the benchmarks) starts it here.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "kernels/backend.h"

namespace tera {

// The names this binary has, in a fixed order: "cpu", "cpu-guarded", ...
std::vector<std::string> backend_list();
std::string backend_names();  // the same, comma-separated
bool backend_built(std::string_view name);

// A new instance of the backend called `name`, ready to bind a device and
// allocate. Refused when this binary has no backend of that name ("is not a
// backend of this binary; it has: ...": the caller prefixes the name), when
// its settings are malformed (gpu-emu's environment, naming the variable),
// or when it cannot start on this machine ("cannot start on this machine:"
// and its unavailable(): cuda without a usable GPU, in the driver's words).
Expected<std::unique_ptr<Backend>> make_backend(std::string_view name);

// The process's cpu backend: stateless, so one instance serves everyone.
const Backend& cpu_backend();
std::unique_ptr<Backend> make_cpu_backend();
// The CPU kernels over device memory that host code cannot touch: every
// pointer it hands out faults when the host dereferences it, and every op
// checks that it was given device pointers (kernels/guarded/). CI runs the
// trainer on it to prove that nothing outside kernels/ touches tensor memory.
std::unique_ptr<Backend> make_cpu_guarded_backend();

}  // namespace tera
