// manifest.json reading (every field checked) and atomic writing.
#include "data/shard_manifest.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/file_util.h"

namespace tera {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool is_shard_dir(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / kManifestFile, ec);
}

Status write_manifest(const std::string& dir, const ShardManifest& m) {
  json splits = json::object();
  for (const auto& [name, s] : m.splits) {
    json shards = json::array();
    for (const auto& e : s.shards) shards.push_back({{"file", e.file}, {"tokens", e.tokens}, {"crc32", e.crc32}});
    splits[name] = {{"tokens", s.tokens}, {"bytes", s.bytes}, {"documents", s.documents}, {"shards", shards}};
  }
  const json j = {{"format", kShardFormat},
                  {"version", kShardManifestVersion},
                  {"tokenizer", m.tokenizer_file},
                  {"tokenizer_fingerprint", fmt::format("{:016x}", m.tokenizer_fingerprint)},
                  {"vocab_size", m.vocab_size},
                  {"eot", m.eot},
                  {"splits", splits},
                  {"inputs", m.inputs}};
  const std::string text = j.dump(2) + "\n";
  auto f = AtomicFile::create((fs::path(dir) / kManifestFile).string());
  if (!f) return f.status();
  TERA_RETURN_IF_ERROR(f->write(text.data(), text.size()));
  return f->commit();
}

Expected<ShardManifest> read_manifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / kManifestFile).string();
  // Regular files only (a FIFO would block, a device never end), with a bound
  // far above any real manifest (~100 bytes per shard).
  auto bytes = read_regular_file(path, "manifest", uint64_t{1} << 30);
  if (!bytes) {
    return Status::error(dir + ": not a token-shard directory (" + bytes.error() +
                         "); make one with tera tokenize encode");
  }
  return parse_manifest(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()), path);
}

Expected<ShardManifest> parse_manifest(std::string_view text, const std::string& path) {
  auto err = [&](const std::string& m) { return Status::error(path + ": " + m); };
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return err(std::string("not valid JSON (") + e.what() + ")");
  }
  if (!j.is_object() || j.value("format", json()) != kShardFormat) {
    return err(fmt::format("\"format\" must be \"{}\"", kShardFormat));
  }
  if (!j.contains("version") || j["version"] != kShardManifestVersion) {
    return err(fmt::format("unsupported manifest version {} (this tera reads version {})",
                           j.contains("version") ? j["version"].dump() : "none", kShardManifestVersion));
  }
  auto is_count = [](const json& v) { return v.is_number_integer() && v.get<int64_t>() >= 0; };
  auto plain = [](const std::string& f) {
    return !f.empty() && f.find('/') == std::string::npos && f != "." && f != "..";
  };
  ShardManifest m;
  if (!j.contains("tokenizer") || !j["tokenizer"].is_string() || !plain(j["tokenizer"].get<std::string>())) {
    return err("\"tokenizer\" must be a plain file name in the directory");
  }
  m.tokenizer_file = j["tokenizer"].get<std::string>();
  const json fp = j.value("tokenizer_fingerprint", json());
  if (!fp.is_string() || fp.get<std::string>().size() != 16 ||
      fp.get<std::string>().find_first_not_of("0123456789abcdef") != std::string::npos) {
    return err("\"tokenizer_fingerprint\" must be 16 hex digits");
  }
  m.tokenizer_fingerprint = std::stoull(fp.get<std::string>(), nullptr, 16);
  if (!j.contains("vocab_size") || !is_count(j["vocab_size"]) || j["vocab_size"].get<int64_t>() == 0) {
    return err("\"vocab_size\" must be a positive integer");
  }
  m.vocab_size = j["vocab_size"].get<int64_t>();
  if (!j.contains("eot") || !j["eot"].is_number_integer() || j["eot"].get<int64_t>() < -1 ||
      j["eot"].get<int64_t>() >= m.vocab_size) {
    return err("\"eot\" must be a token id or -1");
  }
  m.eot = j["eot"].get<int32_t>();
  if (!j.contains("splits") || !j["splits"].is_object()) return err("\"splits\" must be an object");
  for (const auto& [name, s] : j["splits"].items()) {
    const std::string where = "split '" + name + "'";
    if (!s.is_object() || !s.contains("shards") || !s["shards"].is_array()) return err(where + " must list its shards");
    SplitInfo info;
    for (const char* k : {"tokens", "bytes", "documents"}) {
      if (!s.contains(k) || !is_count(s[k])) return err(fmt::format("{}: \"{}\" must be a count", where, k));
    }
    info.tokens = s["tokens"].get<int64_t>();
    info.bytes = s["bytes"].get<int64_t>();
    info.documents = s["documents"].get<int64_t>();
    int64_t sum = 0;
    for (const json& e : s["shards"]) {
      if (!e.is_object() || !e.contains("file") || !e["file"].is_string() || !plain(e["file"].get<std::string>()) ||
          !e.contains("tokens") || !is_count(e["tokens"]) || !e.contains("crc32") || !e["crc32"].is_number_unsigned() ||
          e["crc32"].get<uint64_t>() > 0xFFFFFFFFull) {
        return err(where + ": each shard needs a plain \"file\" name, \"tokens\" and \"crc32\"");
      }
      info.shards.push_back({e["file"].get<std::string>(), e["tokens"].get<int64_t>(), e["crc32"].get<uint32_t>()});
      if (info.shards.back().tokens > info.tokens - sum) {
        return err(fmt::format("{}: its shards hold more than {} tokens", where, info.tokens));
      }
      sum += info.shards.back().tokens;
    }
    if (sum != info.tokens) return err(fmt::format("{}: its shards hold {} tokens, not {}", where, sum, info.tokens));
    m.splits[name] = std::move(info);
  }
  if (j.contains("inputs") && j["inputs"].is_array()) {
    for (const json& in : j["inputs"]) {
      if (in.is_string()) m.inputs.push_back(in.get<std::string>());
    }
  }
  return m;
}

}  // namespace tera
