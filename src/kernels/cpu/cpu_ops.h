// CPU kernels, templated on the element type. The float instantiations are the
// CPU backend (backend_cpu.cpp); the double instantiations are the fp64
// reference that the conformance tests check with finite differences and
// compare the float path against. Shapes and accumulation rules: kernels/ops.h.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace tera::cpu {

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

template <typename T>
void linear_forward(T* y, const T* x, const T* W, const T* b, int64_t N, int64_t I, int64_t O);
template <typename T>
void linear_backward(T* dx, T* dW, T* db, const T* dy, const T* x, const T* W, int64_t N, int64_t I, int64_t O,
                     bool accumulate_dx = false);

template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* g, const T* b, int64_t N, int64_t C);
void layernorm_forward_bf16(uint16_t* out, float* mean, float* rstd, const float* x, const float* g, const float* b,
                            int64_t N, int64_t C);
template <typename T>
void layernorm_backward(T* dx, T* dg, T* db, const T* dout, const T* x, const T* g, const T* mean, const T* rstd,
                        int64_t N, int64_t C);

template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* g, int64_t N, int64_t C, float eps);
void rmsnorm_forward_bf16(uint16_t* out, float* rstd, const float* x, const float* g, int64_t N, int64_t C,
                          float eps);
template <typename T>
void rmsnorm_backward(T* dx, T* dg, const T* dout, const T* x, const T* g, const T* rstd, int64_t N, int64_t C);

template <typename T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n);
template <typename T>
void swiglu_backward(T* dgate, T* dup, const T* gate, const T* up, const T* dout, int64_t n);
void swiglu_forward_bf16(uint16_t* out, const uint16_t* gate, const uint16_t* up, int64_t n);
void swiglu_backward_bf16(float* dgate, float* dup, const uint16_t* gate, const uint16_t* up, const float* dout,
                          int64_t n);

template <typename T>
void rope_forward(T* qkv, int64_t N, int64_t T_, int64_t H, int64_t KV, int64_t hs, RopeParams rope,
                   const int32_t* pos);
template <typename T>
void rope_backward(T* dqkv, int64_t N, int64_t T_, int64_t H, int64_t KV, int64_t hs, RopeParams rope,
                   const int32_t* pos);

template <typename T>
void gelu_forward(T* out, const T* x, int64_t n);
template <typename T>
void gelu_backward(T* dx, const T* x, const T* dout, int64_t n);
void gelu_forward_bf16(uint16_t* out, const uint16_t* x, int64_t n);
void gelu_backward_bf16(float* dx, const uint16_t* x, const float* dout, int64_t n);

template <typename T>
void attention_forward(T* out, T* probs, const T* qkv, int64_t B, int64_t T_, int64_t H, int64_t KV, int64_t hs);
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* probs, int64_t B, int64_t T_, int64_t H,
                        int64_t KV, int64_t hs);
// The scalar flash kernels (attention.cpp), instantiated for double: the
// reference the backend's tiled kernels are tested against.
template <typename T>
void flash_attention_forward(T* out, T* lse, const T* qkv, int64_t B, int64_t T_, int64_t H, int64_t KV, int64_t hs);
template <typename T>
void flash_attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse, int64_t B, int64_t T_,
                              int64_t H, int64_t KV, int64_t hs);
// Flash attention of local queries against one K/V block: ring attention's
// building block (flash_attention_block.cpp; ops.h FlashAttentionBlock*Fn),
// in scalar form (double: the reference; float: timed by attention_bench).
template <typename T>
void flash_attention_block_forward(T* out, T* lse, const T* qkv, const T* kv, const int32_t* pos_q,
                                   const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t KV,
                                   int64_t hs, bool accumulate);
template <typename T>
void flash_attention_block_backward(T* dqkv, T* dkv, const T* dout, const T* qkv, const T* kv, const T* out,
                                    const T* lse, const int32_t* pos_q, const int32_t* pos_k, int64_t B, int64_t Tq,
                                    int64_t Tk, int64_t H, int64_t KV, int64_t hs);
// The backend's block kernels: 64 x 64 tiles, skipping those no query sees.
void flash_attention_block_forward_f32(float* out, float* lse, const float* qkv, const float* kv, const int32_t* pos_q,
                                       const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t KV,
                                       int64_t hs, bool accumulate);
void flash_attention_block_backward_f32(float* dqkv, float* dkv, const float* dout, const float* qkv, const float* kv,
                                        const float* out, const float* lse, const int32_t* pos_q, const int32_t* pos_k,
                                        int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t KV, int64_t hs);
// The backend's flash kernels: 64 x 64 tiles on tile_mac (flash_attention.cpp),
// fp32 products or bf16 operands with fp32 accumulation.
void flash_attention_forward_f32(float* out, float* lse, const float* qkv, int64_t B, int64_t T_, int64_t H,
                                 int64_t KV, int64_t hs);
void flash_attention_backward_f32(float* dqkv, const float* dout, const float* qkv, const float* out,
                                  const float* lse, int64_t B, int64_t T_, int64_t H, int64_t KV, int64_t hs);
void flash_attention_forward_bf16(float* out, float* lse, const uint16_t* qkv, int64_t B, int64_t T_, int64_t H,
                                  int64_t KV, int64_t hs);
void flash_attention_backward_bf16(float* dqkv, const float* dout, const uint16_t* qkv, const uint16_t* out,
                                   const float* lse, int64_t B, int64_t T_, int64_t H, int64_t KV, int64_t hs);

template <typename T>
void residual_forward(T* out, const T* a, const T* b, int64_t n);

template <typename T>
void cross_entropy(T* losses, T* logits, const int32_t* targets, int64_t N, int64_t V, int64_t Vp, T dloss);
template <typename T>
void softmax_row(T* probs, const T* logits, int64_t V, T temperature);

template <typename T>
void embedding_lookup(T* out, const int32_t* tokens, const T* wte_local, int64_t v0, int64_t v1, int64_t N, int64_t C);
template <typename T>
void embedding_lookup_backward(T* dwte_local, const T* dout, const int32_t* tokens, int64_t v0, int64_t v1, int64_t N,
                               int64_t C);
template <typename T>
void position_add(T* out, const T* wpe, int64_t n0, int64_t N, int64_t T_, int64_t C);
template <typename T>
void position_add_backward(T* dwpe, const T* dout, int64_t n0, int64_t N, int64_t T_, int64_t C);
template <typename T>
void bias_residual(T* out, const T* a, const T* bias, const T* residual, int64_t N, int64_t C);

template <typename T>
void ce_max(T* rowmax, const T* logits, int64_t N, int64_t valid, int64_t ld);
template <typename T>
void ce_exp_sum(T* sums, T* target_logit, T* logits, const int32_t* targets, const T* rowmax, int64_t N, int64_t valid,
                int64_t ld, int64_t v0);
template <typename T>
void ce_finalize(T* losses, T* logits, const int32_t* targets, const T* rowmax, const T* sums, const T* target_logit,
                 int64_t N, int64_t valid, int64_t ld, int64_t v0, T dloss);

// One AdamW update of a flat range with weight decay wd (the arithmetic of
// ops.h's AdamWFn); the backend's multi-tensor adamw calls it per segment.
template <typename T>
void adamw(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWArgs& a, float wd,
           uint16_t* param_bf16 = nullptr);
// How many elements of the range the update would make non-finite (p, m or
// v), computed with the same arithmetic, writing nothing.
int64_t adamw_nonfinite(const float* param, const float* grad, const float* m, const float* v, int64_t n,
                        const AdamWArgs& a, float wd);

template <typename T>
double sum_squares(const T* x, int64_t n);

// The backend entries over host-addressable memory (memory.cpp, elementwise.cpp).
void* alloc(int64_t bytes);
void release(void* p);
void fill(void* dst, DType t, double value, int64_t n);
void copy(void* dst, const void* src, int64_t bytes, CopyKind kind);
void copy_columns(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows, int64_t cols);
void cast(void* dst, DType dst_t, const void* src, DType src_t, int64_t n);
void accumulate_sum(double* acc, const float* x, int64_t n);
void sum_squares_segments(double* out, const SegmentRef* segs, int64_t nsegs, int64_t groups);
void count_nonfinite_segments(double* out, const SegmentRef* segs, int64_t nsegs, int64_t groups);
void adamw_segments(const AdamWSegment* segs, int64_t nsegs, const AdamWArgs& a, double* nonfinite);

}  // namespace tera::cpu

namespace tera::cpu {
// Which GEMM kernel family oneDNN dispatches to on this CPU ("avx512_core_bf16", "avx2", ...).
const char* gemm_isa_name();

// C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C (+ bias[N] on every
// row), row-major, with A and B in bf16 (uint16_t: the upper half of the
// fp32 pattern) and fp32 accumulation and output (gemm_bf16.cpp: oneDNN's
// matmul primitive, the bias in its epilogue, or widened to fp32 where
// oneDNN has no bf16 matmul for this CPU). A bias needs beta = 0.
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A,
               int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc,
               const float* bias = nullptr);
// The path gemm_bf16 takes on this CPU, in words (for start-up lines and benchmarks).
const char* gemm_bf16_path();
// dst[i] = src[i] rounded to bf16, nearest even (NaN stays NaN).
void cast_to_bf16(uint16_t* dst, const float* src, int64_t n);
// The same over src[N,O] (dst[N,O]), and db[O] += its column sums (fp32,
// each column's rows in order) in the same pass (linear_bf16.cpp).
void cast_to_bf16_and_add_column_sums(uint16_t* dst, float* db, const float* src, int64_t N, int64_t O);
// db[O] += the column sums of dy[N,O]; y[n,:] = b for every row n (matmul.cpp).
template <typename T>
void add_column_sums(T* db, const T* dy, int64_t N, int64_t O);
template <typename T>
void fill_rows(T* y, const T* b, int64_t N, int64_t O);
// ops.h's LinearForwardBf16Fn / LinearBackwardBf16Fn (linear_bf16.cpp).
void linear_forward_bf16(float* y, const uint16_t* x, const uint16_t* W, const float* b, int64_t N, int64_t I,
                         int64_t O);
void linear_backward_bf16(float* dx, float* dW, float* db, const float* dy, const uint16_t* x, const uint16_t* W,
                          int64_t N, int64_t I, int64_t O, bool accumulate_dx, uint16_t* cast);
}  // namespace tera::cpu
