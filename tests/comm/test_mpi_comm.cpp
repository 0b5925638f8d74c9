// Every collective over real MPI. Run by ctest under mpirun with 1..4 ranks;
// a failure on any rank makes its exit code, and mpirun's, non-zero.
#include <gtest/gtest.h>

#include <vector>

#include "collective_checks.h"
#include "comm/world.h"
#include "mpi_gtest.h"

namespace tera {
namespace {

CommWorld* g_world = nullptr;

TEST(MpiCollectives, AllOperationsMatchClosedForms) {
  ASSERT_TRUE(g_world->is_mpi()) << "this test must run under mpirun";
  testing::check_everything(g_world->world());
}

// The ranks of one node (all of them here: ctest runs mpirun on this
// machine) number themselves 0 .. local_size - 1, each once: what puts each
// rank on its own GPU (Backend::bind_device).
TEST(MpiWorld, LocalRanksNumberTheRanksOfTheNode) {
  Communicator& w = g_world->world();
  EXPECT_EQ(g_world->local_size(), w.size());
  std::vector<double> mine(static_cast<size_t>(w.size()), 0.0), all(static_cast<size_t>(w.size()));
  mine[static_cast<size_t>(g_world->local_rank())] = 1.0;
  all = mine;
  w.all_reduce(all.data(), w.size(), CommType::f64, ReduceOp::sum);
  for (double v : all) EXPECT_EQ(v, 1.0) << "two ranks share a local rank, or one is missing";
}

}  // namespace
}  // namespace tera

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto world = tera::CommWorld::init();
  tera::g_world = world.get();
  return tera::testing::run_all_tests_on_every_rank(*world);
}
