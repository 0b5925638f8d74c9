// core/tensor.h's TypedView: a pointer with its dtype, read only as that dtype.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/tensor.h"

namespace tera {
namespace {

TEST(TypedView, KeepsPointerAndDtype) {
  float f[2] = {};
  uint16_t h[2] = {};
  const TypedView a(f), b(h);
  EXPECT_EQ(a.dtype(), DType::f32);
  EXPECT_EQ(a.f32(), f);
  EXPECT_EQ(b.dtype(), DType::bf16);
  EXPECT_EQ(b.bf16(), h);
  EXPECT_FALSE(a.empty());
  const ConstTypedView c = b;  // read-only from writable
  EXPECT_EQ(c.bf16(), static_cast<const uint16_t*>(h));
  EXPECT_EQ(c.dtype(), DType::bf16);
  const float* cf = f;
  EXPECT_EQ(ConstTypedView(cf).f32(), cf);
}

TEST(TypedView, EmptyViewReadsNullAsAnyDtype) {
  const TypedView v;
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(v.f32(), nullptr);
  EXPECT_EQ(v.bf16(), nullptr);
  EXPECT_TRUE(TypedView(static_cast<float*>(nullptr)).empty());
}

TEST(TypedViewDeathTest, ReadingAnotherDtypeAsserts) {
  uint16_t h = 0;
  float f = 0;
  EXPECT_DEATH((void)TypedView(&h).f32(), "bf16 tensor read as f32");
  EXPECT_DEATH((void)ConstTypedView(&f).bf16(), "f32 tensor read as bf16");
}

}  // namespace
}  // namespace tera
