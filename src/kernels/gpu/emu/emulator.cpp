// The gpu-emu scheduler (emulator.h): one block at a time, each thread a
// fiber (Boost.Context: a switch is a few register moves, no system call,
// where ucontext's swapcontext makes one for the signal mask and ran 100x
// slower), run round robin until it waits at a barrier or a shuffle or
// returns.
#include "kernels/gpu/emu/emulator.h"

#include <boost/context/fiber.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tera::gpu::emu {

namespace {

constexpr size_t kStackBytes = 256 * 1024;  // per thread: kernels keep small register arrays
constexpr int kMaxBlock = 1024;

enum class Wait { ready, barrier, shuffle, done };

namespace ctx = boost::context;

// Hands a fiber one of the emulator's preallocated stacks (reused by every block).
struct PoolStack {
  char* base;
  size_t size;
  ctx::stack_context allocate() {
    ctx::stack_context sc;
    sc.sp = base + size;  // stacks grow down
    sc.size = size;
    return sc;
  }
  void deallocate(ctx::stack_context&) noexcept {}
};

struct Fiber {
  ctx::fiber self;  // resumed by the scheduler (empty once the thread returned)
  ctx::fiber sink;  // the scheduler, resumed by the thread to wait
  ThreadState state;
  Wait wait = Wait::ready;
  Where where;  // the barrier or shuffle it waits at
};

struct WarpExchange {
  int arrived = 0;
  int mask = 0;
  Where where;
  uint64_t in[64] = {};
  uint64_t out[64] = {};
};

struct Block {
  const char* kernel = "";
  int n = 0;
  Fiber* fibers = nullptr;
  int barrier_arrived = 0;
  Where barrier_where;
  std::vector<WarpExchange> warps;
  std::map<const void*, size_t> shared_offsets;  // TERA_SHARED site -> offset
  std::vector<unsigned char> shared_bytes;
  size_t shared_used = 0;
  const std::function<void()>* body = nullptr;
};

thread_local int g_warp = 32;
thread_local Block* g_block = nullptr;
thread_local Fiber* g_current = nullptr;
// Fiber stacks, default-initialised (new char[], not make_unique: zero-filling
// 256 KiB per thread would touch every page of a 1024-thread block).
thread_local std::vector<std::unique_ptr<char[]>> g_stacks;
thread_local std::vector<Fiber> g_fibers;

std::string where_str(const Where& w) {
  const char* f = w.file;
  const char* slash = std::strrchr(f, '/');
  return std::string(slash != nullptr ? slash + 1 : f) + ":" + std::to_string(w.line);
}

[[noreturn]] void report(const std::string& what) {
  const ThreadState& s = g_current != nullptr ? g_current->state : g_block->fibers[0].state;
  std::fprintf(stderr, "gpu-emu: %s in kernel '%s', block (%d,%d) of %d threads (warp %d)\n", what.c_str(),
               g_block->kernel, s.block_x, s.block_y, g_block->n, g_warp);
  std::fflush(stderr);
  std::abort();
}

// Stops the running fiber until the scheduler resumes it.
void yield() {
  Fiber* f = g_current;
  f->sink = std::move(f->sink).resume();
}

// A suspended fiber that runs the block's body on its own stack when first
// resumed. Returning threads that leave others waiting at a barrier are
// found by the scheduler when nothing is ready any more.
void start_fiber(Fiber& f, char* stack) {
  f.self = ctx::fiber(std::allocator_arg, PoolStack{stack, kStackBytes}, [&f](ctx::fiber&& sink) {
    f.sink = std::move(sink);
    (*g_block->body)();
    f.wait = Wait::done;
    return std::move(f.sink);
  });
}

// Why nothing can run: one line per group of waiting threads.
[[noreturn]] void report_deadlock() {
  std::map<std::string, int> groups;
  bool divergent_warp = false;
  for (int t = 0; t < g_block->n; ++t) {
    const Fiber& f = g_block->fibers[t];
    std::string key;
    switch (f.wait) {
      case Wait::done: key = "returned"; break;
      case Wait::barrier: key = "wait at the barrier at " + where_str(f.where); break;
      case Wait::shuffle: key = "wait at the shuffle at " + where_str(f.where); divergent_warp = true; break;
      case Wait::ready: key = "ready"; break;
    }
    ++groups[key];
  }
  std::string msg = divergent_warp ? "deadlock: a full-warp shuffle in divergent code (some lanes of a warp never reach it)"
                                   : "deadlock: a barrier not reached by every thread of the block";
  for (const auto& [k, c] : groups) msg += "\n  " + std::to_string(c) + " thread(s) " + k;
  g_current = nullptr;
  report(msg);
}

}  // namespace

const ThreadState& self() { return g_current->state; }
int warp_size() { return g_warp; }
void set_thread_warp_size(int w) {
  if (w != 32 && w != 64) {
    std::fprintf(stderr, "gpu-emu: warp size %d is not 32 or 64\n", w);
    std::abort();
  }
  g_warp = w;
}

bool Where::operator==(const Where& o) const { return line == o.line && std::strcmp(file, o.file) == 0; }

void barrier(Where where) {
  Block& b = *g_block;
  if (b.barrier_arrived == 0) {
    b.barrier_where = where;
  } else if (!(b.barrier_where == where)) {
    report("threads of one block wait at two different barriers (" + where_str(b.barrier_where) + " and " +
           where_str(where) + ")");
  }
  if (++b.barrier_arrived == b.n) {  // the last one releases the others and goes on
    b.barrier_arrived = 0;
    for (int t = 0; t < b.n; ++t) {
      if (b.fibers[t].wait == Wait::barrier) b.fibers[t].wait = Wait::ready;
    }
    return;
  }
  g_current->wait = Wait::barrier;
  g_current->where = where;
  yield();
}

namespace {

// The warp's rendezvous behind shfl_xor_bits (mask > 0: lane l gets lane
// l ^ mask's value) and warp_gather_bits (mask = kGather: every lane gets
// every lane's). The last lane to arrive fills `out` and releases the
// others; `out` is overwritten only when every lane has arrived again, so
// each lane has read its share by then.
constexpr int kGather = -1;

const uint64_t* warp_rendezvous(uint64_t bits, int mask, Where where) {
  Block& b = *g_block;
  const int t = g_current->state.thread;
  const int w = t / g_warp, lane = t % g_warp;
  const int lanes = std::min(g_warp, b.n - w * g_warp);
  if (lanes != g_warp) {
    report("a shuffle at " + where_str(where) + " in a partial warp (" + std::to_string(lanes) + " of " +
           std::to_string(g_warp) + " lanes): launch whole warps");
  }
  if (mask != kGather && (mask <= 0 || mask >= g_warp)) {
    report("shfl_xor mask " + std::to_string(mask) + " at " + where_str(where) + " outside the warp");
  }
  WarpExchange& x = b.warps[w];
  if (x.arrived == 0) {
    x.mask = mask;
    x.where = where;
  } else if (x.mask != mask || !(x.where == where)) {
    report("lanes of warp " + std::to_string(w) + " shuffle at two places or masks (" + where_str(x.where) + " mask " +
           std::to_string(x.mask) + ", " + where_str(where) + " mask " + std::to_string(mask) + ")");
  }
  x.in[lane] = bits;
  if (++x.arrived == lanes) {
    for (int l = 0; l < lanes; ++l) x.out[l] = x.in[mask == kGather ? l : l ^ mask];
    x.arrived = 0;
    for (int l = 0; l < lanes; ++l) {
      Fiber& f = b.fibers[w * g_warp + l];
      if (f.wait == Wait::shuffle) f.wait = Wait::ready;
    }
    return x.out;
  }
  g_current->wait = Wait::shuffle;
  g_current->where = where;
  yield();
  return x.out;
}

}  // namespace

uint64_t shfl_xor_bits(uint64_t bits, int mask, Where where) {
  if (mask == kGather) report("shfl_xor mask -1 at " + where_str(where) + " outside the warp");
  return warp_rendezvous(bits, mask, where)[g_current->state.thread % g_warp];
}

void warp_gather_bits(uint64_t bits, uint64_t* all, Where where) {
  const uint64_t* out = warp_rendezvous(bits, kGather, where);
  std::copy(out, out + g_warp, all);
}

void* shared(const void* site, size_t bytes, size_t align) {
  Block& b = *g_block;
  auto it = b.shared_offsets.find(site);
  if (it == b.shared_offsets.end()) {
    const size_t off = (b.shared_used + align - 1) / align * align;
    if (off + bytes > b.shared_bytes.capacity()) {
      report("shared memory of " + std::to_string(off + bytes) + " bytes, more than the " +
             std::to_string(b.shared_bytes.capacity()) + " a block may hold");
    }
    if (off + bytes > b.shared_bytes.size()) b.shared_bytes.resize(off + bytes, 0xff);  // within capacity: no move
    b.shared_used = off + bytes;
    it = b.shared_offsets.emplace(site, off).first;
  }
  return b.shared_bytes.data() + it->second;
}

void* kernel_address(const void* p, const char* kernel) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  if ((u & kDeviceBit) == 0) {
    std::fprintf(stderr, "gpu-emu: kernel '%s' was given a host pointer (%p) where device memory is expected\n",
                 kernel, p);
    std::abort();
  }
  return reinterpret_cast<void*>(u & ~kDeviceBit);
}

void run(const char* kernel, Dim grid, int block, size_t shared_bytes, const std::function<void()>& body) {
  if (block <= 0 || block > kMaxBlock || grid.x == 0 || grid.y == 0) {
    std::fprintf(stderr, "gpu-emu: kernel '%s' launched with grid (%u,%u) and block %d (1..%d threads)\n", kernel,
                 grid.x, grid.y, block, kMaxBlock);
    std::abort();
  }
  if (g_block != nullptr) {
    std::fprintf(stderr, "gpu-emu: kernel '%s' launched from inside kernel '%s'\n", kernel, g_block->kernel);
    std::abort();
  }
  while (static_cast<int>(g_stacks.size()) < block) g_stacks.push_back(std::unique_ptr<char[]>(new char[kStackBytes]));
  g_fibers.resize(static_cast<size_t>(block));
  // Shared memory is reserved up front so pointers handed out stay valid.
  const size_t reserve = shared_bytes + 64 * 1024;
  for (unsigned by = 0; by < grid.y; ++by) {
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      Block b;
      b.kernel = kernel;
      b.n = block;
      b.fibers = g_fibers.data();
      b.warps.resize(static_cast<size_t>((block + g_warp - 1) / g_warp));
      b.shared_bytes.reserve(reserve);
      b.body = &body;
      g_block = &b;
      for (int t = 0; t < block; ++t) {
        Fiber& f = g_fibers[static_cast<size_t>(t)];
        f.state = ThreadState{t, static_cast<int>(bx), static_cast<int>(by), block, grid};
        f.wait = Wait::ready;
        start_fiber(f, g_stacks[static_cast<size_t>(t)].get());
      }
      int done = 0;
      while (done < block) {
        bool ran = false;
        done = 0;
        for (int t = 0; t < block; ++t) {
          Fiber& f = g_fibers[static_cast<size_t>(t)];
          if (f.wait == Wait::ready) {
            g_current = &f;
            f.self = std::move(f.self).resume();
            g_current = nullptr;
            ran = true;
          }
          if (f.wait == Wait::done) ++done;
        }
        if (!ran && done < block) report_deadlock();
      }
      g_block = nullptr;
    }
  }
}

}  // namespace tera::gpu::emu
