// ArenaLayout: typed buffers sized in bytes, every copy 64-byte aligned,
// repeated copies back to back, unique names. (The allocation itself is the
// backend's: tests/kernels/test_device_arena.cpp.)
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/arena.h"

namespace tera {
namespace {

TEST(ArenaLayout, TypedBuffersAre64ByteAlignedAndDoNotOverlap) {
  ArenaLayout layout("activations");
  struct Want {
    DType t;
    int64_t count, repeat;
  };
  const Want wants[] = {{DType::f32, 1, 1}, {DType::i32, 15, 3}, {DType::f64, 16, 1}, {DType::bf16, 17, 2},
                        {DType::f32, 0, 4}, {DType::u8, 1000, 1}, {DType::f32, 3, 0}};
  int64_t end = 0;
  for (size_t i = 0; i < std::size(wants); ++i) {
    const Want& w = wants[i];
    const ArenaLayout::Entry e = layout.add("buf" + std::to_string(i), w.t, w.count, w.repeat);
    EXPECT_EQ(e.offset % 64, 0) << i;
    EXPECT_EQ(e.stride % 64, 0) << i;
    EXPECT_GE(e.stride, w.count * dtype_bytes(w.t)) << i;
    EXPECT_LT(e.stride - w.count * dtype_bytes(w.t), 64) << "no more padding than the alignment needs, " << i;
    EXPECT_EQ(e.offset, end) << "buffers follow each other, " << i;
    end = e.offset + e.bytes();
  }
  EXPECT_EQ(layout.total_bytes(), end);
  // Hand count: 64 + 3*64 + 128 + 2*64 + 0 + 1024 + 0.
  EXPECT_EQ(layout.total_bytes(), 64 + 192 + 128 + 128 + 1024);
  ASSERT_NE(layout.find("buf3"), nullptr);
  EXPECT_EQ(layout.find("buf3")->dtype, DType::bf16);
  EXPECT_EQ(layout.find("nope"), nullptr);
}

TEST(ArenaLayout, NamesAreUnique) {
  ArenaLayout layout("workspace");
  layout.add("logits", DType::f32, 4);
  EXPECT_DEATH(layout.add("logits", DType::f32, 4), "lists logits twice");
}

}  // namespace
}  // namespace tera
