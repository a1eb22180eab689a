/* repro_ref: the C references of the reproducible mode's kernels
 * (include/vktrain/repro.h), the oracles of the test_repro_* programs: the
 * formulas and their order are the shaders' own (shaders/reproducible/repro_ops.glsl,
 * repro_tree.glsl, repro_matmul.glsl and the comments atop
 * shaders/repro_*.comp), each float operation rounded on its own (built
 * without contraction, tests/CMakeLists.txt). Arguments as the device
 * function's or op's; gradients are added into, as the ops do. */
#ifndef VKTRAIN_REPRO_REF_H
#define VKTRAIN_REPRO_REF_H

#include "vktrain/repro.h"

/* The matrix product in layout `layout` (repro_matmul's terms). */
void repro_matmul_ref(enum repro_layout layout, const float *a, const float *b, float *c, uint32_t M, uint32_t N,
                      uint32_t K, int accumulate);

/* The pairwise sum (repro_sum's tree) of x and of its squares. */
float repro_sum_ref(const float *x, size_t n);
float repro_sumsq_ref(const float *x, size_t n);

/* The kernels the ops of ops.h record in the reproducible mode
 * (ref_repro_ops.c). */
void repro_add_ref(const float *x, const float *y, float *z, size_t n);
void repro_scale_ref(float *x, float a, size_t n);
void repro_axpy_ref(float a, const float *x, float *y, size_t n);
void repro_bias_add_ref(const float *bias, float *y, size_t rows, size_t C);
/* out[c] = out[c] + each row's term in row order: dy (plain), dy·(x·rstd)
 * (RMSNorm weight), dy·((x − mean)·rstd) (LayerNorm weight). */
enum repro_colsum { REPRO_COLSUM_PLAIN, REPRO_COLSUM_RMS, REPRO_COLSUM_LN };
void repro_colsum_ref(enum repro_colsum mode, const float *dy, const float *x, const float *mean, const float *rstd,
                      float *out, size_t rows, size_t C);
void repro_rmsnorm_ref(const float *x, const float *w, float *y, float *rstd, size_t rows, size_t C, float eps);
void repro_rmsnorm_backward_ref(const float *dy, const float *x, const float *w, const float *rstd, float *dx,
                                float *dw, size_t rows, size_t C);
void repro_layernorm_ref(const float *x, const float *w, const float *b, float *y, float *mean, float *rstd,
                         size_t rows, size_t C, float eps);
void repro_layernorm_backward_ref(const float *dy, const float *x, const float *w, const float *mean, const float *rstd,
                                  float *dx, float *dw, float *db, size_t rows, size_t C);
void repro_swiglu_ref(const float *gate, const float *up, float *h, size_t n);
void repro_swiglu_backward_ref(const float *gate, const float *up, const float *dh, float *dgate, float *dup, size_t n);
void repro_gelu_ref(const float *x, float *y, size_t n);
void repro_gelu_backward_ref(const float *x, const float *dy, float *dx, size_t n);
void repro_rope_ref(float *x, const int32_t *positions, const float *table, size_t rows, size_t H, size_t hd,
                    size_t max_pos, int backward);
void repro_embedding_ref(const int32_t *tokens, const int32_t *positions, const float *wte, const float *wpe,
                         float *out, size_t rows, size_t C, size_t V, size_t P);
void repro_embedding_backward_ref(const int32_t *ids, const float *dout, float *dtable, size_t rows, size_t C,
                                  size_t V);

/* The AdamW step (op_repro_adamw), the cross-entropy (repro_cross_entropy,
 * over rows 0 .. rows − 1) and the attention (repro_flash_attention and its
 * backward, on whole buffers: the views' offsets, strides and sliding
 * window as in s, a window of T or more none; dq, dk, dv may be one
 * buffer, as GPT-2's fused qkv). */
void repro_adamw_ref(float *theta, const float *grad, float *m, float *v, size_t n, const struct op_adamw_step *s);
void repro_cross_entropy_ref(float *logits, const int32_t *labels, float *row_loss, float *row_count, uint32_t rows,
                             uint32_t V, float scale);
void repro_attention_ref(const struct op_attention_shape *s, const float *q, const float *k, const float *v,
                         const int32_t *doc, float *out, float *lse);
void repro_attention_backward_ref(const struct op_attention_shape *s, const float *q, const float *k, const float *v,
                                  const int32_t *doc, const float *out, const float *lse, const float *dout, float *dq,
                                  float *dk, float *dv);

#endif
