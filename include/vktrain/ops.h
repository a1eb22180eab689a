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
/* op_matmul_nt, then Y[r, c] += bias[c] (bias NULL: nothing), the
 * additions of op_bias_add after the product, in the same order and so
 * the same bits: where the product is one dispatch of a texel kernel
 * (either precision) the bias is added as each output is stored, sparing
 * a pass over Y; elsewhere op_bias_add follows. */
void op_matmul_nt_bias(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *w, struct gpu_buffer *bias,
                       struct gpu_buffer *y, uint32_t M, uint32_t N, uint32_t K, int accumulate);
void op_matmul_nn(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *w, struct gpu_buffer *dx, uint32_t M,
                  uint32_t N, uint32_t K, int accumulate);
void op_matmul_tn(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *x, struct gpu_buffer *dw, uint32_t M,
                  uint32_t N, uint32_t K, int accumulate);
/* The same products on operands that start off[] = {first input, second
 * input, output} elements into their buffers (a block of rows of a larger
 * matrix: the LM head's chunks) and whose rows are ld[] elements apart
 * (NULL or 0: packed rows; not in the reproducible mode). The LM head
 * pads its logits' rows of V floats to a multiple of 4: nn then reads dY
 * as whole texels, pad included, so the pad of a padded dY must hold
 * zeros (op_cross_entropy_at writes them). */
void op_matmul_nt_at(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *w, struct gpu_buffer *y, uint32_t M,
                     uint32_t N, uint32_t K, int accumulate, const size_t off[3], const uint32_t ld[3]);
void op_matmul_nn_at(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *w, struct gpu_buffer *dx, uint32_t M,
                     uint32_t N, uint32_t K, int accumulate, const size_t off[3], const uint32_t ld[3]);
void op_matmul_tn_at(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *x, struct gpu_buffer *dw, uint32_t M,
                     uint32_t N, uint32_t K, int accumulate, const size_t off[3], const uint32_t ld[3]);
/* Bytes of gpu_set_matmul_scratch with which tn of this shape runs
 * faster: on the texel family as dYᵀ copied out and nn on it and X (nn
 * walks both operands along their rows, the tn kernel down their columns,
 * a row per token; faster on lavapipe, the copy included, where N and K
 * are at least 512); on the tiled family in parts of the reduction
 * (split-k: a grid of few large tiles, a long reduction), the parts'
 * partial products added in order. 0 where the device or the shape takes
 * the tn kernel in one product, and in the reproducible mode. */
size_t op_matmul_tn_scratch(const struct gpu *g, uint32_t M, uint32_t N, uint32_t K);

/* Elementwise over n floats. */
void op_add(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *y, struct gpu_buffer *z, size_t n); /* z = x+y */
void op_scale(struct gpu *g, struct gpu_buffer *x, float a, size_t n);                                /* x *= a */
void op_axpy(struct gpu *g, float a, struct gpu_buffer *x, struct gpu_buffer *y, size_t n);           /* y += a·x */
void op_copy(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *y, size_t n);                    /* y = x */
/* y[y0 .. y0 + n) = x[0 .. n); y0 floats a multiple of minStorageBufferOffsetAlignment */
void op_copy_to(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *y, size_t y0, size_t n);

/* Deterministic reductions: out[out_index] = Σ x[i] (op_sum) or Σ x[i]²
 * (op_sumsq) over n floats. scratch must hold op_reduce_scratch(g, n)
 * floats. Same device, same n, same input: same bits. */
size_t op_reduce_scratch(const struct gpu *g, size_t n);
void op_sum(struct gpu *g, struct gpu_buffer *x, size_t n, struct gpu_buffer *scratch, struct gpu_buffer *out,
            uint32_t out_index);
void op_sumsq(struct gpu *g, struct gpu_buffer *x, size_t n, struct gpu_buffer *scratch, struct gpu_buffer *out,
              uint32_t out_index);

/* ---- transformer ops ----------------------------------------------------
 * Shapes: rows = B·T tokens; activations (rows, C); int32 id buffers.
 * Backward ops ACCUMULATE (+=) into every gradient they produce, so
 * gradients of a parameter or of the residual stream add up in place.
 * Optional inputs are NULL. */

/* Masked softmax cross-entropy fused with its backward, in place: logits
 * (rows, V) become dlogits = (softmax − onehot)·scale on rows whose label is
 * in [0, V), exactly 0 elsewhere (−100 = ignore). row_loss[r] and
 * row_count[r] (floats) get the row's loss and 1, or 0 and 0. Large logits
 * are processed in row ranges within maxStorageBufferRange. */
void op_cross_entropy(struct gpu *g, struct gpu_buffer *logits, struct gpu_buffer *labels,
                      struct gpu_buffer *row_loss, struct gpu_buffer *row_count, uint32_t rows, uint32_t V,
                      float scale);
/* The same on a block of rows: logits hold rows row0 .. row0 + rows − 1,
 * ld >= V floats apart (the ld − V floats after each row's V are set to
 * 0: a padded dY for op_matmul_nn_at; ld == V in the reproducible mode),
 * whose labels, row_loss and row_count are at row0 in theirs; row0 floats
 * must be a multiple of minStorageBufferOffsetAlignment. */
void op_cross_entropy_at(struct gpu *g, struct gpu_buffer *logits, struct gpu_buffer *labels,
                         struct gpu_buffer *row_loss, struct gpu_buffer *row_count, uint32_t row0, uint32_t rows,
                         uint32_t V, uint32_t ld, float scale);
/* The same with Gemma 2's final soft-capping (softcap > 0; 0: none): each
 * logit x is softcap·tanh(x / softcap) and its gradient is times
 * 1 − tanh²; not in the reproducible mode. */
void op_cross_entropy_capped(struct gpu *g, struct gpu_buffer *logits, struct gpu_buffer *labels,
                             struct gpu_buffer *row_loss, struct gpu_buffer *row_count, uint32_t row0, uint32_t rows,
                             uint32_t V, uint32_t ld, float scale, float softcap);

/* RMSNorm: y = x·rstd·w, rstd (rows) saved. Backward: dx += , dw += . */
void op_rmsnorm(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *w, struct gpu_buffer *y,
                struct gpu_buffer *rstd, uint32_t rows, uint32_t C, float eps);
void op_rmsnorm_backward(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *x, struct gpu_buffer *w,
                         struct gpu_buffer *rstd, struct gpu_buffer *dx, struct gpu_buffer *dw, uint32_t rows,
                         uint32_t C);
/* LayerNorm: y = (x − mean)·rstd·w + b, mean and rstd (rows) saved. */
void op_layernorm(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *w, struct gpu_buffer *b,
                  struct gpu_buffer *y, struct gpu_buffer *mean, struct gpu_buffer *rstd, uint32_t rows, uint32_t C,
                  float eps);
void op_layernorm_backward(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *x, struct gpu_buffer *w,
                           struct gpu_buffer *mean, struct gpu_buffer *rstd, struct gpu_buffer *dx,
                           struct gpu_buffer *dw, struct gpu_buffer *db, uint32_t rows, uint32_t C);

/* out[r] = wte[tokens[r]] (+ wpe[positions[r]]); wte (V, C), wpe (P, C). */
void op_embedding(struct gpu *g, struct gpu_buffer *tokens, struct gpu_buffer *positions, struct gpu_buffer *wte,
                  struct gpu_buffer *wpe, struct gpu_buffer *out, uint32_t rows, uint32_t C, uint32_t V, uint32_t P);
/* dtable[ids[r]] += dout[r], deterministic (rows in order); dtable (V, C). */
void op_embedding_backward(struct gpu *g, struct gpu_buffer *ids, struct gpu_buffer *dout,
                           struct gpu_buffer *dtable, uint32_t rows, uint32_t C, uint32_t V);

/* RoPE (HF rotate_half) in place on x (rows, H, hd) at per-row positions,
 * cos/sin from a table made by op_rope_table; backward rotates back.
 * The frequencies are Hugging Face's inv_freq = 1/theta^(2j/hd), changed
 * by a rope_scaling when one is given (NULL or OP_ROPE_DEFAULT: none):
 * linear divides every frequency by factor; llama3 (Llama 3.1/3.2) divides
 * the low frequencies (wavelength > original_max/low_freq_factor) by factor,
 * keeps the high ones (wavelength < original_max/high_freq_factor) and
 * blends those between, as transformers' _compute_llama3_parameters does;
 * longrope as _compute_longrope_parameters. */
enum op_rope_type { OP_ROPE_DEFAULT, OP_ROPE_LINEAR, OP_ROPE_LLAMA3, OP_ROPE_LONGROPE };
#define OP_ROPE_MAX_FREQS 128 /* longrope's factors: rotary dimensions up to 256 */
struct op_rope_scaling {
    enum op_rope_type type;
    double factor, low_freq_factor, high_freq_factor;
    uint32_t original_max; /* original_max_position_embeddings */
    /* longrope (Phi-3, Phi-4-mini): frequency j divided by short_factor[j],
     * or by long_factor[j] in the table of long_table; cos and sin
     * multiplied by attention (its attention_factor). transformers uses the
     * long table for a forward whose last position is original_max or more. */
    double short_factor[OP_ROPE_MAX_FREQS], long_factor[OP_ROPE_MAX_FREQS], attention;
    int long_table;
};
/* (max_pos, rot/2, 2) floats for rot rotary dimensions per head (the head
 * size, or partial_rotary_factor of it). */
void op_rope_table(float *table, uint32_t max_pos, uint32_t rot, double theta, const struct op_rope_scaling *scaling);
/* The first rot of each head's hd dimensions rotate, in pairs (j, j + rot/2);
 * the others pass unchanged (rot = hd: the whole head). */
void op_rope(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *positions, struct gpu_buffer *table,
             uint32_t rows, uint32_t H, uint32_t hd, uint32_t rot, uint32_t max_pos, int backward);

/* Causal GQA attention; doc (B, T) makes it block-causal by document,
 * each document a run of consecutive positions with one id (as packing
 * writes them: the flash kernels bound their walks by the runs).
 * q, k, v are token rows of q_stride / kv_stride floats starting at
 * q_off / k_off / v_off (0 strides: packed H·hd and KVH·hd), so they may be
 * separate buffers or views into one fused qkv buffer; dq, dk, dv use the
 * same layout. out and dout are packed (B,T,H,hd); probs and dscores are
 * (B,H,T,T). The backward accumulates into dq, dk, dv. */
struct op_attention_shape {
    uint32_t B, T, H, KVH, hd;
    uint32_t q_off, k_off, v_off, q_stride, kv_stride;
    /* Sliding window (the flash ops and the decoder): query t sees keys t'
     * with t − t' < window, as Mistral's and Gemma's masks write it; 0: the
     * whole causal row. A bound on each row's walk (docs/models.md, "Sliding
     * windows"). */
    uint32_t window;
    /* Soft-capping (Gemma 2; the flash ops and the decoder): each score s
     * becomes softcap·tanh(s / softcap) before the mask and softmax, and
     * its gradient is multiplied by 1 − tanh²; 0: none. */
    float softcap;
};
void op_attention(struct gpu *g, const struct op_attention_shape *s, struct gpu_buffer *q, struct gpu_buffer *k,
                  struct gpu_buffer *v, struct gpu_buffer *doc, struct gpu_buffer *probs, struct gpu_buffer *out);
void op_attention_backward(struct gpu *g, const struct op_attention_shape *s, struct gpu_buffer *q,
                           struct gpu_buffer *k, struct gpu_buffer *v, struct gpu_buffer *probs,
                           struct gpu_buffer *dout, struct gpu_buffer *dscores, struct gpu_buffer *dq,
                           struct gpu_buffer *dk, struct gpu_buffer *dv);
/* The same attention without the (T,T) probabilities (flash attention):
 * the forward saves lse (B,H,T), each query row's log-sum-exp of its
 * scores; the backward recomputes the probabilities from q, k and lse,
 * takes the forward's out and doc, uses stats (B,H,T,2) as scratch and
 * accumulates into dq, dk, dv. Memory linear in T; deterministic. */
void op_flash_attention(struct gpu *g, const struct op_attention_shape *s, struct gpu_buffer *q,
                        struct gpu_buffer *k, struct gpu_buffer *v, struct gpu_buffer *doc, struct gpu_buffer *lse,
                        struct gpu_buffer *out);
/* The floats lse must hold for shape s: B·H·T, or twice that in the
 * reproducible mode where the device's loop limit cuts its walk over
 * the keys into dispatches (the row sums wait in the second half). */
size_t op_flash_attention_lse_floats(const struct gpu *g, const struct op_attention_shape *s);
void op_flash_attention_backward(struct gpu *g, const struct op_attention_shape *s, struct gpu_buffer *q,
                                 struct gpu_buffer *k, struct gpu_buffer *v, struct gpu_buffer *doc,
                                 struct gpu_buffer *out, struct gpu_buffer *lse, struct gpu_buffer *dout,
                                 struct gpu_buffer *stats, struct gpu_buffer *dq, struct gpu_buffer *dk,
                                 struct gpu_buffer *dv);

/* h = silu(gate)·up; backward dgate +=, dup += . */
void op_swiglu(struct gpu *g, struct gpu_buffer *gate, struct gpu_buffer *up, struct gpu_buffer *h, size_t n);
void op_swiglu_backward(struct gpu *g, struct gpu_buffer *gate, struct gpu_buffer *up, struct gpu_buffer *dh,
                        struct gpu_buffer *dgate, struct gpu_buffer *dup, size_t n);
/* y = gelu_tanh(x); backward dx += . */
/* h = gelu_tanh(gate)·up (Gemma's MLP); the backward adds into dgate, dup. */
void op_geglu(struct gpu *g, struct gpu_buffer *gate, struct gpu_buffer *up, struct gpu_buffer *h, size_t n);
void op_geglu_backward(struct gpu *g, struct gpu_buffer *gate, struct gpu_buffer *up, struct gpu_buffer *dh,
                       struct gpu_buffer *dgate, struct gpu_buffer *dup, size_t n);
void op_gelu(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *y, size_t n);
void op_gelu_backward(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *dy, struct gpu_buffer *dx, size_t n);

/* y[r] += bias; the gradient db += Σ_r dy[r] (deterministic). */
void op_bias_add(struct gpu *g, struct gpu_buffer *bias, struct gpu_buffer *y, uint32_t rows, uint32_t C);
void op_bias_backward(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *db, uint32_t rows, uint32_t C);

/* Dropout on LoRA's input, inverted as torch.nn.Dropout in training:
 * over x (rows, cols), y = x·keep/(1 − p), or y += that (accumulate: the
 * backward, where x is the gradient). Row r is position r % T of sample
 * sample0 + r / T; keep is a counter-based hash of (key, sample, position,
 * feature) against p, so the mask is recomputed, never stored, and is the
 * same whatever split of the rows. key = op_dropout_key(seed, step,
 * stream), stream naming the layer and the adapted linear layer. */
struct op_dropout {
    uint32_t key, sample0, T;
    float p;
};
uint32_t op_dropout_key(uint64_t seed, int64_t step, uint32_t stream);
/* Whether the element (sample, position, feature) is kept: the same
 * arithmetic as shaders/common/lora_dropout.comp. */
int op_dropout_keep(const struct op_dropout *d, uint32_t sample, uint32_t position, uint32_t feature);
void op_dropout(struct gpu *g, const struct op_dropout *d, struct gpu_buffer *x, struct gpu_buffer *y, uint32_t rows,
                uint32_t cols, int accumulate);

#endif
