// Every collective on the in-process world (comm/in_process_comm.h), for 1..5 ranks.
#include <gtest/gtest.h>

#include "collective_checks.h"
#include "comm/in_process_comm.h"

namespace tera {
namespace {

class InProcessCollectives : public ::testing::TestWithParam<int> {};

TEST_P(InProcessCollectives, AllOperationsMatchClosedForms) {
  InProcessWorld::run(GetParam(), [](Communicator& c) { testing::check_everything(c); });
}

INSTANTIATE_TEST_SUITE_P(Ranks, InProcessCollectives, ::testing::Values(1, 2, 3, 4, 5));

}  // namespace
}  // namespace tera
