// Every collective over real MPI. Run by ctest under mpirun with 1..4 ranks;
// a failure on any rank makes its exit code, and mpirun's, non-zero.
#include <gtest/gtest.h>

#include "collective_checks.h"
#include "comm/world.h"

namespace tera {
namespace {

CommWorld* g_world = nullptr;

TEST(MpiCollectives, AllOperationsMatchClosedForms) {
  ASSERT_TRUE(g_world->is_mpi()) << "this test must run under mpirun";
  testing::check_everything(g_world->world());
}

}  // namespace
}  // namespace tera

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto world = tera::CommWorld::init();
  tera::g_world = world.get();
  if (world->world().rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  // Every rank reports; the job fails if any rank failed.
  const double failed = world->world().all_reduce_max(rc != 0 ? 1.0 : 0.0);
  return failed > 0 ? 1 : 0;
}
