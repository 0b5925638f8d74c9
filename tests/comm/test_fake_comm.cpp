// Every collective on the in-process fake world, for 1..5 ranks.
#include <gtest/gtest.h>

#include "collective_checks.h"
#include "comm/fake_comm.h"

namespace tera {
namespace {

class FakeCollectives : public ::testing::TestWithParam<int> {};

TEST_P(FakeCollectives, AllOperationsMatchClosedForms) {
  FakeWorld::run(GetParam(), [](Communicator& c) { testing::check_everything(c); });
}

INSTANTIATE_TEST_SUITE_P(Ranks, FakeCollectives, ::testing::Values(1, 2, 3, 4, 5));

}  // namespace
}  // namespace tera
