// Strict TOML field reading for presets; nothing throws past this file.
#include "plan/toml_fields.h"

#include <fmt/format.h>

#include <functional>
#include <vector>

namespace tera {

TomlFields::TomlFields(const std::string& text, std::string where) : where_(std::move(where)) {
  try {
    root_ = toml::parse(text, where_);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    parse_ = Status::error(fmt::format("{}:{}:{}: TOML syntax error: {}", where_, b.line, b.column, e.description()));
  }
}

const toml::node* TomlFields::find(const std::string& key) {
  const toml::node* n = root_.at_path(key).node();
  if (n) read_.insert(key);
  return n;
}

bool TomlFields::has(const std::string& key) const { return root_.at_path(key).node() != nullptr; }

Status TomlFields::missing(const std::string& key) const {
  return Status::error(fmt::format("{}: required key '{}' is missing; add it (see configs/ for examples)", where_, key));
}

Status TomlFields::number(const std::string& key, double* out, bool required, double lo, double hi) {
  const toml::node* n = find(key);
  if (!n) return required ? missing(key) : ok_status();
  auto v = n->value<double>();  // integers convert too
  if (!v || n->is_boolean() || n->is_string()) {
    return Status::error(fmt::format("{}: '{}' must be a number", where_, key));
  }
  if (!(*v >= lo && *v <= hi)) {
    return Status::error(fmt::format("{}: '{}' = {} is out of range; expected {} to {}", where_, key, *v, lo, hi));
  }
  *out = *v;
  return ok_status();
}

Status TomlFields::integer(const std::string& key, int64_t* out, bool required, int64_t lo, int64_t hi) {
  const toml::node* n = find(key);
  if (!n) return required ? missing(key) : ok_status();
  if (!n->is_integer()) return Status::error(fmt::format("{}: '{}' must be an integer", where_, key));
  const int64_t v = n->value<int64_t>().value();
  if (v < lo || v > hi) {
    return Status::error(fmt::format("{}: '{}' = {} is out of range; expected {} to {}", where_, key, v, lo, hi));
  }
  *out = v;
  return ok_status();
}

Status TomlFields::boolean(const std::string& key, bool* out, bool required) {
  const toml::node* n = find(key);
  if (!n) return required ? missing(key) : ok_status();
  if (!n->is_boolean()) return Status::error(fmt::format("{}: '{}' must be true or false", where_, key));
  *out = n->value<bool>().value();
  return ok_status();
}

Status TomlFields::string(const std::string& key, std::string* out, bool required) {
  const toml::node* n = find(key);
  if (!n) return required ? missing(key) : ok_status();
  if (!n->is_string()) return Status::error(fmt::format("{}: '{}' must be a string", where_, key));
  *out = n->value<std::string>().value();
  return ok_status();
}

void TomlFields::skip_table(const std::string& prefix) { read_.insert(prefix + ".*"); }

Status TomlFields::finish() const {
  std::vector<std::string> unknown;
  std::function<void(const toml::table&, const std::string&)> walk = [&](const toml::table& t, const std::string& p) {
    if (read_.count(p + ".*")) return;
    for (const auto& [k, v] : t) {
      const std::string key = p.empty() ? std::string(k.str()) : p + "." + std::string(k.str());
      if (const toml::table* sub = v.as_table()) {
        walk(*sub, key);
      } else if (!read_.count(key)) {
        unknown.push_back(key);
      }
    }
  };
  walk(root_, "");
  if (unknown.empty()) return ok_status();
  std::string list;
  for (const auto& k : unknown) list += (list.empty() ? "'" : ", '") + k + "'";
  return Status::error(fmt::format("{}: unknown key {}; remove it or fix its spelling (see configs/ for the keys)",
                                   where_, list));
}

}  // namespace tera
