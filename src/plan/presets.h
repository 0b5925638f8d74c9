// Finding and reading presets: `--cluster NAME|FILE` and `--model NAME|FILE`.
// A NAME is looked up as <user dir>/clusters/NAME.toml, then as <config
// dir>/clusters/NAME.toml (models/ likewise): the user dir is where `tera
// calibrate` writes ($XDG_CONFIG_HOME/tera, else ~/.config/tera), so a
// measured `local` comes before the shipped one; the config dir is
// $TERA_CONFIG_DIR when set, else the source tree's configs/.
// A model file may be a whole tera run config: only its [model] table is read.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "model/model_spec.h"
#include "plan/hardware.h"

namespace tera {

std::string config_dir();
// $XDG_CONFIG_HOME/tera (when absolute), else $HOME/.config/tera; "" when neither is set.
std::string user_config_dir();
// Names of the presets of one kind ("clusters" or "models") in both
// directories, sorted, each once.
std::vector<std::string> list_presets(const std::string& kind);

// The file a NAME or FILE names ("clusters" or "models"): a path with a '/'
// or ending in .toml as given, else the first preset of that name.
Expected<std::string> find_preset(const std::string& kind, const std::string& name_or_file);
Expected<Cluster> load_cluster(const std::string& name_or_file);
Expected<ModelConfig> load_model(const std::string& name_or_file);
Expected<ModelConfig> parse_model_toml(const std::string& text, const std::string& where);

}  // namespace tera
