// Outputs against inputs, before any work: one check every subcommand runs
// over everything it will write and everything it reads. An output is a file
// written at its path, or a directory of which the command writes, replaces
// or deletes some entries (out.dir's `final`, a ckpt.dir's `step-*`, the
// whole of an import's --out). Invariant: nothing a command writes or
// deletes is one of its inputs (same file, hard link, a symlink to it, or
// anything inside a directory entry it replaces), and no two outputs overlap.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace tera {

// Something the command reads: a file, or a directory (then every file
// directly in it counts, and everything inside it). `what` names the flag or
// key ("--config", "data.train").
struct InputPath {
  std::string path, what;
};

// Something the command writes. With `entries` empty: the file at `path`
// (written in place or replaced). Otherwise `path` is a directory and the
// command writes, replaces or deletes the entries directly in it whose names
// match a pattern: "final", "step-*" (a prefix), "*" (all of it).
struct OutputPath {
  std::string path, what;
  std::vector<std::string> entries;
};

// An error naming both paths (and their flags) when an output is an input
// or lies inside an input's replaced entry, or two outputs overlap; empty
// paths are ignored. Paths that do not exist yet are compared as written
// after their existing parents' symlinks are resolved.
Status refuse_overlapping_paths(const std::vector<OutputPath>& outputs, const std::vector<InputPath>& inputs);

// Whether `path` is `dir` or lies inside it (symlinks in the existing parts
// resolved; the rest compared as written).
bool is_within(const std::string& path, const std::string& dir);

// Whether a directory entry's name matches a pattern of OutputPath::entries.
bool entry_matches(const std::string& name, const std::string& pattern);

}  // namespace tera
