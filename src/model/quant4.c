/* quant4: the host side of 4-bit frozen weights (include/vktrain/quant4.h). */
#include "vktrain/quant4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vktrain/util.h"

/* NF4: bitsandbytes' table (QLoRA's NormalFloat4: quantiles of N(0, 1)
 * scaled to [-1, 1]). FP4: the constants of its CUDA kernel's decoding
 * tree, in index order. */
static const float fp4_code[16] = {0.0f,         5.208333333e-03f,  0.66666667f,  1.0f,        0.33333333f, 0.5f,
                                   0.16666667f,  0.25f,             -0.0f,        -5.208333333e-03f, -0.66666667f,
                                   -1.0f,        -0.33333333f,      -0.5f,        -0.16666667f, -0.25f};
static const float nf4_code[16] = {-1.0f,
                                   -0.6961928009986877f,
                                   -0.5250730514526367f,
                                   -0.39491748809814453f,
                                   -0.28444138169288635f,
                                   -0.18477343022823334f,
                                   -0.09105003625154495f,
                                   0.0f,
                                   0.07958029955625534f,
                                   0.16093020141124725f,
                                   0.24611230194568634f,
                                   0.33791524171829224f,
                                   0.44070982933044434f,
                                   0.5626170039176941f,
                                   0.7229568362236023f,
                                   1.0f};

const float *q4_code(enum q4_code c)
{
    return c == Q4_FP4 ? fp4_code : nf4_code;
}

void q4_dynamic_code(float code[256])
{
    /* For exponent i = 0..6: 2^i + 1 boundaries linspace(0.1, 1), their
     * 2^i midpoints times ±10^(i-6); then 0 and 1; sorted. */
    int k = 0;
    for (int i = 0; i < 7; i++) {
        int n = (1 << i) + 1;
        float scale = (float)pow(10.0, i - 6);
        for (int j = 0; j + 1 < n; j++) {
            float lo = (float)(0.1 + 0.9 * j / (n - 1)), hi = (float)(0.1 + 0.9 * (j + 1) / (n - 1));
            float mean = (lo + hi) / 2.0f;
            code[k++] = scale * mean;
            code[k++] = -scale * mean;
        }
    }
    code[k++] = 0.0f;
    code[k++] = 1.0f;
    for (int i = 1; i < 256; i++) /* insertion sort of 256 */
        for (int j = i; j > 0 && code[j - 1] > code[j]; j--) {
            float t = code[j];
            code[j] = code[j - 1], code[j - 1] = t;
        }
}

static uint32_t words_of(size_t bytes)
{
    return (uint32_t)((bytes + 3) / 4);
}

void q4_layout(struct q4_layout *l, size_t n, uint32_t block, int double_quant)
{
    if (block < 32 || block > 4096 || (block & (block - 1)))
        vkt_fatal("quant4: a block of %u elements (bitsandbytes allows 32, 64, ..., 4096)", block);
    memset(l, 0, sizeof *l);
    l->n = n;
    l->log2_block = 0;
    while ((1u << l->log2_block) < block)
        l->log2_block++;
    l->blocks = (n + block - 1) / block;
    l->double_quant = double_quant;
    size_t w = Q4_CODE_WORD + 16;
    if (double_quant) {
        l->nested_blocks = (l->blocks + Q4_NESTED_BLOCK - 1) / Q4_NESTED_BLOCK;
        l->code8 = (uint32_t)w, w += 256;
        l->nested = (uint32_t)w, w += l->nested_blocks;
        l->absmax = (uint32_t)w, w += words_of(l->blocks);
    } else {
        l->absmax = (uint32_t)w, w += l->blocks;
    }
    l->data = (uint32_t)w, w += words_of((n + 1) / 2);
    if (w > UINT32_MAX)
        vkt_fatal("quant4: a weight of %zu elements exceeds 2^32 words", n);
    l->words = w;
}

size_t q4_bytes(size_t n, uint32_t block, int double_quant)
{
    struct q4_layout l;
    q4_layout(&l, n, block, double_quant);
    return l.words * 4;
}

static float f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static uint32_t u32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Compiled with -ffp-contract=off (CMakeLists.txt): a product and a sum
 * stay two roundings, as in the kernels' `precise` code. */

/* The 4-bit index of x (already scaled by 1 / absmax) against mid, the
 * fp32 midpoints of the sorted NF4 code: x on one takes the lower index. */
static uint32_t nf4_index(const float *mid, float x)
{
    uint32_t q = 0;
    while (q < 15 && x > mid[q])
        q++;
    return q;
}

/* bitsandbytes' nearest search in a sorted 256-entry code: a binary walk
 * of 7 halvings from the middle entry, then the neighbour on x's side if x
 * is past the midpoint between them (strictly above, or strictly below). */
static uint32_t code8_index(const float *code, float x)
{
    int pivot = 127, upper_pivot = 255, lower_pivot = 0;
    float lower = -1.0f, upper = 1.0f, val = code[pivot];
    for (int i = 64; i > 0; i >>= 1) {
        if (x > val)
            lower_pivot = pivot, lower = val, pivot += i;
        else
            upper_pivot = pivot, upper = val, pivot -= i;
        val = code[pivot];
    }
    if (upper_pivot == 255)
        upper = code[upper_pivot];
    if (lower_pivot == 0)
        lower = code[lower_pivot];
    if (x > val)
        return (uint32_t)(x > (upper + val) * 0.5f ? upper_pivot : pivot);
    return (uint32_t)(x < (lower + val) * 0.5f ? lower_pivot : pivot);
}

static void set_byte(uint32_t *w, size_t i, uint32_t v)
{
    w[i / 4] = (w[i / 4] & ~(0xffu << (8 * (i % 4)))) | (v << (8 * (i % 4)));
}

/* Zeroes buf and writes its header and code; returns its layout. */
static struct q4_layout header(uint32_t *buf, size_t n, uint32_t block, int double_quant, uint32_t flags,
                               const float *code)
{
    struct q4_layout l;
    q4_layout(&l, n, block, double_quant);
    memset(buf, 0, l.words * 4);
    buf[Q4_W_FLAGS] = flags | (double_quant ? Q4_FLAG_NESTED : 0);
    buf[Q4_W_LOG2_BLOCK] = l.log2_block;
    if (n > UINT32_MAX)
        vkt_fatal("quant4: a weight of %zu elements (at most 2^32 - 1)", n);
    buf[Q4_W_NUMEL] = (uint32_t)n;
    buf[Q4_W_ABSMAX] = l.absmax, buf[Q4_W_DATA] = l.data, buf[Q4_W_NESTED] = l.nested, buf[Q4_W_CODE8] = l.code8;
    for (int i = 0; i < 16; i++)
        buf[Q4_CODE_WORD + i] = u32(code[i]);
    return l;
}

void q4_from_bnb(uint32_t *buf, const struct q4_bnb *w, size_t e0, size_t n)
{
    int nested = w->absmax8 != NULL;
    size_t b0 = e0 / w->block;
    if (e0 % w->block || (nested && b0 % Q4_NESTED_BLOCK))
        vkt_fatal("quant4: a part from element %zu is not on a block boundary", e0);
    struct q4_layout l = header(buf, n, w->block, nested, w->round, q4_code(w->code));
    memcpy(buf + l.data, w->packed + e0 / 2, (n + 1) / 2);
    if (n % 2) /* the last byte's low nibble is the next part's */
        ((uint8_t *)(buf + l.data))[n / 2] &= 0xf0;
    if (!nested) {
        memcpy(buf + l.absmax, w->absmax + b0, l.blocks * sizeof(float));
        return;
    }
    memcpy(buf + l.code8, w->code8, 256 * sizeof(float));
    memcpy(buf + l.nested, w->nested + b0 / Q4_NESTED_BLOCK, l.nested_blocks * sizeof(float));
    memcpy(buf + l.absmax, w->absmax8 + b0, l.blocks);
    buf[Q4_W_OFFSET] = u32(w->offset);
}

void q4_quantize(uint32_t *buf, const float *x, size_t n, uint32_t block, int double_quant)
{
    float mid[15];
    for (int i = 0; i < 15; i++)
        mid[i] = (nf4_code[i] + nf4_code[i + 1]) / 2.0f;
    struct q4_layout l = header(buf, n, block, double_quant, 0, nf4_code);
    float *absmax = vkt_malloc(l.blocks * sizeof *absmax, "quant4 absmax");
    for (size_t b = 0; b < l.blocks; b++) {
        size_t e0 = b * block, e1 = e0 + block < n ? e0 + block : n;
        float m = 0.0f;
        for (size_t e = e0; e < e1; e++)
            m = fmaxf(m, fabsf(x[e]));
        absmax[b] = m;
        float r = 1.0f / m; /* inf for a block of zeros: its elements take the code's 0 */
        for (size_t e = e0; e < e1; e++) {
            uint32_t q = m > 0.0f ? nf4_index(mid, x[e] * r) : 7;
            size_t byte = e / 2;
            uint32_t shift = 8 * (uint32_t)(byte % 4) + (e % 2 ? 0 : 4);
            buf[l.data + byte / 4] |= q << shift;
        }
    }
    if (!double_quant) {
        for (size_t b = 0; b < l.blocks; b++)
            buf[l.absmax + b] = u32(absmax[b]);
    } else {
        float *code8 = (float *)(buf + l.code8);
        q4_dynamic_code(code8);
        double sum = 0.0;
        for (size_t b = 0; b < l.blocks; b++)
            sum += absmax[b];
        float offset = (float)(sum / (double)l.blocks);
        buf[Q4_W_OFFSET] = u32(offset);
        for (size_t nb = 0; nb < l.nested_blocks; nb++) {
            size_t b0 = nb * Q4_NESTED_BLOCK, b1 = b0 + Q4_NESTED_BLOCK < l.blocks ? b0 + Q4_NESTED_BLOCK : l.blocks;
            float m = 0.0f;
            for (size_t b = b0; b < b1; b++)
                m = fmaxf(m, fabsf(absmax[b] - offset));
            buf[l.nested + nb] = u32(m);
            float r = 1.0f / m;
            for (size_t b = b0; b < b1; b++)
                set_byte(buf + l.absmax, b, m > 0.0f ? code8_index(code8, (absmax[b] - offset) * r) : 127);
        }
    }
    free(absmax);
}

static float q4_absmax(const uint32_t *buf, size_t b)
{
    if (!(buf[Q4_W_FLAGS] & Q4_FLAG_NESTED))
        return f32(buf[buf[Q4_W_ABSMAX] + b]);
    uint32_t q8 = (buf[buf[Q4_W_ABSMAX] + b / 4] >> (8 * (b % 4))) & 0xffu;
    float a = f32(buf[buf[Q4_W_CODE8] + q8]) * f32(buf[buf[Q4_W_NESTED] + b / Q4_NESTED_BLOCK]);
    return a + f32(buf[Q4_W_OFFSET]);
}

/* v (finite) rounded to f16, nearest even, as an fp32: below 2^-14 to a
 * multiple of 2^-24 (f16's subnormals; products by powers of two are
 * exact), else to 11 significant bits, past 65504 to infinity. */
static float round_f16(float v)
{
    float a = fabsf(v);
    if (a < 0x1p-14f)
        return copysignf(nearbyintf(a * 0x1p24f) * 0x1p-24f, v);
    uint32_t u = u32(v);
    u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
    return fabsf(f32(u)) > 65504.0f ? copysignf(INFINITY, v) : f32(u);
}

static float q4_value(const uint32_t *buf, size_t e)
{
    uint32_t w = buf[buf[Q4_W_DATA] + e / 8];
    uint32_t q = (w >> ((((uint32_t)e ^ 1u) & 7u) << 2)) & 15u;
    float v = f32(buf[Q4_CODE_WORD + q]) * q4_absmax(buf, e >> buf[Q4_W_LOG2_BLOCK]);
    if (buf[Q4_W_FLAGS] & Q4_FLAG_BF16) {
        uint16_t h;
        vkt_bf16_round(&h, &v, 1);
        vkt_bf16_widen(&v, &h, 1);
    }
    return buf[Q4_W_FLAGS] & Q4_FLAG_F16 ? round_f16(v) : v;
}

void q4_dequantize(float *out, const uint32_t *buf)
{
    size_t n = buf[Q4_W_NUMEL];
    for (size_t e = 0; e < n; e++)
        out[e] = q4_value(buf, e);
}
