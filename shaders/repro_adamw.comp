#version 450
// variant: -
// variant: runs -DRUNS=1
// repro_adamw: one AdamW step over n floats in the reproducible profile:
// the torch-order arithmetic of adamw.comp (its `torch` variant), with the
// square root and the two divisions taken from repro_math.glsl, so every
// device gives the bits of the C reference (src/repro/repro_adamw.c):
//   g     = grad·grad_scale
//   θ     = θ·decay                              (decay = 1 − lr·wd)
//   m     = m·β1 + (1 − β1)·g
//   v     = v·β2 + ((1 − β2)·g)·g
//   denom = repro_div(repro_sqrt(v), sqrt(1 − β2^t)) + eps
//   θ     = θ + repro_div(neg_step_size·m, denom)
// The scalars come from the host (repro_adamw_scalars). Bindings: θ,
// grad, m, v read, then θ, m, v written (each state buffer bound twice);
// the runs variant (CPU devices) reads through R32F texel views, which
// llvmpipe loads faster than storage.
#define CUSTOM_PUSH
layout(push_constant) uniform Push {
    uint n;
    float grad_scale, decay, beta1, one_minus_beta1, beta2, one_minus_beta2, bc2_sqrt, neg_step_size, eps;
} p;
#include "elementwise.glsl"
#include "repro_math.glsl"
#if RUNS
layout(binding = 0) uniform samplerBuffer theta;
layout(binding = 1) uniform samplerBuffer grad;
layout(binding = 2) uniform samplerBuffer m1;
layout(binding = 3) uniform samplerBuffer v2;
#define LD(name, i) texelFetch(name, int(i)).x
#else
layout(std430, binding = 0) readonly buffer BP { float theta[]; };
layout(std430, binding = 1) readonly buffer BG { float grad[]; };
layout(std430, binding = 2) readonly buffer BM { float m1[]; };
layout(std430, binding = 3) readonly buffer BV { float v2[]; };
#define LD(name, i) name[i]
#endif
layout(std430, binding = 4) writeonly buffer OP { float theta_out[]; };
layout(std430, binding = 5) writeonly buffer OM { float m_out[]; };
layout(std430, binding = 6) writeonly buffer OV { float v_out[]; };

void main()
{
    FOR_EACH_OF_FAMILY(i) {
        precise float g = LD(grad, i) * p.grad_scale;
        precise float th = LD(theta, i) * p.decay;
        precise float m = LD(m1, i) * p.beta1;
        precise float mg = p.one_minus_beta1 * g;
        m = m + mg;
        precise float v = LD(v2, i) * p.beta2;
        precise float vg = p.one_minus_beta2 * g;
        vg = vg * g;
        v = v + vg;
        precise float root = repro_sqrt(v);
        precise float denom = repro_div(root, p.bc2_sqrt);
        denom = denom + p.eps;
        precise float upd = p.neg_step_size * m;
        precise float step = repro_div(upd, denom);
        th = th + step;
        m_out[i] = m;
        v_out[i] = v;
        theta_out[i] = th;
    }
}
