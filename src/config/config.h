// Parses and validates a run config: a TOML file plus `--set section.key=value`
// overrides. Every problem is reported as one message that names the file,
// the key and the fix; unknown keys get a "did you mean" suggestion.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "config/run_config.h"

namespace tera {

// check_files: also verify that data files exist (off for tools that only
// need the model shape).
Expected<RunConfig> load_run_config(const std::string& path, const std::vector<std::string>& overrides,
                                    bool check_files = true);
// Same, from TOML text (tests).
Expected<RunConfig> parse_run_config(const std::string& toml_text, const std::string& source,
                                     const std::vector<std::string>& overrides, bool check_files = true);

// The config as TOML text (saved next to checkpoints and printed by --emit).
std::string run_config_to_toml(const RunConfig& cfg);

}  // namespace tera
