/* repro: the reproducible mode (precision: reproducible), in which every
 * device, kernel family and split of the batch is meant to give the same
 * bits. This header is its host side so far:
 *
 * - the deterministic math, the C build of shaders/reproducible/repro_math.glsl (the
 *   same source every reproducible shader includes): correctly rounded
 *   division and square root, and exp, log, tanh, sigmoid and GELU (tanh)
 *   made of single-precision + − × and integer operations only;
 * - the start-up probe, a known-answer shader that checks the device does
 *   the arithmetic the profile relies on;
 * - the matrix product and the sum of a vector in fixed orders, and the
 *   AdamW step, on the device.
 * The C references of these kernels, the tests' oracles, are in
 * tests/ref/repro_ref.h. */
#ifndef VKTRAIN_REPRO_H
#define VKTRAIN_REPRO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "vktrain/ops.h"
#include "vktrain/ops_optim.h"

/* A float's bits and back (no conversion). */
static inline float repro_float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint32_t repro_bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float repro_div(float a, float b);
float repro_sqrt(float x);
float repro_sqrt_fast(float x);  /* within 1 ULP, from floats alone (repro_math.glsl) */
float repro_recip_fast(float d); /* 1/d within 2 ULP, from floats alone */
float repro_exp(float x);
float repro_log(float x);
float repro_tanh(float x);
float repro_sigmoid(float x);
float repro_gelu(float x);
float repro_gelu_sigmoid(float x); /* GELU's σ(2u) (repro_math.glsl) */
float repro_sin(float x); /* |x| <= 65536, NaN beyond */
float repro_cos(float x);

/* The host's inputs to the device (src/repro/repro_host.c), from IEEE
 * + − × / and sqrt and the functions above only, never libm, built without
 * FMA contraction: the same bits on every host.
 *
 * b^t (t >= 0) by repeated squaring: the same multiplications in the same
 * order everywhere. */
double repro_powi(double b, int64_t t);
/* RoPE frequency j after the rope_scaling
 * (ops.h), in float as transformers computes it (op_rope_table uses it
 * too), and the factor of the table's cos and sin (longrope's attention
 * factor, else 1). */
float repro_rope_scaled(float inv_freq, uint32_t j, const struct op_rope_scaling *s);
float repro_rope_attention(const struct op_rope_scaling *s);
/* op_rope_table's table without libm: theta^(2j/hd) by a Newton root in
 * double, each angle p·inv_freq reduced to [−π, π] in double, its cos and
 * sin by repro_cos and repro_sin; within 1e-6 of op_rope_table's (libm,
 * double). The model builds it when gpu_reproducible. */
void repro_rope_table(float *table, uint32_t max_pos, uint32_t hd, double theta,
                      const struct op_rope_scaling *scaling);
/* A standard normal deviate (Box–Muller: repro_log, repro_sqrt, repro_cos)
 * from two random 64-bit words, whose top 24 bits give u1 in (0, 1] and u2
 * in [0, 1): the reproducible initialization's. */
float repro_normal(uint64_t r1, uint64_t r2);

/* The start-up probe. A case is one operation (the op numbers of
 * shaders/reproducible/repro_probe.comp) on the float bits a, b, c and its IEEE 754
 * answer; `what` names the property it checks. */
struct repro_probe_case {
    const char *what;
    uint32_t op, a, b, c, expect;
};
extern const struct repro_probe_case repro_probe_cases[];
extern const size_t repro_probe_case_count;

struct gpu;
/* Runs the cases on g's device: returns how many gave other bits than
 * their answer (NaNs compared as a class) and names the first few in why;
 * *digest is a 64-bit hash of the device's results (NaNs as one), which
 * ranks exchange: every device that passes gives
 * repro_probe_expected_digest(). */
int repro_probe_run(struct gpu *g, const struct repro_probe_case *cases, size_t n, uint64_t *digest, char *why,
                    size_t why_size);
/* repro_probe_run with the built-in cases. */
int repro_probe(struct gpu *g, uint64_t *digest, char *why, size_t why_size);
uint64_t repro_probe_expected_digest(void);
/* The case computed by the host's own C arithmetic (float bits). */
uint32_t repro_probe_host(const struct repro_probe_case *c);

/* The reproducible matrix product, in the three layouts of ops.h:
 *   REPRO_NT: Y[M,N]  (+)= X[M,K] · W[N,K]ᵀ   (a = X, b = W, c = Y)
 *   REPRO_NN: dX[M,K] (+)= dY[M,N] · W[N,K]   (a = dY, b = W, c = dX)
 *   REPRO_TN: dW[N,K] (+)= dY[M,N]ᵀ · X[M,K]  (a = dY, b = X, c = dW)
 * Each output is one accumulator, +0 (or its old value with accumulate)
 * plus each product in the order of the reduction index, every operation
 * rounded on its own: the same bits from either kernel family (texel or
 * tiled, as gpu_kernel_class says) and from the C reference. Each operand
 * must fit one binding; M, N, K >= 1. repro_matmul records the dispatches. */
enum repro_layout { REPRO_NT, REPRO_NN, REPRO_TN };
struct gpu_buffer;
void repro_matmul(struct gpu *g, enum repro_layout layout, struct gpu_buffer *a, struct gpu_buffer *b,
                  struct gpu_buffer *c, uint32_t M, uint32_t N, uint32_t K, int accumulate);
/* The same on operands that start off[] = {a, b, c} floats into their
 * buffers (op_matmul_*_at); NULL: 0. Fatal for a bf16 operand. */
void repro_matmul_at(struct gpu *g, enum repro_layout layout, struct gpu_buffer *a, struct gpu_buffer *b,
                     struct gpu_buffer *c, uint32_t M, uint32_t N, uint32_t K, int accumulate, const size_t off[3]);
/* REPRO_NT, then C[i, j] = C[i, j] + bias[j], added as each output is
 * stored where the product is one dispatch of the vec4 texel kernel
 * (returns 1); elsewhere it records nothing and returns 0 (the caller
 * runs repro_matmul and the bias pass: the same bits). */
int repro_matmul_nt_bias(struct gpu *g, struct gpu_buffer *a, struct gpu_buffer *b, struct gpu_buffer *bias,
                         struct gpu_buffer *c, uint32_t M, uint32_t N, uint32_t K, int accumulate);
/* tn (layout REPRO_TN's M, N, K, off) into a parameter gradient: its rows
 * per sample with repro_param_rows, row 0 being row off[1] / K of the
 * micro-batch (the LM head's chunks of the forward pass). */
void repro_matmul_grad(struct gpu *g, struct gpu_buffer *a, struct gpu_buffer *b, struct gpu_buffer *c, uint32_t M,
                       uint32_t N, uint32_t K, int accumulate, const size_t off[3]);

/* The reproducible sum of n >= 1 floats: the pairwise tree over x padded
 * with +0 to a power of two (adjacent pairs first), plus +0 (a −0 total
 * becomes +0). repro_sum records the passes that write it to
 * out[out_index]; wg (a power of two) and 2^log_run (elements per
 * invocation, log_run <= 10) shape the work, never the bits: 0 picks
 * 256 and 4. scratch holds repro_sum_scratch(...) floats (none may be
 * needed: NULL then). */
size_t repro_sum_scratch(const struct gpu *g, size_t n, uint32_t wg, uint32_t log_run);
void repro_sum(struct gpu *g, struct gpu_buffer *x, size_t n, struct gpu_buffer *scratch, struct gpu_buffer *out,
               size_t out_index, uint32_t wg, uint32_t log_run);
/* y[r] = the reproducible sum of row r of x (rows x n, row-major), one
 * workgroup of wg invocations (a power of two; 0: 256) per row, each
 * summing 2^log_run elements (0: the fewest that cover n; at most 2^10).
 * Records one dispatch. */
void repro_rowsum(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *y, uint32_t rows, uint32_t n, uint32_t wg,
                  uint32_t log_run);
/* The same sum over the squares x[i]·x[i] (each rounded on its own). */
void repro_sumsq(struct gpu *g, struct gpu_buffer *x, size_t n, struct gpu_buffer *scratch, struct gpu_buffer *out,
                 size_t out_index, uint32_t wg, uint32_t log_run);

/* Sums over the samples of a micro-batch inside parameter gradients
 * (src/repro/repro_samples.c; gpu_set_repro_samples). repro_push: sample
 * j's value, in grad, joins the tree: g = stack[l] + g for each set low
 * bit l of j, then onto the first free level with grad back to +0, or,
 * after the last sample, left in grad. The stack holds groups of four
 * elements: element o's level l at [((o / 4)·levels + l)·4 + o % 4], so
 * a kernel that owns four adjacent outputs loads and stores each level of
 * them as one vec4; repro_stack_floats(n, levels) is its size in floats
 * for n elements (n rounded up to a group). repro_param_rows records fn(rows [r0, r1))
 * over rows [0, rows) of a reduction into grad whose row 0 is row `first`
 * of the micro-batch: in one call, or, with samples set and a stack on
 * grad, cut at the samples' boundaries with a push after each sample. fn
 * must add its rows to grad's old value in row order. */
typedef void (*repro_rows_fn)(struct gpu *g, void *ctx, uint32_t r0, uint32_t r1);
size_t repro_stack_floats(size_t n, uint32_t levels);
/* Whether the kernels read and write the stack (and repro_push the
 * gradient) as RGBA32F storage texels, a texel per group: on CPU devices
 * (the texel family) that have the format feature. */
int repro_stack_texels(const struct gpu *g);
void repro_push(struct gpu *g, struct gpu_buffer *grad, struct gpu_buffer *stack, size_t n, uint32_t levels,
                uint32_t j);
void repro_param_rows(struct gpu *g, struct gpu_buffer *grad, uint32_t first, uint32_t rows, repro_rows_fn fn,
                      void *ctx);
/* grad's stack when a reduction over rows [first, first + rows) of the
 * micro-batch into grad sums per sample, with the samples' rows and the
 * stack's levels; NULL when it does not (no samples set, one sample, no
 * stack). Fatal for rows past the micro-batch. */
struct gpu_buffer *repro_sample_stack(const struct gpu *g, struct gpu_buffer *grad, uint32_t first, uint32_t rows,
                                      uint32_t *sample_rows, uint32_t *levels);

/* The reproducible AdamW step: op_adamw's formula and operation order
 * (include/vktrain/ops_optim.h) with repro_sqrt and repro_div, except that
 * √v is multiplied by 1 / √(1 − β2^t) (a host scalar) where torch divides
 * by √(1 − β2^t): one division per element fewer, the same value to a
 * rounding. Its scalars are computed without libm but sqrt (correctly
 * rounded by IEEE 754) and with β^t by repeated squaring, so every host
 * and device gives the same bits. op_repro_adamw records it. */
struct repro_adamw_push {
    uint32_t n;
    float grad_scale, decay, beta1, one_minus_beta1, beta2, one_minus_beta2, inv_bc2_sqrt, neg_step_size, eps;
};
void repro_adamw_scalars(const struct op_adamw_step *s, uint32_t n, struct repro_adamw_push *p);
void op_repro_adamw(struct gpu *g, struct gpu_buffer *param, struct gpu_buffer *grad, struct gpu_buffer *m,
                    struct gpu_buffer *v, size_t n, const struct op_adamw_step *s);

/* The reproducible cross-entropy, op_cross_entropy_at's contract
 * (include/vktrain/ops.h; op_cross_entropy_at records it when
 * gpu_reproducible): per row with a label in [0, V), m = the row's max
 * (compare and select), l = repro_sum's tree over repro_exp(x − m),
 * lse = m + repro_log(l), loss = lse − x[label] and, in place,
 * dx = (repro_exp(x − lse) − onehot)·scale; other labels give dx = +0 and
 * loss = count = 0. Rows are independent, so any cut into row blocks gives
 * the same bits. */
void repro_cross_entropy(struct gpu *g, struct gpu_buffer *logits, struct gpu_buffer *labels,
                         struct gpu_buffer *row_loss, struct gpu_buffer *row_count, uint32_t row0, uint32_t rows,
                         uint32_t V, float scale);

/* The reproducible attention, op_flash_attention(_backward)'s contract
 * (include/vktrain/ops.h; those ops record it when gpu_reproducible),
 * exact per query row in passes, no online rescaling. With the allowed keys
 * j of query row t (causal, same document) and s_j = (q·k_j, d in order
 * from +0)·scale: m = max s_j (compare and select), l = repro_sum's tree over
 * the T keys of e_j = repro_exp(s_j − m) (+0 where not allowed), lse = m +
 * repro_log(l), out = repro_div(Σ_j e_j·v_j, l) per element (the sum over
 * the allowed j in order, from +0). Backward, with P_j = repro_exp(s_j −
 * lse): D = Σ_d do·out (d order), dS_j = P_j·(do·v_j − D),
 * dq += (dS_j·scale)·k_j over j in order; dk += (dS·scale)·q and
 * dv += P·do over the group's query heads in order, within each over the
 * query rows t >= j in order; each gradient is one accumulator from its old
 * value. The bits do not depend on the kernel family or on how the walk is
 * cut into dispatches (where it is cut, lse holds 2·B·H·T floats:
 * op_flash_attention_lse_floats). stats is scratch as for the default op. */
void repro_flash_attention(struct gpu *g, const struct op_attention_shape *s, struct gpu_buffer *q,
                           struct gpu_buffer *k, struct gpu_buffer *v, struct gpu_buffer *doc, struct gpu_buffer *lse,
                           struct gpu_buffer *out);
void repro_flash_attention_backward(struct gpu *g, const struct op_attention_shape *s, struct gpu_buffer *q,
                                    struct gpu_buffer *k, struct gpu_buffer *v, struct gpu_buffer *doc,
                                    struct gpu_buffer *out, struct gpu_buffer *lse, struct gpu_buffer *dout,
                                    struct gpu_buffer *stats, struct gpu_buffer *dq, struct gpu_buffer *dk,
                                    struct gpu_buffer *dv);

#endif
