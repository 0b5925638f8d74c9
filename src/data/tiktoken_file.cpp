// tiktoken rank files; see tiktoken_file.h.
#include "data/tiktoken_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "core/strings.h"

namespace tera {

namespace {

constexpr int64_t kMaxRank = (int64_t{1} << 24) - 1;
constexpr int64_t kMaxUnusedIds = 65536;  // as tokenizer.json's reader: ids are dense but for this many holes

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with padding; false for anything else.
bool decode_base64(std::string_view s, std::string& out) {
  out.clear();
  if (s.empty() || s.size() % 4 != 0) return false;
  for (size_t i = 0; i < s.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s[i + static_cast<size_t>(k)];
      if (c == '=' && i + 4 == s.size() && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad > 0 || (v[k] = base64_value(c)) < 0) return false;
    }
    const uint32_t w = static_cast<uint32_t>(v[0]) << 18 | static_cast<uint32_t>(v[1]) << 12 |
                       static_cast<uint32_t>(v[2]) << 6 | static_cast<uint32_t>(v[3]);
    out += static_cast<char>(w >> 16);
    if (pad < 2) out += static_cast<char>((w >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(w & 0xFF);
  }
  return true;
}

struct Line {
  std::string_view token, rank;
};

bool split_line(std::string_view line, Line& l) {
  const size_t sp = line.find(' ');
  if (sp == std::string_view::npos || line.find(' ', sp + 1) != std::string_view::npos) return false;
  l = {line.substr(0, sp), line.substr(sp + 1)};
  return true;
}

// Every split of each token into two tokens, in rank order.
std::vector<BpeMerge> merges_from_ranks(const std::vector<std::string>& tokens, const std::vector<uint8_t>& used) {
  std::unordered_map<std::string_view, int32_t> id;
  id.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (used[i]) id.emplace(tokens[i], static_cast<int32_t>(i));
  }
  std::vector<BpeMerge> merges;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string_view t = tokens[i];
    if (!used[i]) continue;
    for (size_t k = 1; k < t.size(); ++k) {
      auto l = id.find(t.substr(0, k)), r = id.find(t.substr(k));
      if (l != id.end() && r != id.end()) merges.push_back({l->second, r->second});
    }
  }
  return merges;
}

}  // namespace

bool looks_like_tiktoken(std::string_view text) {
  Line l;
  std::string bytes;
  int64_t rank = 0;
  const std::string_view first = text.substr(0, text.find('\n'));
  return split_line(first, l) && decode_base64(l.token, bytes) && parse_int64(l.rank, rank);
}

Expected<std::vector<TiktokenSpecial>> parse_special_list(std::string_view list, const std::string& what) {
  std::vector<TiktokenSpecial> out;
  if (list.empty()) return out;
  for (const std::string& piece : split(list, ',')) {
    const std::string_view item = piece;
    if (item.empty()) continue;
    const size_t eq = item.rfind('=');
    int64_t id = -1;
    if (eq == std::string_view::npos || eq == 0 || !parse_int64(item.substr(eq + 1), id) || id < 0 || id > kMaxRank) {
      return Status::error(fmt::format("{}: \"{}\" must be TEXT=ID with an id in [0, {}] (e.g. <|endoftext|>=100257)",
                                       what, item, kMaxRank));
    }
    out.push_back({std::string(item.substr(0, eq)), static_cast<int32_t>(id)});
  }
  return out;
}

Expected<BpeTokenizer> parse_tiktoken(std::string_view text, Pretokenizer pattern,
                                      const std::vector<TiktokenSpecial>& specials, const std::string& what) {
  std::vector<std::string> tokens;
  std::vector<uint8_t> used;
  const int64_t id_limit = static_cast<int64_t>(std::count(text.begin(), text.end(), '\n') + 1 + specials.size()) +
                           kMaxUnusedIds;
  std::string bytes;
  TextLines lines(text);
  for (std::string_view line; lines.next(line);) {
    const size_t line_no = lines.number();
    if (line.empty()) continue;
    Line l;
    int64_t rank = 0;
    if (!split_line(line, l) || !decode_base64(l.token, bytes) || !parse_int64(l.rank, rank)) {
      return Status::error(fmt::format("{}:{}: expected \"BASE64 RANK\" (a tiktoken rank file)", what, line_no));
    }
    if (rank < 0 || rank > kMaxRank || rank >= id_limit) {
      return Status::error(fmt::format("{}:{}: rank {} is outside [0, {}] (ranks are dense but for at most {} unused)",
                                       what, line_no, rank, std::min(kMaxRank, id_limit - 1), kMaxUnusedIds));
    }
    const auto r = static_cast<size_t>(rank);
    if (r >= tokens.size()) {
      tokens.resize(r + 1);
      used.resize(r + 1, 0);
    }
    if (used[r]) return Status::error(fmt::format("{}:{}: rank {} is given twice", what, line_no, rank));
    tokens[r] = bytes;
    used[r] = 1;
  }
  std::vector<BpeMerge> merges = merges_from_ranks(tokens, used);
  std::vector<int32_t> special_ids;
  for (const TiktokenSpecial& s : specials) {
    const auto id = static_cast<size_t>(s.id);
    if (s.text.empty()) return Status::error(what + ": a special token's text is empty");
    if (s.id < 0 || s.id >= id_limit) {
      return Status::error(fmt::format("{}: special token {} has id {}, more than {} past the file's ranks", what,
                                       s.text, s.id, kMaxUnusedIds));
    }
    if (id < used.size() && used[id]) {
      return Status::error(fmt::format("{}: special token {} has id {}, which is a rank of the file; give it an id "
                                       "the file does not use", what, s.text, s.id));
    }
    if (id >= tokens.size()) {
      tokens.resize(id + 1);
      used.resize(id + 1, 0);
    }
    if (used[id]) return Status::error(fmt::format("{}: two special tokens have id {}", what, s.id));
    tokens[id] = s.text;
    used[id] = 2;
    special_ids.push_back(s.id);
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!used[i]) special_ids.push_back(static_cast<int32_t>(i));  // an unused id
  }
  EncodingRules rules;
  rules.pretokenizer = pattern;
  rules.whole_piece_first = true;
  rules.specials_in_text = true;
  return BpeTokenizer::create(std::move(tokens), std::move(merges), std::move(special_ids), what, std::move(rules));
}

}  // namespace tera
