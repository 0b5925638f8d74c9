// The fp32 exp approximation used by softmax, cross-entropy and GELU: relative
// error within 4 ulp over the whole finite range, NaN propagates, and the
// clamps keep the extremes finite and non-negative.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/vec_math.h"

namespace tera::cpu {
namespace {

TEST(VecMath, ExpRelativeErrorWithinFourUlp) {
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 3.7e-4f) {
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(exp_approx_f32(x) - want) / want);
  }
  EXPECT_LT(worst, 4 * 5.96e-8);
}

TEST(VecMath, ExpEdgeCases) {
  EXPECT_TRUE(std::isnan(exp_approx_f32(NAN)));
  EXPECT_TRUE(std::isfinite(exp_approx_f32(1000.0f)));
  EXPECT_GT(exp_approx_f32(-1000.0f), 0.0f);
  EXPECT_LT(exp_approx_f32(-1000.0f), 1e-37f);
  EXPECT_EQ(exp_approx_f32(0.0f), 1.0f);
}

TEST(VecMath, TanhMatchesLibm) {
  for (float u = -20.0f; u < 20.0f; u += 1e-3f) {
    ASSERT_NEAR(tanh_v<float>(u), std::tanh(static_cast<double>(u)), 3e-7) << u;
  }
}

}  // namespace
}  // namespace tera::cpu
