// repro_trig: sin and cos of the reproducible mode's math, for the host
// (the RoPE table, the initialization, the cosine schedule:
// src/repro/repro_host.c, src/train/schedule.c) and for test_repro_math's
// shader; no training kernel takes them. It builds on repro_math.glsl
// (its helpers and rules: every float operation `precise`, no built-in
// math) and, like it, compiles as GLSL and as C (src/repro/repro_math.c).
#ifndef REPRO_TRIG_GLSL
#define REPRO_TRIG_GLSL
#include "repro_math.glsl"

// The polynomials of sin and cos on |x| <= π/4 (Cephes' sinf, cosf); below
// 2^-12 sin x rounds to x and cos x to 1 (and z·z would be subnormal).
REPRO_INTERNAL float repro_sin_poly(float x)
{
    if ((floatBitsToUint(x) & REPRO_ABS) < 0x39800000u)
        return x;
    precise float z = x * x;
    precise float p = -1.9515295891e-4f * z;
    p = p + 8.3321608736e-3f;
    p = p * z;
    p = p - 1.6666654611e-1f;
    p = p * z;
    p = p * x;
    p = p + x;
    return p;
}

REPRO_INTERNAL float repro_cos_poly(float x)
{
    if ((floatBitsToUint(x) & REPRO_ABS) < 0x39800000u)
        return 1.0f;
    precise float z = x * x;
    precise float p = 2.443315711809948e-5f * z;
    p = p - 1.388731625493765e-3f;
    p = p * z;
    p = p + 4.166664568298827e-2f;
    p = p * z;
    p = p * z;
    precise float hz = z * 0.5f;
    p = p - hz;
    p = p + 1.0f;
    return p;
}

// sin x (want_cos false) or cos x: |x| less j·π/4 (j the octant, made
// even) in three parts, Cody–Waite, then the polynomial of the octant.
// Within 4 ULP or 2^-23 absolute (near the zeros) for |x| <= 8192, 2^-19
// absolute up to 65536 (j·π/4 is no longer subtracted exactly there); NaN
// beyond, and for ±Inf and NaN.
REPRO_INTERNAL float repro_sincos(float x, bool want_cos)
{
    uint u = floatBitsToUint(x);
    precise float ax = uintBitsToFloat(u & REPRO_ABS);
    if (repro_is_nan(u) || ax > 65536.0f)
        return uintBitsToFloat(REPRO_NAN);
    if ((u & REPRO_ABS) < 0x39800000u) // |x| < 2^-12
        return want_cos ? 1.0f : x;
    bool negative = !want_cos && (u & REPRO_SIGN) != 0u;
    precise float t = ax * 1.27323954473516f; // 4/π
    int j = REPRO_I(t);
    if ((j & 1) != 0)
        j += 1;
    precise float y = REPRO_F(j);
    j = j & 7;
    if (j > 3) {
        negative = !negative;
        j -= 4;
    }
    if (want_cos && j > 1)
        negative = !negative;
    precise float y1 = y * 0.78515625f;
    precise float r = ax - y1;
    precise float y2 = y * 2.4187564849853515625e-4f;
    r = r - y2;
    precise float y3 = y * 3.77489497744594108e-8f;
    r = r - y3;
    bool use_cos = (j == 1 || j == 2) != want_cos;
    precise float v = use_cos ? repro_cos_poly(r) : repro_sin_poly(r);
    return negative ? -v : v;
}

float repro_sin(float x)
{
    return repro_sincos(x, false);
}

float repro_cos(float x)
{
    return repro_sincos(x, true);
}

#endif
