// The rank formula, its worked example (partition/parallel_layout.h) and layout strings.
#include <gtest/gtest.h>

#include "partition/parallel_layout.h"

namespace tera {
namespace {

TEST(Layout, WorkedExampleTp2Pp2Dp4) {
  const ParallelLayout l{.tp = 2, .pp = 2, .dp = 4};
  EXPECT_EQ(l.world(), 16);
  EXPECT_EQ(l.tp_group(5), (std::vector<int>{4, 5}));
  EXPECT_EQ(l.dp_group(0), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(l.dp_group(9), (std::vector<int>{9, 11, 13, 15}));
  EXPECT_EQ(l.pp_group(3), (std::vector<int>{3, 11}));
  EXPECT_EQ(l.embedding_group(10), (std::vector<int>{2, 10}));
  const ParallelLayout::Coord c = l.coord(13);  // pp 1, dp 2, tp 1
  EXPECT_EQ(c.pp, 1);
  EXPECT_EQ(c.dp, 2);
  EXPECT_EQ(c.tp, 1);
}

TEST(Layout, RankFormulaRoundTripsForManyShapes) {
  for (int tp : {1, 2, 3, 4})
    for (int pp : {1, 2, 5})
      for (int dp : {1, 2, 3}) {
        const ParallelLayout l{.tp = tp, .pp = pp, .dp = dp};
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

TEST(Layout, ContextParallelRanksSitBetweenTpAndDp) {
  // tp 2, cp 2, dp 2, pp 2: rank = ((pp * dp + dp_rank) * cp + cp_rank) * tp + tp_rank.
  ParallelLayout l{.tp = 2, .pp = 2, .dp = 2};
  l.cp = 2;
  EXPECT_EQ(l.world(), 16);
  const auto c = l.coord(13);  // 13 = ((1 * 2 + 1) * 2 + 0) * 2 + 1
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.cp, 0);
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.pp, 1);
  for (int r = 0; r < l.world(); ++r) ASSERT_EQ(l.rank_of(l.coord(r)), r);
  EXPECT_EQ(l.dp_group(13), (std::vector<int>{9, 13}));
}

TEST(Layout, StringRoundTripsEveryField) {
  ParallelLayout l{.tp = 2, .pp = 2, .dp = 3};
  l.vpp = 2;
  l.micro_batch = 4;
  l.zero = 3;
  l.sequence_parallel = true;
  l.recompute = Recompute::full;
  l.schedule = ScheduleKind::interleaved;
  l.stage_layers = {3, 2, 2, 1};
  const std::string s = layout_string(l);
  EXPECT_EQ(s, "tp=2,pp=2,dp=3,vpp=2,mb=4,zero=3,sp=1,recompute=full,schedule=interleaved,stage_layers=3/2/2/1");
  auto back = parse_layout(s, 0);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, l);
  EXPECT_EQ(l.to_string(), "tp=2 pp=2 dp=3");
}

TEST(Layout, ParseRefusesNamingTheKey) {
  EXPECT_NE(parse_layout("tp=2,stage_layers=3/x", 4).error().find("stage_layers=3/x"), std::string::npos);
  EXPECT_NE(parse_layout("tp=2,bogus=1", 4).error().find("unknown layout key 'bogus'"), std::string::npos);
  EXPECT_NE(parse_layout("tp=2,tp=4", 4).error().find("given twice"), std::string::npos);
  EXPECT_NE(parse_layout("tp=3", 4).error().find("does not divide gpus 4"), std::string::npos);
  auto d = parse_layout("tp=2,pp=2", 12);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->dp, 3);
}

TEST(Layout, WithWorldSizeDerivesDp) {
  ParallelLayout l{.tp = 2, .pp = 2, .dp = 0};
  EXPECT_EQ(with_world_size(l, 12).dp, 3);
  l.dp = 5;
  EXPECT_EQ(with_world_size(l, 12).dp, 5);  // given: kept (check_layout refuses the mismatch)
}

}  // namespace
}  // namespace tera
