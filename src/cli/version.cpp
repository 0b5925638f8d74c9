// Build information printed by `tera version`.
#include "cli/version.h"

#include <omp.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"

#include "kernels/backend_registry.h"

#ifndef TERA_VERSION
#define TERA_VERSION "0.0.0"
#endif
#ifndef TERA_GIT_REV
#define TERA_GIT_REV "unknown"
#endif

namespace tera::cli {

const char* tera_version_string() { return TERA_VERSION; }

std::string tera_build_info() {
  return fmt::format(
      "tera {} (git {})\n"
      "compiler: {} {}.{}.{}, C++{}\n"
      "backends: {} (cpu: {}, OpenMP {} threads)\n"
      "built: {} {}",
      TERA_VERSION, TERA_GIT_REV, "g++", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__, __cplusplus / 100 % 100,
      backend_names(), cpu_backend().gemm_library, omp_get_max_threads(), __DATE__, __TIME__);
}

Command add_version_command(CLI::App& parent) {
  auto* sub = parent.add_subcommand("version", "Print the version and build information");
  return {sub, [] {
            fmt::print("{}\n", tera_build_info());
            return kExitOk;
          }};
}

}  // namespace tera::cli
