// The rank formula, its worked example (comm/layout.h) and validation messages.
#include <gtest/gtest.h>

#include "comm/layout.h"

namespace tera {
namespace {

TEST(Layout, WorkedExampleTp2Pp2Dp4) {
  const Layout l{2, 2, 4};
  EXPECT_EQ(l.world(), 16);
  EXPECT_EQ(l.tp_group(5), (std::vector<int>{4, 5}));
  EXPECT_EQ(l.dp_group(0), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(l.dp_group(9), (std::vector<int>{9, 11, 13, 15}));
  EXPECT_EQ(l.pp_group(3), (std::vector<int>{3, 11}));
  EXPECT_EQ(l.embedding_group(10), (std::vector<int>{2, 10}));
  const Layout::Coord c = l.coord(13);  // pp 1, dp 2, tp 1
  EXPECT_EQ(c.pp, 1);
  EXPECT_EQ(c.dp, 2);
  EXPECT_EQ(c.tp, 1);
}

TEST(Layout, RankFormulaRoundTripsForManyShapes) {
  for (int tp : {1, 2, 3, 4})
    for (int pp : {1, 2, 5})
      for (int dp : {1, 2, 3}) {
        const Layout l{tp, pp, dp};
        for (int r = 0; r < l.world(); ++r) {
          const auto c = l.coord(r);
          ASSERT_EQ((c.pp * dp + c.dp) * tp + c.tp, r);
          ASSERT_EQ(l.rank_of(c), r);
          // Every rank is in exactly one group of each kind, of the right size.
          ASSERT_EQ(static_cast<int>(l.tp_group(r).size()), tp);
          ASSERT_EQ(static_cast<int>(l.dp_group(r).size()), dp);
          ASSERT_EQ(static_cast<int>(l.pp_group(r).size()), pp);
        }
      }
}

TEST(Layout, MismatchNamesEveryFactor) {
  auto l = make_layout(2, 4, 3, 16);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.error().find("parallel.tp (2) * parallel.pp (4) * parallel.dp (3) = 24 != world size 16"),
            std::string::npos)
      << l.error();
  auto d = make_layout(2, 2, 0, 12);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->dp, 3);
  auto bad = make_layout(2, 2, 0, 10);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("world size 10 is not divisible by parallel.tp (2) * parallel.pp (2) = 4"),
            std::string::npos)
      << bad.error();
  EXPECT_FALSE(make_layout(0, 1, 1, 1).ok());
}

}  // namespace
}  // namespace tera
