// ProcessGroups (comm/groups.h) against the layout's rank formula
// (partition/parallel_layout.h): each group's members, in group-rank order,
// learnt by an all-gather of world ranks over the group, for layouts with
// and without context parallelism (its worked example included).
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "comm/groups.h"
#include "comm/in_process_comm.h"

namespace tera {
namespace {

std::vector<int> members(Communicator& c, int world_rank) {
  std::vector<int> out(static_cast<size_t>(c.size()));
  c.all_gather(&world_rank, out.data(), 1, CommType::i32);
  return out;
}

// The ranks of layout l with rank r's coordinates but `vary` set to each value.
template <typename F>
std::vector<int> expected(const ParallelLayout& l, int r, int n, F set) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    ParallelLayout::Coord c = l.coord(r);
    set(c, i);
    out.push_back(l.rank_of(c));
  }
  return out;
}

void check_groups(const ParallelLayout& l) {
  std::mutex mu;
  InProcessWorld::run(l.world(), [&](Communicator& world) {
    ProcessGroups pg(world, l);
    const Groups& g = pg.groups();
    const int r = world.rank();
    const auto tp = members(*g.tp, r), dp = members(*g.dp, r), pp = members(*g.pp, r), cp = members(*g.cp, r);
    const auto zero = members(*g.zero, r);
    std::lock_guard<std::mutex> lock(mu);
    const std::string where = layout_string(l) + " rank " + std::to_string(r);
    EXPECT_EQ(tp, l.tp_group(r)) << where;
    EXPECT_EQ(dp, l.dp_group(r)) << where;
    EXPECT_EQ(pp, l.pp_group(r)) << where;
    EXPECT_EQ(cp, expected(l, r, l.cp, [](ParallelLayout::Coord& c, int i) { c.cp = i; })) << where;
    // ZeRO's group: every (dp, cp) of this (pp, tp), ordered dp * cp + cp (RankPlan::zero_rank).
    EXPECT_EQ(zero, expected(l, r, l.dp_cp(), [&](ParallelLayout::Coord& c, int i) {
                c.dp = i / l.cp;
                c.cp = i % l.cp;
              })) << where;
    if (l.cp == 1) {
      EXPECT_EQ(g.zero, g.dp) << where << ": at cp 1 the dp group is ZeRO's";
    }
  });
}

TEST(ProcessGroups, WorkedExampleWithContextParallelism) {
  ParallelLayout l{.tp = 2, .pp = 1, .dp = 2};
  l.cp = 2;
  check_groups(l);
  // The header's lists.
  EXPECT_EQ(l.dp_group(0), (std::vector<int>{0, 4}));
  EXPECT_EQ(l.tp_group(2), (std::vector<int>{2, 3}));
}

TEST(ProcessGroups, EveryGroupMatchesTheRankFormula) {
  for (int tp : {1, 2}) {
    for (int cp : {1, 2, 3}) {
      for (int dp : {1, 2}) {
        for (int pp : {1, 2}) {
          ParallelLayout l{.tp = tp, .pp = pp, .dp = dp};
          l.cp = cp;
          if (l.world() > 12) continue;
          check_groups(l);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tera
