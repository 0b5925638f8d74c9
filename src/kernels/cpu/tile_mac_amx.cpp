// The AMX form of tile_mac_bf16 (tile_mac_forms.h). C is walked in blocks
// of 2 x 2 tiles of 16 x 16 fp32 (tmm0-3), each loaded from C, accumulated
// over K2 in steps of 16 pairs (A: tmm4-5, 16 rows x 16 pairs; B: tmm6-7,
// 16 pairs x 16 columns, the VNNI layout tile_mac.h's B already has) by
// tdpbf16ps, and stored back. Edge blocks get tiles of fewer rows or
// columns (a tile configuration per block shape, loaded when the shape
// changes, so nothing past M, N or K2 is read or written); the part of K2
// past its multiple of 16 is added by the AVX-512 form afterwards. C = A B
// starts the tiles at zero (tilezero) instead of loading C. The tile
// configuration is loaded at every call, since other code on the thread
// (oneDNN's AMX GEMMs) loads its own between calls, except inside a
// TileMacScope (tile_mac.h), where the thread's last one is kept.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/tile_mac_forms.h"

#if defined(TERA_TILE_FORMS_X86)
#include <immintrin.h>

#define TERA_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512dq,avx512vl")))

namespace tera::cpu::tile_forms {

namespace {

constexpr int kTileRows = 16;  // rows of a tile; a tile row is 64 bytes: 16 fp32 or 16 bf16 pairs

// The tile configuration of ldtilecfg (palette 1): bytes per row and rows of tmm0-15.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// A block: rows of its C tile rows (r[1] = 0: one tile row) and columns of
// its C tile columns (c[1] = 0: one tile column).
struct BlockShape {
  int r[2], c[2];
  bool operator==(const BlockShape&) const = default;
};

TileConfig config_for(const BlockShape& s) {
  TileConfig t;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      const bool used = s.r[i] > 0 && s.c[j] > 0;
      t.rows[2 * i + j] = static_cast<uint8_t>(used ? s.r[i] : 0);  // C(i, j): tmm 2i + j
      t.colsb[2 * i + j] = static_cast<uint16_t>(used ? 4 * s.c[j] : 0);
    }
    t.rows[4 + i] = static_cast<uint8_t>(s.r[i]);  // A row i: tmm 4 + i, 16 pairs
    t.colsb[4 + i] = static_cast<uint16_t>(s.r[i] > 0 ? 64 : 0);
    t.rows[6 + i] = static_cast<uint8_t>(s.c[i] > 0 ? kTileRows : 0);  // B column i: tmm 6 + i, 16 pairs
    t.colsb[6 + i] = static_cast<uint16_t>(4 * s.c[i]);
  }
  return t;
}

// C (ldc floats) (+)= A (lda bf16) B (ldb pairs) over k16 steps of 16
// pairs, on RT x CT tiles configured by config_for.
template <int RT, int CT, bool Acc>
TERA_AMX void block(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
                    int64_t k16) {
  const int64_t sc = ldc * 4, sa = lda * 2, sb = ldb * 4;  // strides in bytes
  float* C1 = C + kTileRows * ldc;
  const uint16_t* A1 = A + kTileRows * lda;
  if constexpr (Acc) {
    _tile_loadd(0, C, sc);
    if constexpr (CT == 2) _tile_loadd(1, C + 16, sc);
    if constexpr (RT == 2) _tile_loadd(2, C1, sc);
    if constexpr (RT == 2 && CT == 2) _tile_loadd(3, C1 + 16, sc);
  } else {
    _tile_zero(0);
    if constexpr (CT == 2) _tile_zero(1);
    if constexpr (RT == 2) _tile_zero(2);
    if constexpr (RT == 2 && CT == 2) _tile_zero(3);
  }
  for (int64_t k = 0; k < k16; ++k) {
    const uint16_t* b = B + 2 * (k * kTileRows * ldb);
    _tile_loadd(4, A + 32 * k, sa);
    _tile_loadd(6, b, sb);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (CT == 2) {
      _tile_loadd(7, b + 32, sb);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (RT == 2) {
      _tile_loadd(5, A1 + 32 * k, sa);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (CT == 2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, C, sc);
  if constexpr (CT == 2) _tile_stored(1, C + 16, sc);
  if constexpr (RT == 2) _tile_stored(2, C1, sc);
  if constexpr (RT == 2 && CT == 2) _tile_stored(3, C1 + 16, sc);
}

using BlockFn = void (*)(float*, int64_t, const uint16_t*, int64_t, const uint16_t*, int64_t, int64_t);
// [accumulate][two tile rows][two tile columns]
constexpr BlockFn kBlocks[2][2][2] = {{{block<1, 1, false>, block<1, 2, false>}, {block<2, 1, false>, block<2, 2, false>}},
                                      {{block<1, 1, true>, block<1, 2, true>}, {block<2, 1, true>, block<2, 2, true>}}};

// This thread's TileMacScope depth and the configuration it last loaded
// (kept only while a scope is open).
constexpr BlockShape kNone{{-1, -1}, {-1, -1}};
thread_local int scope_depth = 0;
thread_local BlockShape scope_loaded = kNone;

// ldtilecfg with the whole configuration as its memory operand (GCC's
// _tile_loadconfig names only its first 8 bytes, so stores to the rest
// could be dropped as dead).
TERA_AMX void load_config(const TileConfig& t) { __asm__ volatile("ldtilecfg %0" ::"m"(t)); }
TERA_AMX void release_tiles() { _tile_release(); }

}  // namespace

void amx_scope_open() { ++scope_depth; }

void amx_scope_close() {
  if (--scope_depth > 0) return;
  if (!(scope_loaded == kNone)) release_tiles();
  scope_loaded = kNone;
}

void amx_bf16(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, int64_t M,
              int64_t N, int64_t K2, bool accumulate, bool dot) {
  const int64_t k16 = K2 / kTileRows;
  if (k16 > 0) {
    // The tile instructions' memory operands are invisible to the compiler
    // (inline assembly without memory clobbers): fence ordinary accesses.
    __asm__ volatile("" ::: "memory");
    BlockShape loaded = scope_depth > 0 ? scope_loaded : kNone;
    constexpr int64_t kBlock = 2 * kTileRows;
    for (int64_t m0 = 0; m0 < M; m0 += kBlock) {
      const int64_t rows = std::min(kBlock, M - m0);
      for (int64_t n0 = 0; n0 < N; n0 += kBlock) {
        const int64_t cols = std::min(kBlock, N - n0);
        const BlockShape s{{static_cast<int>(std::min<int64_t>(rows, kTileRows)), static_cast<int>(std::max<int64_t>(rows - kTileRows, 0))},
                           {static_cast<int>(std::min<int64_t>(cols, kTileRows)), static_cast<int>(std::max<int64_t>(cols - kTileRows, 0))}};
        if (!(s == loaded)) {
          load_config(config_for(s));
          loaded = s;
        }
        kBlocks[accumulate][s.r[1] > 0][s.c[1] > 0](C + m0 * ldc + n0, ldc, A + m0 * lda, lda, B + 2 * n0, ldb, k16);
      }
    }
    if (scope_depth > 0) scope_loaded = loaded;
    __asm__ volatile("" ::: "memory");
  }
  const int64_t done = k16 * kTileRows;
  if (done == K2 && done > 0) return;
  const uint16_t *At = A + 2 * done, *Bt = B + 2 * done * ldb;
  const bool acc = accumulate || done > 0;  // the tiles wrote C already
  if (dot) {
    avx512_bf16_dot(C, ldc, At, lda, Bt, ldb, M, N, K2 - done, acc);
  } else {
    avx512_bf16_widened(C, ldc, At, lda, Bt, ldb, M, N, K2 - done, acc);
  }
}

}  // namespace tera::cpu::tile_forms

#endif  // TERA_TILE_FORMS_X86
