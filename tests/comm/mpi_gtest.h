// The gtest run of a test binary launched under mpirun: every rank runs the
// tests, only rank 0 prints gtest's report, and the job fails if any rank
// failed (so a failure on rank 3 is not lost behind rank 0's pass).
#pragma once

#include <gtest/gtest.h>

#include "comm/world.h"

namespace tera::testing {

inline int run_all_tests_on_every_rank(CommWorld& world) {
  if (world.world().rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  const double failed = world.world().all_reduce_max(rc != 0 ? 1.0 : 0.0);
  return failed > 0 ? 1 : 0;
}

}  // namespace tera::testing
