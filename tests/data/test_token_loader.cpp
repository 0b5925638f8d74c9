// The loader: permutations are bijections, an epoch visits every window once,
// windows never cross segments, the global batch is the same for d = 1, 2, 4
// data-parallel ranks, and a resumed run continues with exactly the samples
// the uninterrupted run would have read.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "bpe_test_util.h"
#include "data/permutation.h"
#include "data/token_loader.h"

namespace tera {
namespace {

// Token i of the stream is i, so a window names its own offset.
class CountingDataset final : public TokenDataset {
 public:
  explicit CountingDataset(std::vector<int64_t> segs) : segs_(std::move(segs)) {
    for (int64_t n : segs_) n_ += n;
  }
  int64_t num_tokens() const override { return n_; }
  int64_t vocab() const override { return 1 << 30; }
  void read(int64_t offset, int64_t n, int32_t* out) const override {
    ASSERT_LE(offset + n, n_);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(offset + i);
  }
  std::string describe() const override { return "counting"; }
  std::vector<int64_t> segments() const override { return segs_; }
  uint64_t fingerprint() const override { return static_cast<uint64_t>(n_) * 31 + segs_.size(); }

 private:
  std::vector<int64_t> segs_;
  int64_t n_ = 0;
};

TEST(IndexPermutation, IsABijectionForEverySize) {
  for (uint64_t n = 1; n <= 300; ++n) {
    const IndexPermutation p(n, philox_key(n, "perm"));
    std::vector<int> hit(n, 0);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t v = p(i);
      ASSERT_LT(v, n);
      ++hit[v];
    }
    for (uint64_t v = 0; v < n; ++v) ASSERT_EQ(hit[v], 1) << "n = " << n;
  }
  const IndexPermutation a(1000, philox_key(1, "x")), b(1000, philox_key(2, "x"));
  int same = 0;
  for (uint64_t i = 0; i < 1000; ++i) same += a(i) == b(i);
  EXPECT_LT(same, 20);  // different keys, different orders (about 1 fixed coincidence expected)
}

TEST(TokenLoader, EachEpochVisitsEveryWindowOnceWithinSegments) {
  const int64_t T = 16;
  const CountingDataset data({1000, 17, 16, 250, 40});  // 16 tokens: too short for a window
  auto loader = TokenLoader::create(data, T, 5, "test");
  ASSERT_TRUE(loader.ok()) << loader.error();
  const auto& l = **loader;
  // Windows per segment: (1000-1)/16 = 62 -> 61; 1; 0; (249/16 = 15) -> 14; (39/16 = 2) -> 1.
  ASSERT_EQ(l.windows_per_epoch(), 61 + 1 + 0 + 14 + 1);
  const std::vector<int64_t> seg_start = {0, 1000, 1017, 1033, 1283}, seg_len = {1000, 17, 16, 250, 40};
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<std::pair<int64_t, int64_t>> seen;  // (segment, window index within it)
    for (int64_t j = 0; j < l.windows_per_epoch(); ++j) {
      const auto loc = l.locate(epoch * l.windows_per_epoch() + j);
      ASSERT_EQ(loc.epoch, epoch);
      const auto s = static_cast<size_t>(loc.segment);
      const int64_t local = loc.offset - seg_start[s];
      ASSERT_GE(local, 0);
      ASSERT_LE(local + T + 1, seg_len[s]) << "window crosses the end of segment " << s;
      seen.insert({loc.segment, local / T});
    }
    ASSERT_EQ(static_cast<int64_t>(seen.size()), l.windows_per_epoch());
  }
  // The per-epoch start offset moves the windows between epochs.
  std::set<int64_t> phases;
  for (int64_t e = 0; e < 8; ++e) phases.insert(l.locate(e * l.windows_per_epoch()).offset % T);
  EXPECT_GT(phases.size(), 1u);
}

TEST(TokenLoader, GlobalBatchIsTheSameForAnyDataParallelSize) {
  const int64_t T = 8, G = 8;
  const CountingDataset data({3000, 500});
  auto loader = TokenLoader::create(data, T, 11, "test");
  ASSERT_TRUE(loader.ok());
  for (int64_t step : {0, 3, 50}) {
    std::vector<int32_t> all(G * T), all_t(G * T);
    (*loader)->fill(step * G, G, all.data(), all_t.data());
    for (int64_t b = 0; b < G; ++b)
      for (int64_t t = 0; t + 1 < T; ++t) ASSERT_EQ(all_t[b * T + t], all[b * T + t + 1]);
    for (int64_t d : {1, 2, 4}) {
      std::vector<int32_t> joined;
      for (int64_t r = 0; r < d; ++r) {
        const SampleRange s = dp_slice(step, G, r, d);
        ASSERT_EQ(s.count, G / d);
        std::vector<int32_t> tok(s.count * T), tgt(s.count * T);
        (*loader)->fill(s.first, s.count, tok.data(), tgt.data());
        joined.insert(joined.end(), tok.begin(), tok.end());
      }
      ASSERT_EQ(joined, all) << "d = " << d << ", step " << step;
    }
  }
}

TEST(TokenLoader, ResumeContinuesExactlyAndRefusesOtherData) {
  const int64_t T = 8, G = 4, steps = 40, stop = 17;
  const CountingDataset data({2000});
  auto run = TokenLoader::create(data, T, 3, "test");
  ASSERT_TRUE(run.ok());
  std::vector<int32_t> uninterrupted(steps * G * T), tgt(steps * G * T);
  for (int64_t s = 0; s < steps; ++s) (*run)->fill(s * G, G, uninterrupted.data() + s * G * T, tgt.data() + s * G * T);

  // Stop after `stop` steps, serialise the state (as a checkpoint would), start a fresh loader, resume.
  const std::string saved = (*run)->state(stop * G).to_json().dump();
  auto state = LoaderState::from_json(nlohmann::json::parse(saved), "ckpt");
  ASSERT_TRUE(state.ok()) << state.error();
  EXPECT_EQ(*state, (*run)->state(stop * G));
  auto fresh = TokenLoader::create(data, T, 3, "test");
  ASSERT_TRUE(fresh.ok());
  auto next = (*fresh)->resume(*state, "ckpt");
  ASSERT_TRUE(next.ok()) << next.error();
  std::vector<int32_t> resumed;
  for (int64_t first = *next; first < steps * G; first += G) {
    std::vector<int32_t> tok(G * T), t2(G * T);
    (*fresh)->fill(first, G, tok.data(), t2.data());
    resumed.insert(resumed.end(), tok.begin(), tok.end());
  }
  EXPECT_EQ(resumed, std::vector<int32_t>(uninterrupted.begin() + stop * G * T, uninterrupted.end()));

  const CountingDataset other({2001});
  auto wrong_data = TokenLoader::create(other, T, 3, "test");
  auto r1 = (*wrong_data)->resume(*state, "ckpt/meta.json");
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.error().find("different training data"), std::string::npos) << r1.error();
  auto wrong_seed = TokenLoader::create(data, T, 4, "test");
  auto r2 = (*wrong_seed)->resume(*state, "ckpt/meta.json");
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.error().find("train.seed = 3"), std::string::npos) << r2.error();
  auto bad = LoaderState::from_json(nlohmann::json::parse(R"({"next_sample": -1})"), "ckpt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("next_sample"), std::string::npos);
}

TEST(TokenLoader, SeedChangesOrderAndTooShortDataIsRefused) {
  const CountingDataset data({5000});
  auto a = TokenLoader::create(data, 10, 1, "test"), b = TokenLoader::create(data, 10, 2, "test");
  std::vector<int32_t> ta(80), tb(80), t(80);
  (*a)->fill(0, 8, ta.data(), t.data());
  (*b)->fill(0, 8, tb.data(), t.data());
  EXPECT_NE(ta, tb);
  const CountingDataset tiny({10, 10});
  auto none = TokenLoader::create(tiny, 10, 1, "data.train = \"d\"");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().find("data.train = \"d\" holds no segment (shard) of model.seq_len + 1 = 11 tokens"),
            std::string::npos)
      << none.error();
}

}  // namespace
}  // namespace tera
