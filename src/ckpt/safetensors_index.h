// A model sharded over several safetensors files, as Hugging Face writes one:
//   model.safetensors.index.json = {"metadata": {"total_size": bytes},
//                                   "weight_map": {"tensor.name": "model-00001-of-00002.safetensors", ...}}
// beside the shards model-00001-of-0000N.safetensors. The index is untrusted
// input: it is size-limited, every shard name must be a plain file name in
// the index's own directory (no path, no "..": a file cannot point outside
// it), and a tensor named twice is refused naming both entries (JSON's
// duplicate keys included, which a plain parse would silently drop).
// SafetensorsFile::open reads an index and its shards as one model; the
// checks of the shards against the index (each exists, each tensor is in the
// shard the index names and in no other) are safetensors.cpp's.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/safetensors.h"
#include "core/status.h"

namespace tera {

constexpr uint64_t kMaxSafetensorsIndexBytes = uint64_t{64} << 20;  // Llama 3.1 405B's index is ~130 KB
constexpr size_t kMaxSafetensorsShards = 100000;                   // the five-digit names Hugging Face writes
constexpr uint64_t kDefaultMaxShardBytes = 5'000'000'000;          // Hugging Face's default max_shard_size "5GB"

struct SafetensorsIndex {
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file name
  std::vector<std::string> shards;                // the distinct shard names, sorted
  std::optional<uint64_t> total_size;             // metadata.total_size when given (tensor bytes)
};

// A path that names an index ("....index.json") rather than a tensor file.
bool is_safetensors_index_path(const std::string& path);

// Parses an in-memory index (the fuzz target and tests use this directly);
// `what` names the file in messages.
Expected<SafetensorsIndex> parse_safetensors_index(const uint8_t* data, size_t size, const std::string& what);

// Reads and parses the index file at `path` (size-limited, regular files only).
Expected<SafetensorsIndex> read_safetensors_index(const std::string& path);

// Hugging Face's shard names: stem "model", shard 1 of 3 -> "model-00001-of-00003.safetensors".
std::string safetensors_shard_name(const std::string& stem, size_t i, size_t n);

// Which tensors go to which shard: greedily in order, a new shard when the
// next tensor would take the current one past max_shard_bytes (tensor bytes,
// as Hugging Face counts); a tensor larger than that has a shard of its own.
// Returns the index of the first tensor of each shard.
std::vector<size_t> plan_safetensors_shards(const std::vector<StTensorRef>& tensors, uint64_t max_shard_bytes);

// Writes `tensors` as `path` (FILE.safetensors) when they fit in one shard of
// max_shard_bytes, else as STEM-0000i-of-0000N.safetensors beside it plus
// the index FILE.safetensors.index.json (written last, so an index never
// names a shard not yet complete). Every file is written atomically.
// Returns the paths written, the index (if any) last.
Expected<std::vector<std::string>> write_safetensors_sharded(const std::string& path,
                                                              const std::vector<StTensorRef>& tensors,
                                                              const std::map<std::string, std::string>& metadata,
                                                              uint64_t max_shard_bytes);

// The files write_safetensors_sharded(path, ...) may write for `shards`
// shards (1: path itself), for checking outputs before any work.
std::vector<std::string> safetensors_sharded_paths(const std::string& path, size_t shards);

// "5GB" (10^9, as Hugging Face's convert_file_size_to_int), "500MiB" (2^20),
// "2KB", "123" (bytes); the message names `flag`.
Expected<uint64_t> parse_shard_size(const std::string& text, const std::string& flag);

}  // namespace tera
