// Run-config parsing: the key table (config_keys.cpp) drives type checks,
// unknown-key detection (with a nearest-key suggestion) and assignment; the
// semantic checks (config_checks.cpp) follow. toml++ does the TOML; nothing
// here throws past the API.
#include "config/config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <filesystem>
#include <fstream>
#include <fmt/format.h>
#include <functional>
#include <map>
#include <sstream>
#include <toml++/toml.h>

#include "config/config_internal.h"
#include "core/file_util.h"
#include "partition/layout_check.h"

namespace tera {

namespace {

using config_internal::Field;
using config_internal::Kind;
using config_internal::kind_name;
using config_internal::schema;
using config_internal::validate;

constexpr uint64_t kMaxConfigBytes = 16u << 20;  // a run config is a few hundred bytes

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string suggestion(const std::string& key, const std::vector<Field>& fields) {
  std::string best;
  size_t best_d = 4;  // suggest only close matches
  for (const auto& f : fields) {
    const size_t d = edit_distance(key, f.key);
    if (d < best_d) {
      best_d = d;
      best = f.key;
    }
  }
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

bool kind_matches(Kind k, const toml::node& n) {
  switch (k) {
    case Kind::integer: return n.is_integer();
    case Kind::number:
    case Kind::number32: return n.is_integer() || n.is_floating_point();
    case Kind::string: return n.is_string();
    case Kind::boolean: return n.is_boolean();
    case Kind::blend:
      if (!n.is_array()) return false;
      for (const auto& e : *n.as_array()) {
        const toml::array* pair = e.as_array();
        if (pair == nullptr || pair->size() != 2 || !((*pair)[0].is_integer() || (*pair)[0].is_floating_point()) ||
            !(*pair)[1].is_string()) {
          return false;
        }
      }
      return true;
    case Kind::integer_array:
      if (!n.is_array()) return false;
      for (const auto& e : *n.as_array()) {
        if (!e.is_integer()) return false;
      }
      return true;
  }
  return false;
}

std::string node_type(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}

// A number as the user wrote it: the --set value, or the TOML literal at
// the node's place in the file (the first token there).
std::string literal_of(const std::string& key, const toml::node& node, const std::string& text,
                       const std::map<std::string, std::string>& override_text) {
  if (auto it = override_text.find(key); it != override_text.end()) return it->second;
  const auto& at = node.source().begin;
  size_t pos = 0;
  for (uint32_t line = 1; line < at.line && pos != std::string::npos; ++line) {
    pos = text.find('\n', pos);
    if (pos != std::string::npos) ++pos;
  }
  if (pos == std::string::npos || at.column < 1) return "";
  pos += at.column - 1;
  if (pos >= text.size()) return "";
  const size_t end = text.find_first_of(" \t\r\n#,]}", pos);
  return text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
}

// A real value's range: finite, representable where it is stored (a
// float key in 32 bits), and not a nonzero literal that rounds to 0.
Status check_real(double v, bool f32, const std::string& key, const std::string& literal, const std::string& source) {
  const std::string shown = literal.empty() ? fmt::format("{}", v) : literal;
  if (!std::isfinite(v)) {
    return Status::error(fmt::format("{}: {} = {} is not a finite number; give a finite value", source, key, shown));
  }
  if (f32 && std::abs(v) > std::numeric_limits<float>::max()) {
    return Status::error(fmt::format("{}: {} = {} is beyond a 32-bit float's range (at most {:g})", source, key, shown,
                                     std::numeric_limits<float>::max()));
  }
  const bool nonzero_literal = literal.find_first_of("123456789") < literal.find_first_of("eE");
  if ((v == 0 || (f32 && static_cast<float>(v) == 0.0f)) && nonzero_literal) {
    return Status::error(fmt::format("{}: {} = {} is too small to represent: it rounds to 0{}", source, key, shown,
                                     f32 ? fmt::format(" in 32 bits (the smallest is {:g})",
                                                       std::numeric_limits<float>::denorm_min())
                                         : ""));
  }
  return ok_status();
}

Status apply_override(toml::table& root, const std::string& kv) {
  const auto eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Status::error("--set '" + kv + "': expected section.key=value (for example --set train.steps=50)");
  }
  const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
  const auto dot = key.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == key.size()) {
    return Status::error("--set '" + kv + "': the key must be section.name (for example train.steps)");
  }
  const std::string section = key.substr(0, dot), name = key.substr(dot + 1);
  toml::table parsed;
  bool as_toml = true;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    as_toml = false;
  }
  if (root.contains(section) && !root[section].is_table()) {
    return Status::error("--set '" + kv + "': '" + section + "' is not a table in the config");
  }
  if (!root.contains(section)) root.insert(section, toml::table{});
  toml::table& t = *root[section].as_table();
  if (!as_toml) {
    // A bare word is a string, but a bare number TOML refused is a number out
    // of range: say so instead of "got a string" later.
    const bool numeric = !value.empty() && value.find_first_not_of("+-0123456789_") == std::string::npos &&
                         value.find_first_of("0123456789") != std::string::npos;
    if (numeric) {
      return Status::error("--set '" + kv + "': " + value + " does not fit in a 64-bit integer (the largest is " +
                           std::to_string(std::numeric_limits<int64_t>::max()) + ")");
    }
  }
  if (as_toml) {
    // Copy the parsed node (whatever its type) into the config table.
    parsed.get("v")->visit([&](auto&& v) { t.insert_or_assign(name, v); });
  } else {
    t.insert_or_assign(name, value);  // bare words are strings: --set data.train=corpus.txt
  }
  return ok_status();
}

}  // namespace

Expected<RunConfig> parse_run_config(const std::string& text, const std::string& source,
                                     const std::vector<std::string>& overrides, bool check_files) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    return Status::error(fmt::format("{}:{}:{}: TOML syntax error: {}", source, b.line, b.column, e.description()));
  }
  std::map<std::string, std::string> override_text;  // key -> the value as written after --set key=
  for (const auto& kv : overrides) {
    TERA_RETURN_IF_ERROR(apply_override(root, kv));
    override_text[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
  }

  const auto fields = schema();
  RunConfig cfg;
  cfg.source = source;
  cfg.model = ModelConfig{.layers = 0, .hidden = 0, .heads = 0, .seq_len = 0, .vocab = 256};
  for (auto&& [sec_key, sec_node] : root) {
    const std::string section(sec_key.str());
    if (!sec_node.is_table()) {
      return Status::error(fmt::format("{}: '{}' must be a [{}] table", source, section, section));
    }
    for (auto&& [k, node] : *sec_node.as_table()) {
      const std::string key = section + "." + std::string(k.str());
      auto it = std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return key == f.key; });
      if (it == fields.end()) {
        return Status::error(fmt::format("{}: unknown key '{}'{}", source, key, suggestion(key, fields)));
      }
      if (!kind_matches(it->kind, node)) {
        return Status::error(fmt::format("{}: {} must be {}, got {}", source, key, kind_name(it->kind), node_type(node)));
      }
      if ((it->kind == Kind::number || it->kind == Kind::number32) && node.is_floating_point()) {
        TERA_RETURN_IF_ERROR(check_real(node.value<double>().value(), it->kind == Kind::number32, key,
                                        literal_of(key, node, text, override_text), source));
      }
      it->set(cfg, node);
    }
  }
  // Llama's MLP is the gated one: model.mlp may be left out (an explicit
  // "standard" is refused by validation, naming the key).
  if (cfg.model.arch == Arch::llama) {
    auto model = root["model"];
    if (!model || !model.as_table() || !model.as_table()->contains("mlp")) cfg.model.mlp = MlpKind::gated;
  }
  // Llama-only keys on another architecture would be ignored without a word.
  if (cfg.model.arch != Arch::llama && cfg.arch_error.empty()) {
    auto model = root["model"];
    for (const char* key : {"rope_theta", "norm_eps", "rope_scaling", "rope_factor", "rope_low_freq_factor",
                            "rope_high_freq_factor", "rope_original_seq_len"}) {
      if (model && model.as_table() && model.as_table()->contains(key)) {
        return Status::error(fmt::format("{}: model.{} applies to model.arch = \"llama\" only (this model is \"{}\", "
                                         "which has {}); remove it or set model.arch = \"llama\"",
                                         source, key, arch_name(cfg.model.arch),
                                         std::string_view(key) == "norm_eps" ? "LayerNorm with epsilon 1e-5"
                                                                              : "learned positions"));
      }
    }
  }
  // The scaling's numbers without the scaling would be ignored without a word.
  if (cfg.model.arch == Arch::llama && !cfg.model.rope_scaling.llama3) {
    auto model = root["model"];
    for (const char* key : {"rope_factor", "rope_low_freq_factor", "rope_high_freq_factor", "rope_original_seq_len"}) {
      if (model && model.as_table() && model.as_table()->contains(key)) {
        return Status::error(fmt::format("{}: model.{} applies to model.rope_scaling = \"llama3\" only; add that key "
                                         "or remove this one",
                                         source, key));
      }
    }
  }
  for (const char* required : {"model.layers", "model.hidden", "model.heads", "model.seq_len"}) {
    const std::string r(required);
    const auto dot = r.find('.');
    auto sec = root[r.substr(0, dot)];
    if (!sec || !sec.as_table() || !sec.as_table()->contains(r.substr(dot + 1))) {
      return Status::error(fmt::format("{}: {} is missing; add it to the [{}] table", source, r, r.substr(0, dot)));
    }
  }
  TERA_RETURN_IF_ERROR(validate(cfg, source, check_files));
  return cfg;
}

Expected<RunConfig> load_run_config(const std::string& path, const std::vector<std::string>& overrides,
                                    bool check_files) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return Status::error(path + ": config file not found; pass an existing TOML file to --config");
  }
  // A directory, FIFO or device is refused by name, never read (a FIFO would block).
  auto text = read_regular_file(path, "--config", kMaxConfigBytes);
  if (!text) return text.status();
  return parse_run_config(std::string(text->begin(), text->end()), path, overrides, check_files);
}

std::string run_config_to_toml(const RunConfig& c) {
  auto q = [](const std::string& s) {
    std::string o = "\"";
    for (char ch : s) {
      if (ch == '"' || ch == '\\') o += '\\';
      o += ch;
    }
    return o + "\"";
  };
  std::string s;
  s += fmt::format("[model]\nlayers = {}\nhidden = {}\nheads = {}\nseq_len = {}\nvocab = {}\n", c.model.layers,
                   c.model.hidden, c.model.heads, c.model.seq_len, c.model.vocab);
  if (c.model.ffn_hidden > 0) s += fmt::format("ffn_hidden = {}\n", c.model.ffn_hidden);
  s += fmt::format("vocab_align = {}\n", c.model.vocab_align);
  if (c.model.kv_heads > 0) s += fmt::format("kv_heads = {}\n", c.model.kv_heads);
  if (c.model.mlp != MlpKind::standard) s += fmt::format("mlp = \"{}\"\n", mlp_kind_name(c.model.mlp));
  s += fmt::format("arch = \"{}\"\n", arch_name(c.model.arch));
  if (c.model.arch == Arch::llama) s += fmt::format("rope_theta = {}\nnorm_eps = {}\n", c.model.rope_theta, c.model.norm_eps);
  if (c.model.arch == Arch::llama && c.model.rope_scaling.llama3) {
    const auto& r = c.model.rope_scaling;
    s += fmt::format("rope_scaling = \"llama3\"\nrope_factor = {}\nrope_low_freq_factor = {}\nrope_high_freq_factor = {}\n"
                     "rope_original_seq_len = {}\n",
                     r.factor, r.low_freq_factor, r.high_freq_factor, r.original_max_positions);
  }
  if (c.model.tie_embeddings >= 0) s += fmt::format("tie_embeddings = {}\n", c.model.tie_embeddings == 1);
  s += fmt::format("attention = \"{}\"\n", attention_kind_name(c.model.attention));
  const TrainConfig& t = c.train;
  s += fmt::format(
      "\n[train]\nsteps = {}\nmicro_batch = {}\nglobal_batch = {}\nlr = {}\nmin_lr = {}\nwarmup = {}\n"
      "weight_decay = {}\nbeta1 = {}\nbeta2 = {}\neps = {}\nclip = {}\nseed = {}\neval_every = {}\neval_sequences = {}\nrecompute = \"{}\"\n",
      t.steps, c.parallel.micro_batch, t.global_batch, t.lr, t.min_lr, t.warmup, t.adamw.weight_decay, t.adamw.beta1,
      t.adamw.beta2, t.adamw.eps, t.clip, t.seed, t.eval_every, t.eval_sequences, recompute_name(c.parallel.recompute));
  s += fmt::format("max_bad_steps = {}\ncomm_timeout_s = {}\nbackend = {}\ndevice_comm = {}\nprecision = \"{}\"\n",
                   t.max_bad_steps, t.comm_timeout_s, q(t.backend), q(t.device_comm),
                   t.precision == DType::bf16 ? "bf16" : "fp32");
  s += "\n[data]\ntrain = " + q(c.data.train) + "\n";
  if (!c.data.val.empty()) s += "val = " + q(c.data.val) + "\n";
  else s += fmt::format("val_fraction = {}\n", c.data.val_fraction);
  if (!c.data.tokenizer.empty()) s += "tokenizer = " + q(c.data.tokenizer) + "\n";
  if (!c.data.tokenizer_pattern.empty()) s += "tokenizer_pattern = " + q(c.data.tokenizer_pattern) + "\n";
  if (!c.data.tokenizer_specials.empty()) s += "tokenizer_specials = " + q(c.data.tokenizer_specials) + "\n";
  if (!c.data.blend.empty()) {
    s += "blend = [";
    for (size_t i = 0; i < c.data.blend.size(); ++i) {
      s += fmt::format("{}[{}, {}]", i > 0 ? ", " : "", c.data.blend[i].first, q(c.data.blend[i].second));
    }
    s += "]\n";
  }
  s += fmt::format("\n[parallel]\ntp = {}\npp = {}\ndp = {}\nzero = {}\nsequence_parallel = {}\nschedule = \"{}\"\nvpp = {}\n",
                   c.parallel.tp, c.parallel.pp, c.parallel.dp, c.parallel.zero, c.parallel.sequence_parallel,
                   schedule_kind_name(c.parallel.schedule), c.parallel.vpp);
  if (!c.parallel.stage_layers.empty()) {
    s += "stage_layers = [";
    for (size_t i = 0; i < c.parallel.stage_layers.size(); ++i) s += (i ? ", " : "") + std::to_string(c.parallel.stage_layers[i]);
    s += "]\n";
  }
  s += "\n[out]\ndir = " + q(c.out.dir) + "\n";
  s += fmt::format("\n[ckpt]\ndir = {}\nevery = {}\nkeep = {}\n", q(c.ckpt.dir), c.ckpt.every, c.ckpt.keep);
  if (!c.ckpt.init.empty()) s += "init = " + q(c.ckpt.init) + "\n";
  return s;
}

}  // namespace tera
