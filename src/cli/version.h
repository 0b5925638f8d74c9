// Version and build description (git revision, compiler, BLAS, OpenMP threads).
#pragma once

#include <string>

namespace tera::cli {

const char* tera_version_string();
std::string tera_build_info();

}  // namespace tera::cli
