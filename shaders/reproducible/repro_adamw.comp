#version 450
// variant: -
// variant: runs -DRUNS=1
// variant: vec4 -DVEC4=1 -DRUNS=1
// repro_adamw: one AdamW step over n floats in the reproducible mode:
// the torch-order arithmetic of adamw.comp (its `torch` variant), with the
// square root and the reciprocal taken from repro_math.glsl, so every
// device gives the bits of the C reference (src/repro/repro_adamw.c):
//   g     = grad·grad_scale
//   θ     = θ·decay                              (decay = 1 − lr·wd)
//   m     = m·β1 + (1 − β1)·g
//   v     = v·β2 + ((1 − β2)·g)·g
//   denom = repro_sqrt_fast(v)·(1 / sqrt(1 − β2^t)) + eps (torch divides
//           by the root; a multiply by the host's reciprocal spares a
//           division per element, 1.3-1.5x faster on lavapipe)
//   θ     = θ + (neg_step_size·m)·repro_recip_fast(denom)
// The root within 1 ULP and the reciprocal within 2 (floats alone, no
// integer multiply or rounding by hand): bench_ops' AdamW on lavapipe
// 7.8 -> 4.7 ms against the correctly rounded repro_sqrt and repro_div.
// The scalars come from the host (repro_adamw_scalars). Bindings: θ,
// grad, m, v read, then θ, m, v written (each state buffer bound twice);
// the runs variant reads through R32F texel views, which llvmpipe loads
// faster than storage; the vec4 one (CPU devices) in adamw_texel.comp's
// pattern: RGBA32F views, vec4 stores, the last n % 4 elements one by one,
// each component the scalar formula (2.5x faster than runs on lavapipe).
#define CUSTOM_PUSH
layout(push_constant) uniform Push {
    uint n;
    float grad_scale, decay, beta1, one_minus_beta1, beta2, one_minus_beta2, inv_bc2_sqrt, neg_step_size, eps;
} p;
#include "elementwise.glsl"
#include "repro_math.glsl"
#if VEC4
layout(binding = 0) uniform samplerBuffer theta;
layout(binding = 1) uniform samplerBuffer grad;
layout(binding = 2) uniform samplerBuffer m1;
layout(binding = 3) uniform samplerBuffer v2;
layout(std430, binding = 4) writeonly buffer OP { vec4 theta_out[]; };
layout(std430, binding = 5) writeonly buffer OM { vec4 m_out[]; };
layout(std430, binding = 6) writeonly buffer OV { vec4 v_out[]; };
#define FT vec4
#else
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
#define FT float
#endif

// θ, m and v of elements (one, or four as the components of a vec4) from
// θ0, grad, m0 and v0: every vec4 operation is the scalar one on each
// component, rounded on its own.
void step(FT th0, FT gr, FT m0, FT v0, out FT th_o, out FT m_o, out FT v_o)
{
    precise FT g = gr * p.grad_scale;
    precise FT th = th0 * p.decay;
    precise FT m = m0 * p.beta1;
    precise FT mg = p.one_minus_beta1 * g;
    m = m + mg;
    precise FT v = v0 * p.beta2;
    precise FT vg = p.one_minus_beta2 * g;
    vg = vg * g;
    v = v + vg;
    precise FT upd = p.neg_step_size * m;
    precise FT st;
#if VEC4
    for (int k = 0; k < 4; k++) {
#define C(x) x[k]
#else
    {
#define C(x) x
#endif
        precise float root = repro_sqrt_fast(C(v));
        precise float denom = root * p.inv_bc2_sqrt;
        denom = denom + p.eps;
        precise float inv = repro_recip_fast(denom);
        precise float q = C(upd) * inv;
        C(st) = q;
    }
    th = th + st;
    th_o = th;
    m_o = m;
    v_o = v;
}

#if VEC4
// Chunk j, lanes where mask is true (all of them except in the tail).
void chunk(uint j, bvec4 mask)
{
    vec4 th, m, v;
    step(texelFetch(theta, int(j)), texelFetch(grad, int(j)), texelFetch(m1, int(j)), texelFetch(v2, int(j)), th, m,
         v);
    if (all(mask)) {
        m_out[j] = m;
        v_out[j] = v;
        theta_out[j] = th;
    } else {
        for (uint k = 0u; k < 4u; k++)
            if (mask[k]) {
                m_out[j][k] = m[k];
                v_out[j][k] = v[k];
                theta_out[j][k] = th[k];
            }
    }
}

void main()
{
    uint n4 = p.n / 4u;
    FOR_EACH_RUN(j, n4) chunk(j, bvec4(true));
    if (gl_GlobalInvocationID.x == 0u && p.n % 4u != 0u) {
        uint r = p.n % 4u;
        chunk(n4, bvec4(r > 0u, r > 1u, r > 2u, false));
    }
}
#else
void main()
{
    FOR_EACH_OF_FAMILY(i) {
        float th, m, v;
        step(LD(theta, i), LD(grad, i), LD(m1, i), LD(v2, i), th, m, v);
        m_out[i] = m;
        v_out[i] = v;
        theta_out[i] = th;
    }
}
#endif
