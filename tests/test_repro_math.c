/* test_repro_math: the reproducible mode's math (shaders/reproducible/repro_math.glsl)
 * run by a shader over millions of inputs must give the same bits as the C
 * build of the same source (src/repro/repro_math.c), NaNs compared as a
 * class (payloads are not portable); and the C build must be within stated
 * ULP of an independent oracle: C's own division and sqrtf (0 ULP: both are
 * correctly rounded), the double-precision libm, rounded to float, for the
 * others (bounds at ulp_bound and within_bound); sqrt_fast and recip_fast
 * (AdamW's root and reciprocal, from floats alone) within 1 and 2 ULP of
 * sqrtf and 1.0f / x, the sign of zero exact.
 *
 * Inputs per routine: edge cases (±0, subnormals, FLT_MIN, FLT_MAX, ±Inf,
 * NaNs, the routines' own thresholds), a sweep of the whole 32-bit pattern
 * space (every exponent of both signs) and random values in the range where
 * the routine does its work; for sqrt every significand of both exponent
 * parities and for div every divisor significand, since their estimates
 * (corrected to the exact result) depend only on those; for div also
 * quotients next to halfway between two floats. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_testing.h"
#include "vktrain/repro.h"
#include "vktrain/shaders.h"

enum {
    FN_DIV,
    FN_SQRT,
    FN_EXP,
    FN_LOG,
    FN_TANH,
    FN_SIGMOID,
    FN_GELU,
    FN_SIN,
    FN_COS,
    FN_SQRT_FAST,
    FN_RECIP,
    FN_COUNT
};
static const char *fn_names[FN_COUNT] = {"div",  "sqrt", "exp", "log",       "tanh",      "sigmoid",
                                         "gelu", "sin",  "cos", "sqrt_fast", "recip_fast"};

#define SWEEP (1u << 20)  /* patterns i·4099, i < 2^20: all of 2^32 */
#define RANDOM (1u << 19) /* random values in the working range */
#define EVERY (1u << 24)  /* sqrt: every float in [1, 4); div: by every one in [1, 2) */

/* Floats in the order of their values, as integers: the difference of two
 * is their distance in ULP (±0 both map to 0). */
static int64_t ordered(float f)
{
    uint32_t u = repro_bits_of(f);
    return (u & 0x80000000u) ? -(int64_t)(u & 0x7fffffffu) : (int64_t)u;
}

static int64_t ulp_distance(float a, float b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b) ? 0 : INT64_MAX;
    int64_t d = ordered(a) - ordered(b);
    return d < 0 ? -d : d;
}

static const uint32_t edge_bits[] = {
    0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x00000002, 0x007fffff, 0x807fffff, 0x00400000,
    0x00800000, 0x80800000, 0x00800001, 0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000,
    0xffc00000, 0x7f800001, 0x7fffffff, 0x3f800000, 0xbf800000, 0x3f000000, 0x40000000, 0x3f7fffff,
    0x3f800001, 0x33000000, 0x32ffffff, 0x39800000, 0x397fffff, 0x30800000, 0x307fffff, 0x3f200000,
    0x3f1fffff, 0x3f3504f3, 0x3f3504f4, 0x3fb504f3, 0x3fb504f4, 0x41200000, 0x41200001, 0x41900000,
    0x41900001, 0x42b17218, 0x42b17217, 0x42b17219, 0xc2cff1b5, 0xc2cff1b4, 0xc2cff1b6, 0xc2aeac50,
    0xc2aeac4f, 0xc2b00000, 0x42b00000, 0xc1200000, 0x3e800000, 0x0c000000, 0x8c000000, 0x1a000000,
    /* ldexp's switch from normal to subnormal results (GELU halves tiny x) */
    0x01000000, 0x01000001, 0x00ffffff, 0x81000000, 0x80ffffff, 0x00fffffe, 0x01800000, 0x00c00000,
};
#define N_EDGE (sizeof edge_bits / sizeof edge_bits[0])

/* The inputs of routine fn: a (and b for div), n of them. */
static size_t make_inputs(int fn, uint32_t *a, uint32_t *b, struct ref_rng *rng)
{
    size_t n = 0;
    for (size_t i = 0; i < N_EDGE; i++)
        for (size_t j = 0; j < (fn == FN_DIV ? N_EDGE : 1); j++) {
            a[n] = edge_bits[i];
            b[n++] = edge_bits[j];
        }
    for (uint32_t i = 0; i < SWEEP; i++) {
        a[n] = i * 4099u;
        b[n++] = (uint32_t)ref_rng_u64(rng);
    }
    /* Every significand (the estimates repro_div and repro_sqrt correct
     * depend on nothing else): sqrt of every float in [1, 4) (both
     * exponent parities), and every float in [1, 2) divided by, with
     * numerators 1, just below 2, and random. */
    for (uint32_t i = 0; (fn == FN_SQRT || fn == FN_SQRT_FAST) && i < EVERY; i++)
        a[n++] = 0x3f800000u + i;
    /* recip_fast: every float in [1, 2) and [2^-121, 2^-119), where the
     * scaling starts (its estimate's error depends on nothing else) */
    for (uint32_t i = 0; fn == FN_RECIP && i < EVERY; i++)
        a[n++] = (i < EVERY / 2 ? 0x3f800000u : 0x03000000u) + (i & (EVERY / 2 - 1)) * 2;
    for (uint32_t i = 0; fn == FN_DIV && i < EVERY; i++) {
        uint32_t k = i >> 23;
        a[n] = k == 0 ? 0x3f800000u : (i & 1) ? 0x3fffffffu : ((uint32_t)ref_rng_u64(rng) & 0x807fffffu) | 0x3f800000u;
        b[n++] = 0x3f800000u + (i & 0x7fffffu);
    }
    /* Working ranges: div any magnitudes near each other and subnormal
     * quotients; exp [−105, 90]; log (0, 4]; tanh, sigmoid, gelu [−20, 20];
     * sin, cos [−8192, 8192], a quarter within [−4, 4]. */
    static const double range[FN_COUNT] = {0, 0, 0, 0, 20, 20, 20, 8192, 8192, 0, 0};
    for (uint32_t i = 0; i < RANDOM; i++) {
        double r = ref_rng_uniform(rng);
        uint32_t u;
        switch (fn) {
        case FN_DIV:
        case FN_SQRT:
        case FN_SQRT_FAST:
        case FN_RECIP:
            u = (uint32_t)ref_rng_u64(rng);
            if (i & 1) /* magnitudes near 1 or near the bottom of the range */
                u = (u & 0x807fffffu) | ((i & 2) ? 0x3f800000u : 0x00800000u);
            b[n] = (uint32_t)ref_rng_u64(rng) & (0x80ffffffu | (i & 4 ? 0x3f000000u : 0x7f000000u));
            if (fn == FN_DIV && (i & 7) == 7) {
                /* quotients next to halfway between two floats: a = b·(q + ½)
                 * rounded, q with 24 bits */
                double q = (double)((1u << 23) | ((uint32_t)ref_rng_u64(rng) & 0x7fffffu)) + 0.5;
                b[n] |= 0x00800000u;
                u = repro_bits_of((float)((double)repro_float_of(b[n]) * q * 0x1p-23));
            }
            break;
        case FN_EXP:
            u = repro_bits_of((float)(-105.0 + 195.0 * r));
            break;
        case FN_LOG:
            u = repro_bits_of((float)(4.0 * r));
            break;
        default:
            u = repro_bits_of(
                (float)(((fn == FN_SIN || fn == FN_COS) && (i & 3) == 0 ? 4.0 : range[fn]) * (2.0 * r - 1.0)));
            break;
        }
        a[n++] = u;
    }
    return n;
}

static float c_routine(int fn, float x, float y)
{
    switch (fn) {
    case FN_DIV:
        return repro_div(x, y);
    case FN_SQRT:
        return repro_sqrt(x);
    case FN_EXP:
        return repro_exp(x);
    case FN_LOG:
        return repro_log(x);
    case FN_TANH:
        return repro_tanh(x);
    case FN_SIGMOID:
        return repro_sigmoid(x);
    case FN_GELU:
        return repro_gelu(x);
    case FN_SIN:
        return repro_sin(x);
    case FN_SQRT_FAST:
        return repro_sqrt_fast(x);
    case FN_RECIP:
        return repro_recip_fast(x);
    default:
        return repro_cos(x);
    }
}

/* The oracle, independent of repro_math: IEEE float / and sqrtf, or the
 * double libm rounded once to float. */
static float oracle(int fn, float x, float y)
{
    double d = x;
    switch (fn) {
    case FN_DIV:
        return x / y;
    case FN_SQRT:
    case FN_SQRT_FAST:
        return sqrtf(x);
    case FN_RECIP:
        return 1.0f / x;
    case FN_EXP:
        return (float)exp(d);
    case FN_LOG:
        return (float)log(d);
    case FN_TANH:
        return (float)tanh(d);
    case FN_SIGMOID:
        return (float)(1.0 / (1.0 + exp(-d)));
    case FN_SIN:
        return (float)sin(d);
    case FN_COS:
        return (float)cos(d);
    default: {
        double u = 0.7978845608028654 * (d + 0.044715 * d * d * d);
        u = u > 40 ? 40 : u < -40 ? -40 : u;
        return (float)(d / (1.0 + exp(-2.0 * u)));
    }
    }
}

/* The stated bound of each routine against the oracle, in ULP of the
 * result. GELU's bound grows with |u| for negative x: u = k·(x + c·x³)
 * takes five roundings (x², x³, c·x³, the sum, k·) of at most 2^-24
 * relative each, and σ(2u) ≈ e^{2u} there turns an error δ in u into a
 * relative error 2δ of the result: 10|u|·2^-24, at most 10|u| ULP (|u| is
 * held to 40); the oracle computes u exactly. */
static int64_t ulp_bound(int fn, float x)
{
    static const int64_t bound[FN_COUNT] = {0, 0, 2, 2, 3, 4, 4, 4, 4, 1, 2};
    if (fn == FN_GELU && x < 0) {
        double u = 0.7978845608028654 * fabs((double)x + 0.044715 * (double)x * x * x);
        return bound[fn] + (int64_t)(10.0 * (u < 40 ? u : 40));
    }
    return bound[fn];
}

/* Whether c, the routine's value at x, is within its stated bound of the
 * oracle o. sin and cos: within the ULP bound, or near their zeros within
 * 2^-23 absolute of the exact value for |x| <= 8192 and 2^-19 up to 65536;
 * NaN beyond and for ±Inf. */
static int within_bound(int fn, float x, float c, float o, int64_t dist)
{
    if (fn == FN_SIN || fn == FN_COS) {
        if (!(fabsf(x) <= 65536.0f))
            return isnan(c);
        double exact = fn == FN_SIN ? sin((double)x) : cos((double)x);
        return dist <= ulp_bound(fn, x) || fabs((double)c - exact) <= (fabsf(x) <= 8192.0f ? 0x1p-23 : 0x1p-19);
    }
    (void)o;
    return dist <= ulp_bound(fn, x);
}

static void run_gpu(struct gpu *g, struct gpu_kernel *k, const uint32_t *a, const uint32_t *b, size_t n,
                    uint32_t *out)
{
    struct gpu_buffer *ba = gpu_buffer_create(g, n * 4, "repro a");
    struct gpu_buffer *bb = gpu_buffer_create(g, n * 4, "repro b");
    struct gpu_buffer *bo = gpu_buffer_create(g, n * 4, "repro out");
    gpu_upload(g, ba, 0, a, n * 4);
    gpu_upload(g, bb, 0, b, n * 4);
    struct gpu_arg args[3] = {{ba, 0, 0, 0}, {bb, 0, 0, 0}, {bo, 1, 0, 0}};
    size_t per = (size_t)64 * 32768;
    for (size_t off = 0; off < n; off += per) {
        uint32_t push[2] = {(uint32_t)n, (uint32_t)off};
        size_t m = n - off < per ? n - off : per;
        gpu_dispatch(g, k, args, push, (uint32_t)((m + 63) / 64), 1, 1);
    }
    gpu_submit(g);
    gpu_download(g, bo, 0, out, n * 4);
    gpu_buffer_destroy(g, ba);
    gpu_buffer_destroy(g, bb);
    gpu_buffer_destroy(g, bo);
}

int main(void)
{
    struct gpu *g = test_gpu();
    size_t cap = N_EDGE * N_EDGE + SWEEP + RANDOM + EVERY;
    uint32_t *a = vkt_malloc(cap * 4, "a"), *b = vkt_malloc(cap * 4, "b"), *out = vkt_malloc(cap * 4, "out");
    struct ref_rng rng;
    ref_rng_seed(&rng, 14);
    size_t total = 0;
    for (int fn = 0; fn < FN_COUNT; fn++) {
        char shader[64];
        snprintf(shader, sizeof shader, "repro_math_test_%s", fn_names[fn]);
        struct gpu_kernel_desc d = {.shader = shader_lookup(shader), .n_bindings = 3, .push_size = 8};
        if (d.shader == SHADER_NONE) {
            fprintf(stderr, "no shader %s in the build\n", shader);
            return 1;
        }
        size_t n = make_inputs(fn, a, b, &rng);
        run_gpu(g, gpu_kernel_get(g, &d), a, b, n, out);
        size_t differ = 0, over = 0;
        int64_t worst = 0;
        for (size_t i = 0; i < n; i++) {
            float x = repro_float_of(a[i]), y = repro_float_of(b[i]);
            float c = c_routine(fn, x, y), s = repro_float_of(out[i]);
            if (repro_bits_of(c) != out[i] && !(isnan(c) && isnan(s)) && differ++ < 5)
                fprintf(stderr, "%s(%a [%08x], %a): shader %08x, C %08x\n", fn_names[fn], x, a[i], y, out[i],
                        repro_bits_of(c));
            float o = oracle(fn, x, y);
            int64_t dist = ulp_distance(c, o);
            /* Division and the roots: the sign of zero exact (and division
             * and sqrt every bit). */
            if ((fn == FN_DIV || fn == FN_SQRT || fn == FN_SQRT_FAST || fn == FN_RECIP) && dist == 0 && !isnan(c) &&
                repro_bits_of(c) != repro_bits_of(o))
                dist = 1;
            if (!within_bound(fn, x, c, o, dist) && over++ < 5)
                fprintf(stderr, "%s(%a, %a) = %a, oracle %a: %lld ULP\n", fn_names[fn], x, y, c, o, (long long)dist);
            if (dist > worst && dist != INT64_MAX && !(fn == FN_GELU && x < 0) &&
                !((fn == FN_SIN || fn == FN_COS) && fabsf(x) > 4))
                worst = dist;
        }
        printf("%-8s %zu inputs: shader = C on all but %zu; C vs oracle: %zu over the bound, worst %lld ULP%s\n",
               fn_names[fn], n, differ, over, (long long)worst,
               fn == FN_GELU                    ? " (x >= 0)"
               : (fn == FN_SIN || fn == FN_COS) ? " (|x| <= 4)"
                                                : "");
        CHECK(differ == 0, "%s: %zu inputs where the shader's bits differ from C's", fn_names[fn], differ);
        CHECK(over == 0, "%s: %zu inputs beyond the stated bound", fn_names[fn], over);
        total += n;
    }
    printf("%zu inputs in all\n", total);
    /* GELU below 2^-30 is x · σ with σ exactly ½: C's x · 0.5f (one
     * rounding, to nearest even, also into the subnormals) for every
     * subnormal and smallest-binade x, and a stride through the rest */
    size_t half_bad = 0, half_n = 0;
    for (uint32_t u = 0; u < 0x30800000u; u += u < 0x01000000u ? 1u : 997u)
        for (uint32_t sign = 0; sign < 2; sign++, half_n++) {
            float x = repro_float_of(u | sign << 31), want = x * 0.5f;
            half_bad += repro_bits_of(repro_gelu(x)) != repro_bits_of(want);
        }
    printf("gelu below 2^-30: %zu of %zu inputs differ from x * 0.5f\n", half_bad, half_n);
    CHECK(half_bad == 0, "gelu below 2^-30: %zu inputs differ from x / 2", half_bad);
    /* GELU's σ(2v) (its own exp scaling and no clamps) gives the bits of
     * repro_sigmoid(2v), v computed as repro_gelu_sigmoid does (this file
     * is built without contraction, as src/repro is): every 4093rd float
     * but NaN (whose σ is σ(−80): x·σ is NaN all the same) */
    size_t sig_bad = 0, sig_n = 0;
    for (uint64_t w = 0; w <= UINT32_MAX; w += 4093) {
        float x = repro_float_of((uint32_t)w);
        if (isnan(x))
            continue;
        sig_n++;
        float x2 = x * x, x3 = x2 * x, c = x3 * 0.044715f, sv = x + c, v = sv * 0.797884561f;
        v = v > 40.0f ? 40.0f : v;
        v = v >= -40.0f ? v : -40.0f;
        float v2 = v + v, want = repro_sigmoid(v2), got = repro_gelu_sigmoid(x);
        sig_bad += repro_bits_of(got) != repro_bits_of(want);
    }
    printf("gelu's sigmoid: %zu of %zu inputs differ from repro_sigmoid(2v)\n", sig_bad, sig_n);
    CHECK(sig_bad == 0, "gelu's sigmoid: %zu inputs differ from repro_sigmoid(2v)", sig_bad);
    free(a);
    free(b);
    free(out);
    gpu_destroy(g);
    return test_failures ? 1 : 0;
}
