// What the CPU running this process can execute, read once from CPUID and
// the OS's saved-state mask (XCR0), so that kernels compiled for wider ISAs
// (function-level target attributes: the build may be portable,
// -DTERA_NATIVE=OFF) are chosen at run time, never by the build machine.
// AMX also needs the kernel's permission for the tile state
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), Linux 5.16+): it is
// requested once here, and AMX counts as present only if it was granted.
#pragma once

namespace tera::cpu {

struct CpuFeatures {
  bool avx512 = false;       // AVX-512 F, BW, DQ, VL with the ZMM state enabled by the OS
  bool avx512_bf16 = false;  // and AVX512-BF16 (vdpbf16ps, vcvtne2ps2bf16)
  bool amx_bf16 = false;     // AMX-TILE + AMX-BF16, tile state enabled and permitted for this process
};

// Detected on first call (thread-safe), then cached.
const CpuFeatures& cpu_features();

}  // namespace tera::cpu
