// repro_math: the deterministic math of the reproducible mode
// (precision: reproducible). One source, compiled twice: as GLSL by every
// reproducible shader (which also gets the profile's float controls below),
// and as C by src/repro/repro_math.c through src/repro/repro_glsl_c.h, so
// the host and the C reference compute the same bits as any device.
//
// It uses only `precise` + − ×, negation, compares and selects, and integer
// and bit operations: never /, sqrt, exp, log, tanh, sin, cos, fma,
// min/max or clamp built-ins, whose bits differ between drivers. Division
// and square root are correctly rounded (round to nearest even): a float
// estimate (Newton's steps) is moved to the integer quotient or root by its
// exact integer remainder, so any estimate close enough gives the bits of
// long division and of the digit-by-digit root (repro_sqrt_fast and
// repro_recip_fast, for AdamW, are within 1 and 2 ULP instead, from
// floats alone); exp, log, tanh, and sin and cos (repro_trig.glsl)
// are deterministic polynomials (Cephes' single-precision ones), not correctly
// rounded: what matters is that every device gives the same bits.
//
// Subnormal operands and results of add and multiply are IEEE 754's on
// every device the mode runs on: the start-up probe refuses a device that
// flushes them (the matmuls meet them too). So exp scales by multiplying;
// division and square root still take subnormals apart with integers.
//
// A CPU device (lavapipe) runs every side of every branch, early returns
// included, for all lanes: there, the cost is that of all the paths, and
// one path with selects beats a fast path beside a slow one.
//
// Rules that keep the GLSL and the C the same program:
// - every float operation is assigned to a `precise` temporary before it
//   is returned or passed on (glslang does not carry `precise` into a
//   return value or a call argument);
// - float literals carry the f suffix (C would compute a bare 1.0 in
//   double) and no expression combines two literals (glslang folds those
//   in double);
// - conversions are REPRO_U / REPRO_I / REPRO_F, no vectors, no out parameters, no
//   signed overflow, no shift by 32 or more.
#ifndef REPRO_MATH_GLSL
#define REPRO_MATH_GLSL

#ifndef REPRO_C
#extension GL_EXT_spirv_intrinsics : require
// SignedZeroInfNanPreserve (4461, capability 4466) and RoundingModeRTE
// (4462, capability 4467) for 32-bit floats: Vulkan 1.2 core.
spirv_execution_mode(capabilities = [4466], 4461, 32);
spirv_execution_mode(capabilities = [4467], 4462, 32);
#define REPRO_U(x) uint(x)
#define REPRO_I(x) int(x)
#define REPRO_F(x) float(x)
#define REPRO_INTERNAL
#endif

REPRO_INTERNAL const uint REPRO_SIGN = 0x80000000u;
REPRO_INTERNAL const uint REPRO_ABS = 0x7fffffffu;
REPRO_INTERNAL const uint REPRO_INF = 0x7f800000u;
REPRO_INTERNAL const uint REPRO_NAN = 0x7fc00000u;

REPRO_INTERNAL bool repro_is_nan(uint u) { return (u & REPRO_ABS) > REPRO_INF; }

// The significand of a finite nonzero float as an integer in [2^23, 2^24)
// (subnormals shifted up), and the exponent that goes with it:
// |x| = repro_sig(u) · 2^(repro_exponent(u) − 23).
//
// The highest set bit of a subnormal's f in [1, 2^23) is read from the
// exponent of the float f converts to (exactly): cheaper than findMSB on a
// CPU device, which runs it for every lane (it runs both sides of a branch).
REPRO_INTERNAL int repro_msb24(uint f)
{
    return REPRO_I(floatBitsToUint(REPRO_F(REPRO_I(f))) >> 23) - 127;
}

REPRO_INTERNAL uint repro_sig(uint u)
{
    uint e = (u >> 23) & 0xffu;
    uint f = u & 0x7fffffu;
    if (e != 0u)
        return f | 0x800000u;
    return f << REPRO_U(23 - repro_msb24(f));
}

REPRO_INTERNAL int repro_exponent(uint u)
{
    int e = REPRO_I((u >> 23) & 0xffu);
    if (e != 0)
        return e - 127;
    return -126 - (23 - repro_msb24(u & 0x7fffffu));
}

// The float nearest (ties to even) to sig · 2^(e − 25), plus a little more
// when sticky is set, with the sign bit `sign`; sig in [2^25, 2^26) carries
// two bits below the float's 24. Overflow gives ±Inf, underflow a rounded
// subnormal or ±0.
REPRO_INTERNAL float repro_round_pack(uint sign, int e, uint sig, bool sticky)
{
    int be = e + 127;
    if (be >= 255)
        return uintBitsToFloat(sign | REPRO_INF);
    // One path for normal and subnormal results (a CPU device would run
    // both): a subnormal's significand is shifted right by 1 − be more, at
    // most 26 (then m and the guard bit are 0 and the sticky bit is set,
    // sig being nonzero, as for anything below half the least subnormal).
    uint shift = be >= 1 ? 0u : (be < -25 ? 26u : REPRO_U(1 - be));
    uint m = sig >> (2u + shift);
    uint g = (sig >> (1u + shift)) & 1u;
    bool s = sticky || (sig & ((1u << (1u + shift)) - 1u)) != 0u;
    if (g != 0u && (s || (m & 1u) != 0u))
        m += 1u;
    // A normal m includes the hidden bit: adding it to (be − 1) << 23 lets a
    // carry out of the significand raise the exponent (up to Inf).
    uint bits = be >= 1 ? (REPRO_U(be - 1) << 23) + m : m;
    return uintBitsToFloat(sign | bits);
}

// y · 2^k for y in [1/2, 2) and k in [-150, 128], correctly rounded, as
// two multiplies by normal powers of two, 2^k1 and 2^(k − k1) with k1 =
// floor(k / 2): the first is exact (y · 2^k1 is normal), so only the second
// rounds, subnormal results included (IEEE multiply: the start-up probe
// checks it). A handful of operations where shifting the significand by
// hand took thirty, every one of them run for every lane on a CPU device.
REPRO_INTERNAL float repro_scale(float y, int k)
{
    int k1 = ((k + 256) >> 1) - 128;
    precise float a = y * uintBitsToFloat(REPRO_U(k1 + 127) << 23);
    precise float b = a * uintBitsToFloat(REPRO_U(k - k1 + 127) << 23);
    return b;
}

// The two's-complement integer in bits, as a float (rounded), for |bits| <
// 2^31. Conversions go through int: a CPU device converts between float and
// int in one instruction, between float and uint in several.
REPRO_INTERNAL float repro_float_of_signed(uint bits)
{
    bool negative = (bits & REPRO_SIGN) != 0u;
    precise float f = REPRO_F(REPRO_I((negative ? 0u - bits : bits) & REPRO_ABS));
    precise float nf = -f;
    return negative ? nf : f;
}

// About 1/b for b in [1, 2] (repro_recip_newton), and 2^23 / mb for mb in
// [2^23, 2^24) (repro_recip_sig, b = mb · 2^-23): from the line
// 24/17 − 8/17·b (relative error at most 1/17) and three Newton steps
// y += y·(1 − b·y). Its bits need not be exact (repro_div corrects the
// quotient), only close.
REPRO_INTERNAL float repro_recip_newton(float b)
{
    precise float t = b * 0.470588235f;
    precise float y = 1.41176471f - t;
    for (int i = 0; i < 3; i++) {
        precise float by = b * y;
        precise float err = 1.0f - by;
        precise float dy = y * err;
        y = y + dy;
    }
    return y;
}
REPRO_INTERNAL float repro_recip_sig(uint mb)
{
    precise float b = uintBitsToFloat(0x3f800000u | (mb & 0x7fffffu));
    precise float y = repro_recip_newton(b);
    return y;
}

// sign | (r / mb) · 2^e, correctly rounded, for mb in [2^23, 2^24) and r in
// [mb, 2mb).
REPRO_INTERNAL float repro_div_sig(uint sign, int e, uint r, uint mb)
{
    // q = floor(r · 2^25 / mb) in [2^25, 2^26): 26 quotient bits of r / mb
    // in [1, 2), and the remainder R = r · 2^25 − q · mb in [0, mb), as long
    // division gives them. An estimate q0 from a float reciprocal y of mb is
    // within 11 of q (y's relative error is below 2^-23.4 for every mb), so
    // |R0| < 2^31 and R0's low 32 bits tell its sign. Then q1 = q0 +
    // floor(R0·y·2^-23): R0·y·2^-23 is within 2^-18 of R0 / mb = q − q0 +
    // R / mb, whose floor is q − q0, so q1 is within 1 of q, and one step
    // of the exact remainder either way gives q and R (the bits do not
    // depend on the estimate; tests/test_repro_math.c divides by every
    // significand).
    precise float y = repro_recip_sig(mb);
    precise float fr = REPRO_F(REPRO_I(r));
    precise float qf = fr * y; // about r / mb · 2^23
    precise float q4 = qf * 4.0f;
    uint q = REPRO_U(REPRO_I(q4));
    uint rem = (r << 25) - q * mb; // R mod 2^32
    precise float fR = repro_float_of_signed(rem);
    precise float dqy = fR * y;
    precise float dq = dqy * 1.1920928955078125e-7f; // 2^-23: R0 / mb
    precise float dq16 = dq + 16.0f;                    // floor by truncation
    q += REPRO_U(REPRO_I(dq16) - 16);
    rem = (r << 25) - q * mb;
    if ((rem & REPRO_SIGN) != 0u) {
        q -= 1u;
        rem += mb;
    } else if (rem >= mb) {
        q += 1u;
        rem -= mb;
    }
    return repro_round_pack(sign, e, q, rem != 0u);
}

// a / b, correctly rounded.
float repro_div(float a, float b)
{
    uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
    uint sign = (ua ^ ub) & REPRO_SIGN;
    uint xa = ua & REPRO_ABS, xb = ub & REPRO_ABS;
    if (repro_is_nan(ua) || repro_is_nan(ub) || (xa == 0u && xb == 0u) || (xa == REPRO_INF && xb == REPRO_INF))
        return uintBitsToFloat(REPRO_NAN);
    if (xa == REPRO_INF || xb == 0u)
        return uintBitsToFloat(sign | REPRO_INF);
    if (xa == 0u || xb == REPRO_INF)
        return uintBitsToFloat(sign);
    uint ma = repro_sig(ua), mb = repro_sig(ub);
    int e = repro_exponent(ua) - repro_exponent(ub);
    uint r = ma;
    if (ma < mb) {
        r = ma << 1;
        e -= 1;
    }
    return repro_div_sig(sign, e, r, mb);
}

// a / b for positive normal a and b (or a NaN b) whose quotient is normal:
// repro_div's bits without its cases of zeros, infinities and subnormals
// (a CPU device would run them all).
REPRO_INTERNAL float repro_div_normal(float a, float b)
{
    uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
    if (repro_is_nan(ub))
        return uintBitsToFloat(REPRO_NAN);
    uint ma = (ua & 0x7fffffu) | 0x800000u, mb = (ub & 0x7fffffu) | 0x800000u;
    int e = REPRO_I(ua >> 23) - REPRO_I(ub >> 23);
    uint r = ma;
    if (ma < mb) {
        r = ma << 1;
        e -= 1;
    }
    return repro_div_sig(0u, e, r, mb);
}

// About 1/√v for a positive normal v: the bit pattern's guess
// (0x5f3759df, within 3.5%) and `steps` Newton steps y ·= 1.5 − ½·v·y².
// repro_sqrt takes three for v in [2^24, 2^26) (its bits need not be
// exact: it corrects the root), repro_sqrt_fast two.
REPRO_INTERNAL float repro_rsqrt_newton(float v, int steps)
{
    precise float y = uintBitsToFloat(0x5f3759dfu - (floatBitsToUint(v) >> 1));
    precise float hv = v * 0.5f;
    for (int i = 0; i < steps; i++) {
        precise float yy = y * y;
        precise float hvyy = hv * yy;
        precise float c = 1.5f - hvyy;
        y = y * c;
    }
    return y;
}

// √x, correctly rounded; √(−0) = −0, √(negative) = NaN.
float repro_sqrt(float x)
{
    uint u = floatBitsToUint(x);
    if (repro_is_nan(u) || (u > REPRO_SIGN))
        return uintBitsToFloat(REPRO_NAN);
    if ((u & REPRO_ABS) == 0u || u == REPRO_INF)
        return x;
    uint m = repro_sig(u);
    int e = repro_exponent(u);
    if ((e & 1) != 0) {
        m <<= 1;
        e -= 1;
    }
    // x = m · 2^(e − 23), e even, m in [2^23, 2^25): the root of the 52-bit
    // N = 2m · 2^26 is a 26-bit integer in [2^25, 2^26), worth 2^(e/2) at its
    // top bit, with the remainder R = N − root² in [0, 2·root], as the
    // digit-by-digit root gives them. An estimate √(2m)·2^13 from a float
    // reciprocal square root y is within 13 of the root, so |R0| < 2^31 and
    // R0's low 32 bits tell its sign; improved once by the exact remainder
    // (root += floor(R0·y/2^14), Newton's step) it is within 1, and one step
    // of the exact remainder either way gives the root and R (the bits do
    // not depend on the estimate; tests/test_repro_math.c takes the root of
    // every significand, and so checks these bounds).
    precise float v = REPRO_F(REPRO_I(m << 1));
    precise float y = repro_rsqrt_newton(v, 3);
    precise float s = v * y;         // about √v, in [2^12, 2^13)
    precise float s13 = s * 8192.0f; // exact
    uint root = REPRO_U(REPRO_I(s13));
    uint rem = (m << 27) - root * root; // R mod 2^32
    precise float fR = repro_float_of_signed(rem);
    precise float dry = fR * y;
    precise float dr = dry * 6.103515625e-5f; // 2^-14: R0 / (2·root)
    precise float dr16 = dr + 16.0f;          // floor by truncation
    root += REPRO_U(REPRO_I(dr16) - 16);
    rem = (m << 27) - root * root;
    if ((rem & REPRO_SIGN) != 0u) {
        root -= 1u;
        rem += (root << 1) + 1u;
    } else if (rem > (root << 1)) {
        rem -= (root << 1) + 1u;
        root += 1u;
    }
    return repro_round_pack(0u, e / 2, root, rem != 0u);
}

// √x from floats alone, where a root within 1 ULP will do (AdamW's
// denominator): not correctly rounded, and about a fifth of repro_sqrt's
// operations with no integer multiply or rounding by hand. 1/√x is
// estimated as 0x5f3759df − bits/2 (within 3.5%), refined by two Newton
// steps y·(1.5 − x/2·y²); then s = x·y and one Newton step of the root,
// s + (x − s²)·y/2. Below 2^-100 (subnormals included) x is scaled by 2^64
// first and the root by 2^-32 after, both exact. ±0 gives ±0, +Inf +Inf,
// NaN and x < 0 NaN. test_repro_math: within 1 ULP of sqrtf.
float repro_sqrt_fast(float x)
{
    uint u = floatBitsToUint(x);
    bool tiny = x < uintBitsToFloat(0x0d800000u); // 2^-100
    precise float xb = x * uintBitsToFloat(0x5f800000u); // · 2^64
    precise float xs = tiny ? xb : x;
    precise float y = repro_rsqrt_newton(xs, 2);
    precise float s = xs * y;
    precise float ss = s * s;
    precise float r = xs - ss;
    precise float hy = y * 0.5f;
    precise float c = r * hy;
    s = s + c;
    precise float sb = s * uintBitsToFloat(0x2f800000u); // · 2^-32
    s = tiny ? sb : s;
    s = (u & REPRO_ABS) == 0u || u == REPRO_INF ? x : s;
    return repro_is_nan(u) || u > REPRO_SIGN ? uintBitsToFloat(REPRO_NAN) : s;
}

// 1/d from floats alone, where a reciprocal within 2 ULP will do (AdamW's
// quotient is a product by it): the estimate 0x7ef311c3 − bits of 1/|d|
// (within 12%) and three Newton steps r·(2 − |d|·r), d's sign put back.
// Outside [2^-120, 2^120] |d| is scaled by 2^64 or 2^-64 first and the
// result by the same after (rounded twice where that result is
// subnormal). ±0 gives ±Inf, ±Inf ±0, NaN NaN. test_repro_math: within 2
// ULP of 1.0f / d.
float repro_recip_fast(float d)
{
    uint u = floatBitsToUint(d), sign = u & REPRO_SIGN;
    precise float a = uintBitsToFloat(u & REPRO_ABS);
    bool lo = a < uintBitsToFloat(0x03800000u), hi = a > uintBitsToFloat(0x7b800000u); // 2^-120, 2^120
    precise float up = a * uintBitsToFloat(0x5f800000u), down = a * uintBitsToFloat(0x1f800000u);
    precise float as = lo ? up : hi ? down : a;
    precise float r = uintBitsToFloat(0x7ef311c3u - floatBitsToUint(as));
    for (int i = 0; i < 3; i++) {
        precise float ar = as * r;
        precise float e = 2.0f - ar;
        r = r * e;
    }
    precise float rl = r * uintBitsToFloat(0x5f800000u), rh = r * uintBitsToFloat(0x1f800000u);
    r = lo ? rl : hi ? rh : r;
    r = (u & REPRO_ABS) == 0u ? uintBitsToFloat(REPRO_INF) : r;
    r = (u & REPRO_ABS) == REPRO_INF ? 0.0f : r;
    r = repro_is_nan(u) ? d : r;
    return uintBitsToFloat(floatBitsToUint(r) | sign);
}

// k = round(x / ln2) as a float, for |x| below 2^22: adding 1.5·2^23
// rounds to an integer (RTE).
REPRO_INTERNAL float repro_exp_k(float x)
{
    precise float t = x * 1.44269504f;
    precise float big = t + 12582912.0f;
    precise float kf = big - 12582912.0f;
    return kf;
}

// e^r for r = x − k·ln2 (k = repro_exp_k(x), |r| <= ln2/2): Cody–Waite's
// r from ln2 = 0.693359375 − 2.12194440e-4 + … (k · 0.693359375 is exact),
// then Cephes' degree-7 polynomial; in [0.7, 1.42], normal.
REPRO_INTERNAL float repro_exp_reduced(float x, float kf)
{
    precise float kc1 = kf * 0.693359375f;
    precise float r1 = x - kc1;
    precise float kc2 = kf * -2.12194440e-4f;
    precise float r = r1 - kc2;
    precise float z = r * r;
    precise float p = 1.9875691500e-4f * r;
    p = p + 1.3981999507e-3f;
    p = p * r;
    p = p + 8.3334519073e-3f;
    p = p * r;
    p = p + 4.1665795894e-2f;
    p = p * r;
    p = p + 1.6666665459e-1f;
    p = p * r;
    p = p + 5.0000001201e-1f;
    p = p * z;
    p = p + r;
    precise float y = p + 1.0f;
    return y;
}

// e^x within 2 ULP of the exact value (1 at most measured against glibc).
// Cody–Waite reduction x = k·ln2 + r, |r| <= ln2/2, Cephes' degree-7
// polynomial, then the exponent k added with integers.
float repro_exp(float x)
{
    uint u = floatBitsToUint(x);
    uint a = u & REPRO_ABS;
    // One path for every input, the special results chosen at the end (a
    // CPU device would run early returns' paths for every lane anyway):
    // the reduction takes x held to the range where e^x is finite and not
    // 0 (NaN as 0: converting it to an integer is undefined in C).
    precise float xc = x > 88.7228394f ? 88.7228394f : x;
    xc = xc < -103.972084f ? -103.972084f : xc;
    xc = repro_is_nan(u) ? 0.0f : xc;
    precise float kf = repro_exp_k(xc);
    precise float y = repro_exp_reduced(xc, kf);
    precise float e = repro_scale(y, REPRO_I(kf));
    e = x > 88.7228394f ? uintBitsToFloat(REPRO_INF) : e;
    e = x < -103.972084f ? 0.0f : e;
    e = a < 0x33000000u ? 1.0f : e; // |x| < 2^-25: e^x rounds to 1
    return repro_is_nan(u) ? x : e;
}

// ln x within 2 ULP (Cephes' logf): x = 2^k · m, m in [√½, √2], and a
// degree-9 polynomial in m − 1.
float repro_log(float x)
{
    uint u = floatBitsToUint(x);
    if (repro_is_nan(u) || u > REPRO_SIGN)
        return uintBitsToFloat(REPRO_NAN);
    if ((u & REPRO_ABS) == 0u)
        return uintBitsToFloat(REPRO_SIGN | REPRO_INF);
    if (u == REPRO_INF)
        return x;
    uint sig = repro_sig(u);
    int k = repro_exponent(u);
    uint mbits = (127u << 23) | (sig & 0x7fffffu); // m in [1, 2)
    if (sig > 0xb504f3u) {                         // m > √2: halve it
        mbits = (126u << 23) | (sig & 0x7fffffu);
        k += 1;
    }
    precise float m = uintBitsToFloat(mbits);
    precise float f = m - 1.0f; // exact
    precise float kf = REPRO_F(k);
    precise float z = f * f;
    precise float p = 7.0376836292e-2f * f;
    p = p - 1.1514610310e-1f;
    p = p * f;
    p = p + 1.1676998740e-1f;
    p = p * f;
    p = p - 1.2420140846e-1f;
    p = p * f;
    p = p + 1.4249322787e-1f;
    p = p * f;
    p = p - 1.6668057665e-1f;
    p = p * f;
    p = p + 2.0000714765e-1f;
    p = p * f;
    p = p - 2.4999993993e-1f;
    p = p * f;
    p = p + 3.3333331174e-1f;
    p = p * f;
    p = p * z;
    precise float kc2 = kf * -2.12194440e-4f;
    p = p + kc2;
    precise float hz = z * 0.5f;
    p = p - hz;
    precise float y = f + p;
    precise float kc1 = kf * 0.693359375f;
    y = y + kc1;
    return y;
}

// tanh x within 3 ULP: x itself below 2^-12, Cephes' odd polynomial below
// 0.625, 1 − 2/(e^2|x| + 1) above, ±1 beyond 10.
float repro_tanh(float x)
{
    uint u = floatBitsToUint(x);
    uint a = u & REPRO_ABS;
    if (repro_is_nan(u) || a < 0x39800000u) // |x| < 2^-12: tanh x rounds to x
        return x;
    uint sign = u & REPRO_SIGN;
    precise float ax = uintBitsToFloat(a);
    if (ax > 10.0f)
        return uintBitsToFloat(sign | 0x3f800000u);
    if (ax >= 0.625f) {
        precise float two_x = ax + ax;
        precise float e = repro_exp(two_x);
        precise float d = e + 1.0f;
        precise float q = repro_div_normal(2.0f, d); // d in [4.4, 2^29]
        precise float t = 1.0f - q;
        return uintBitsToFloat(sign | floatBitsToUint(t));
    }
    precise float z = x * x;
    precise float p = -5.70498872745e-3f * z;
    p = p + 2.06390887954e-2f;
    p = p * z;
    p = p - 5.37397155531e-2f;
    p = p * z;
    p = p + 1.33314422036e-1f;
    p = p * z;
    p = p - 3.33332819422e-1f;
    p = p * z;
    p = p * x;
    p = p + x;
    return p;
}

// σ(x) within 4 ULP: e = e^−|x| in [0, 1] (subnormal or 0 far out), the
// Newton reciprocal r of 1 + e in [1, 2], and σ = r for x >= +0, e·r for
// x <= −0 (½ at both zeros). One exp and one reciprocal with no exponent to
// take apart or put back (a CPU device runs every branch for every lane);
// not a correctly rounded division, and within the 4 ULP all the same.
// e^−|x| is repro_exp's for an argument that is never positive: the same
// reduction, polynomial and scaling, without its cases of large x (and of
// tiny |x|, where the polynomial's 1 + r already rounds to 1). NaN gives
// NaN.
float repro_sigmoid(float x)
{
    uint u = floatBitsToUint(x);
    bool nan = repro_is_nan(u);
    precise float na = uintBitsToFloat(u | REPRO_SIGN); // −|x|
    precise float xc = na < -103.972084f ? -103.972084f : na;
    xc = nan ? 0.0f : xc;
    precise float kf = repro_exp_k(xc);
    precise float y = repro_exp_reduced(xc, kf);
    precise float e = repro_scale(y, REPRO_I(kf));
    e = na < -103.972084f ? 0.0f : e;
    precise float d = 1.0f + e;
    precise float r = repro_recip_newton(d);
    precise float er = e * r;
    precise float sg = (u & REPRO_SIGN) != 0u ? er : r;
    return nan ? x : sg;
}

// σ(2v) of GELU's tanh form (below), v = √(2/π)·(x + 0.044715·x³) held
// to ±40 (a NaN v to −40: x·σ is NaN all the same), so 2v is in [−80, 80]
// and e = e^−|2v| in [1.8e-35, 1] is normal: no case of repro_exp's but the
// reduction and polynomial, scaled by 2^k (k >= −116) in one multiply (as
// exact as repro_scale's two: the same bits). Then 1 / (1 + e), 1 + e in
// (1, 2], is repro_recip_newton's, and below 0 σ = e · (1 / (1 + e)): the
// operations of repro_sigmoid(2v), so its bits (within 4 ULP), without
// its clamps and with one multiply for 2^k (repro_scale's two give the
// same bits for a normal result).
float repro_gelu_sigmoid(float x)
{
    precise float x2 = x * x;
    precise float x3 = x2 * x;
    precise float c = x3 * 0.044715f;
    precise float s = x + c;
    precise float v = s * 0.797884561f;
    v = v > 40.0f ? 40.0f : v;
    v = v >= -40.0f ? v : -40.0f;
    precise float v2 = v + v;
    precise float na = v2 < 0.0f ? v2 : -v2; // −|2v|
    precise float kf = repro_exp_k(na);
    precise float y = repro_exp_reduced(na, kf);
    precise float e = y * uintBitsToFloat(REPRO_U(REPRO_I(kf) + 127) << 23);
    precise float d = 1.0f + e;
    precise float r = repro_recip_newton(d);
    precise float er = e * r;
    precise float sg = v2 < 0.0f ? er : r;
    return sg;
}

// GELU, tanh approximation, in the default kernels' form (shaders/gelu.glsl):
// x · σ(2u) = 0.5·x·(1 + tanh u), u = √(2/π)·(x + 0.044715·x³) held to
// ±40 (repro_gelu_sigmoid). Below 2^-30, σ(2u) is exactly ½ (e^−|2u|
// rounds to 1, and the Newton reciprocal of 2 is exactly ½), so the
// product is x/2 correctly rounded, subnormal results included (the start-up probe
// checks that multiplies keep them; test_repro_math checks the bits). The
// integer halving this took before gave the same bits for 14 more
// operations per element.
float repro_gelu(float x)
{
    precise float sg = repro_gelu_sigmoid(x);
    precise float y = x * sg;
    return y;
}

#endif
