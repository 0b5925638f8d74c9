// Arena: every buffer 64-byte aligned, the allocation zero-filled, and an
// allocation that cannot succeed throws AllocationError naming the class.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/arena.h"

// An impossible allocation must return null under AddressSanitizer too (its
// default is to abort), so the exhaustion test runs in the asan preset.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

namespace tera {
namespace {

TEST(Arena, BuffersAre64ByteAlignedAndZeroFilled) {
  ArenaLayout layout("activations");
  const int64_t counts[] = {1, 15, 16, 17, 33, 0, 1000, 3};
  std::vector<int64_t> offsets;
  for (int64_t c : counts) offsets.push_back(layout.add(std::string("buf") += std::to_string(offsets.size()), c));
  Arena arena(layout);
  ASSERT_NE(arena.base(), nullptr);
  EXPECT_EQ(arena.bytes(), layout.total_bytes());
  for (size_t i = 0; i < offsets.size(); ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(arena.at(offsets[i])) % 64, 0u) << "buffer " << i;
    if (i + 1 < offsets.size()) {
      EXPECT_GE(offsets[i + 1] - offsets[i], counts[i]) << "buffers overlap";
    }
  }
  for (int64_t i = 0; i < layout.total_floats(); ++i) ASSERT_EQ(arena.base()[i], 0.0f) << "element " << i;
  EXPECT_EQ(layout.total_floats() % ArenaLayout::kAlignFloats, 0);
}

TEST(Arena, EmptyLayoutHoldsNothing) {
  Arena arena{ArenaLayout("workspace")};
  EXPECT_EQ(arena.bytes(), 0);
  EXPECT_EQ(arena.base(), nullptr);
}

TEST(Arena, ImpossibleSizeThrowsAllocationErrorNamingTheClass) {
  ArenaLayout layout("optimizer state");
  layout.add("exp_avg", int64_t{1} << 60);  // 4 EiB
  try {
    Arena arena(layout);
    FAIL() << "an arena of " << layout.total_bytes() << " bytes was allocated";
  } catch (const AllocationError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("optimizer state arena"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(layout.total_bytes())), std::string::npos) << what;
  }
}

TEST(Arena, UnnamedLayoutIsNamedByItsOnlyBuffer) {
  ArenaLayout layout;
  layout.add("logits", int64_t{1} << 60);
  try {
    Arena arena(layout);
    FAIL() << "allocated";
  } catch (const AllocationError& e) {
    EXPECT_NE(std::string(e.what()).find("logits arena"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tera
