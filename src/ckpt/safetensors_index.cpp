// Sharded safetensors: the index reader (untrusted input), the shards checked
// against it, and the sharded writer; see safetensors_index.h.
#include "ckpt/safetensors_index.h"

#include <cctype>
#include <filesystem>
#include <set>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/file_util.h"

namespace tera {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A shard must be a plain .safetensors file name in the index's directory.
Status check_shard_name(const std::string& shard, const std::string& tensor, const std::string& what) {
  const std::string where = fmt::format("{}: weight_map[\"{}\"] = {}", what, tensor, json(shard).dump());
  if (shard.empty() || shard.size() > 255 || shard.find('/') != std::string::npos ||
      shard.find('\\') != std::string::npos || shard.find('\0') != std::string::npos || shard == "." || shard == "..") {
    return Status::error(where + " is not a plain file name; a shard must be a file in the index's own directory "
                                 "(e.g. \"model-00001-of-00002.safetensors\")");
  }
  if (!ends_with(shard, ".safetensors")) {
    return Status::error(where + " is not a .safetensors file; the index must name the shards' tensor files");
  }
  return ok_status();
}

// The weight_map's entries in file order, duplicates kept (a plain parse
// keeps only the last of a repeated key). Strings only; another value is
// recorded as its JSON text with is_string false.
struct RawEntry {
  std::string tensor, shard;
  bool is_string = false;
};

Expected<json> parse_index_json(const uint8_t* data, size_t size, const std::string& what,
                                std::vector<RawEntry>* entries) {
  std::string root_key;
  bool in_value = false;  // the last event was a weight_map key: the next depth-2 event is its value
  auto cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1) root_key = parsed.get<std::string>();
    if (depth != 2 || root_key != "weight_map") return true;
    if (event == json::parse_event_t::key) {
      entries->push_back({parsed.get<std::string>(), "", false});
      in_value = true;
    } else if (in_value && (event == json::parse_event_t::value || event == json::parse_event_t::object_start ||
                            event == json::parse_event_t::array_start)) {
      RawEntry& e = entries->back();
      e.is_string = event == json::parse_event_t::value && parsed.is_string();
      e.shard = e.is_string ? parsed.get<std::string>() : "";
      in_value = false;
    }
    return true;
  };
  json j = json::parse(reinterpret_cast<const char*>(data), reinterpret_cast<const char*>(data) + size, cb,
                       /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::error(what + ": not valid JSON (a model.safetensors.index.json)");
  if (!j.is_object()) return Status::error(what + ": not a JSON object {\"metadata\": ..., \"weight_map\": ...}");
  return j;
}

}  // namespace

bool is_safetensors_index_path(const std::string& path) { return ends_with(path, ".index.json"); }

Expected<SafetensorsIndex> parse_safetensors_index(const uint8_t* data, size_t size, const std::string& what) {
  if (size > kMaxSafetensorsIndexBytes) {
    return Status::error(fmt::format("{}: {} bytes, more than an index of safetensors shards holds (at most {})", what,
                                     size, kMaxSafetensorsIndexBytes));
  }
  std::vector<RawEntry> entries;
  auto j = parse_index_json(data, size, what, &entries);
  if (!j) return j.status();
  if (!j->contains("weight_map") || !(*j)["weight_map"].is_object()) {
    return Status::error(what + ": weight_map is missing or not an object {tensor name: shard file}");
  }
  if ((*j)["weight_map"].empty()) return Status::error(what + ": weight_map is empty; the index names no tensor");
  SafetensorsIndex index;
  if (j->contains("metadata") && !(*j)["metadata"].is_null()) {
    const json& m = (*j)["metadata"];
    if (!m.is_object()) return Status::error(what + ": metadata is not an object");
    if (m.contains("total_size")) {
      if (!m["total_size"].is_number_unsigned()) {
        return Status::error(what + ": metadata.total_size is not a non-negative integer (the tensors' bytes)");
      }
      index.total_size = m["total_size"].get<uint64_t>();
    }
  }
  std::set<std::string> shards;
  for (const RawEntry& e : entries) {
    if (!e.is_string) {
      return Status::error(fmt::format("{}: weight_map[\"{}\"] is not a string; it must name the shard file holding "
                                       "the tensor", what, e.tensor));
    }
    TERA_RETURN_IF_ERROR(check_shard_name(e.shard, e.tensor, what));
    auto [it, inserted] = index.weight_map.emplace(e.tensor, e.shard);
    if (!inserted) {
      return Status::error(fmt::format("{}: tensor '{}' is named twice in weight_map (in {} and in {}); each tensor "
                                       "must appear once",
                                       what, e.tensor, it->second, e.shard));
    }
    shards.insert(e.shard);
  }
  if (shards.size() > kMaxSafetensorsShards) {
    return Status::error(fmt::format("{}: {} shards, more than {}", what, shards.size(), kMaxSafetensorsShards));
  }
  index.shards.assign(shards.begin(), shards.end());
  return index;
}

Expected<SafetensorsIndex> read_safetensors_index(const std::string& path) {
  auto bytes = read_regular_file(path, "safetensors index", kMaxSafetensorsIndexBytes);
  if (!bytes) return bytes.status();
  return parse_safetensors_index(bytes->data(), bytes->size(), path);
}

Expected<SafetensorsFile> SafetensorsFile::open_sharded(const std::string& index_path) {
  auto index = read_safetensors_index(index_path);
  if (!index) return index.status();
  const fs::path dir = fs::path(index_path).has_parent_path() ? fs::path(index_path).parent_path() : fs::path(".");
  // Each shard's tensors, for messages naming the first that needs a missing shard.
  std::map<std::string, std::vector<std::string>> wanted;
  for (const auto& [tensor, shard] : index->weight_map) wanted[shard].push_back(tensor);
  SafetensorsFile all;
  all.path_ = index_path;
  std::map<std::string, std::string> seen;  // tensor -> shard that holds it
  for (const std::string& shard : index->shards) {
    const std::string shard_path = (dir / shard).string();
    std::error_code ec;
    if (!fs::exists(shard_path, ec)) {
      return Status::error(fmt::format("{}: shard {} is missing ({} does not exist), and weight_map puts {} tensor{} "
                                       "there, e.g. '{}'; copy every shard the index names beside it",
                                       index_path, shard, shard_path, wanted[shard].size(),
                                       wanted[shard].size() == 1 ? "" : "s", wanted[shard].front()));
    }
    auto one = SafetensorsFile::open_one(shard_path);
    if (!one) return one.status();
    for (const StTensorRef& t : one->tensors_) {
      auto listed = index->weight_map.find(t.name);
      if (listed == index->weight_map.end()) {
        return Status::error(fmt::format("{}: tensor '{}' of shard {} is not in the index's weight_map; the index and "
                                         "its shards disagree", index_path, t.name, shard));
      }
      if (listed->second != shard) {
        return Status::error(fmt::format("{}: tensor '{}' is in shard {}, but weight_map puts it in {}; each tensor "
                                         "must appear once, where the index says",
                                         index_path, t.name, shard, listed->second));
      }
      seen[t.name] = shard;
    }
    for (const auto& [k, v] : one->metadata_) all.metadata_.emplace(k, v);
    all.tensors_.insert(all.tensors_.end(), one->tensors_.begin(), one->tensors_.end());
    all.maps_.push_back(one->maps_.front());
    one->maps_.clear();  // now all's to unmap
  }
  for (const auto& [tensor, shard] : index->weight_map) {
    if (!seen.count(tensor)) {
      return Status::error(fmt::format("{}: weight_map puts tensor '{}' in {}, but that shard does not hold it; the "
                                       "index and its shards disagree", index_path, tensor, shard));
    }
  }
  return all;
}

std::string safetensors_shard_name(const std::string& stem, size_t i, size_t n) {
  return fmt::format("{}-{:05d}-of-{:05d}.safetensors", stem, i, n);
}

std::vector<size_t> plan_safetensors_shards(const std::vector<StTensorRef>& tensors, uint64_t max_shard_bytes) {
  std::vector<size_t> first;
  uint64_t current = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (first.empty() || (current > 0 && current + tensors[i].bytes > max_shard_bytes)) {
      first.push_back(i);
      current = 0;
    }
    current += tensors[i].bytes;
  }
  return first;
}

namespace {

// "dir/model.safetensors" -> ("dir", "model").
std::pair<fs::path, std::string> split_weights_path(const std::string& path) {
  const fs::path p(path);
  std::string stem = p.filename().string();
  if (ends_with(stem, ".safetensors")) stem.resize(stem.size() - std::string(".safetensors").size());
  return {p.has_parent_path() ? p.parent_path() : fs::path("."), stem};
}

}  // namespace

std::vector<std::string> safetensors_sharded_paths(const std::string& path, size_t shards) {
  if (shards <= 1) return {path};
  const auto [dir, stem] = split_weights_path(path);
  std::vector<std::string> out;
  for (size_t i = 1; i <= shards; ++i) out.push_back((dir / safetensors_shard_name(stem, i, shards)).string());
  out.push_back(path + ".index.json");
  return out;
}

Expected<std::vector<std::string>> write_safetensors_sharded(const std::string& path,
                                                              const std::vector<StTensorRef>& tensors,
                                                              const std::map<std::string, std::string>& metadata,
                                                              uint64_t max_shard_bytes) {
  const std::vector<size_t> first = plan_safetensors_shards(tensors, max_shard_bytes);
  const std::vector<std::string> paths = safetensors_sharded_paths(path, first.size());
  if (first.size() <= 1) {
    auto crc = write_safetensors(path, tensors, metadata);
    if (!crc) return crc.status();
    return paths;
  }
  json weight_map = json::object();
  uint64_t total = 0;
  for (size_t s = 0; s < first.size(); ++s) {
    const size_t end = s + 1 < first.size() ? first[s + 1] : tensors.size();
    const std::vector<StTensorRef> part(tensors.begin() + static_cast<std::ptrdiff_t>(first[s]),
                                        tensors.begin() + static_cast<std::ptrdiff_t>(end));
    auto crc = write_safetensors(paths[s], part, metadata);
    if (!crc) return crc.status();
    const std::string name = fs::path(paths[s]).filename().string();
    for (const StTensorRef& t : part) {
      weight_map[t.name] = name;
      total += t.bytes;
    }
  }
  const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  const std::string text = index.dump(2) + "\n";
  auto file = AtomicFile::create(paths.back());
  if (!file) return file.status();
  TERA_RETURN_IF_ERROR(file->write(text.data(), text.size()));
  TERA_RETURN_IF_ERROR(file->commit());
  return paths;
}

Expected<uint64_t> parse_shard_size(const std::string& text, const std::string& flag) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string unit = text.substr(digits);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::map<std::string, uint64_t> units = {{"", 1},           {"B", 1},
                                                 {"KB", 1000},      {"MB", 1000000},
                                                 {"GB", 1000000000}, {"KIB", uint64_t{1} << 10},
                                                 {"MIB", uint64_t{1} << 20}, {"GIB", uint64_t{1} << 30}};
  const auto u = units.find(unit);
  if (digits == 0 || digits > 18 || u == units.end()) {
    return Status::error(flag + " " + text + ": not a size; write bytes, or a number with KB, MB, GB (10^3, 10^6, "
                         "10^9, as Hugging Face) or KiB, MiB, GiB, e.g. 5GB");
  }
  const uint64_t count = std::stoull(text.substr(0, digits));
  if (count == 0) return Status::error(flag + " " + text + ": a shard must hold at least one byte");
  if (count > UINT64_MAX / u->second) return Status::error(flag + " " + text + ": too large");
  return count * u->second;
}

}  // namespace tera
