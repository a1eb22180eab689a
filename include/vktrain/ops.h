/* ops: one C function per shader, each recording one dispatch (or a fixed
 * pair) on the gpu's command buffer. Shapes travel in push constants.
 * Ops never allocate device memory and never submit: callers own buffers
 * (including scratch) and decide when to gpu_submit().
 *
 * All matrices are row-major float32. */
#ifndef VKTRAIN_OPS_H
#define VKTRAIN_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "vktrain/gpu.h"

/* The three layouts of a linear layer y = x·Wᵀ, W being (out, in):
 *   op_matmul_nt: Y[M,N]  (+)= X[M,K] · W[N,K]ᵀ   forward
 *   op_matmul_nn: dX[M,K] (+)= dY[M,N] · W[N,K]   input gradient
 *   op_matmul_tn: dW[N,K] (+)= dY[M,N]ᵀ · X[M,K]  weight gradient
 * accumulate: add into the output instead of overwriting it. */
void op_matmul_nt(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *w, struct gpu_buffer *y, uint32_t M,
                  uint32_t N, uint32_t K, int accumulate);
void op_matmul_nn(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *w, struct gpu_buffer *dx, uint32_t M,
                  uint32_t N, uint32_t K, int accumulate);
void op_matmul_tn(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *x, struct gpu_buffer *dw, uint32_t M,
                  uint32_t N, uint32_t K, int accumulate);

/* Elementwise over n floats. */
void op_add(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *y, struct gpu_buffer *z, size_t n); /* z = x+y */
void op_scale(struct gpu *g, struct gpu_buffer *x, float a, size_t n);                                /* x *= a */
void op_axpy(struct gpu *g, float a, struct gpu_buffer *x, struct gpu_buffer *y, size_t n);           /* y += a·x */
void op_copy(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *y, size_t n);                    /* y = x */

/* Deterministic reductions: out[out_index] = Σ x[i] (op_sum) or Σ x[i]²
 * (op_sumsq) over n floats. scratch must hold op_reduce_scratch(g, n)
 * floats. Same device, same n, same input: same bits. */
size_t op_reduce_scratch(const struct gpu *g, size_t n);
void op_sum(struct gpu *g, struct gpu_buffer *x, size_t n, struct gpu_buffer *scratch, struct gpu_buffer *out,
            uint32_t out_index);
void op_sumsq(struct gpu *g, struct gpu_buffer *x, size_t n, struct gpu_buffer *scratch, struct gpu_buffer *out,
              uint32_t out_index);

#endif
