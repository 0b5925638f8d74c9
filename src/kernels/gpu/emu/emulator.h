// gpu-emu: a SIMT emulator that runs the kernel dialect (kernels/gpu/
// dialect.h) on the host with a GPU's semantics, so the kernel sources that
// nvcc and hipcc compile are tested, unchanged, where no GPU is attached.
//
// A launch is queued on an emulated stream (stream.h) and runs there, on the
// stream's worker thread, after TERA_LAUNCH has returned. It runs its
// blocks one after another. Within a block every thread is
// a fiber (Boost.Context) with its own stack; a fiber runs until it reaches
// block_sync or shfl_xor, where it waits for the rest of its block or warp:
//   - block_sync releases when every thread of the block has reached it, the
//     same call site; a thread that returns while others wait, or threads at
//     two different barriers, is a deadlock;
//   - shfl_xor releases when every lane of the warp has reached it with the
//     same mask; lanes at a barrier or returned while others wait at a
//     shuffle (divergent code) is a deadlock.
// A deadlock is reported on stderr naming the kernel, the block and where
// each group of threads waits, and the process aborts (a GPU would hang or
// return garbage). Shared memory starts filled with NaN bytes so a read
// before any write shows in the results.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/gpu/emu/stream.h"

namespace tera::gpu::emu {

struct Dim {
  unsigned x = 1, y = 1;
};

// What the running fiber is.
struct ThreadState {
  int thread = 0;      // threadIdx.x
  int block_x = 0;     // blockIdx.x
  int block_y = 0;     // blockIdx.y
  int block_dim = 1;   // blockDim.x
  Dim grid;
};
const ThreadState& self();

// The warp width kernels running on this thread see: 32 (NVIDIA) or 64
// (AMD); a stream's worker sets its stream's.
int warp_size();
void set_thread_warp_size(int w);

// Where a thread waits: the kernel source's file and line (the dialect's
// block_sync and shfl_xor take them as __builtin_FILE() / __builtin_LINE()
// default arguments, which GCC and Clang evaluate at the call site).
struct Where {
  const char* file = "";
  unsigned line = 0;
  bool operator==(const Where& o) const;
};

void barrier(Where where);
uint64_t shfl_xor_bits(uint64_t bits, int mask, Where where);
// Every lane's `bits` to every lane of the warp (all[l] = lane l's), in one
// rendezvous: how the emulator models an instruction that reads the whole
// wave's registers at once (the MFMA in mma.h). All lanes must reach it.
void warp_gather_bits(uint64_t bits, uint64_t* all, Where where);
template <typename T>
T shfl_xor(T v, int mask, Where where) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  uint64_t b = 0;
  __builtin_memcpy(&b, &v, sizeof(T));
  b = shfl_xor_bits(b, mask, where);
  T out;
  __builtin_memcpy(&out, &b, sizeof(T));
  return out;
}

// The block's shared array declared at `site` (one per TERA_SHARED), made on
// first use by any thread of the block.
void* shared(const void* site, size_t bytes, size_t align);

// gpu-emu device memory is host memory whose addresses carry this bit (as
// the cpu-guarded backend's do): no process maps such an address, so a host
// read or write through a device pointer faults.
constexpr uintptr_t kDeviceBit = uintptr_t{1} << 54;

// The host address of a device pointer; aborts on a host pointer: a kernel
// given host memory is a bug.
void* kernel_address(const void* device_ptr, const char* kernel);

// Runs body on every thread of every block of grid (block threads per
// block), on the calling thread.
void run(const char* kernel, Dim grid, int block, size_t shared_bytes, const std::function<void()>& body);

template <typename A>
A kernel_arg(A a, const char* kernel) {
  if constexpr (std::is_pointer_v<A>) {
    return a == nullptr ? a : static_cast<A>(kernel_address(a, kernel));
  } else if constexpr (requires(A& x) { x.for_each_pointer([](auto*&) {}); }) {
    // A table of device pointers passed by value (adamw.cuh's AdamWBatch).
    a.for_each_pointer([&](auto*& p) { p = kernel_arg(p, kernel); });
    return a;
  } else {
    return a;
  }
}

// TERA_LAUNCH on the emulator: queued on `stream`; pointer arguments are
// device memory and are translated (when queued) to the host addresses
// behind them, as are the pointers of an argument that lists them
// (for_each_pointer); the rest pass as they are, by value.
template <typename Kernel, typename... Args>
void launch(Stream* stream, const char* name, Dim grid, Dim block, size_t shared_bytes, Kernel kernel, Args... args) {
  auto translated = std::make_tuple(kernel_arg(args, name)...);
  stream->count_launch(name);
  stream->enqueue([=] { run(name, grid, static_cast<int>(block.x), shared_bytes, [&] { std::apply(kernel, translated); }); });
}
template <typename Kernel, typename... Args>
void launch(Stream* stream, const char* name, Dim grid, int block, size_t shared_bytes, Kernel kernel, Args... args) {
  launch(stream, name, grid, Dim{static_cast<unsigned>(block), 1}, shared_bytes, kernel, args...);
}

}  // namespace tera::gpu::emu
