/* repro_host: what the host computes for the device in the reproducible
 * mode, from IEEE + − × / and sqrt (correctly rounded in float or
 * double) and the C build of the math layer (repro_math.c) only, never
 * libm, in this file built with -ffp-contract=off: so two hosts of
 * different CPU families (or C libraries) give the device the same bits.
 *   - the RoPE table: theta^(−2j/hd) by a Newton root in double, the
 *     angles reduced exactly to [−π, π] in double, cos/sin by repro_cos and
 *     repro_sin; the rope_scaling arithmetic (shared with op_rope_table);
 *   - a normal deviate for the initialization (Box–Muller by repro_log,
 *     repro_sqrt and repro_cos). */
#include <float.h>

#include "vktrain/repro.h"
#include "vktrain/util.h"

/* Every float and double operation rounded to its own type (not x87's
 * extended precision). */
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "the reproducible mode's host math needs FLT_EVAL_METHOD == 0 (SSE2 or a 64-bit target, not x87)"
#endif

double repro_powi(double b, int64_t t)
{
    double r = 1.0;
    for (; t > 0; t >>= 1) {
        if (t & 1)
            r = r * b;
        b = b * b;
    }
    return r;
}

float repro_rope_attention(const struct op_rope_scaling *s)
{
    return s && s->type == OP_ROPE_LONGROPE ? (float)s->attention : 1.0f;
}

float repro_rope_scaled(float inv_freq, uint32_t j, const struct op_rope_scaling *s)
{
    if (!s || s->type == OP_ROPE_DEFAULT)
        return inv_freq;
    if (s->type == OP_ROPE_LONGROPE && j < OP_ROPE_MAX_FREQS) /* 1 / (ext · theta^(2j/rot)) */
        return inv_freq / (float)(s->long_table ? s->long_factor[j] : s->short_factor[j]);
    float factor = (float)s->factor;
    if (s->type == OP_ROPE_LINEAR)
        return inv_freq / factor;
    float old = (float)s->original_max, lo = (float)s->low_freq_factor, hi = (float)s->high_freq_factor;
    float wavelen = 2.0f * 3.14159265358979323846f / inv_freq;
    if (wavelen > old / lo) /* low frequency: scaled */
        return inv_freq / factor;
    if (wavelen < old / hi) /* high frequency: kept */
        return inv_freq;
    float smooth = (old / wavelen - lo) / (hi - lo);
    return (1.0f - smooth) * inv_freq / factor + smooth * inv_freq;
}

/* theta^(1/n), n >= 1, theta > 0: four Newton steps in double from the
 * math layer's float estimate (about 1e-7 relative; each step squares the
 * error), so within a few ULP of the double root. */
static double nth_root(double theta, uint32_t n)
{
    if (n == 1)
        return theta;
    float guess = repro_div(repro_log((float)theta), (float)n);
    double y = (double)repro_exp(guess);
    for (int i = 0; i < 4; i++) {
        double y1 = repro_powi(y, (int64_t)n - 1);
        y = y - (y1 * y - theta) / ((double)n * y1);
    }
    return y;
}

/* a - k·2π for the integer k nearest a/2π (0 <= a < 2^23): 2π in three
 * parts (Cody and Waite), the first two of 32 significant bits so that k
 * times them is exact for k < 2^21. */
static double reduce_2pi(double a)
{
    static const double C1 = 0x1.921fb544p+2, C2 = 0x1.0b4611a6p-32, C3 = 0x1.3198a2e037073p-67;
    double k = (double)(int64_t)(a * 0.15915494309189535 + 0.5);
    return ((a - k * C1) - k * C2) - k * C3;
}

void repro_rope_table(float *table, uint32_t max_pos, uint32_t hd, double theta, const struct op_rope_scaling *scaling)
{
    uint32_t n = hd / 2;
    double root = nth_root(theta, n); /* theta^(2/hd) */
    float attention = repro_rope_attention(scaling);
    for (uint32_t j = 0; j < n; j++) {
        float inv_freq = repro_rope_scaled((float)(1.0 / repro_powi(root, j)), j, scaling);
        if (!(inv_freq > 0.0f) || !((double)max_pos * (double)inv_freq < 0x1p23))
            vkt_fatal("rope table (reproducible): frequency %u of rope_theta %g and head dimension %u is %g: "
                      "the angles of %u positions must stay below 2^23",
                      j, theta, hd, (double)inv_freq, max_pos);
        for (uint32_t p = 0; p < max_pos; p++) {
            /* a float times an integer below 2^29: exact in double */
            float r = (float)reduce_2pi((double)p * (double)inv_freq);
            table[((size_t)p * n + j) * 2 + 0] = repro_cos(r) * attention;
            table[((size_t)p * n + j) * 2 + 1] = repro_sin(r) * attention;
        }
    }
}

float repro_normal(uint64_t r1, uint64_t r2)
{
    float u1 = (float)((r1 >> 40) + 1) * 0x1p-24f; /* (0, 1] */
    float u2 = (float)(r2 >> 40) * 0x1p-24f;       /* [0, 1) */
    float radius = repro_sqrt(-2.0f * repro_log(u1));
    return radius * repro_cos(6.28318530717958647692f * u2);
}
