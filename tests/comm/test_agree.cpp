// agree() and any_rank() (comm/agree.h) on the in-process world: every
// combination of failing ranks for 1..4 ranks, each rank's returned status
// against the contract.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "comm/agree.h"
#include "comm/in_process_comm.h"

namespace tera {
namespace {

const std::string kPeer = "another rank failed (see its message)";

std::string own_message(int rank) { return "rank " + std::to_string(rank) + " failed"; }

// Runs agree on n ranks where rank r fails when bit r of `failing` is set;
// returns each rank's status.
std::vector<Status> run_agree(int n, unsigned failing, AgreeReport report) {
  std::vector<Status> out(static_cast<size_t>(n));
  InProcessWorld::run(n, [&](Communicator& c) {
    const bool fails = (failing >> c.rank()) & 1u;
    const Status local = fails ? Status::error(own_message(c.rank())) : ok_status();
    out[static_cast<size_t>(c.rank())] = agree(c, local, kPeer, report);
  });
  return out;
}

class Agree : public ::testing::TestWithParam<int> {};

TEST_P(Agree, EveryFailedRankKeepsItsOwnStatus) {
  const int n = GetParam();
  for (unsigned failing = 0; failing < (1u << n); ++failing) {
    const auto got = run_agree(n, failing, AgreeReport::every_failed_rank);
    for (int r = 0; r < n; ++r) {
      const Status& s = got[static_cast<size_t>(r)];
      if (failing == 0) {
        EXPECT_TRUE(s.is_ok()) << "rank " << r << " of " << n;
      } else if ((failing >> r) & 1u) {
        EXPECT_EQ(s.kind(), StatusKind::bad_input);
        EXPECT_EQ(s.message(), own_message(r));
      } else {
        EXPECT_EQ(s.kind(), StatusKind::peer_failed);
        EXPECT_EQ(s.message(), kPeer);
      }
    }
  }
}

TEST_P(Agree, OnlyTheLowestFailedRankKeepsItsOwnStatus) {
  const int n = GetParam();
  for (unsigned failing = 0; failing < (1u << n); ++failing) {
    const auto got = run_agree(n, failing, AgreeReport::lowest_failed_rank);
    int lowest = -1;
    for (int r = n - 1; r >= 0; --r) {
      if ((failing >> r) & 1u) lowest = r;
    }
    for (int r = 0; r < n; ++r) {
      const Status& s = got[static_cast<size_t>(r)];
      if (lowest < 0) {
        EXPECT_TRUE(s.is_ok());
      } else if (r == lowest) {
        EXPECT_EQ(s.kind(), StatusKind::bad_input);
        EXPECT_EQ(s.message(), own_message(r));
      } else {
        EXPECT_EQ(s.kind(), StatusKind::peer_failed) << "rank " << r << ", lowest failed " << lowest;
        EXPECT_EQ(s.message(), kPeer);
      }
    }
  }
}

TEST_P(Agree, AnyRankIsTheOrOfTheFlags) {
  const int n = GetParam();
  for (unsigned set = 0; set < (1u << n); ++set) {
    std::atomic<int> agreeing{0};
    InProcessWorld::run(n, [&](Communicator& c) {
      if (any_rank(c, (set >> c.rank()) & 1u) == (set != 0)) ++agreeing;
    });
    EXPECT_EQ(agreeing.load(), n) << "flags " << set;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, Agree, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace tera
