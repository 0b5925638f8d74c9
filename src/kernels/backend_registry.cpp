// The registry of backends (backend_registry.h).
#include "kernels/backend_registry.h"

#include "kernels/gpu/emu/backend_gpu_emu.h"
#if defined(TERA_HAVE_CUDA)
#include "kernels/gpu/cuda/backend_cuda.h"
#endif
#if defined(TERA_HAVE_HIP)
#include "kernels/gpu/hip/backend_hip.h"
#endif

namespace tera {

std::vector<std::string> backend_list() {
  std::vector<std::string> names = {"cpu", "cpu-guarded"};
#if defined(TERA_HAVE_GPU_EMU)
  names.emplace_back("gpu-emu");
#endif
#if defined(TERA_HAVE_CUDA)
  names.emplace_back("cuda");
#endif
#if defined(TERA_HAVE_HIP)
  names.emplace_back("hip");
#endif
  return names;
}

std::string backend_names() {
  std::string out;
  for (const std::string& n : backend_list()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool backend_built(std::string_view name) {
  for (const std::string& n : backend_list()) {
    if (n == name) return true;
  }
  return false;
}

namespace {

Expected<std::unique_ptr<Backend>> make_built(std::string_view name) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "cpu-guarded") return make_cpu_guarded_backend();
#if defined(TERA_HAVE_GPU_EMU)
  if (name == "gpu-emu") {
    auto options = gpu_emu_options_from_env();
    if (!options) return options.status();
    return make_gpu_emu_backend(*options);
  }
#endif
#if defined(TERA_HAVE_CUDA)
  if (name == "cuda") return make_cuda_backend();
#endif
#if defined(TERA_HAVE_HIP)
  if (name == "hip") return make_hip_backend();
#endif
  return Status::error("the " + std::string(name) + " backend is not built into this binary; it has: " + backend_names());
}

}  // namespace

Expected<std::unique_ptr<Backend>> make_backend(std::string_view name) {
  if (!backend_built(name)) {
    return Status::error("is not a backend of this binary; it has: " + backend_names());
  }
  auto made = make_built(name);
  if (!made) return made.status();
  if (const std::string why = (*made)->unavailable(); !why.empty()) {
    return Status::error("cannot start on this machine: " + why + " (this binary's backends: " + backend_names() + ")");
  }
  return made;
}

}  // namespace tera
