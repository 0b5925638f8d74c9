// Outputs against inputs; see path_overlap.h.
#include "core/path_overlap.h"

#include <sys/stat.h>

#include <filesystem>
#include <optional>
#include <tuple>

#include "core/file_util.h"

namespace tera {

namespace fs = std::filesystem;

namespace {

std::optional<fs::path> canonical_or_none(const std::string& p) {
  std::error_code ec;
  const fs::path abs = fs::absolute(p, ec);
  if (ec) return std::nullopt;
  fs::path c = fs::weakly_canonical(abs, ec);
  if (ec) return std::nullopt;
  return c;
}

// The first component of `p` below `base` ("" when p is base itself);
// nullopt when p is not inside base.
std::optional<std::string> first_component_below(const fs::path& p, const fs::path& base) {
  auto pi = p.begin();
  for (auto bi = base.begin(); bi != base.end(); ++bi) {
    if (bi->empty()) continue;  // a trailing separator
    if (pi == p.end() || *pi != *bi) return std::nullopt;
    ++pi;
  }
  while (pi != p.end() && pi->empty()) ++pi;
  return pi == p.end() ? std::string() : pi->string();
}

// The entry of `out` (a directory output) that `p` lies in, when the
// command writes or deletes it: "<out.path>/<entry>", or out.path for "*".
std::optional<std::string> region_holding(const fs::path& p, const OutputPath& out) {
  const auto base = canonical_or_none(out.path);
  if (!base) return std::nullopt;
  const auto first = first_component_below(p, *base);
  if (!first) return std::nullopt;
  for (const std::string& pattern : out.entries) {
    if (pattern == "*") return out.path;
    if (!first->empty() && entry_matches(*first, pattern)) return (fs::path(out.path) / *first).string();
  }
  return std::nullopt;
}

bool exists_no_follow(const std::string& p) {
  struct stat st{};
  return ::lstat(p.c_str(), &st) == 0;
}

bool is_directory(const std::string& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

std::string named(const std::string& what, const std::string& path) { return what + " " + path; }

// A file output against one input (a file, or every file directly in a directory).
Status check_file_against_input(const OutputPath& out, const InputPath& in) {
  if (!exists_no_follow(out.path)) return ok_status();  // a new file is no existing input
  if (!is_directory(in.path)) {
    if (!same_file(out.path, in.path)) return ok_status();
    return Status::error(named(out.what, out.path) + ": is the same file as " + named(in.what, in.path) +
                         " (an input of this command); write the output elsewhere (an output never replaces an input)");
  }
  std::error_code ec;
  int64_t seen = 0;
  constexpr int64_t kMaxEntries = 1 << 20;  // a shard directory holds thousands, not millions
  for (const auto& e : fs::directory_iterator(in.path, ec)) {
    if (++seen > kMaxEntries) break;
    if (!same_file(out.path, e.path().string())) continue;
    return Status::error(named(out.what, out.path) + ": is the same file as " + e.path().string() + ", part of " +
                         named(in.what, in.path) + " (an input of this command); write the output elsewhere");
  }
  return ok_status();
}

Status check_output_pair(const OutputPath& a, const OutputPath& b) {
  const auto ca = canonical_or_none(a.path), cb = canonical_or_none(b.path);
  if (!ca || !cb) return ok_status();
  const std::string both = named(a.what, a.path) + " and " + named(b.what, b.path);
  if (a.entries.empty() && b.entries.empty()) {
    if (*ca == *cb || same_file(a.path, b.path)) {
      return Status::error(both + " are the same file; give each output its own path");
    }
    return ok_status();
  }
  // A file inside the other's replaced entry, or one directory's base inside the other's.
  for (const auto& [x, cx, y] : {std::tuple{&a, *ca, &b}, std::tuple{&b, *cb, &a}}) {
    if (y->entries.empty()) continue;
    if (x->entries.empty() || cx != canonical_or_none(y->path)) {  // two directories at one path: the caller's choice
      if (const auto region = region_holding(cx, *y)) {
        return Status::error(both + " overlap: " + x->path + " is inside " + *region + ", which " + y->what +
                             " replaces or deletes; give them separate paths");
      }
    }
  }
  return ok_status();
}

}  // namespace

bool entry_matches(const std::string& name, const std::string& pattern) {
  if (pattern == "*") return true;
  if (!pattern.empty() && pattern.back() == '*') return name.rfind(pattern.substr(0, pattern.size() - 1), 0) == 0;
  return name == pattern;
}

bool is_within(const std::string& path, const std::string& dir) {
  const auto p = canonical_or_none(path), d = canonical_or_none(dir);
  return p && d && first_component_below(*p, *d).has_value();
}

Status refuse_overlapping_paths(const std::vector<OutputPath>& outputs, const std::vector<InputPath>& inputs) {
  for (const OutputPath& out : outputs) {
    if (out.path.empty()) continue;
    for (const InputPath& in : inputs) {
      if (in.path.empty()) continue;
      if (out.entries.empty()) {
        TERA_RETURN_IF_ERROR(check_file_against_input(out, in));
        continue;
      }
      const auto cin = canonical_or_none(in.path);
      if (!cin) continue;
      if (const auto region = region_holding(*cin, out)) {
        return Status::error(named(out.what, out.path) + ": " + *region + " holds " + named(in.what, in.path) +
                             " (an input of this command), and this command replaces or deletes it; move the input "
                             "or choose another " + out.what);
      }
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = i + 1; j < outputs.size(); ++j) {
      if (outputs[i].path.empty() || outputs[j].path.empty()) continue;
      TERA_RETURN_IF_ERROR(check_output_pair(outputs[i], outputs[j]));
    }
  }
  return ok_status();
}

}  // namespace tera
