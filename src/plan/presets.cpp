// Preset lookup and the model-preset reader (the cluster reader is hardware.cpp).
#include "plan/presets.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "core/file_util.h"
#include "plan/toml_fields.h"

#ifndef TERA_CONFIG_DIR
#define TERA_CONFIG_DIR "configs"
#endif

namespace tera {

namespace fs = std::filesystem;

std::string config_dir() {
  const char* env = std::getenv("TERA_CONFIG_DIR");
  return env && *env ? std::string(env) : std::string(TERA_CONFIG_DIR);
}

std::string user_config_dir() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg != nullptr && *xdg && fs::path(xdg).is_absolute()) return (fs::path(xdg) / "tera").string();
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home) return (fs::path(home) / ".config/tera").string();
  return "";
}

namespace {

// The directories a preset NAME is looked up in, first match wins.
std::vector<fs::path> preset_dirs(const std::string& kind) {
  std::vector<fs::path> dirs;
  if (const std::string user = user_config_dir(); !user.empty()) dirs.push_back(fs::path(user) / kind);
  dirs.push_back(fs::path(config_dir()) / kind);
  return dirs;
}

}  // namespace

std::vector<std::string> list_presets(const std::string& kind) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::path& dir : preset_dirs(kind)) {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".toml") names.push_back(e.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

namespace {

bool looks_like_file(const std::string& s) {
  return s.find('/') != std::string::npos || (s.size() > 5 && s.substr(s.size() - 5) == ".toml");
}

}  // namespace

Expected<std::string> find_preset(const std::string& kind, const std::string& name_or_file) {
  if (looks_like_file(name_or_file)) return name_or_file;
  std::string searched;
  for (const fs::path& dir : preset_dirs(kind)) {
    const fs::path candidate = dir / (name_or_file + ".toml");
    searched += (searched.empty() ? "" : ", ") + dir.string();
    std::error_code ec;
    if (fs::exists(candidate, ec)) return candidate.string();
  }
  std::string names;
  for (const auto& n : list_presets(kind)) names += (names.empty() ? "" : ", ") + n;
  return Status::error(fmt::format("unknown {} preset '{}'; the presets are: {} (in {}); or pass a .toml file",
                                   kind == "clusters" ? "cluster" : "model", name_or_file,
                                   names.empty() ? "(none found)" : names, searched));
}

namespace {

// Reads a preset's text; `what` is "cluster" or "model".
Expected<std::pair<std::string, std::string>> read_preset(const std::string& kind, const std::string& what,
                                                         const std::string& name_or_file) {
  auto found = find_preset(kind, name_or_file);
  if (!found.ok()) return found.status();
  const std::string path = *found;
  // A preset is a few kB of TOML; a device (/dev/zero), FIFO or huge file is refused before reading.
  constexpr uint64_t kMaxPresetBytes = uint64_t{1} << 20;
  auto bytes = read_regular_file(path, what + " file", kMaxPresetBytes);
  if (!bytes.ok()) return bytes.status();
  return std::make_pair(path, std::string(bytes->begin(), bytes->end()));
}

}  // namespace

Expected<Cluster> load_cluster(const std::string& name_or_file) {
  auto text = read_preset("clusters", "cluster", name_or_file);
  if (!text.ok()) return text.status();
  return parse_cluster_toml(text->second, text->first);
}

Expected<ModelConfig> load_model(const std::string& name_or_file) {
  auto text = read_preset("models", "model", name_or_file);
  if (!text.ok()) return text.status();
  return parse_model_toml(text->second, text->first);
}

Expected<ModelConfig> parse_model_toml(const std::string& text, const std::string& where) {
  TomlFields f(text, where);
  TERA_RETURN_IF_ERROR(f.parse_status());
  if (!f.has("model")) return Status::error(where + ": no [model] table; a model preset needs [model] layers, hidden, heads, seq_len, vocab");
  ModelConfig m;
  std::string ignored, mlp = "standard";
  TERA_RETURN_IF_ERROR(f.string("name", &ignored, false));
  TERA_RETURN_IF_ERROR(f.string("description", &ignored, false));
  constexpr int64_t kMax = int64_t{1} << 40;
  TERA_RETURN_IF_ERROR(f.integer("model.layers", &m.layers, true, 1, kMax));
  TERA_RETURN_IF_ERROR(f.integer("model.hidden", &m.hidden, true, 1, kMax));
  TERA_RETURN_IF_ERROR(f.integer("model.heads", &m.heads, true, 1, kMax));
  TERA_RETURN_IF_ERROR(f.integer("model.seq_len", &m.seq_len, true, 1, kMax));
  TERA_RETURN_IF_ERROR(f.integer("model.vocab", &m.vocab, true, 1, kMax));
  TERA_RETURN_IF_ERROR(f.integer("model.ffn_hidden", &m.ffn_hidden, false, 0, kMax));
  TERA_RETURN_IF_ERROR(f.integer("model.vocab_align", &m.vocab_align, false, 1, kMax));
  TERA_RETURN_IF_ERROR(f.integer("model.kv_heads", &m.kv_heads, false, 0, kMax));
  std::string arch = "gpt2", attention = "flash";
  TERA_RETURN_IF_ERROR(f.string("model.arch", &arch, false));
  auto a = parse_arch(arch);
  if (!a.ok()) return Status::error(where + ": " + a.error());
  m.arch = *a;
  if (m.arch == Arch::llama) mlp = "gated";  // Llama's MLP unless model.mlp says otherwise (then validation refuses it)
  TERA_RETURN_IF_ERROR(f.string("model.mlp", &mlp, false));
  auto kind = parse_mlp_kind(mlp);
  if (!kind.ok()) return Status::error(where + ": " + kind.error());
  m.mlp = *kind;
  TERA_RETURN_IF_ERROR(f.number("model.rope_theta", &m.rope_theta, false, 1, 1e12));
  TERA_RETURN_IF_ERROR(f.number("model.norm_eps", &m.norm_eps, false, 0, 1));
  bool tie = false;
  if (f.has("model.tie_embeddings")) {
    TERA_RETURN_IF_ERROR(f.boolean("model.tie_embeddings", &tie, true));
    m.tie_embeddings = tie ? 1 : 0;
  }
  TERA_RETURN_IF_ERROR(f.string("model.attention", &attention, false));
  auto att = parse_attention_kind(attention);
  if (!att.ok()) return Status::error(where + ": " + att.error());
  m.attention = *att;
  // A run config carries more tables; the planner reads only [model].
  for (const char* t : {"train", "data", "parallel", "out"}) f.skip_table(t);
  TERA_RETURN_IF_ERROR(f.finish());
  if (Status s = validate_model_config(m); !s) return Status::error(where + ": " + s.message());
  return m;
}

}  // namespace tera
