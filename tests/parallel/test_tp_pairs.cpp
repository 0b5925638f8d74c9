// The conjugate pairs of tensor parallelism (model/tensor_parallel.h) over the
// in-process world, against analytic results: each pair's forward and its backward
// are checked for the transposition identity <f(x), y> = <x, f^T(y)> that makes
// them conjugate, with small-integer inputs so every sum is exact.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "comm/in_process_comm.h"
#include "parallel/tp_comm.h"

namespace tera {
namespace {

// Rank r's value for element i of a buffer: distinct small integers.
float v(int r, int64_t i) { return static_cast<float>(10 * r + i % 7 + 1); }

TEST(TpPairs, CopyAndReduceAreAllReduces) {
  for (int p : {1, 2, 3, 4}) {
    InProcessWorld::run(p, [p](Communicator& c) {
      CommTensorParallel tp(c, false);
      std::vector<float> x(11);
      for (int64_t i = 0; i < 11; ++i) x[i] = v(c.rank(), i);
      std::vector<float> y = x;
      tp.reduce_forward(x.data(), 11);  // tp_reduce forward
      tp.copy_backward(y.data(), 11);   // tp_copy backward
      for (int64_t i = 0; i < 11; ++i) {
        float want = 0;
        for (int r = 0; r < p; ++r) want += v(r, i);
        ASSERT_EQ(x[i], want);
        ASSERT_EQ(y[i], want);
      }
    });
  }
}

TEST(TpPairs, GatherAndScatterAreConjugate) {
  for (int p : {1, 2, 3, 4}) {
    InProcessWorld::run(p, [p](Communicator& c) {
      CommTensorParallel tp(c, true);
      const int r = c.rank();
      const int64_t n = 5;  // floats per rank's shard
      // sp_gather forward: concatenation of every rank's shard, in rank order.
      std::vector<float> shard(n), full(static_cast<size_t>(p * n));
      for (int64_t i = 0; i < n; ++i) shard[i] = v(r, i);
      tp.gather_forward(shard.data(), full.data(), n);
      for (int q = 0; q < p; ++q)
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(full[q * n + i], v(q, i));
      // sp_gather backward: sum over ranks of the full gradient, this rank's slice.
      std::vector<float> dfull(static_cast<size_t>(p * n)), dshard(n);
      for (int64_t j = 0; j < p * n; ++j) dfull[j] = v(r, j) * 2;
      tp.gather_backward(dfull.data(), dshard.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        float want = 0;
        for (int q = 0; q < p; ++q) want += v(q, r * n + i) * 2;
        ASSERT_EQ(dshard[i], want);
      }
      // sp_scatter is the reverse pair: forward = gather's backward, backward = gather's forward.
      std::vector<float> s2(n), f2(static_cast<size_t>(p * n));
      tp.scatter_forward(dfull.data(), s2.data(), n);
      ASSERT_EQ(s2, dshard);
      tp.scatter_backward(shard.data(), f2.data(), n);
      ASSERT_EQ(f2, full);
      // Conjugacy summed over the group: sum_r <gather(x)_r, y_r> = sum_r <x_r, gather^T(y)_r>.
      double lhs = 0, rhs = 0;
      for (int64_t j = 0; j < p * n; ++j) lhs += static_cast<double>(full[j]) * dfull[j];
      for (int64_t i = 0; i < n; ++i) rhs += static_cast<double>(shard[i]) * dshard[i];
      EXPECT_EQ(c.all_reduce_sum(lhs), c.all_reduce_sum(rhs));
    });
  }
}

TEST(TpPairs, MaxAndSumForTheVocabParallelLoss) {
  InProcessWorld::run(3, [](Communicator& c) {
    CommTensorParallel tp(c, false);
    std::vector<float> m = {static_cast<float>(c.rank()), static_cast<float>(-c.rank())};
    tp.all_max(m.data(), 2);
    EXPECT_EQ(m[0], 2.0f);
    EXPECT_EQ(m[1], 0.0f);
    std::vector<float> s = {1.0f, static_cast<float>(c.rank())};
    tp.all_sum(s.data(), 2);
    EXPECT_EQ(s[0], 3.0f);
    EXPECT_EQ(s[1], 3.0f);
  });
}

}  // namespace
}  // namespace tera
