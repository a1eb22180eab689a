/*
 * ref_ops.h — the plain C reference of every transformer op: the oracle that
 * the shaders are tested against.
 *
 * Everything is double precision, llm.c style: each op is a forward/backward
 * pair with plain loops, and the shape of every pointer is in a comment.
 *
 * Conventions shared with the shaders:
 *   - activations are row-major (N, C) with N = B*T tokens, token n = b*T + t;
 *   - a Linear weight is (OC, C) like torch.nn.Linear: out = inp·Wᵀ + bias;
 *     a GPT-2 Conv1D weight is (C, OC), as Hugging Face stores it: out = inp·W + bias;
 *   - token ids, positions, document ids and labels are int32 per token;
 *   - backward functions ACCUMULATE (+=) into every gradient they are given,
 *     so callers zero gradients once and can sum contributions; the one
 *     exception is the fused cross-entropy, which WRITES dlogits (see there).
 *   - a NULL gradient pointer means "not wanted" where a comment says so.
 *
 * This library never allocates inside an op and never reads out of bounds for
 * any label value; other index inputs (tokens, positions) must be in range,
 * as the data layer guarantees.
 */
#ifndef VKTRAIN_REF_OPS_H
#define VKTRAIN_REF_OPS_H

#include <stddef.h>
#include <stdint.h>

#define REF_IGNORE_INDEX (-100)

/* ---- linear layers ------------------------------------------------------ */

/* out = inp·Wᵀ + bias (Linear).
 * out is (N,OC), inp is (N,C), weight is (OC,C), bias is (OC) or NULL. */
void ref_matmul_forward(double *out, const double *inp, const double *weight, const double *bias, int N, int C, int OC);
/* dinp += dout·W, dweight += doutᵀ·inp, dbias += Σ_n dout[n].
 * dinp (N,C), dweight (OC,C), dbias (OC): each may be NULL. dout is (N,OC).
 * weight is read only for dinp and inp only for dweight (else may be NULL). */
void ref_matmul_backward(double *dinp, double *dweight, double *dbias, const double *dout, const double *inp,
                         const double *weight, int N, int C, int OC);

/* out = inp·W + bias (GPT-2 Conv1D, weight stored [in, out]).
 * out is (N,OC), inp is (N,C), weight is (C,OC), bias is (OC) or NULL. */
void ref_conv1d_forward(double *out, const double *inp, const double *weight, const double *bias, int N, int C, int OC);
/* dinp += dout·Wᵀ, dweight += inpᵀ·dout, dbias += Σ_n dout[n].
 * dinp (N,C), dweight (C,OC), dbias (OC): each may be NULL; weight is read
 * only for dinp and inp only for dweight. */
void ref_conv1d_backward(double *dinp, double *dweight, double *dbias, const double *dout, const double *inp,
                         const double *weight, int N, int C, int OC);

/* out[n,c] += bias[c]. out is (N,C), bias is (C). */
void ref_bias_add_forward(double *out, const double *bias, int N, int C);
/* dbias[c] += Σ_n dout[n,c]. */
void ref_bias_add_backward(double *dbias, const double *dout, int N, int C);

/* out = a + b, all of n elements (out may alias a or b). */
void ref_residual_forward(double *out, const double *a, const double *b, size_t n);
/* da += dout, db += dout. */
void ref_residual_backward(double *da, double *db, const double *dout, size_t n);

/* ---- embeddings --------------------------------------------------------- */

/* out[n] = wte[tokens[n]] (+ wpe[positions[n]] when wpe is not NULL).
 * out is (N,C), tokens and positions are (N), wte is (V,C), wpe is (P,C).
 * Every token must be in [0,V) and every position in [0,P). */
void ref_embedding_forward(double *out, const int32_t *tokens, const int32_t *positions, const double *wte,
                           const double *wpe, int N, int C);
/* Scatter-add: dwte[tokens[n]] += dout[n], dwpe[positions[n]] += dout[n].
 * dwpe (and positions) may be NULL. */
void ref_embedding_backward(double *dwte, double *dwpe, const double *dout, const int32_t *tokens,
                            const int32_t *positions, int N, int C);

/* ---- normalization ------------------------------------------------------ */

/* out = inp / sqrt(mean(inp²) + eps) · weight, per row.
 * out, inp are (N,C), weight is (C), rstd is (N) (saved 1/sqrt(mean(x²)+eps),
 * may be NULL). out must not alias inp. */
void ref_rmsnorm_forward(double *out, double *rstd, const double *inp, const double *weight, int N, int C, double eps);
/* dinp += ∂L/∂inp, dweight += ∂L/∂weight (either may be NULL).
 * rstd is the one saved by the forward. */
void ref_rmsnorm_backward(double *dinp, double *dweight, const double *dout, const double *inp, const double *weight,
                          const double *rstd, int N, int C);

/* out = (inp − mean) / sqrt(var + eps) · weight + bias, per row, var biased.
 * out, inp are (N,C), weight and bias are (C) (bias may be NULL),
 * mean and rstd are (N) (saved, may be NULL). out must not alias inp. */
void ref_layernorm_forward(double *out, double *mean, double *rstd, const double *inp, const double *weight,
                           const double *bias, int N, int C, double eps);
/* dinp, dweight, dbias accumulate (each may be NULL). */
void ref_layernorm_backward(double *dinp, double *dweight, double *dbias, const double *dout, const double *inp,
                            const double *weight, const double *mean, const double *rstd, int N, int C);

/* ---- rotary position embedding (Hugging Face rotate_half) --------------- */

/* For each token n, head h and j < hd/2, with a = positions[n]·theta^(−2j/hd):
 *   out[j]      = x[j]·cos a − x[j+hd/2]·sin a
 *   out[j+hd/2] = x[j+hd/2]·cos a + x[j]·sin a
 * out, inp are (N,H,hd), hd even, positions is (N). out may alias inp. */
void ref_rope_forward(double *out, const double *inp, const int32_t *positions, int N, int H, int hd, double theta);
/* dinp += Rᵀ·dout (the inverse rotation). */
void ref_rope_backward(double *dinp, const double *dout, const int32_t *positions, int N, int H, int hd, double theta);

/* ---- causal self-attention with grouped-query heads --------------------- */

/* out[b,t,h] = Σ_{t'} P[b,h,t,t'] · v[b,t',h/(H/KVH)], where
 * P[b,h,t,:] = softmax over the allowed keys of q[b,t,h]·k[b,t',kh]/sqrt(hd),
 * allowed: t' ≤ t and (doc == NULL or doc[b,t'] == doc[b,t]).
 * out, q are (B,T,H,hd); k, v are (B,T,KVH,hd); KVH divides H;
 * doc is (B,T) or NULL (one document per sequence);
 * probs is (B,H,T,T), saved for the backward, exactly 0 where not allowed. */
void ref_attention_forward(double *out, double *probs, const double *q, const double *k, const double *v,
                           const int32_t *doc, int B, int T, int H, int KVH, int hd);
/* The same in a sliding window: allowed also needs t − t' < window
 * (window > 0; 0: the whole causal row). */
void ref_attention_forward_window(double *out, double *probs, const double *q, const double *k, const double *v,
                                  const int32_t *doc, int B, int T, int H, int KVH, int hd, int window);
/* ... and with Gemma 2's soft-capping: each score s becomes
 * softcap·tanh(s/softcap) before the mask (softcap > 0; 0: none). */
void ref_attention_forward_capped(double *out, double *probs, const double *q, const double *k, const double *v,
                                  const int32_t *doc, int B, int T, int H, int KVH, int hd, int window,
                                  double softcap);
/* dq (B,T,H,hd), dk and dv (B,T,KVH,hd) accumulate. */
void ref_attention_backward(double *dq, double *dk, double *dv, const double *dout, const double *probs,
                            const double *q, const double *k, const double *v, int B, int T, int H, int KVH, int hd);
/* The same after a soft-capped forward: each dS times 1 − tanh²(s/softcap). */
void ref_attention_backward_capped(double *dq, double *dk, double *dv, const double *dout, const double *probs,
                                   const double *q, const double *k, const double *v, int B, int T, int H, int KVH,
                                   int hd, double softcap);

/* ---- activations -------------------------------------------------------- */

/* h = silu(gate) ⊙ up, silu(g) = g·σ(g). h, gate, up are (n). */
void ref_swiglu_forward(double *h, const double *gate, const double *up, size_t n);
/* dgate += dh·up·σ(g)·(1 + g·(1 − σ(g))), dup += dh·silu(g). */
void ref_swiglu_backward(double *dgate, double *dup, const double *dh, const double *gate, const double *up, size_t n);

/* out = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). out, inp are (n). */
void ref_gelu_forward(double *out, const double *inp, size_t n);
/* dinp += dout·gelu'(x). */
void ref_gelu_backward(double *dinp, const double *dout, const double *inp, size_t n);

/* ---- masked softmax cross-entropy, fused with its backward -------------- */

/* logits are (N,V), labels (N). A row is valid when 0 ≤ labels[n] < V;
 * label −100 (REF_IGNORE_INDEX) is ignored. Any other label (≥ V, or < 0 and
 * ≠ −100) is out of range: treated exactly like an ignored row (as the
 * shaders do) and counted in the return value; it is never used as an index.
 * For valid rows: *loss_sum += logsumexp(logits[n]) − logits[n][label],
 * *count += 1, and dlogits[n] = (softmax(logits[n]) − onehot(label))·scale.
 * For other rows: dlogits[n] = 0 exactly, and logits[n] is not read.
 * dlogits (N,V) is WRITTEN, not accumulated; it may be NULL (loss only).
 * Returns the number of out-of-range labels (0 for well-formed input). */
int ref_crossentropy_forward_backward(double *dlogits, double *loss_sum, int *count, const double *logits,
                                      const int32_t *labels, int N, int V, double scale);

/* ---- deterministic random numbers for tests ----------------------------- */

struct ref_rng {
    uint64_t state;
};
void ref_rng_seed(struct ref_rng *rng, uint64_t seed);
uint64_t ref_rng_u64(struct ref_rng *rng);
double ref_rng_uniform(struct ref_rng *rng); /* in [0, 1) */
double ref_rng_normal(struct ref_rng *rng);  /* N(0, 1) */

#endif
