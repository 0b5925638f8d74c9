// CPU feature detection (cpu_features.h): CPUID leaves 1 and 7 (sub-leaves
// 0 and 1) for the instructions, XCR0 for the register state the OS saves
// (an instruction whose registers the OS does not save must not run), and
// for AMX the per-process permission Linux requires before a first tile
// instruction (without it the instruction faults).
#include "kernels/cpu/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <cstdint>

namespace tera::cpu {

namespace {

#if defined(__x86_64__)
uint64_t xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// Linux's arch_prctl codes (asm/prctl.h) and the tile-data state component.
constexpr long kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

bool amx_permitted() {
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  uint64_t perm = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &perm) != 0) return false;
  return (perm >> kXfeatureXtiledata) & 1u;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1u;
  if (!osxsave) return f;
  const uint64_t xcr = xcr0();
  const bool zmm_state = (xcr & 0xe6u) == 0xe6u;                    // SSE, AVX, opmask, ZMM 0-15 high, ZMM 16-31
  const bool tile_state = ((xcr >> 17) & 3u) == 3u;                 // XTILECFG, XTILEDATA
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  const bool f_dq_bw_vl = ((b >> 16) & 1u) && ((b >> 17) & 1u) && ((b >> 30) & 1u) && ((b >> 31) & 1u);
  const bool amx_tile = (d >> 24) & 1u, amx_bf16 = (d >> 22) & 1u;
  f.avx512 = zmm_state && f_dq_bw_vl;
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) f.avx512_bf16 = f.avx512 && ((a1 >> 5) & 1u);
  // The AMX kernels also use AVX-512 (packing, the C edges).
  f.amx_bf16 = f.avx512 && amx_tile && amx_bf16 && tile_state && amx_permitted();
  return f;
}
#else
CpuFeatures detect() { return {}; }
#endif

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

}  // namespace tera::cpu
