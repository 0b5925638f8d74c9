// Hugging Face tokenizer.json in and out; see hf_tokenizer.h. The reader
// takes untrusted files: every field is type-checked, and a refusal names the
// file, the field and what tera reads instead.
#include "data/hf_tokenizer.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "data/byte_unicode.h"
#include "data/pretokenize.h"

namespace tera {

using json = nlohmann::json;

namespace {

constexpr const char* kSpecialsAreStructureKey = "tera_special_tokens_are_not_text";

// Vocabulary ids above this are refused; and a vocabulary is dense up to its
// largest id but for at most kMaxUnusedIds holes, so a small file cannot make
// the reader allocate for ids nothing names.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;
constexpr int64_t kMaxUnusedIds = 65536;

class Reader {
 public:
  explicit Reader(const std::string& what) : what_(what) {}
  Status err(const std::string& field, const std::string& m) const {
    return Status::error(fmt::format("{}: {}: {}", what_, field, m));
  }
  // The type name of an object component, or "" when it is null.
  Expected<std::string> type_of(const json& j, const std::string& field) const {
    if (j.is_null()) return std::string();
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
      return err(field, "must be null or an object with a \"type\" string");
    }
    return j["type"].get<std::string>();
  }
  bool flag(const json& j, const char* key, bool fallback) const {
    return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
  }

 private:
  std::string what_;
};

struct Parsed {
  int64_t id_limit = 0;  // ids must lie below: the tokens named + kMaxUnusedIds
  std::vector<std::string> tokens;
  std::vector<uint8_t> filled;
  std::vector<int32_t> specials;
  EncodingRules rules;
  std::vector<BpeMerge> merges;
  std::unordered_map<std::string, int32_t> vocab;  // printable text -> id
};

Status place(Parsed& p, int64_t id, std::string bytes, const Reader& r, const std::string& field) {
  if (id < 0 || id > kMaxTokenId) return r.err(field, fmt::format("id {} is outside [0, {}]", id, kMaxTokenId));
  if (id >= p.id_limit) {
    return r.err(field, fmt::format("id {} would leave more than {} ids unused (the file names {} tokens); a "
                                    "vocabulary's ids are dense", id, kMaxUnusedIds, p.id_limit - kMaxUnusedIds));
  }
  const auto i = static_cast<size_t>(id);
  if (i >= p.tokens.size()) {
    p.tokens.resize(i + 1);
    p.filled.resize(i + 1, 0);
  }
  if (p.filled[i] && p.tokens[i] != bytes) {
    return r.err(field, fmt::format("id {} is given to two different tokens", id));
  }
  p.tokens[i] = std::move(bytes);
  p.filled[i] = 1;
  return ok_status();
}

Status read_vocab(const json& model, Parsed& p, const Reader& r) {
  if (!model.contains("vocab") || !model["vocab"].is_object()) return r.err("model.vocab", "must be an object");
  for (const auto& [key, val] : model["vocab"].items()) {
    if (!val.is_number_integer()) return r.err("model.vocab", fmt::format("{} must map to an integer id", json(key).dump()));
    std::string bytes;
    if (!printable_to_bytes(key, bytes)) {
      return r.err("model.vocab", fmt::format("token {} is not written in byte-level characters (a byte-level BPE "
                                              "vocabulary spells bytes as GPT-2 does, space as \"\\u0120\")",
                                              json(key).dump()));
    }
    TERA_RETURN_IF_ERROR(place(p, val.get<int64_t>(), std::move(bytes), r, "model.vocab"));
    p.vocab[key] = val.get<int32_t>();
  }
  return ok_status();
}

Status read_merges(const json& model, Parsed& p, const Reader& r) {
  if (!model.contains("merges") || !model["merges"].is_array()) return r.err("model.merges", "must be an array");
  const json& m = model["merges"];
  p.merges.reserve(m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    std::string left, right;
    if (m[i].is_string()) {  // "left right"
      const std::string& s = m[i].get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        return r.err("model.merges", fmt::format("merge {} must be two tokens separated by one space", i));
      }
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (m[i].is_array() && m[i].size() == 2 && m[i][0].is_string() && m[i][1].is_string()) {
      left = m[i][0].get<std::string>();
      right = m[i][1].get<std::string>();
    } else {
      return r.err("model.merges", fmt::format("merge {} must be \"left right\" or [\"left\", \"right\"]", i));
    }
    auto l = p.vocab.find(left), rt = p.vocab.find(right);
    if (l == p.vocab.end() || rt == p.vocab.end()) {
      return r.err("model.merges", fmt::format("merge {} uses {}, which is not in model.vocab", i,
                                               json(l == p.vocab.end() ? left : right).dump()));
    }
    p.merges.push_back({l->second, rt->second});
  }
  return ok_status();
}

Status read_model(const json& j, Parsed& p, const Reader& r) {
  if (!j.contains("model")) return r.err("model", "is missing");
  auto type = r.type_of(j["model"], "model");
  if (!type) return type.status();
  const json& model = j["model"];
  if (*type != "BPE") {
    return r.err("model.type", fmt::format("\"{}\" is not implemented; tera reads byte-level BPE tokenizers "
                                           "(GPT-2, Llama 3, Qwen2 style)", *type));
  }
  if (r.flag(model, "byte_fallback", false)) {
    return r.err("model.byte_fallback", "is true: a SentencePiece-style BPE (Llama 2, Mistral) is not byte-level "
                 "and is not implemented");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() && !(model[key].is_string() && model[key].get<std::string>().empty())) {
      return r.err(fmt::format("model.{}", key), "is set; a byte-level BPE has none (not implemented)");
    }
  }
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0)) {
    return r.err("model.dropout", "is set; BPE dropout is a training-time augmentation tera does not implement");
  }
  p.rules.whole_piece_first = r.flag(model, "ignore_merges", false);
  TERA_RETURN_IF_ERROR(read_vocab(model, p, r));
  return read_merges(model, p, r);
}

Status read_added_tokens(const json& j, Parsed& p, const Reader& r) {
  if (!j.contains("added_tokens") || j["added_tokens"].is_null()) return ok_status();
  if (!j["added_tokens"].is_array()) return r.err("added_tokens", "must be an array");
  for (const json& a : j["added_tokens"]) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string() || a["content"].get<std::string>().empty()) {
      return r.err("added_tokens", "each entry must have an integer \"id\" and a non-empty \"content\" string");
    }
    const std::string content = a["content"].get<std::string>();
    for (const char* key : {"lstrip", "rstrip", "single_word"}) {
      if (r.flag(a, key, false)) {
        return r.err("added_tokens", fmt::format("{} sets {}, which tera does not implement", json(content).dump(), key));
      }
    }
    const int64_t id = a["id"].get<int64_t>();
    TERA_RETURN_IF_ERROR(place(p, id, content, r, "added_tokens"));
    (r.flag(a, "special", false) ? p.specials : p.rules.matched).push_back(static_cast<int32_t>(id));
  }
  return ok_status();
}

// ByteLevel with GPT-2's regex, or Split(pattern) then ByteLevel without one.
Status read_pre_tokenizer(const json& j, Parsed& p, const Reader& r) {
  const json pre = j.value("pre_tokenizer", json());
  auto type = r.type_of(pre, "pre_tokenizer");
  if (!type) return type.status();
  auto byte_level = [&](const json& b, bool want_regex) -> Status {
    if (r.flag(b, "add_prefix_space", false)) {
      return r.err("pre_tokenizer", "ByteLevel sets add_prefix_space, which tera does not implement");
    }
    if (r.flag(b, "use_regex", true) != want_regex) {
      return r.err("pre_tokenizer", want_regex ? "ByteLevel without its regex needs a Split before it"
                                               : "ByteLevel after a Split must set use_regex false");
    }
    return ok_status();
  };
  if (*type == "ByteLevel") {
    p.rules.pretokenizer = Pretokenizer::gpt2;
    return byte_level(pre, true);
  }
  const bool sequence = *type == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].is_array() &&
                        pre["pretokenizers"].size() == 2;
  if (!sequence) {
    return r.err("pre_tokenizer", fmt::format("\"{}\" is not implemented; tera reads ByteLevel, or a Sequence of "
                                              "Split (a known pattern) and ByteLevel", type->empty() ? "null" : *type));
  }
  const json& split = pre["pretokenizers"][0];
  auto split_type = r.type_of(split, "pre_tokenizer.pretokenizers[0]");
  if (!split_type) return split_type.status();
  const json pattern = split.value("pattern", json());
  if (*split_type != "Split" || !pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string() ||
      split.value("behavior", std::string()) != "Isolated" || r.flag(split, "invert", false)) {
    return r.err("pre_tokenizer", "a Sequence must start with Split {\"pattern\": {\"Regex\": ...}, \"behavior\": "
                 "\"Isolated\", \"invert\": false}");
  }
  auto known = pretokenizer_from_regex(pattern["Regex"].get<std::string>());
  if (!known) {
    return r.err("pre_tokenizer", fmt::format("the Split pattern {} is not one tera implements (GPT-2's, "
                                              "cl100k/Llama 3's, Qwen2's)", pattern["Regex"].dump()));
  }
  p.rules.pretokenizer = *known;
  auto bl_type = r.type_of(pre["pretokenizers"][1], "pre_tokenizer.pretokenizers[1]");
  if (!bl_type) return bl_type.status();
  if (*bl_type != "ByteLevel") return r.err("pre_tokenizer", "the Split must be followed by ByteLevel");
  return byte_level(pre["pretokenizers"][1], false);
}

// One template step: {"SpecialToken": {"id": TEXT}} or {"Sequence": {"id": "A"}}.
Status read_template(const json& proc, Parsed& p, const Reader& r) {
  const json single = proc.value("single", json());
  if (!single.is_array()) return r.err("post_processor", "TemplateProcessing needs a \"single\" array");
  std::vector<std::string> before;
  bool text = false;
  for (const json& step : single) {
    if (step.is_object() && step.contains("Sequence")) {
      if (text) return r.err("post_processor", "the template holds the text twice");
      text = true;
    } else if (step.is_object() && step.contains("SpecialToken") && step["SpecialToken"].is_object() &&
               step["SpecialToken"].contains("id") && step["SpecialToken"]["id"].is_string()) {
      if (text) {
        return r.err("post_processor", "a template that adds tokens after the text is not implemented (tera "
                     "closes documents with its end-of-text token)");
      }
      before.push_back(step["SpecialToken"]["id"].get<std::string>());
    } else {
      return r.err("post_processor", "a template step must be SpecialToken or Sequence");
    }
  }
  if (before.size() > 1) return r.err("post_processor", "a template with more than one token before the text is not implemented");
  if (before.empty()) return ok_status();
  for (size_t i = 0; i < p.tokens.size(); ++i) {
    if (p.filled[i] && p.tokens[i] == before[0]) {
      p.rules.bos = static_cast<int32_t>(i);
      return ok_status();
    }
  }
  return r.err("post_processor", fmt::format("the template's token {} is not a token", json(before[0]).dump()));
}

Status read_post_processor(const json& j, Parsed& p, const Reader& r) {
  const json proc = j.value("post_processor", json());
  auto type = r.type_of(proc, "post_processor");
  if (!type) return type.status();
  if (type->empty() || *type == "ByteLevel") return ok_status();  // ByteLevel only trims offsets
  if (*type == "TemplateProcessing") return read_template(proc, p, r);
  if (*type == "Sequence" && proc.contains("processors") && proc["processors"].is_array()) {
    for (const json& step : proc["processors"]) {
      auto t = r.type_of(step, "post_processor.processors");
      if (!t) return t.status();
      if (*t == "TemplateProcessing") {
        TERA_RETURN_IF_ERROR(read_template(step, p, r));
      } else if (*t != "ByteLevel") {
        return r.err("post_processor", fmt::format("\"{}\" is not implemented", *t));
      }
    }
    return ok_status();
  }
  return r.err("post_processor", fmt::format("\"{}\" is not implemented (tera reads ByteLevel and "
                                             "TemplateProcessing)", *type));
}

Status check_unsupported(const json& j, const Reader& r) {
  auto norm = r.type_of(j.value("normalizer", json()), "normalizer");
  if (!norm) return norm.status();
  if (!norm->empty()) {
    return r.err("normalizer", fmt::format("\"{}\" is not implemented; tera encodes the text as it is", *norm));
  }
  auto dec = r.type_of(j.value("decoder", json()), "decoder");
  if (!dec) return dec.status();
  if (!dec->empty() && *dec != "ByteLevel") {
    return r.err("decoder", fmt::format("\"{}\" is not implemented; a byte-level BPE decodes with ByteLevel", *dec));
  }
  return ok_status();
}

}  // namespace

bool looks_like_hf_tokenizer(std::string_view text) {
  // A cheap test before parsing: tera's own format names itself first.
  return text.find("\"model\"") != std::string_view::npos && text.find("\"tera-bpe\"") == std::string_view::npos;
}

Expected<BpeTokenizer> parse_hf_tokenizer(std::string_view text, const std::string& what) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return Status::error(what + ": not valid JSON (" + e.what() + ")");
  }
  const Reader r(what);
  if (!j.is_object()) return r.err("(top level)", "must be an object");
  Parsed p;
  const auto count = [&](const json& o, const char* key) -> int64_t {
    return o.is_object() && o.contains(key) && (o[key].is_object() || o[key].is_array()) ? static_cast<int64_t>(o[key].size()) : 0;
  };
  p.id_limit = count(j.value("model", json()), "vocab") + count(j, "added_tokens") + kMaxUnusedIds;
  // Hugging Face finds every added token in the text. tera's own writer marks
  // a tokenizer whose special tokens are structure only (GPT-2's files, as
  // OpenAI's encoder reads them) with this key, which other readers ignore.
  p.rules.specials_in_text = !r.flag(j, kSpecialsAreStructureKey, false);
  TERA_RETURN_IF_ERROR(check_unsupported(j, r));
  TERA_RETURN_IF_ERROR(read_model(j, p, r));
  TERA_RETURN_IF_ERROR(read_added_tokens(j, p, r));
  TERA_RETURN_IF_ERROR(read_pre_tokenizer(j, p, r));
  TERA_RETURN_IF_ERROR(read_post_processor(j, p, r));
  // Ids no token names are unused (special, empty: never produced).
  for (size_t i = 0; i < p.tokens.size(); ++i) {
    if (!p.filled[i]) p.specials.push_back(static_cast<int32_t>(i));
  }
  // An added token also in the vocabulary is the added one (matched, never merged).
  std::vector<int32_t> matched;
  for (const int32_t id : p.rules.matched) {
    if (std::find(p.specials.begin(), p.specials.end(), id) == p.specials.end()) matched.push_back(id);
  }
  p.rules.matched = std::move(matched);
  return BpeTokenizer::create(std::move(p.tokens), std::move(p.merges), std::move(p.specials), what,
                              std::move(p.rules));
}

std::string hf_tokenizer_json(const BpeTokenizer& tok) {
  const EncodingRules& rules = tok.rules();
  json added = json::array();
  auto add = [&](int32_t id, bool special) {
    added.push_back({{"id", id}, {"content", tok.token(id)}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", special}});
  };
  std::vector<int32_t> ids = tok.specials();
  ids.insert(ids.end(), rules.matched.begin(), rules.matched.end());
  std::sort(ids.begin(), ids.end());
  for (const int32_t id : ids) {
    if (!tok.token(id).empty()) add(id, tok.is_special(id));
  }
  json vocab = json::object();
  for (int64_t i = 0; i < tok.vocab_size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    if (!tok.is_special(id)) vocab[bytes_to_printable(tok.token(id))] = id;
  }
  json merges = json::array();
  for (const BpeMerge& m : tok.merges()) {
    merges.push_back(bytes_to_printable(tok.token(m.left)) + " " + bytes_to_printable(tok.token(m.right)));
  }
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  json pre = byte_level;
  if (rules.pretokenizer != Pretokenizer::gpt2) {
    json split = {{"type", "Split"},
                  {"pattern", {{"Regex", pretokenizer_regex(rules.pretokenizer)}}},
                  {"behavior", "Isolated"},
                  {"invert", false}};
    json bl = byte_level;
    bl["use_regex"] = false;
    pre = {{"type", "Sequence"}, {"pretokenizers", json::array({split, bl})}};
  }
  json post = byte_level;
  post["trim_offsets"] = false;
  if (rules.bos >= 0) {
    const std::string b = tok.token(rules.bos);
    auto seq = [](const char* id) { return json{{"Sequence", {{"id", id}, {"type_id", 0}}}}; };
    const json special = {{"SpecialToken", {{"id", b}, {"type_id", 0}}}};
    post = {{"type", "TemplateProcessing"},
            {"single", json::array({special, seq("A")})},
            {"pair", json::array({special, seq("A"), special, seq("B")})},
            {"special_tokens", {{b, {{"id", b}, {"ids", json::array({rules.bos})}, {"tokens", json::array({b})}}}}}};
  }
  json decoder = byte_level;
  json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", rules.whole_piece_first},
                {"vocab", std::move(vocab)},
                {"merges", std::move(merges)}};
  json j = {{"version", "1.0"},
            {"truncation", nullptr},
            {"padding", nullptr},
            {"added_tokens", std::move(added)},
            {"normalizer", nullptr},
            {"pre_tokenizer", std::move(pre)},
            {"post_processor", std::move(post)},
            {"decoder", std::move(decoder)},
            {"model", std::move(model)}};
  if (!rules.specials_in_text && !tok.specials().empty()) j[kSpecialsAreStructureKey] = true;
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace tera
