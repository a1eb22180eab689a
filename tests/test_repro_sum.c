/* test_repro_sum: the reproducible sum (a pairwise tree whose
 * shape depends on the element index only) gives the bits of the C
 * reference repro_sum_ref for every workgroup size and run per invocation
 * tried, so for any device's limits: lengths 1 to 2^20 + 3, one to three
 * passes, data of mixed magnitudes and signs; all −0 gives +0; Inf and NaN
 * propagate. The row sums (repro_rowsum) give each row's repro_sum_ref
 * for rows of 1 to 50257 under three workgroup sizes and two run lengths. Negative control: a sequential sum of the
 * same data differs, so the match is a statement about the order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_testing.h"
#include "repro_ref.h"

static int same(float a, float b)
{
    return repro_bits_of(a) == repro_bits_of(b) || (isnan(a) && isnan(b));
}

static float device_sum(struct gpu *g, const float *x, size_t n, uint32_t wg, uint32_t log_run)
{
    struct gpu_buffer *bx = gpu_buffer_create(g, n * 4, "sum x");
    size_t ns = repro_sum_scratch(g, n, wg, log_run);
    struct gpu_buffer *bs = ns ? gpu_buffer_create(g, ns * 4, "sum scratch") : NULL;
    struct gpu_buffer *bo = gpu_buffer_create(g, 8, "sum out");
    gpu_upload(g, bx, 0, x, n * 4);
    repro_sum(g, bx, n, bs, bo, 1, wg, log_run);
    gpu_submit(g);
    float out[2];
    gpu_download(g, bo, 0, out, 8);
    gpu_buffer_destroy(g, bx);
    if (bs)
        gpu_buffer_destroy(g, bs);
    gpu_buffer_destroy(g, bo);
    return out[1];
}

/* How many of the rows' sums (at most 13 rows of n) differ from C's. */
static int rows_differ(struct gpu *g, struct gpu_buffer *bx, struct gpu_buffer *by, const float *x, uint32_t rows,
                       uint32_t n, uint32_t wg, uint32_t log_run)
{
    repro_rowsum(g, bx, by, rows, n, wg, log_run);
    gpu_submit(g);
    float y[13];
    gpu_download(g, by, 0, y, sizeof(float) * rows);
    int bad = 0;
    for (uint32_t r = 0; r < rows; r++)
        bad += !same(y[r], repro_sum_ref(x + (size_t)r * n, n));
    return bad;
}

static void check_rows(struct gpu *g, const float *x)
{
    const uint32_t lengths[] = {1, 7, 768, 50257}, rows = 13;
    struct gpu_buffer *bx = gpu_buffer_create(g, (size_t)rows * 50257 * 4, "rows x");
    struct gpu_buffer *by = gpu_buffer_create(g, rows * 4, "rows y");
    gpu_upload(g, bx, 0, x, (size_t)rows * 50257 * 4);
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        uint32_t n = lengths[li];
        int bad = 0, shapes = 0;
        for (uint32_t wg = 64; wg <= 256; wg *= 2)
            for (uint32_t extra = 0; extra <= 2; extra += 2) {
                uint32_t log_run = 0;
                while (((size_t)wg << log_run) < n)
                    log_run++;
                if (log_run + extra > 10)
                    continue;
                bad += rows_differ(g, bx, by, x, rows, n, wg, log_run + extra);
                shapes++;
            }
        bad += rows_differ(g, bx, by, x, rows, n, 0, 0); /* the default shape, as the model calls it */
        shapes++;
        printf("rows of %u: %u rows x %d shapes, %d sums differ from C\n", n, rows, shapes, bad);
        CHECK(bad == 0, "rows of %u: %d sums differ from C", n, bad);
    }
    gpu_buffer_destroy(g, bx);
    gpu_buffer_destroy(g, by);
}

int main(void)
{
    struct gpu *g = test_gpu();
    struct ref_rng rng;
    ref_rng_seed(&rng, 1415);
    const size_t lengths[] = {1, 2, 5, 255, 1000, 4097, 65537, (1u << 20) + 3};
    /* {0, 0}: the device's default shape (on CPU devices one subgroup per
     * block of long runs) */
    const uint32_t shapes[][2] = {{1, 6}, {32, 1}, {64, 3}, {256, 4}, {128, 10}, {0, 0}};
    size_t n_max = (1u << 20) + 3;
    float *x = vkt_malloc(n_max * sizeof *x, "x");
    for (size_t i = 0; i < n_max; i++) {
        double u = ref_rng_uniform(&rng);
        x[i] = (float)(ref_rng_normal(&rng) * (u < 0.1 ? 1e4 : u < 0.2 ? 1e-4 : 1.0));
    }
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        size_t n = lengths[li];
        float ref = repro_sum_ref(x, n);
        int bad = 0;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            float s = device_sum(g, x, n, shapes[si][0], shapes[si][1]);
            if (!same(s, ref)) {
                bad++;
                fprintf(stderr, "n %zu, workgroup %u, run 2^%u: %a, C %a\n", n, shapes[si][0], shapes[si][1], s, ref);
            }
        }
        printf("n %zu: the sum %a from all %zu shapes equals C's: %s\n", n, ref, sizeof shapes / sizeof shapes[0],
               bad ? "no" : "yes");
        CHECK(bad == 0, "n %zu: %d shapes differ from C", n, bad);
    }
    float seq = 0;
    for (size_t i = 0; i < n_max; i++)
        seq += x[i];
    printf("negative control: sequential %a, tree %a\n", seq, repro_sum_ref(x, n_max));
    CHECK(!same(seq, repro_sum_ref(x, n_max)), "a sequential sum gave the tree's bits");

    check_rows(g, x);

    float zeros[7] = {-0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f};
    CHECK(repro_bits_of(repro_sum_ref(zeros, 7)) == 0 && repro_bits_of(device_sum(g, zeros, 7, 2, 1)) == 0 &&
              repro_bits_of(device_sum(g, zeros, 4, 4, 0)) == 0,
          "a sum of -0 must be +0");
    float special[5] = {1.0f, INFINITY, 2.0f, 0.0f, -1.0f};
    CHECK(device_sum(g, special, 5, 0, 0) == INFINITY && repro_sum_ref(special, 5) == INFINITY, "Inf lost");
    special[3] = NAN;
    CHECK(isnan(device_sum(g, special, 5, 0, 0)) && isnan(repro_sum_ref(special, 5)), "NaN lost");
    free(x);
    gpu_destroy(g);
    return test_failures ? 1 : 0;
}
