// Reading and writing tokenizer files (tokenizer.json, tera's earlier JSON,
// GPT-2 vocab.json + merges.txt, tiktoken rank files).
#include "data/tokenizer_file.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "core/strings.h"
#include "data/byte_unicode.h"
#include "data/hf_tokenizer.h"
#include "data/tiktoken_file.h"

namespace tera {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Tokenizer files are untrusted: regular files only (never a device or a
// FIFO), read with a size bound.
Expected<std::string> read_text(const std::string& path, const std::string& what) {
  auto bytes = read_regular_file(path, what, kMaxTokenizerFileBytes);
  if (!bytes) return bytes.status();
  return std::string(bytes->begin(), bytes->end());
}

Expected<json> parse_json(std::string_view text, const std::string& what) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return Status::error(what + ": not valid JSON (" + e.what() + ")");
  }
}

}  // namespace

std::string tokenizer_to_json(const BpeTokenizer& tok) { return hf_tokenizer_json(tok); }

namespace {

// tera's earlier format ("format": "tera-bpe", version 1).
Expected<BpeTokenizer> parse_tera_tokenizer(std::string_view text, const std::string& what) {
  auto parsed = parse_json(text, what);
  if (!parsed) return parsed.status();
  const json& j = *parsed;
  auto err = [&](const std::string& m) { return Status::error(what + ": " + m); };
  if (!j.is_object() || !j.contains("format") || j["format"] != kTokenizerFormat) {
    return err(fmt::format("not a tera tokenizer (\"format\" must be \"{}\")", kTokenizerFormat));
  }
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != kTokenizerVersion) {
    return err(fmt::format("unsupported tokenizer version {} (this tera reads version {})",
                           j.contains("version") ? j["version"].dump() : "none", kTokenizerVersion));
  }
  if (j.value("pretokenizer", json()) != "gpt2") return err("\"pretokenizer\" must be \"gpt2\"");
  for (const char* key : {"tokens", "merges", "special_tokens"}) {
    if (!j.contains(key) || !j[key].is_array()) return err(fmt::format("\"{}\" must be an array", key));
  }
  const json& jt = j["tokens"];
  if (!j.contains("vocab_size") || !j["vocab_size"].is_number_integer() ||
      j["vocab_size"].get<int64_t>() != static_cast<int64_t>(jt.size())) {
    return err(fmt::format("\"vocab_size\" must equal the number of tokens ({})", jt.size()));
  }
  std::vector<std::string> tokens(jt.size());
  for (size_t i = 0; i < jt.size(); ++i) {
    if (!jt[i].is_string() || !printable_to_bytes(jt[i].get_ref<const std::string&>(), tokens[i])) {
      return err(fmt::format("token {} is not a string of GPT-2 byte characters", i));
    }
  }
  std::vector<BpeMerge> merges;
  merges.reserve(j["merges"].size());
  for (const json& m : j["merges"]) {
    if (!m.is_array() || m.size() != 2 || !m[0].is_number_integer() || !m[1].is_number_integer() ||
        m[0].get<int64_t>() < 0 || m[1].get<int64_t>() < 0 || m[0].get<int64_t>() >= static_cast<int64_t>(jt.size()) ||
        m[1].get<int64_t>() >= static_cast<int64_t>(jt.size())) {
      return err(fmt::format("merge {} must be a pair of token ids below {}", merges.size(), jt.size()));
    }
    merges.push_back({m[0].get<int32_t>(), m[1].get<int32_t>()});
  }
  std::vector<int32_t> specials;
  for (const json& s : j["special_tokens"]) {
    if (!s.is_number_integer() || s.get<int64_t>() < 0 || s.get<int64_t>() >= static_cast<int64_t>(jt.size())) {
      return err("\"special_tokens\" must hold token ids");
    }
    specials.push_back(s.get<int32_t>());
  }
  return BpeTokenizer::create(std::move(tokens), std::move(merges), std::move(specials), what);
}

}  // namespace

Expected<BpeTokenizer> parse_tokenizer_json(std::string_view text, const std::string& what) {
  if (looks_like_hf_tokenizer(text)) return parse_hf_tokenizer(text, what);
  return parse_tera_tokenizer(text, what);
}

Status save_tokenizer(const BpeTokenizer& tok, const std::string& path) {
  const std::string text = tokenizer_to_json(tok);
  auto f = AtomicFile::create(path);
  if (!f) return f.status();
  TERA_RETURN_IF_ERROR(f->write(text.data(), text.size()));
  return f->commit();
}

Expected<BpeTokenizer> parse_gpt2_tokenizer(std::string_view vocab_json, std::string_view merges_txt,
                                            const std::string& vocab_what, const std::string& merges_what) {
  auto parsed = parse_json(vocab_json, vocab_what);
  if (!parsed) return parsed.status();
  const json& v = *parsed;
  if (!v.is_object() || v.size() < 256) {
    return Status::error(vocab_what + ": must be a JSON object mapping at least 256 tokens to ids");
  }
  std::vector<std::string> tokens(v.size());
  std::vector<uint8_t> seen(v.size(), 0);
  std::vector<int32_t> specials;
  std::unordered_map<std::string, int32_t> ids;
  for (const auto& [key, val] : v.items()) {
    if (!val.is_number_integer() || val.get<int64_t>() < 0 || val.get<int64_t>() >= static_cast<int64_t>(v.size())) {
      return Status::error(
          fmt::format("{}: token {} must map to an id in [0, {})", vocab_what, json(key).dump(), v.size()));
    }
    const auto id = val.get<int32_t>();
    if (seen[static_cast<size_t>(id)]) return Status::error(fmt::format("{}: id {} is used twice", vocab_what, id));
    seen[static_cast<size_t>(id)] = 1;
    if (key == kEndOfText) {
      tokens[static_cast<size_t>(id)] = key;
      specials.push_back(id);
    } else if (!printable_to_bytes(key, tokens[static_cast<size_t>(id)])) {
      return Status::error(
          fmt::format("{}: token {} is not written in GPT-2 byte characters", vocab_what, json(key).dump()));
    }
    ids.emplace(key, id);
  }
  std::vector<BpeMerge> merges;
  TextLines lines(merges_txt);
  for (std::string_view line; lines.next(line);) {
    const size_t line_no = lines.number();
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    const size_t sp = line.find(' ');
    const std::string left(line.substr(0, sp == std::string_view::npos ? line.size() : sp));
    const std::string right(sp == std::string_view::npos ? "" : line.substr(sp + 1));
    auto l = ids.find(left), r = ids.find(right);
    if (left.empty() || right.empty() || right.find(' ') != std::string::npos || l == ids.end() || r == ids.end()) {
      return Status::error(
          fmt::format("{}:{}: expected two tokens of {} separated by one space", merges_what, line_no, vocab_what));
    }
    merges.push_back({l->second, r->second});
  }
  return BpeTokenizer::create(std::move(tokens), std::move(merges), std::move(specials), vocab_what);
}

namespace {

Expected<BpeTokenizer> open_tokenizer_dir(const std::string& dir) {
  std::error_code ec;
  const std::string hf = (fs::path(dir) / "tokenizer.json").string();
  if (fs::exists(hf, ec)) {
    auto text = read_text(hf, "tokenizer");
    if (!text) return text.status();
    return parse_tokenizer_json(*text, hf);
  }
  for (const auto& [vocab, merges] : {std::pair{"vocab.json", "merges.txt"}, std::pair{"encoder.json", "vocab.bpe"}}) {
    const std::string vp = (fs::path(dir) / vocab).string(), mp = (fs::path(dir) / merges).string();
    if (!fs::exists(vp, ec) && !fs::exists(mp, ec)) continue;
    auto vt = read_text(vp, "tokenizer vocabulary");
    if (!vt) return vt.status();
    auto mt = read_text(mp, "tokenizer merges");
    if (!mt) return mt.status();
    return parse_gpt2_tokenizer(*vt, *mt, vp, mp);
  }
  return Status::error(dir + ": a tokenizer directory must hold tokenizer.json, or vocab.json + merges.txt (GPT-2's "
                       "files)");
}

bool starts_as_json(std::string_view text) {
  const size_t p = text.find_first_not_of(" \t\r\n");
  return p != std::string_view::npos && text[p] == '{';
}

}  // namespace

Expected<BpeTokenizer> open_tokenizer(const std::string& path) { return open_tokenizer(TokenizerSpec{path, "", ""}); }

Expected<BpeTokenizer> open_tokenizer(const TokenizerSpec& spec) {
  const bool tiktoken = !spec.pattern.empty();
  if (!tiktoken && !spec.specials.empty()) {
    return Status::error(spec.path + ": special tokens (--special, data.tokenizer_specials) are given only with a "
                         "tiktoken rank file and its --pattern; other tokenizer files list their own");
  }
  if (spec.path == "bytes" && !tiktoken) return BpeTokenizer::bytes();
  std::error_code ec;
  if (fs::is_directory(spec.path, ec)) {
    if (tiktoken) return Status::error(spec.path + ": --pattern names a tiktoken rank file's pre-tokenizer; this is a directory");
    return open_tokenizer_dir(spec.path);
  }
  auto text = read_text(spec.path, "tokenizer");
  if (!text) return text.status();
  if (tiktoken) {
    auto pattern = pretokenizer_from_name(spec.pattern);
    if (!pattern) {
      return Status::error(fmt::format("--pattern / data.tokenizer_pattern = \"{}\": not a pre-tokenizer tera "
                                       "implements (gpt2, cl100k or llama3, qwen2)", spec.pattern));
    }
    if (starts_as_json(*text)) {
      return Status::error(spec.path + ": is JSON, not a tiktoken rank file; --pattern is only for tiktoken files "
                           "(a tokenizer.json carries its own)");
    }
    auto specials = parse_special_list(spec.specials, "--special / data.tokenizer_specials");
    if (!specials) return specials.status();
    return parse_tiktoken(*text, *pattern, *specials, spec.path);
  }
  if (!starts_as_json(*text) && looks_like_tiktoken(*text)) {
    return Status::error(spec.path + ": is a tiktoken rank file; name its pre-tokenizer with --pattern "
                         "(data.tokenizer_pattern): gpt2, cl100k (Llama 3) or qwen2");
  }
  return parse_tokenizer_json(*text, spec.path);
}

bool gpt2_files_can_hold(const BpeTokenizer& tok) {
  if (!tok.rules().is_default()) return false;
  for (const int32_t s : tok.specials()) {
    if (tok.token(s) != kEndOfText) return false;
  }
  return true;
}

Status save_gpt2_tokenizer(const BpeTokenizer& tok, const std::string& vocab_path, const std::string& merges_path) {
  // vocab.json: printable token text -> id; the special token is written as
  // its text, which must not also be an ordinary token's printable form.
  json vocab = json::object();
  for (int64_t i = 0; i < tok.vocab_size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    std::string key;
    if (tok.is_special(id)) {
      if (tok.token(id) != kEndOfText) {
        return Status::error(fmt::format("{}: special token {} ({}) cannot be written in GPT-2's format, whose only "
                                         "special token is {}",
                                         vocab_path, id, json(tok.token(id)).dump(), kEndOfText));
      }
      key = kEndOfText;
    } else {
      key = bytes_to_printable(tok.token(id));
    }
    if (vocab.contains(key)) {
      return Status::error(fmt::format("{}: tokens {} and {} are both written {}; GPT-2's vocab.json cannot hold both",
                                       vocab_path, vocab[key].get<int64_t>(), id, json(key).dump()));
    }
    vocab[key] = id;
  }
  std::string merges = "#version: 0.2\n";
  for (const BpeMerge& m : tok.merges()) {
    merges += bytes_to_printable(tok.token(m.left));
    merges += ' ';
    merges += bytes_to_printable(tok.token(m.right));
    merges += '\n';
  }
  const std::string vtext = vocab.dump() + "\n";
  // Both complete before either is renamed into place.
  auto vf = AtomicFile::create(vocab_path);
  if (!vf) return vf.status();
  auto mf = AtomicFile::create(merges_path);
  if (!mf) return mf.status();
  TERA_RETURN_IF_ERROR(vf->write(vtext.data(), vtext.size()));
  TERA_RETURN_IF_ERROR(mf->write(merges.data(), merges.size()));
  TERA_RETURN_IF_ERROR(vf->commit());
  return mf->commit();
}

std::string tokenizer_reference(const BpeTokenizer& tok) { return tok.is_bytes() ? "bytes" : tokenizer_to_json(tok); }

Expected<BpeTokenizer> tokenizer_from_reference(const std::string& ref, const std::string& base_dir,
                                                const std::string& where) {
  if (ref == "bytes") return BpeTokenizer::bytes();
  if (!ref.empty() && ref.front() == '{') return parse_tokenizer_json(ref, where + " (the tokenizer it records)");
  // A path inside a checkpoint is untrusted: resolved beside its meta.json,
  // and open_tokenizer reads only regular files, with a size bound.
  if (fs::path(ref).is_absolute()) {
    return Status::error(where + ": names the tokenizer by an absolute path (" + ref + "); a checkpoint may only "
                         "name files beside it. Re-import the model with `tera ckpt import --tokenizer FILE`");
  }
  auto tok = open_tokenizer(tokenizer_reference_path(ref, base_dir));
  if (!tok) return Status::error(where + ": cannot load the tokenizer it names: " + tok.error());
  return tok;
}

std::string tokenizer_reference_path(const std::string& ref, const std::string& base_dir) {
  if (ref.empty() || ref == "bytes" || ref.front() == '{') return "";
  return resolve_beside((fs::path(base_dir) / "meta.json").string(), ref);
}

}  // namespace tera
