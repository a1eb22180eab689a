/* test_lora_dropout: the LoRA dropout op (op_dropout) against its C twin
 * (op_dropout_keep), and the mask's statistics.
 *   - every element, forward and accumulate, equals x·keep·(1/(1 − p))
 *     (and y + that) with keep from the C hash, bit for bit: the GLSL and
 *     C hashes agree;
 *   - the kept fraction over 3 x 37 x 1000 elements is 1 − p within 5
 *     standard deviations (p = 0.1 and 0.5), and every (sample, position,
 *     feature) coordinate is used: the fraction holds per sample, per
 *     position and per feature column within 5 of their deviations;
 *   - masks of another step or stream agree with this one on p² + (1−p)²
 *     of the elements, within 5 deviations (independent draws), and the
 *     same counter gives the same mask from a different first row
 *     (sample0 shifted with the rows, as another split of the batch). */
#include <math.h>
#include <string.h>

#include "gpu_testing.h"
#include "vktrain/ops.h"

enum { S = 3, T = 37, N = 1000 };

/* |frac − want| within 5 standard deviations of n Bernoulli(want) draws. */
static int near(double frac, double want, double n)
{
    return fabs(frac - want) <= 5 * sqrt(want * (1 - want) / n);
}

static void run(struct gpu *g, float p)
{
    size_t rows = (size_t)S * T, n = rows * N;
    struct ref_rng rng;
    ref_rng_seed(&rng, 5);
    double *xd = random_floats(&rng, n, 1.0), *yd = random_floats(&rng, n, 1.0);
    struct gpu_buffer *x = buffer_from_doubles(g, xd, n, "x"), *y = buffer_from_doubles(g, yd, n, "y");
    struct gpu_buffer *z = gpu_buffer_create(g, n * sizeof(float), "z");
    struct op_dropout d = {.key = op_dropout_key(42, 7, 3), .sample0 = 5, .T = T, .p = p};
    op_dropout(g, &d, x, z, (uint32_t)rows, N, 0);
    op_dropout(g, &d, x, y, (uint32_t)rows, N, 1);
    float *zf = download_floats(g, z, n), *yf = download_floats(g, y, n);
    float scale = (float)(1.0 / (1.0 - (double)p));
    size_t bad = 0, kept = 0, per_sample[S] = {0}, *per_pos = vkt_calloc(T, sizeof(size_t), "counts"),
           *per_col = vkt_calloc(N, sizeof(size_t), "counts");
    for (size_t i = 0; i < n; i++) {
        uint32_t r = (uint32_t)(i / N), c = (uint32_t)(i % N);
        int keep = op_dropout_keep(&d, 5 + r / T, r % T, c);
        float want = keep ? (float)xd[i] * scale : 0.0f, acc = (float)yd[i] + want;
        bad += memcmp(&zf[i], &want, sizeof want) != 0 || memcmp(&yf[i], &acc, sizeof acc) != 0;
        kept += keep, per_sample[r / T] += keep, per_pos[r % T] += keep, per_col[c] += keep;
    }
    CHECK(bad == 0, "p %g: %zu of %zu elements differ from the C mask", (double)p, bad, n);
    double frac = (double)kept / (double)n;
    CHECK(near(frac, 1 - p, (double)n), "p %g: kept fraction %.5f", (double)p, frac);
    for (int s = 0; s < S; s++)
        CHECK(near((double)per_sample[s] / (T * N), 1 - p, T * N), "p %g: sample %d keeps %zu of %d", (double)p, s,
              per_sample[s], T * N);
    int odd_pos = 0, odd_col = 0; /* 5 deviations: a chance of about 6e-7 each */
    for (int t = 0; t < T; t++)
        odd_pos += !near((double)per_pos[t] / (S * N), 1 - p, S * N);
    for (int c = 0; c < N; c++)
        odd_col += !near((double)per_col[c] / (S * T), 1 - p, S * T);
    CHECK(odd_pos == 0 && odd_col == 0, "p %g: %d positions, %d features off 1 - p", (double)p, odd_pos, odd_col);
    printf("  p %.2f: kept %.5f (want %.2f)\n", (double)p, frac, 1 - (double)p);

    /* Another step, another stream: independent masks. */
    struct op_dropout other[2] = {d, d};
    other[0].key = op_dropout_key(42, 8, 3), other[1].key = op_dropout_key(42, 7, 4);
    for (int k = 0; k < 2; k++) {
        size_t same = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t r = (uint32_t)(i / N), c = (uint32_t)(i % N);
            same += op_dropout_keep(&d, 5 + r / T, r % T, c) == op_dropout_keep(&other[k], 5 + r / T, r % T, c);
        }
        double q = 1 - p, want = p * p + q * q;
        CHECK(near((double)same / (double)n, want, (double)n), "p %g: %s: masks agree on %.5f, want %.5f", (double)p,
              k ? "another stream" : "another step", (double)same / (double)n, want);
    }

    /* Samples 1 .. 2 alone, as a micro-batch starting at sample 6: the same
     * bits as rows T .. 3T − 1 of the whole. */
    struct gpu_buffer *x2 = gpu_buffer_create(g, (n - (size_t)T * N) * sizeof(float), "x part");
    struct gpu_buffer *z2 = gpu_buffer_create(g, (n - (size_t)T * N) * sizeof(float), "z part");
    float *xf = vkt_malloc(n * sizeof *xf, "x");
    for (size_t i = 0; i < n; i++)
        xf[i] = (float)xd[i];
    gpu_upload(g, x2, 0, xf + (size_t)T * N, (n - (size_t)T * N) * sizeof *xf);
    struct op_dropout part = d;
    part.sample0 = 6;
    op_dropout(g, &part, x2, z2, (uint32_t)(rows - T), N, 0);
    float *z2f = download_floats(g, z2, n - (size_t)T * N);
    CHECK(!memcmp(z2f, zf + (size_t)T * N, (n - (size_t)T * N) * sizeof *z2f),
          "p %g: a micro-batch of the later samples gets another mask", (double)p);
    free(z2f), free(xf);
    gpu_buffer_destroy(g, x2), gpu_buffer_destroy(g, z2);
    free(xd), free(yd), free(zf), free(yf), free(per_pos), free(per_col);
    gpu_buffer_destroy(g, x), gpu_buffer_destroy(g, y), gpu_buffer_destroy(g, z);
}

int main(void)
{
    struct gpu *g = test_gpu();
    run(g, 0.1f);
    run(g, 0.5f);
    gpu_destroy(g);
    return test_result("test_lora_dropout");
}
