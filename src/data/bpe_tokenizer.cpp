// BPE encode/decode. A piece is merged with a heap of candidate pairs keyed
// by (rank, position): all candidates of the lowest rank are applied left to
// right before any pair they create is considered, which is GPT-2's
// round-by-round rule, in O(n log n) for a piece of n bytes.
#include "data/bpe_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "data/pretokenize.h"

namespace tera {

namespace {

constexpr size_t kMaxVocab = size_t{1} << 24;

struct Fnv {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= 0x100000001b3ull;
    }
  }
  void add_u64(uint64_t v) { add(&v, sizeof(v)); }
};

std::string show(std::string_view bytes) {
  std::string s;
  for (char c : bytes.substr(0, 24)) {
    const auto u = static_cast<uint8_t>(c);
    s += (u >= 0x20 && u < 0x7F && u != '"' && u != '\\') ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  return "\"" + s + (bytes.size() > 24 ? "...\"" : "\"");
}

}  // namespace

Expected<BpeTokenizer> BpeTokenizer::create(std::vector<std::string> tokens, std::vector<BpeMerge> merges,
                                            std::vector<int32_t> specials, const std::string& what,
                                            EncodingRules rules) {
  auto err = [&](const std::string& m) { return Status::error(what + ": " + m); };
  const size_t V = tokens.size();
  if (V < 256 || V > kMaxVocab) {
    return err(fmt::format("vocabulary has {} tokens; a byte-level BPE needs between 256 and {}", V, kMaxVocab));
  }
  // Each merge makes a token from two others, at one of its byte boundaries:
  // no vocabulary has more distinct merges than that (checked before the
  // table is sized).
  size_t boundaries = 0;
  for (const auto& tok : tokens) boundaries += tok.empty() ? 0 : tok.size() - 1;
  if (merges.size() > boundaries) {
    return err(fmt::format("{} merges, but its {} tokens have only {} byte boundaries to merge at", merges.size(), V,
                           boundaries));
  }
  // Order-free lists in one order, so the fingerprint does not depend on a file's.
  std::sort(specials.begin(), specials.end());
  // Rules without effect are left at their defaults, for the same reason (the
  // byte tokenizer read back from a tokenizer.json is the byte tokenizer).
  if (std::all_of(specials.begin(), specials.end(), [&](int32_t s) {
        return s < 0 || static_cast<size_t>(s) >= V || tokens[static_cast<size_t>(s)].empty();
      })) {
    rules.specials_in_text = false;
  }
  std::sort(rules.matched.begin(), rules.matched.end());
  BpeTokenizer t;
  t.special_flag_.assign(V, 0);
  for (const int32_t s : specials) {
    if (s < 0 || static_cast<size_t>(s) >= V) return err(fmt::format("special token id {} is out of range", s));
    if (t.special_flag_[static_cast<size_t>(s)]) return err(fmt::format("special token id {} is listed twice", s));
    t.special_flag_[static_cast<size_t>(s)] = 1;
  }
  for (const char* name : {"</s>", "<|end_of_text|>", kEndOfText}) {  // the last found wins
    for (const int32_t s : specials) {
      if (tokens[static_cast<size_t>(s)] == name) t.eot_ = s;
    }
  }
  std::unordered_map<std::string_view, int32_t> by_bytes;  // non-special tokens
  std::unordered_map<std::string_view, int32_t> named;     // every non-empty token
  by_bytes.reserve(V);
  for (size_t i = 0; i < V; ++i) {
    if (tokens[i].empty()) {
      if (t.special_flag_[i]) continue;  // an unused id
      return err(fmt::format("token {} is empty", i));
    }
    auto [it, fresh] = named.emplace(tokens[i], static_cast<int32_t>(i));
    if (!fresh) return err(fmt::format("token {} {} repeats token {}", i, show(tokens[i]), it->second));
    if (!t.special_flag_[i]) by_bytes.emplace(tokens[i], static_cast<int32_t>(i));
  }
  for (int b = 0; b < 256; ++b) {
    const char ch = static_cast<char>(b);
    auto it = by_bytes.find(std::string_view(&ch, 1));
    if (it == by_bytes.end()) {
      return err(fmt::format("no token for the byte 0x{:02x}; a byte-level BPE needs all 256 bytes", b));
    }
    t.byte_id_[b] = it->second;
  }
  t.merge_table_ = PairMap<MergeInfo>(merges.size());
  std::string joined;
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto [l, rt] = merges[r];
    if (l < 0 || rt < 0 || static_cast<size_t>(l) >= V || static_cast<size_t>(rt) >= V) {
      return err(fmt::format("merge {} refers to a token id outside [0, {})", r, V));
    }
    if (t.special_flag_[static_cast<size_t>(l)] || t.special_flag_[static_cast<size_t>(rt)]) {
      return err(fmt::format("merge {} uses a special token", r));
    }
    joined = tokens[static_cast<size_t>(l)] + tokens[static_cast<size_t>(rt)];
    auto it = by_bytes.find(joined);
    if (it == by_bytes.end()) return err(fmt::format("merge {} makes {}, which is not a token", r, show(joined)));
    if (const MergeInfo* old = t.merge_table_.find(pair_key(l, rt))) {
      return err(fmt::format("merge {} repeats merge {} ({} {})", r, old->rank, l, rt));
    }
    t.merge_table_[pair_key(l, rt)] = MergeInfo{static_cast<uint32_t>(r), it->second};
  }
  Fnv f;
  f.add("tera-bpe", 8);
  f.add_u64(V);
  for (const auto& s : tokens) {
    f.add_u64(s.size());
    f.add(s.data(), s.size());
  }
  f.add_u64(merges.size());
  for (const auto& m : merges) f.add(&m, sizeof(m));
  f.add_u64(specials.size());
  for (const int32_t s : specials) f.add(&s, sizeof(s));
  if (!rules.is_default()) {  // tokenizers of the default rules keep the fingerprints they always had
    f.add("rules", 5);
    f.add_u64(static_cast<uint64_t>(rules.pretokenizer));
    f.add_u64(rules.whole_piece_first ? 1 : 0);
    f.add_u64(rules.specials_in_text ? 1 : 0);
    f.add_u64(rules.matched.size());
    for (const int32_t m : rules.matched) f.add(&m, sizeof(m));
    f.add_u64(static_cast<uint64_t>(static_cast<int64_t>(rules.bos)));
  }
  t.fingerprint_ = f.h;
  t.tokens_ = std::move(tokens);  // by_bytes still views the same strings: a vector's move keeps its buffer
  t.merges_ = std::move(merges);
  t.specials_ = std::move(specials);
  TERA_RETURN_IF_ERROR(t.set_rules(std::move(rules), by_bytes, what));
  return t;
}

Status BpeTokenizer::set_rules(EncodingRules rules, const std::unordered_map<std::string_view, int32_t>& by_bytes,
                               const std::string& what) {
  auto err = [&](const std::string& m) { return Status::error(what + ": " + m); };
  const auto V = static_cast<int64_t>(special_flag_.size());
  if (rules.bos >= V || (rules.bos >= 0 && tokens_[static_cast<size_t>(rules.bos)].empty())) {
    return err(fmt::format("beginning-of-text token {} is not a token", rules.bos));
  }
  std::vector<int32_t> matched;
  if (rules.specials_in_text) matched = specials_;
  for (const int32_t id : rules.matched) {
    if (id < 0 || id >= V) return err(fmt::format("added token id {} is out of range", id));
    if (special_flag_[static_cast<size_t>(id)]) return err(fmt::format("added token {} is also a special token", id));
    matched.push_back(id);
  }
  std::sort(matched.begin(), matched.end());
  if (std::adjacent_find(matched.begin(), matched.end()) != matched.end()) return err("an added token is listed twice");
  for (const int32_t id : matched) {
    const std::string& text = tokens_[static_cast<size_t>(id)];
    if (text.empty()) continue;  // an unused id
    if (matched_by_first_.empty()) matched_by_first_.assign(256, {});
    if (text.find(' ') != std::string::npos) splits_at_spaces_ = false;
    matched_by_first_[static_cast<uint8_t>(text[0])].push_back(id);
  }
  for (auto& ids : matched_by_first_) {  // longest first: the longest match wins, as Hugging Face's matcher does
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
      return tokens_[static_cast<size_t>(a)].size() > tokens_[static_cast<size_t>(b)].size();
    });
  }
  if (rules.whole_piece_first) {
    whole_.reserve(by_bytes.size());
    for (const auto& [bytes, id] : by_bytes) whole_.emplace(std::string(bytes), id);
  }
  rules_ = std::move(rules);
  return ok_status();
}

BpeTokenizer BpeTokenizer::bytes() {
  std::vector<std::string> tokens(256);
  for (int b = 0; b < 256; ++b) tokens[static_cast<size_t>(b)] = std::string(1, static_cast<char>(b));
  return std::move(create(std::move(tokens), {}, {}, "bytes")).value();
}

void BpeTokenizer::merge_piece(std::string_view piece, EncodeCache& c) const {
  const auto n = static_cast<int32_t>(piece.size());
  c.sym_.resize(static_cast<size_t>(n));
  c.prev_.resize(static_cast<size_t>(n));
  c.next_.resize(static_cast<size_t>(n));
  int32_t* sym = c.sym_.data();
  int32_t* prev = c.prev_.data();
  int32_t* next = c.next_.data();
  for (int32_t i = 0; i < n; ++i) {
    sym[i] = byte_id_[static_cast<uint8_t>(piece[static_cast<size_t>(i)])];
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  auto later = [](const EncodeCache::Candidate& a, const EncodeCache::Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  auto consider = [&](int32_t p, std::vector<EncodeCache::Candidate>& into) {
    const int32_t q = next[p];
    if (q < 0) return;
    if (const MergeInfo* m = merge_table_.find(pair_key(sym[p], sym[q]))) into.push_back({m->rank, p, sym[p], sym[q]});
  };
  c.heap_.clear();
  for (int32_t i = 0; i + 1 < n; ++i) consider(i, c.heap_);
  std::make_heap(c.heap_.begin(), c.heap_.end(), later);
  while (!c.heap_.empty()) {
    const uint32_t rank = c.heap_.front().rank;
    c.pending_.clear();
    while (!c.heap_.empty() && c.heap_.front().rank == rank) {
      std::pop_heap(c.heap_.begin(), c.heap_.end(), later);
      const EncodeCache::Candidate cand = c.heap_.back();
      c.heap_.pop_back();
      const int32_t p = cand.pos, q = next[p];
      if (sym[p] != cand.left || q < 0 || sym[q] != cand.right) continue;  // stale: a merge changed it
      sym[p] = merge_table_.find(pair_key(cand.left, cand.right))->result;
      sym[q] = -1;
      next[p] = next[q];
      if (next[q] >= 0) prev[next[q]] = p;
      if (prev[p] >= 0) consider(prev[p], c.pending_);
      consider(p, c.pending_);
    }
    for (const auto& cand : c.pending_) {
      c.heap_.push_back(cand);
      std::push_heap(c.heap_.begin(), c.heap_.end(), later);
    }
  }
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out, EncodeCache& c) const {
  if (piece.size() == 1 || (merges_.empty() && whole_.empty())) {
    for (char ch : piece) out.push_back(byte_id_[static_cast<uint8_t>(ch)]);
    return;
  }
  EncodeCache::Short* slot = nullptr;
  uint64_t key = 0;
  if (piece.size() <= 8) {
    if (c.short_.empty()) c.short_.resize(EncodeCache::kShortSlots);
    std::memcpy(&key, piece.data(), piece.size());
    const uint64_t h = (key ^ piece.size()) * 0x9E3779B97F4A7C15ull;
    slot = &c.short_[static_cast<size_t>(h >> 48)];  // kShortSlots = 2^16
    if (slot->len == piece.size() && slot->bytes == key) {
      out.insert(out.end(), slot->ids, slot->ids + slot->n);
      return;
    }
  }
  const size_t first = out.size();
  if (auto it = c.map_.find(piece); it != c.map_.end()) {
    const auto [begin, n] = it->second;
    out.insert(out.end(), c.ids_.begin() + begin, c.ids_.begin() + begin + n);
  } else if (auto w = whole_.empty() ? whole_.end() : whole_.find(piece); w != whole_.end()) {
    out.push_back(w->second);
    remember(piece, out.data() + first, 1, c);
  } else {
    merge_piece(piece, c);
    for (int32_t p = 0; p >= 0; p = c.next_[static_cast<size_t>(p)]) out.push_back(c.sym_[static_cast<size_t>(p)]);
    remember(piece, out.data() + first, out.size() - first, c);
  }
  if (slot != nullptr && out.size() - first <= 3) {
    slot->bytes = key;
    slot->len = static_cast<uint8_t>(piece.size());
    slot->n = static_cast<uint8_t>(out.size() - first);
    std::copy(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), slot->ids);
  }
}

void BpeTokenizer::remember(std::string_view piece, const int32_t* ids, size_t n, EncodeCache& c) const {
  if (c.map_.size() >= EncodeCache::kMaxEntries || c.ids_.size() > (size_t{1} << 26)) {
    c.map_.clear();
    c.ids_.clear();
  }
  c.map_.emplace(std::string(piece),
                 std::pair<uint32_t, uint32_t>(static_cast<uint32_t>(c.ids_.size()), static_cast<uint32_t>(n)));
  c.ids_.insert(c.ids_.end(), ids, ids + n);
}

void BpeTokenizer::encode_text(std::string_view text, std::vector<int32_t>& out, EncodeCache& cache) const {
  for_each_pretoken(rules_.pretokenizer, text, [&](std::string_view piece) { encode_piece(piece, out, cache); });
}

void BpeTokenizer::encode(std::string_view text, std::vector<int32_t>& out, EncodeCache& cache) const {
  if (matched_by_first_.empty()) return encode_text(text, out, cache);
  // Added tokens first: the text between two matches is encoded on its own.
  size_t start = 0, i = 0;
  while (i < text.size()) {
    int32_t hit = -1;
    for (const int32_t id : matched_by_first_[static_cast<uint8_t>(text[i])]) {
      if (text.substr(i).starts_with(tokens_[static_cast<size_t>(id)])) {
        hit = id;
        break;
      }
    }
    if (hit < 0) {
      ++i;
      continue;
    }
    encode_text(text.substr(start, i - start), out, cache);
    out.push_back(hit);
    i += tokens_[static_cast<size_t>(hit)].size();
    start = i;
  }
  encode_text(text.substr(start), out, cache);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  EncodeCache cache;
  std::vector<int32_t> out;
  encode(text, out, cache);
  return out;
}

void BpeTokenizer::decode(const int32_t* ids, size_t n, std::string& out, bool keep_special) const {
  for (size_t i = 0; i < n; ++i) {
    TERA_ASSERT(ids[i] >= 0 && ids[i] < vocab_size(), "token id out of range");
    if (!keep_special && special_flag_[static_cast<size_t>(ids[i])]) continue;
    out += tokens_[static_cast<size_t>(ids[i])];
  }
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids, bool keep_special) const {
  std::string out;
  decode(ids.data(), ids.size(), out, keep_special);
  return out;
}

}  // namespace tera
