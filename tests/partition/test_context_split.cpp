// Context parallelism's load-balanced split (partition/context_split.h): its
// worked example, that the ranks' tokens partition every sequence, and the
// messages for lengths that do not split.
#include <gtest/gtest.h>

#include <numeric>

#include "partition/context_split.h"

namespace tera {
namespace {

TEST(ContextSplit, WorkedExampleSeq8Cp2) {
  EXPECT_EQ((ContextSplit{.cp = 2, .rank = 0, .seq_len = 8}.positions()), (std::vector<int32_t>{0, 1, 6, 7}));
  EXPECT_EQ((ContextSplit{.cp = 2, .rank = 1, .seq_len = 8}.positions()), (std::vector<int32_t>{2, 3, 4, 5}));
}

TEST(ContextSplit, OneRankIsTheWholeSequenceInOrder) {
  const ContextSplit s{.cp = 1, .rank = 0, .seq_len = 7};
  ASSERT_EQ(s.runs().size(), 1u);
  std::vector<int32_t> want(7);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(s.positions(), want);
}

TEST(ContextSplit, RanksPartitionEverySequenceWithEqualCausalWork) {
  for (int cp : {2, 3, 4}) {
    for (int64_t T : {int64_t{2} * cp, int64_t{8} * cp}) {
      std::vector<int> seen(static_cast<size_t>(T), 0);
      int64_t work0 = -1;
      for (int r = 0; r < cp; ++r) {
        const ContextSplit s{.cp = cp, .rank = r, .seq_len = T};
        int64_t work = 0;  // keys each query attends to under the causal mask
        for (int64_t i = 0; i < s.local(); ++i) {
          ASSERT_EQ(s.position(i), s.positions()[static_cast<size_t>(i)]);
          ++seen[static_cast<size_t>(s.position(i))];
          work += s.position(i) + 1;
        }
        if (work0 < 0) work0 = work;
        EXPECT_EQ(work, work0) << "cp " << cp << " rank " << r;
      }
      for (int n : seen) ASSERT_EQ(n, 1);
    }
  }
}

TEST(ContextSplit, TakeGathersTheRanksTokensOfEachSequence) {
  const ContextSplit s{.cp = 2, .rank = 1, .seq_len = 8};
  std::vector<int32_t> full(16);
  std::iota(full.begin(), full.end(), 100);
  std::vector<int32_t> local(8);
  s.take(full.data(), local.data(), 2);
  EXPECT_EQ(local, (std::vector<int32_t>{102, 103, 104, 105, 110, 111, 112, 113}));
}

TEST(ContextSplit, LengthsThatDoNotSplitNameTheDivisor) {
  EXPECT_EQ(ContextSplit::check(8, 2), "");
  EXPECT_EQ(ContextSplit::check(9, 1), "");
  EXPECT_NE(ContextSplit::check(9, 2).find("multiple of 4"), std::string::npos);
  EXPECT_NE(ContextSplit::check(12, 4).find("multiple of 8"), std::string::npos);
  EXPECT_FALSE(ContextSplit::divides(6, 2));
}

}  // namespace
}  // namespace tera
