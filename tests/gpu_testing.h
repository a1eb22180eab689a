/* gpu_testing: helpers for the tests that run shaders against the C
 * reference: float<->double buffer moves and the normalized error
 * mse(a,b)/mse(b,0) that every op test reports. CHECK and test_result come
 * from test_util.h. */
#ifndef VKTRAIN_GPU_TESTING_H
#define VKTRAIN_GPU_TESTING_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_ops.h"
#include "test_util.h"
#include "vktrain/gpu.h"
#include "vktrain/quant4.h"
#include "vktrain/util.h"

/* Σ(a−b)² / Σ b², or Σ(a−b)² when b is all zero. */
static inline double normalized_error(const float *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += b[i] * b[i];
    }
    return den > 0 ? num / den : num;
}

static inline struct gpu_buffer *buffer_from_doubles(struct gpu *g, const double *x, size_t n, const char *name)
{
    float *f = vkt_malloc(n * sizeof *f, name);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)x[i];
    struct gpu_buffer *b = gpu_buffer_create(g, n * sizeof *f, name);
    gpu_upload(g, b, 0, f, n * sizeof *f);
    free(f);
    return b;
}

/* x (n values) as floats after `lead` zeros. */
static inline struct gpu_buffer *buffer_at(struct gpu *g, const double *x, size_t n, size_t lead, const char *name)
{
    double *y = vkt_calloc(lead + n, sizeof *y, name);
    memcpy(y + lead, x, n * sizeof *y);
    struct gpu_buffer *b = buffer_from_doubles(g, y, lead + n, name);
    free(y);
    return b;
}

/* x rounded to bf16 in place (to nearest even, as the model's upload
 * does), and a buffer holding those bf16 values, tagged bf16 and a whole
 * number of uints long (what the model makes for a bf16 weight). */
static inline void round_to_bf16(double *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float f = (float)x[i];
        uint16_t h;
        vkt_bf16_round(&h, &f, 1);
        vkt_bf16_widen(&f, &h, 1);
        x[i] = f;
    }
}
static inline struct gpu_buffer *buffer_bf16_from_doubles(struct gpu *g, double *x, size_t n, const char *name)
{
    round_to_bf16(x, n);
    uint16_t *h = vkt_calloc(n + 2, sizeof *h, name);
    for (size_t i = 0; i < n; i++) {
        float f = (float)x[i];
        vkt_bf16_round(&h[i], &f, 1);
    }
    size_t bytes = (n * 2 + 3) / 4 * 4;
    struct gpu_buffer *b = gpu_buffer_create(g, bytes, name);
    gpu_buffer_set_dtype(b, GPU_DTYPE_BF16);
    gpu_upload(g, b, 0, h, bytes);
    free(h);
    return b;
}

/* How many of n floats differ from their counterparts in their bits. */
static inline size_t floats_differing(const float *a, const float *b, size_t n)
{
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += memcmp(&a[i], &b[i], sizeof *a) != 0;
    return differ;
}

/* The 4-bit weights the tests cover: NF4 (model.base_dtype nf4), with
 * double quantization, and as bitsandbytes folders may hold them: FP4
 * values rounded to bf16, NF4 with double quantization rounded to f16. */
enum q4_variant { Q4V_NF4, Q4V_NF4_DQ, Q4V_FP4_BF16, Q4V_NF4_DQ_F16, Q4V_N };
static inline const char *q4_variant_name(enum q4_variant v)
{
    static const char *const names[Q4V_N] = {"NF4", "NF4, double quant", "FP4, bf16 values",
                                             "NF4, double quant, f16 values"};
    return names[v];
}

/* x (n values, rounded to floats) quantized to 4 bits (NF4, blocks of
 * `block`, with double quantization in the _DQ variants) in a
 * GPU_DTYPE_Q4 buffer; Q4V_FP4_BF16's indices then read FP4's code and
 * its values, and Q4V_NF4_DQ_F16's, are rounded as the variant says; x
 * becomes the dequantized values, what the kernels read. */
static inline struct gpu_buffer *buffer_q4_from_doubles(struct gpu *g, double *x, size_t n, uint32_t block,
                                                        enum q4_variant v, const char *name)
{
    int double_quant = v == Q4V_NF4_DQ || v == Q4V_NF4_DQ_F16;
    float *f = vkt_malloc(n * sizeof *f, name);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)x[i];
    size_t bytes = q4_bytes(n, block, double_quant);
    uint32_t *w = vkt_malloc(bytes, name);
    q4_quantize(w, f, n, block, double_quant);
    memcpy(w + Q4_CODE_WORD, q4_code(v == Q4V_FP4_BF16 ? Q4_FP4 : Q4_NF4), 16 * sizeof(float));
    w[Q4_W_FLAGS] |= v == Q4V_FP4_BF16 ? Q4_FLAG_BF16 : v == Q4V_NF4_DQ_F16 ? Q4_FLAG_F16 : 0;
    q4_dequantize(f, w);
    for (size_t i = 0; i < n; i++)
        x[i] = f[i];
    struct gpu_buffer *b = gpu_buffer_create(g, bytes, name);
    gpu_buffer_set_dtype(b, GPU_DTYPE_Q4);
    gpu_buffer_set_q4_flags(b, w[Q4_W_FLAGS]);
    gpu_upload(g, b, 0, w, bytes);
    free(w), free(f);
    return b;
}

/* n values uniform in [−scale, scale), each rounded to a float (what a
 * buffer will hold, so the reference sees the same inputs). */
static inline double *random_floats(struct ref_rng *rng, size_t n, double scale)
{
    double *x = vkt_malloc(n * sizeof *x, "test data");
    for (size_t i = 0; i < n; i++)
        x[i] = (double)(float)(scale * (2.0 * ref_rng_uniform(rng) - 1.0));
    return x;
}

/* doc (B,T): document ids of random lengths, a new document starting at
 * each position after the first with probability p_new. */
static inline void random_documents(struct ref_rng *rng, int32_t *doc, int B, int T, double p_new)
{
    for (int b = 0; b < B; b++)
        for (int t = 0, d = 0; t < T; t++) {
            d += t > 0 && ref_rng_uniform(rng) < p_new;
            doc[b * T + t] = d;
        }
}

/* The float values a buffer was given, widened: the reference's input. */
static inline double *doubles_of_floats(const double *x, size_t n)
{
    double *d = vkt_malloc(n * sizeof *d, "test doubles");
    for (size_t i = 0; i < n; i++)
        d[i] = (double)(float)x[i];
    return d;
}

static inline float *download_floats(struct gpu *g, struct gpu_buffer *b, size_t n)
{
    float *f = vkt_malloc(n * sizeof *f, "test download");
    gpu_download(g, b, 0, f, n * sizeof *f);
    return f;
}

/* Dispatches the profile recorded of kernels whose names start with
 * `prefix` ("" for all of them). */
static inline uint64_t profile_dispatches(const struct gpu *g, const char *prefix)
{
    const struct gpu_profile_row *rows;
    uint64_t n = 0;
    for (int i = 0, k = gpu_profile_rows(g, &rows); i < k; i++)
        if (!strncmp(rows[i].kernel, prefix, strlen(prefix)))
            n += rows[i].dispatches;
    return n;
}

static inline struct gpu *test_gpu(void)
{
    struct gpu_options opt = {.device_index = -1, .quiet = 1};
    return gpu_create(&opt);
}

#endif
