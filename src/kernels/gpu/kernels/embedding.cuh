// Token and position embeddings in the kernel dialect (the arithmetic of
// kernels/cpu/embedding.cpp). Backward passes are deterministic without
// atomics: a thread owns one column of a set of the table's rows (those
// whose index is its part modulo the grid's parts) and adds the tokens' rows
// in token order (tokens), or one (position, column) and adds the rows at
// that position in order (positions). Each element of the gradient is added
// to by one thread in token order, so the result does not depend on the
// number of parts.
#pragma once

#include "kernels/gpu/dialect.h"
#include "kernels/gpu/kernels/elementwise.cuh"

TERA_GPU_BEGIN

// out[n,:] = wte_local[tok - v0, :] for tokens in [v0, v1), else 0; one thread per element.
TERA_KERNEL embedding_lookup_k(float* out, const int32_t* tokens, const float* wte_local, int64_t v0, int64_t v1,
                               int64_t N, int64_t C) {
  for (int64_t i = grid_first(); i < N * C; i += grid_stride()) {
    const int64_t n = i / C, c = i % C;
    const int64_t tok = tokens[n];
    out[i] = (tok >= v0 && tok < v1) ? wte_local[(tok - v0) * C + c] : 0.0f;
  }
}

// Row parts of the table: columns alone give a GPU only ceil(C / block)
// blocks (3 for GPT-2's 768), too few for its SMs.
constexpr int kEmbeddingRowParts = 32;

// dwte_local[tok - v0, c] += dout[n, c] over n in order; grid (ceil(C /
// block), parts): the thread of column c and part p owns the rows r with
// r mod parts == p.
TERA_KERNEL embedding_backward_k(float* dwte_local, const float* dout, const int32_t* tokens, int64_t v0, int64_t v1,
                                 int64_t N, int64_t C) {
  const int64_t c = grid_first(), part = block_y(), parts = grid_dim_y();
  if (c >= C) return;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t tok = tokens[n];
    if (tok >= v0 && tok < v1 && (tok - v0) % parts == part) dwte_local[(tok - v0) * C + c] += dout[n * C + c];
  }
}

// out[i,:] += wpe[(n0 + i) mod T, :]; one thread per element.
TERA_KERNEL position_add_k(float* out, const float* wpe, int64_t n0, int64_t N, int64_t T, int64_t C) {
  for (int64_t j = grid_first(); j < N * C; j += grid_stride()) {
    const int64_t i = j / C, c = j % C;
    out[j] += wpe[((n0 + i) % T) * C + c];
  }
}

// dwpe[pos, c] += dout[i, c] over the rows i at position pos, in order; one thread per (pos, c).
TERA_KERNEL position_add_backward_k(float* dwpe, const float* dout, int64_t n0, int64_t N, int64_t T, int64_t C) {
  for (int64_t j = grid_first(); j < T * C; j += grid_stride()) {
    const int64_t pos = j / C, c = j % C;
    const int64_t first = ((pos - n0) % T + T) % T;
    float s = dwpe[j];
    for (int64_t i = first; i < N; i += T) s += dout[i * C + c];
    dwpe[j] = s;
  }
}

TERA_GPU_END
