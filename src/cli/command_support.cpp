// The helpers every subcommand shares (commands.h): error lines, once per
// job before MPI starts, and a backend started by name.
#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/console.h"
#include "kernels/backend_registry.h"

namespace tera::cli {

void print_error(const std::string& msg) { print_err(fmt::format("tera: error: {}\n", msg)); }

void print_error_once(const std::string& msg) {
  // Before MPI starts, the launcher's variables say which rank this is.
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* r = std::getenv(v); r != nullptr && *r) {
      if (std::string(r) != "0") return;
      break;
    }
  }
  print_error(msg);
}

std::unique_ptr<Backend> start_backend(const std::string& name, const std::string& what) {
  auto made = make_backend(name);
  if (!made) {
    const bool flag = what.rfind("--", 0) == 0;
    print_error_once(flag ? fmt::format("{} {} {}", what, name, made.error())
                          : fmt::format("{} = \"{}\" {}", what, name, made.error()));
    return nullptr;
  }
  return std::move(*made);
}

}  // namespace tera::cli
