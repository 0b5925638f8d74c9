// Strict reading of preset TOML files: each read names its dotted key, checks
// the type and range, and finish() refuses any key nobody read, so a typo
// in a preset is an error naming the file and key instead of a silent default.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include <toml++/toml.h>

#include "core/status.h"

namespace tera {

class TomlFields {
 public:
  // Parses `text`; on a syntax error ok() is false and error() says where.
  TomlFields(const std::string& text, std::string where);
  const Status& parse_status() const { return parse_; }
  const std::string& where() const { return where_; }
  bool has(const std::string& key) const;

  // Each leaves *out untouched when the key is absent and not required.
  Status number(const std::string& key, double* out, bool required, double lo, double hi);
  Status integer(const std::string& key, int64_t* out, bool required, int64_t lo, int64_t hi);
  Status boolean(const std::string& key, bool* out, bool required);
  Status string(const std::string& key, std::string* out, bool required);
  // Marks every key under `prefix` (a table) as read: tables another reader owns.
  void skip_table(const std::string& prefix);
  // Fails naming every key present in the file but never read.
  Status finish() const;

 private:
  const toml::node* find(const std::string& key);
  Status missing(const std::string& key) const;
  toml::table root_;
  std::string where_;
  Status parse_;
  std::set<std::string> read_;
};

}  // namespace tera
