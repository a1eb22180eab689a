/* ops_optim: the optimizer's device pieces. op_adamw records one AdamW step
 * of one parameter tensor; grad_norm_record records the squared L2 norm of
 * each gradient tensor into slots that the host sums (grad_norm_total) to
 * get the global gradient norm and the clipping factor (grad_clip_factor).
 *
 * Like every op these never allocate and never submit: the caller owns the
 * moment buffers, the scratch and the slots, and calls gpu_submit(). Which
 * tensors get weight decay, the step count and the learning rate are the
 * caller's (src/train) decisions. */
#ifndef VKTRAIN_OPS_OPTIM_H
#define VKTRAIN_OPS_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "vktrain/gpu.h"

/* The hyperparameters of one AdamW step (host doubles; op_adamw turns them
 * into float push constants the way torch turns its Python floats). */
struct op_adamw_step {
    double lr;           /* this step's learning rate (after the schedule) */
    double beta1, beta2; /* e.g. 0.9, 0.95 */
    double eps;          /* added outside the sqrt, e.g. 1e-8 */
    double weight_decay; /* decoupled; 0 for tensors without decay */
    int64_t t;           /* 1 on the first step: torch's state['step'] after
                          * its increment; bias corrections use β^t */
    double grad_scale;   /* g = grad·grad_scale: the clip factor, 1 for none */
};

/* One torch.optim.AdamW step (amsgrad=False, maximize=False) over n floats,
 * in place on param, m (exp_avg) and v (exp_avg_sq); grad is only read.
 * m and v start at zero (gpu_zero) before the first step. With
 *   g = grad·grad_scale, bc1 = 1 − β1^t, bc2 = 1 − β2^t:
 *   θ = θ·(1 − lr·wd)
 *   m = m·β1 + (1 − β1)·g
 *   v = v·β2 + (1 − β2)·g·g
 *   θ = θ − (lr/bc1)·m / (sqrt(v)/sqrt(bc2) + eps)
 * in torch's operation order, each step rounded to float (no fma); the
 * scalars lr/bc1, sqrt(bc2), 1 − lr·wd, 1 − β are computed in double and
 * rounded once. Fatal if a buffer is smaller than n floats, t < 1 or
 * n ≥ 2^32. */
void op_adamw(struct gpu *g, struct gpu_buffer *param, struct gpu_buffer *grad, struct gpu_buffer *m,
              struct gpu_buffer *v, size_t n, const struct op_adamw_step *s);

/* ---- global gradient norm and clipping -------------------------------- */

/* One gradient tensor: n floats at the start of buffer grad. */
struct grad_tensor {
    struct gpu_buffer *grad;
    size_t n;
};

/* Floats of scratch that grad_norm_record needs for these tensors (the
 * largest op_reduce_scratch among them). */
size_t grad_norm_scratch(const struct gpu *g, const struct grad_tensor *t, int count);

/* Records slots[first_slot + i] = Σ grad_i² (op_sumsq, deterministic) for
 * i = 0..count-1. slots must hold first_slot + count floats. The scratch is
 * shared; the gpu orders the reuse. */
void grad_norm_record(struct gpu *g, const struct grad_tensor *t, int count, struct gpu_buffer *scratch,
                      struct gpu_buffer *slots, uint32_t first_slot);

/* sqrt(Σ slots[i]) in double, from the downloaded slots: the global L2 norm
 * before clipping (the `grad_norm` that is logged). */
double grad_norm_total(const float *slots, int count);

/* The factor that clipping multiplies every gradient by, like
 * torch.nn.utils.clip_grad_norm_: min(1, max_norm/(norm + 1e-6)).
 * max_norm <= 0 means no clipping: 1. A NaN norm gives NaN and an infinite
 * one 0, as torch's would: a non-finite norm is the caller's to act on.
 * Pass the factor to op_adamw as grad_scale. */
double grad_clip_factor(double norm, double max_norm);

#endif
