// The caching allocator behind the GPU backends' alloc/release
// (kernels/caching_allocator.h), over a fake device of a fixed capacity.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <unordered_map>

#include "kernels/caching_allocator.h"

namespace tera {
namespace {

// A device of kCapacity bytes: raw allocations past it fail.
constexpr int64_t kCapacity = int64_t{8} << 20;
int64_t g_used = 0;
int64_t g_raw_frees = 0;
std::set<void*> g_blocks;
std::unordered_map<void*, int64_t> g_sizes;

void* fake_alloc(int64_t bytes) {
  if (g_used + bytes > kCapacity) return nullptr;
  void* p = std::malloc(static_cast<size_t>(bytes));
  g_used += bytes;
  g_sizes[p] = bytes;
  g_blocks.insert(p);
  return p;
}
void fake_free(void* p) {
  EXPECT_EQ(g_blocks.erase(p), 1u) << "the raw free of a block the raw allocator did not give";
  g_used -= g_sizes[p];
  g_sizes.erase(p);
  ++g_raw_frees;
  std::free(p);
}

class CachingAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_used = 0;
    g_raw_frees = 0;
  }
};

TEST_F(CachingAllocatorTest, SizeClasses) {
  EXPECT_EQ(CachingAllocator::size_class(1), 512);
  EXPECT_EQ(CachingAllocator::size_class(512), 512);
  EXPECT_EQ(CachingAllocator::size_class(513), 1024);
  EXPECT_EQ(CachingAllocator::size_class((1 << 20) - 1), 1 << 20);
  EXPECT_EQ(CachingAllocator::size_class(1 << 20), 2 << 20);
  EXPECT_EQ(CachingAllocator::size_class((3 << 20) + 1), 4 << 20);
}

TEST_F(CachingAllocatorTest, AReleasedBlockServesTheNextRequestOfItsClass) {
  CachingAllocator a(fake_alloc, fake_free);
  void* p = a.allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(a.release(p));
  EXPECT_EQ(a.stats().cached, 1024);
  EXPECT_EQ(a.allocate(700), p);  // the same class: no raw call
  EXPECT_EQ(a.stats().raw_allocs, 1);
  EXPECT_EQ(a.stats().reuses, 1);
  EXPECT_EQ(a.stats().in_use, 1024);
  EXPECT_EQ(a.stats().cached, 0);
  // A larger request does not take it: a new block.
  void* q = a.allocate(5000);
  EXPECT_NE(q, p);
  EXPECT_EQ(a.stats().raw_allocs, 2);
  a.release(p);
  a.release(q);
  a.trim();
  EXPECT_EQ(g_used, 0);
  EXPECT_EQ(g_raw_frees, 2);
}

TEST_F(CachingAllocatorTest, ASmallRequestNeverPinsABlockOverTwiceItsClass) {
  CachingAllocator a(fake_alloc, fake_free);
  void* big = a.allocate(4096);
  a.release(big);
  void* small = a.allocate(1000);  // class 1024: 4096 > 2 * 1024
  EXPECT_NE(small, big);
  void* mid = a.allocate(2048);  // class 2048: 4096 <= 2 * 2048, reused
  EXPECT_EQ(mid, big);
  a.release(small);
  a.release(mid);
}

TEST_F(CachingAllocatorTest, OutOfMemoryFreesTheCacheAndRetriesOnce) {
  CachingAllocator a(fake_alloc, fake_free);
  void* p = a.allocate(int64_t{4} << 20);
  ASSERT_NE(p, nullptr);
  a.release(p);  // 4 MiB cached
  void* q = a.allocate(int64_t{6} << 20);  // 4 + 6 > 8: the cache is given back, then it fits
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(g_raw_frees, 1);
  EXPECT_EQ(a.stats().cached, 0);
  // Nothing cached and no room: null, and the block handed out is untouched.
  EXPECT_EQ(a.allocate(int64_t{4} << 20), nullptr);
  EXPECT_EQ(a.stats().in_use, int64_t{6} << 20);
  a.release(q);
}

TEST_F(CachingAllocatorTest, ReleaseOfAForeignPointerIsRefused) {
  CachingAllocator a(fake_alloc, fake_free);
  int x = 0;
  EXPECT_FALSE(a.release(&x));
  EXPECT_TRUE(a.release(nullptr));
  EXPECT_EQ(a.allocate(0), nullptr);
}

TEST_F(CachingAllocatorTest, DestructionFreesTheCachedBlocksOnly) {
  void* kept = nullptr;
  {
    CachingAllocator a(fake_alloc, fake_free);
    kept = a.allocate(100);
    a.release(a.allocate(3000));
  }
  EXPECT_EQ(g_raw_frees, 1);  // the cached one; the one still handed out stays its owner's
  fake_free(kept);
  EXPECT_EQ(g_used, 0);
}

}  // namespace
}  // namespace tera
