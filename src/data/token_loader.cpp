// Sample order and window geometry of the training loader; see token_loader.h.
// A segment of n tokens holds W = floor((n - 1) / T) windows at stride T; when
// W >= 2 one is given up so the start offset can range over [0, T) per epoch.
#include "data/token_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "data/permutation.h"

namespace tera {

SampleRange dp_slice(int64_t step, int64_t global_batch, int64_t dp_rank, int64_t dp_size) {
  TERA_ASSERT(dp_size > 0 && dp_rank >= 0 && dp_rank < dp_size && step >= 0);
  const int64_t per = divide(global_batch, dp_size);
  return {step * global_batch + dp_rank * per, per};
}

nlohmann::json LoaderState::to_json() const {
  return {{"next_sample", next_sample},
          {"seed", seed},
          {"seq_len", seq_len},
          {"data_fingerprint", fmt::format("{:016x}", data_fingerprint)}};
}

Expected<LoaderState> LoaderState::from_json(const nlohmann::json& j, const std::string& what) {
  auto bad = [&](const char* field) {
    return Status::error(what + ": loader state field '" + field + "' is missing or malformed");
  };
  LoaderState s;
  if (!j.is_object()) return Status::error(what + ": loader state must be a JSON object");
  if (!j.contains("next_sample") || !j["next_sample"].is_number_integer() || j["next_sample"].get<int64_t>() < 0) {
    return bad("next_sample");
  }
  if (!j.contains("seed") || !j["seed"].is_number_integer()) return bad("seed");
  if (!j.contains("seq_len") || !j["seq_len"].is_number_integer() || j["seq_len"].get<int64_t>() <= 0) {
    return bad("seq_len");
  }
  const nlohmann::json fp = j.value("data_fingerprint", nlohmann::json());
  if (!fp.is_string() || fp.get<std::string>().size() != 16 ||
      fp.get<std::string>().find_first_not_of("0123456789abcdef") != std::string::npos) {
    return bad("data_fingerprint");
  }
  s.next_sample = j["next_sample"].get<int64_t>();
  s.seed = j["seed"].get<uint64_t>();
  s.seq_len = j["seq_len"].get<int64_t>();
  s.data_fingerprint = std::stoull(fp.get<std::string>(), nullptr, 16);
  return s;
}

Expected<std::unique_ptr<TokenLoader>> TokenLoader::create(const TokenDataset& data, int64_t seq_len, uint64_t seed,
                                                           const std::string& what) {
  TERA_ASSERT(seq_len > 0);
  auto l = std::unique_ptr<TokenLoader>(new TokenLoader(data, seq_len, seed));
  int64_t start = 0;
  l->win_prefix_.push_back(0);
  for (const int64_t n : data.segments()) {
    const int64_t full = n > seq_len ? (n - 1) / seq_len : 0;
    const int64_t w = full >= 2 ? full - 1 : full;
    l->seg_start_.push_back(start);
    l->seg_slack_.push_back(w > 0 ? std::min(seq_len - 1, n - 1 - w * seq_len) : 0);
    l->windows_ += w;
    l->win_prefix_.push_back(l->windows_);
    start += n;
  }
  if (l->windows_ == 0) {
    return Status::error(
        fmt::format("{} holds no segment (shard) of model.seq_len + 1 = {} tokens; use more data per "
                    "shard (tera tokenize encode --shard-tokens) or a shorter model.seq_len",
                    what, seq_len + 1));
  }
  l->order_key_ = philox_key(seed, "data.train.order");
  l->shift_key_ = philox_key(seed, "data.train.shift");
  return l;
}

TokenLoader::Location TokenLoader::locate(int64_t sample) const {
  TERA_ASSERT(sample >= 0);
  const int64_t epoch = sample / windows_;
  const auto e = static_cast<uint64_t>(epoch);
  const auto r = philox4x32(order_key_, e, 0);
  const IndexPermutation perm(static_cast<uint64_t>(windows_), PhiloxKey{r[0], r[1]});
  const auto w = static_cast<int64_t>(perm(static_cast<uint64_t>(sample % windows_)));
  const auto seg =
      static_cast<size_t>(std::upper_bound(win_prefix_.begin(), win_prefix_.end(), w) - win_prefix_.begin()) - 1;
  const auto range = static_cast<uint64_t>(seg_slack_[seg]) + 1;
  const auto u = philox4x32(shift_key_, e, seg)[0];
  const auto shift = static_cast<int64_t>((static_cast<uint64_t>(u) * range) >> 32);
  return {epoch, static_cast<int64_t>(seg), seg_start_[seg] + shift + (w - win_prefix_[seg]) * T_};
}

void TokenLoader::fill(int64_t first, int64_t count, int32_t* tokens, int32_t* targets) const {
  std::vector<int32_t> buf(static_cast<size_t>(T_ + 1));
  for (int64_t i = 0; i < count; ++i) {
    data_.read(locate(first + i).offset, T_ + 1, buf.data());
    std::copy(buf.begin(), buf.end() - 1, tokens + i * T_);
    std::copy(buf.begin() + 1, buf.end(), targets + i * T_);
  }
}

LoaderState TokenLoader::state(int64_t next_sample) const {
  return LoaderState{next_sample, seed_, T_, data_.fingerprint()};
}

Expected<int64_t> TokenLoader::resume(const LoaderState& s, const std::string& what) const {
  if (s.seed != seed_ || s.seq_len != T_) {
    return Status::error(
        fmt::format("{}: saved with train.seed = {} and model.seq_len = {}, but this run has {} and {}; "
                    "resume with the saved values",
                    what, s.seed, s.seq_len, seed_, T_));
  }
  if (s.data_fingerprint != data_.fingerprint()) {
    return Status::error(what + ": saved while reading different training data (fingerprint " +
                         fmt::format("{:016x}", s.data_fingerprint) + ", now " +
                         fmt::format("{:016x}", data_.fingerprint()) + "); resume on the same data.train");
  }
  return s.next_sample;
}

}  // namespace tera
