// Output paths of the offline subcommands (ckpt, tokenize, calibrate),
// checked before any work: nothing a user made is replaced without --force,
// an output is never one of the inputs (core/path_overlap.h), and an unwritable destination is
// found at start-up, not after the work. The writes themselves stay atomic
// (a temporary beside the target, then a rename), so with --force the old
// output survives until the new one is complete. Header-only: used by
// several cmd_*.cpp files.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/path_overlap.h"
#include "core/status.h"

namespace tera::cli {

// The missing directories on the way to `dir` (which probing an output
// creates), removed again when the guard goes out of scope if they are still
// empty: a command that fails after the probe leaves no empty directories
// behind, and one that succeeds has written its output into them.
class CreatedDirsGuard {
 public:
  explicit CreatedDirsGuard(const std::string& dir) {
    std::error_code ec;
    if (dir.empty()) return;
    const std::filesystem::path start = std::filesystem::absolute(dir, ec);
    if (ec) return;
    for (std::filesystem::path p = start; !p.empty() && p != p.root_path(); p = p.parent_path()) {
      // symlink_status reports a missing path as not_found and sets ec (ENOENT)
      if (std::filesystem::symlink_status(p, ec).type() != std::filesystem::file_type::not_found) break;
      missing_.push_back(p.string());  // deepest first
    }
  }
  ~CreatedDirsGuard() {
    std::error_code ec;
    for (const auto& d : missing_) {
      if (!std::filesystem::remove(d, ec)) break;  // not empty (the output is there) or not ours
    }
  }
  CreatedDirsGuard(const CreatedDirsGuard&) = delete;
  CreatedDirsGuard& operator=(const CreatedDirsGuard&) = delete;

 private:
  std::vector<std::string> missing_;
};

inline std::string parent_dir(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// What a path is, for messages ("a directory", "a file").
inline std::string describe_existing(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(path, ec);
  switch (st.type()) {
    case std::filesystem::file_type::directory: return "a directory";
    case std::filesystem::file_type::regular: return "a file";
    case std::filesystem::file_type::symlink: return "a symbolic link";
    default: return "something that is not a regular file";
  }
}

inline bool path_exists(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(path, ec);
  return !ec && st.type() != std::filesystem::file_type::not_found;
}

// An existing `path` is refused unless `force`; the message names the path,
// what it is, and --force.
inline Status refuse_existing(const std::string& path, const std::string& what, bool force) {
  if (force || !path_exists(path)) return ok_status();
  return Status::error(what + " " + path + ": already exists (" + describe_existing(path) +
                       "); pass --force to replace it (the old one is kept until the new one is complete)");
}

// An output file: refused when it exists (unless force) and probed for
// writing (its directory must exist unless create_parent, and be writable).
inline Status check_output_file(const std::string& path, const std::string& what, bool force,
                                bool create_parent = false) {
  if (path.empty()) return Status::error(what + ": the path is empty");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return Status::error(what + " " + path + ": is a directory; name a file");
  // A device or FIFO (or a link to one) is written in place, never replaced: there is nothing to force.
  if (!is_special_file(follow_symlinks(path))) TERA_RETURN_IF_ERROR(refuse_existing(path, what, force));
  return probe_output_file(path, what, create_parent);
}

// An output directory that is written beside and renamed into place (ckpt
// import): refused when it exists (unless force); its parent is created if
// needed and probed for writing.
inline Status check_output_dir_replace(const std::string& path, const std::string& what, bool force) {
  if (path.empty()) return Status::error(what + ": the path is empty");
  TERA_RETURN_IF_ERROR(refuse_existing(path, what, force));
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) parent = ".";
  if (path_exists(parent.string()) && !std::filesystem::is_directory(parent)) {
    return Status::error(what + " " + path + ": " + parent.string() + " is " + describe_existing(parent.string()) +
                         ", not a directory");
  }
  return probe_output_dir(parent.string(), what + " " + path + ": its directory");
}

// Each path as an input named `what` (core/path_overlap.h).
inline std::vector<InputPath> inputs_named(const std::vector<std::string>& paths, const std::string& what) {
  std::vector<InputPath> out;
  for (const auto& p : paths) out.push_back({p, what});
  return out;
}

}  // namespace tera::cli
