// Tile multiply-accumulate (tile_mac.h): the portable forms and the choice
// among the forms at run time. Which forms exist is read from the CPU
// (cpu_features.h) once; the bf16 form tile_mac_bf16 runs is chosen once
// from them (the fastest), and only tests and benchmarks change it.
#include "kernels/cpu/tile_mac.h"

#include <algorithm>
#include <atomic>

#include "core/check.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/tile_mac_forms.h"

namespace tera::cpu {

namespace tile_forms {

void portable_f32(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t M,
                  int64_t N, int64_t K) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) {
      const float a = A[m * lda + k];
      for (int64_t n = 0; n < N; ++n) C[m * ldc + n] += a * B[k * ldb + n];
    }
  }
}

void portable_bf16(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, int64_t M,
                   int64_t N, int64_t K2, bool accumulate) {
  for (int64_t m = 0; m < M; ++m) {
    if (!accumulate) std::fill(C + m * ldc, C + m * ldc + N, 0.0f);
    for (int64_t k = 0; k < K2; ++k) {
      const float a0 = from_bf16(A[m * lda + 2 * k]), a1 = from_bf16(A[m * lda + 2 * k + 1]);
      for (int64_t n = 0; n < N; ++n) {
        const uint16_t* b = B + 2 * (k * ldb + n);
        C[m * ldc + n] += a0 * from_bf16(b[0]) + a1 * from_bf16(b[1]);
      }
    }
  }
}

}  // namespace tile_forms

namespace {

TileMacForm fastest_bf16() {
  for (TileMacForm f : {TileMacForm::amx, TileMacForm::avx512_bf16, TileMacForm::avx512}) {
    if (tile_mac_form_available(f, true)) return f;
  }
  return TileMacForm::portable;
}

std::atomic<TileMacForm>& selected() {
  static std::atomic<TileMacForm> form{fastest_bf16()};
  return form;
}

}  // namespace

bool tile_mac_form_available(TileMacForm form, bool bf16) {
  const CpuFeatures& f = cpu_features();
  switch (form) {
    case TileMacForm::portable: return true;
    case TileMacForm::avx512: return f.avx512;
    case TileMacForm::avx512_bf16: return bf16 && f.avx512_bf16;
    case TileMacForm::amx: return bf16 && f.amx_bf16;
  }
  return false;
}

void tile_mac_f32_form(TileMacForm form, float* C, int64_t ldc, const float* A, int64_t lda, const float* B,
                       int64_t ldb, int64_t M, int64_t N, int64_t K) {
  TERA_ASSERT(tile_mac_form_available(form, false), "tile_mac_f32: form not available on this CPU");
#if defined(TERA_TILE_FORMS_X86)
  if (form == TileMacForm::avx512) return tile_forms::avx512_f32(C, ldc, A, lda, B, ldb, M, N, K);
#endif
  tile_forms::portable_f32(C, ldc, A, lda, B, ldb, M, N, K);
}

void tile_mac_bf16_form(TileMacForm form, float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B,
                        int64_t ldb, int64_t M, int64_t N, int64_t K2, bool accumulate) {
  TERA_ASSERT(tile_mac_form_available(form, true), "tile_mac_bf16: form not available on this CPU");
  if (M <= 0 || N <= 0) return;
#if defined(TERA_TILE_FORMS_X86)
  switch (form) {
    case TileMacForm::amx:
      return tile_forms::amx_bf16(C, ldc, A, lda, B, ldb, M, N, K2, accumulate, cpu_features().avx512_bf16);
    case TileMacForm::avx512_bf16: return tile_forms::avx512_bf16_dot(C, ldc, A, lda, B, ldb, M, N, K2, accumulate);
    case TileMacForm::avx512: return tile_forms::avx512_bf16_widened(C, ldc, A, lda, B, ldb, M, N, K2, accumulate);
    case TileMacForm::portable: break;
  }
#endif
  tile_forms::portable_bf16(C, ldc, A, lda, B, ldb, M, N, K2, accumulate);
}

void tile_mac_f32(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t M,
                  int64_t N, int64_t K) {
  static const TileMacForm form = cpu_features().avx512 ? TileMacForm::avx512 : TileMacForm::portable;
  tile_mac_f32_form(form, C, ldc, A, lda, B, ldb, M, N, K);
}

void tile_mac_bf16(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, int64_t M,
                   int64_t N, int64_t K2) {
  tile_mac_bf16_form(selected().load(std::memory_order_relaxed), C, ldc, A, lda, B, ldb, M, N, K2);
}

void tile_mul_bf16(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, int64_t M,
                   int64_t N, int64_t K2) {
  tile_mac_bf16_form(selected().load(std::memory_order_relaxed), C, ldc, A, lda, B, ldb, M, N, K2, false);
}

TileMacForm tile_mac_bf16_selected() { return selected().load(); }

TileMacForm tile_mac_bf16_select(TileMacForm form) {
  TERA_ASSERT(tile_mac_form_available(form, true),
              std::string("tile_mac_bf16_select: ") + tile_mac_form_name(form, true) + " is not available on this CPU");
  return selected().exchange(form);
}

const char* tile_mac_form_name(TileMacForm form, bool bf16) {
  switch (form) {
    case TileMacForm::portable: return bf16 ? "bf16 widened to fp32, portable loops" : "portable loops";
    case TileMacForm::avx512: return bf16 ? "bf16 widened to fp32, AVX-512 FMA" : "AVX-512 FMA";
    case TileMacForm::avx512_bf16: return "AVX512-BF16 dot products";
    case TileMacForm::amx: return "AMX bf16 tiles";
  }
  return "?";
}

const char* tile_mac_bf16_path() { return tile_mac_form_name(tile_mac_bf16_selected(), true); }

TileMacScope::TileMacScope() {
#if defined(TERA_TILE_FORMS_X86)
  if (cpu_features().amx_bf16) tile_forms::amx_scope_open();
#endif
}

TileMacScope::~TileMacScope() {
#if defined(TERA_TILE_FORMS_X86)
  if (cpu_features().amx_bf16) tile_forms::amx_scope_close();
#endif
}

}  // namespace tera::cpu
