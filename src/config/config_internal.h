// The run config's internals shared by its three files: the key table
// (config_keys.cpp: every key, its TOML kind and where it lands in a
// RunConfig) and the semantic checks that follow parsing
// (config_checks.cpp); config.cpp reads the TOML, applies overrides and
// drives both. Not for use outside config/ (config/config.h is the API).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "config/run_config.h"
#include "core/status.h"

namespace tera::config_internal {

enum class Kind { integer, number, number32, string, boolean, integer_array, blend };  // number32: stored as a float
const char* kind_name(Kind k);

struct Field {
  const char* key;  // "section.name"
  Kind kind;
  std::function<void(RunConfig&, const toml::node&)> set;
};

// Every key a run config may have.
std::vector<Field> schema();

// The checks across keys and against the files a run reads (check_files),
// after every key parsed; the error names src, the key and the fix.
Status validate(const RunConfig& c, const std::string& src, bool check_files);

}  // namespace tera::config_internal
