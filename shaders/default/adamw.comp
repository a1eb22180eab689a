#version 450
// variant: torch -DFUSED=0
// variant: fused -DFUSED=1
// One AdamW step over n floats of one parameter tensor, with torch.optim.AdamW
// semantics and torch's order of float operations (torch/optim/adamw.py,
// _single_tensor_adamw, non-capturable branch):
//   g     = grad·grad_scale                     (grad_scale: the clip factor)
//   θ     = θ·(1 − lr·wd)                       (decoupled decay, before Adam)
//   m     = m·β1 + (1 − β1)·g
//   v     = v·β2 + ((1 − β2)·g)·g
//   denom = sqrt(v)/sqrt(1 − β2^t) + eps        (eps outside the sqrt)
//   θ     = θ + (−lr/(1 − β1^t))·m / denom
// Every scalar in parentheses comes from the host (computed in double,
// rounded once to float). Each product and sum is rounded on its own
// (precise: never fused into an fma). grad is only read.
// The `fused` variant computes the same step with fmas and a reciprocal, as
// a device with other rounding would: VKTRAIN_ADAMW=fused selects it, so a
// test can give one rank different arithmetic (a mixed-vendor cluster) and
// check that replica drift is found and repaired (src/train/replica.c).
#define CUSTOM_PUSH
layout(push_constant) uniform Push {
    uint n;
    float grad_scale;   // g = grad·grad_scale
    float decay;        // 1 − lr·wd
    float beta1, one_minus_beta1;
    float beta2, one_minus_beta2;
    float bc2_sqrt;     // sqrt(1 − β2^t)
    float neg_step_size;// −lr/(1 − β1^t)
    float eps;
} p;
#include "elementwise.glsl"
layout(std430, binding = 0) buffer BP { float theta[]; };
layout(std430, binding = 1) readonly buffer BG { float grad[]; };
layout(std430, binding = 2) buffer BM { float m1[]; };
layout(std430, binding = 3) buffer BV { float v2[]; };

void main()
{
#if FUSED
    FOR_EACH_ELEMENT(i) {
        float g = grad[i] * p.grad_scale;
        float m = fma(m1[i], p.beta1, p.one_minus_beta1 * g);
        float v = fma(v2[i], p.beta2, p.one_minus_beta2 * g * g);
        float r = 1.0 / (sqrt(v) * (1.0 / p.bc2_sqrt) + p.eps);
        theta[i] = fma(p.neg_step_size * m, r, theta[i] * p.decay);
        m1[i] = m;
        v2[i] = v;
    }
#else
    FOR_EACH_ELEMENT(i) {
        precise float g = grad[i] * p.grad_scale;
        precise float th = theta[i] * p.decay;
        precise float m = m1[i] * p.beta1;
        precise float mg = p.one_minus_beta1 * g;
        m = m + mg;
        precise float v = v2[i] * p.beta2;
        precise float vg = p.one_minus_beta2 * g;
        vg = vg * g;
        v = v + vg;
        precise float denom = sqrt(v) / p.bc2_sqrt;
        denom = denom + p.eps;
        precise float upd = p.neg_step_size * m;
        upd = upd / denom;
        th = th + upd;
        m1[i] = m;
        v2[i] = v;
        theta[i] = th;
    }
#endif
}
