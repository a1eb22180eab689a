// repro_ops: the per-element formulas of the reproducible kernels of the
// model's ops (shaders/repro_norm.comp, repro_activation.comp), one source
// compiled as GLSL and as C (tests/ref/ref_repro_ops.c, the C reference), like
// repro_math.glsl, whose rules it follows: every float operation `precise`
// and assigned before it is returned or passed on, f-suffixed literals.
// Each formula keeps the default kernel's operation order where that has
// one (shaders/rmsnorm*.comp, layernorm*.comp, activation.comp); division,
// square root and the sigmoid come from repro_math.glsl.
#ifndef REPRO_OPS_GLSL
#define REPRO_OPS_GLSL

#ifndef REPRO_C
#include "repro_math.glsl"
#endif

// A norm's rstd = 1/sqrt(sum/C + eps), sum being the row's tree sum of x²
// (RMSNorm) or of (x − mean)² (LayerNorm).
REPRO_INTERNAL float repro_norm_rstd(float sum, float C, float eps)
{
    precise float m = repro_div(sum, C);
    m = m + eps;
    precise float r = repro_sqrt(m);
    precise float s = repro_div(1.0f, r);
    return s;
}

// RMSNorm: y = (x·s)·w.
REPRO_INTERNAL float repro_rms_y(float x, float s, float w)
{
    precise float y = x * s;
    y = y * w;
    return y;
}

// RMSNorm backward, with d = the row's tree sum of (w·dy)·x:
//   dx + ((s·w)·dy − k·x),  k = ((s·s)·s)·d / C.
REPRO_INTERNAL float repro_rms_k(float s, float d, float C)
{
    precise float s3 = s * s;
    s3 = s3 * s;
    precise float t = s3 * d;
    precise float k = repro_div(t, C);
    return k;
}
REPRO_INTERNAL float repro_rms_dx(float dx, float s, float w, float dy, float k, float x)
{
    precise float a = s * w;
    a = a * dy;
    precise float b = k * x;
    precise float t = a - b;
    precise float r = dx + t;
    return r;
}

// LayerNorm: y = ((x − m)·rs)·w + b.
REPRO_INTERNAL float repro_ln_y(float x, float m, float rs, float w, float b)
{
    precise float y = x - m;
    y = y * rs;
    y = y * w;
    y = y + b;
    return y;
}

// LayerNorm backward, with g = w·dy, a = (tree sum of g)/C and
// b = (tree sum of (g·(x − m))·rs)/C: dx + rs·((g − a) − xhat·b),
// xhat = (x − m)·rs.
REPRO_INTERNAL float repro_ln_dx(float dx, float g, float x, float m, float rs, float a, float b)
{
    precise float xhat = x - m;
    xhat = xhat * rs;
    precise float t = g - a;
    precise float u = xhat * b;
    t = t - u;
    t = rs * t;
    precise float r = dx + t;
    return r;
}

// SwiGLU: h = (g·σ(g))·u.
REPRO_INTERNAL float repro_swiglu_h(float g, float u)
{
    precise float s = repro_sigmoid(g);
    precise float h = g * s;
    h = h * u;
    return h;
}
// Its backward, s = σ(g): dgate + ((dh·u)·s)·(1 + g·(1 − s)) ...
// (the _s forms take s, for a kernel that computes it once for both)
REPRO_INTERNAL float repro_swiglu_dgate_s(float dgate, float g, float s, float u, float dh)
{
    precise float t = dh * u;
    t = t * s;
    precise float q = 1.0f - s;
    q = g * q;
    q = 1.0f + q;
    t = t * q;
    precise float r = dgate + t;
    return r;
}
REPRO_INTERNAL float repro_swiglu_dgate(float dgate, float g, float u, float dh)
{
    precise float s = repro_sigmoid(g);
    return repro_swiglu_dgate_s(dgate, g, s, u, dh);
}
// ... and dup + (dh·g)·s.
REPRO_INTERNAL float repro_swiglu_dup_s(float dup, float g, float s, float dh)
{
    precise float t = dh * g;
    t = t * s;
    precise float r = dup + t;
    return r;
}
REPRO_INTERNAL float repro_swiglu_dup(float dup, float g, float dh)
{
    precise float s = repro_sigmoid(g);
    return repro_swiglu_dup_s(dup, g, s, dh);
}

// GELU (tanh form) backward: dx + dy·gelu'(x). With repro_gelu's
// gelu(x) = x·s, s = σ(2v), v = k·(x + 0.044715·x³) held to ±40,
// k = √(2/π):
//   gelu'(x) = s + ((((2x)·s)·(1 − s))·k)·(1 + (x·x)·0.134145),
// 0.134145 = 3·0.044715 (the derivative of the unclamped form, as the
// default kernel's gelu.glsl computes it). Below 2^-30 gelu'(x) rounds to ½.
REPRO_INTERNAL float repro_gelu_grad(float x)
{
    if ((floatBitsToUint(x) & 0x7fffffffu) < 0x30800000u)
        return 0.5f;
    precise float x2 = x * x;
    precise float s = repro_gelu_sigmoid(x);
    precise float t = x + x;
    t = t * s;
    precise float q = 1.0f - s;
    t = t * q;
    t = t * 0.797884561f;
    precise float p = x2 * 0.134145f;
    p = 1.0f + p;
    t = t * p;
    precise float d = s + t;
    return d;
}
REPRO_INTERNAL float repro_gelu_dx(float dx, float x, float dy)
{
    precise float d = repro_gelu_grad(x);
    precise float t = dy * d;
    precise float r = dx + t;
    return r;
}

#endif
