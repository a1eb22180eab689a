/* test_repro_attention: the reproducible mode's cross-entropy and
 * attention: with gpu_set_reproducible on, op_cross_entropy(_at)
 * and op_flash_attention(_backward) give the bits of their C references
 * (tests/ref/ref_repro_cross_entropy.c, ref_repro_attention.c) in both kernel
 * families, compared with memcmp on every output:
 *  - cross-entropy at V = 1, 5, 50257 with ignored (−100) and out-of-range
 *    labels, and the rows cut into blocks (op_cross_entropy_at) equal to
 *    one call;
 *  - attention forward (out, lse) and backward (dq, dk, dv, accumulated
 *    onto random values) for llama-like GQA shapes and GPT-2's fused qkv
 *    views, with and without document segments and sliding windows (1, 3,
 *    5, 6, 40, 50 and 60 keys, and one of T keys, none), T = 1, odd T,
 *    T = 256 and 1024,
 *    and the walk over keys split over dispatches (as under a loop limit,
 *    parts of 5 or 48 keys, the sum's of 4 or 32) equal to one walk; and
 *    in blocks (repro_attention_block.comp, the storage family's default
 *    on GPUs), checked to have run.
 * Sanity of the formulas: each result is within float tolerance of the
 * default kernels (normalized error mse/mse(ref) < 1e-10, i.e. about 1e-5
 * relative; seen 1e-16 .. 5e-13), whose bits differ (a negative control
 * for the bitwise comparisons). */
#include <stdlib.h>
#include <string.h>

#include "../src/ops/ops_internal.h"
#include "gpu_testing.h"
#include "repro_ref.h"
#include "repro_testing.h"
#include "vktrain/ops.h"
#include "vktrain/kernel_select.h"

static struct gpu *g;
static struct ref_rng rng;
static const char *family_names[] = {"texel", "tiled"};

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
    size_t d = repro_bit_differences(got, want, n);
    CHECK(d == 0, "%s: %zu of %zu floats differ from C", what, d, n);
    if (getenv("TEST_VERBOSE"))
        printf("  %-58s %zu of %zu differ\n", what, d, n);
    free(got);
}

/* got within float tolerance of the default kernel's want. Negative
 * control: on 10,000 outputs or more the default kernel (the built-in exp
 * and log, other orders) must differ in the bits of some, or the bitwise
 * comparisons with C would not tell the kernels apart. */
static void expect_close(const char *what, const float *got, const float *want, size_t n)
{
    double *w = widen(want, n), err = normalized_error(got, w, n);
    size_t d = repro_bit_differences(got, want, n);
    CHECK(err < 1e-10, "%s: normalized error %.3g against the default kernel", what, err);
    CHECK(n < 10000 || d > 0, "%s: the default kernel gives the same bits on all %zu outputs", what, n);
    if (getenv("TEST_VERBOSE"))
        printf("  %-58s normalized error %.2g, %zu of %zu bits differ\n", what, err, d, n);
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
        op_cross_entropy_at(g, b1, bl, bloss, bcount, 0, (uint32_t)step, V, V, scale);
        op_cross_entropy_at(g, b2, bl, bloss, bcount, (uint32_t)step, rows - (uint32_t)step, V, V, scale);
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

/* ---- attention --------------------------------------------------------- */

/* docs: document segments, a new one at each position with probability
 * 0.1 (1) or 1/docs (more: longer documents, for the windows to cut). */
struct attn_case {
    const char *name;
    struct op_attention_shape s;
    int fused, docs;
};

/* The floats each of q, k, v (or the fused qkv) spans. */
static size_t view_floats(const struct op_attention_shape *s, uint32_t off, uint32_t stride, uint32_t heads)
{
    return off + (size_t)(s->B * s->T - 1) * stride + (size_t)heads * s->hd;
}

static void attn_bits(const char *name, const char *how, const char *out, struct gpu_buffer *b, const float *want,
                      size_t n)
{
    char what[128];
    snprintf(what, sizeof what, "%s %s: %s", name, how, out);
    expect_bits(what, b, want, n);
}

static void attn_close(const char *name, const char *how, const char *out, struct gpu_buffer *b, const float *want,
                       size_t n)
{
    char what[128];
    snprintf(what, sizeof what, "%s %s: %s against the default", name, how, out);
    float *x = download_floats(g, b, n);
    expect_close(what, want, x, n);
    free(x);
}

/* One shape: forward and backward in both families against C, the walk
 * in small parts equal to one walk, and the default kernels close. */
static void attn_case(const struct attn_case *c)
{
    const struct op_attention_shape *s = &c->s;
    size_t rows = (size_t)s->B * s->T * s->H, no = rows * s->hd, nd = (size_t)s->B * s->T;
    size_t nq = view_floats(s, s->q_off, s->q_stride ? s->q_stride : s->H * s->hd, s->H);
    size_t nk = view_floats(s, s->k_off, s->kv_stride ? s->kv_stride : s->KVH * s->hd, s->KVH);
    size_t nv = view_floats(s, s->v_off, s->kv_stride ? s->kv_stride : s->KVH * s->hd, s->KVH);
    if (c->fused)
        nq = nk = nv = nq > nk ? (nq > nv ? nq : nv) : (nk > nv ? nk : nv);
    float *q = normal_floats(nq, 1.0), *k = c->fused ? q : normal_floats(nk, 1.0);
    float *v = c->fused ? q : normal_floats(nv, 1.0), *dout = normal_floats(no, 1.0);
    float *dq0 = normal_floats(nq, 0.1), *dk0 = c->fused ? dq0 : normal_floats(nk, 0.1);
    float *dv0 = c->fused ? dq0 : normal_floats(nv, 0.1);
    int32_t *doc = NULL;
    if (c->docs) {
        doc = vkt_malloc(nd * sizeof *doc, "doc");
        random_documents(&rng, doc, (int)s->B, (int)s->T, c->docs > 1 ? 1.0 / c->docs : 0.1);
    }
    /* the C reference */
    float *out = vkt_malloc(no * sizeof *out, "out"), *lse = vkt_malloc(rows * sizeof *lse, "lse");
    repro_attention_ref(s, q, k, v, doc, out, lse);
    float *dq = vkt_malloc(nq * 4, "dq"), *dk = c->fused ? dq : vkt_malloc(nk * 4, "dk");
    float *dv = c->fused ? dq : vkt_malloc(nv * 4, "dv");
    memcpy(dq, dq0, nq * 4);
    if (!c->fused)
        memcpy(dk, dk0, nk * 4), memcpy(dv, dv0, nv * 4);
    repro_attention_backward_ref(s, q, k, v, doc, out, lse, dout, dq, dk, dv);

    struct gpu_buffer *bq = upload(q, nq * 4, "q"), *bk = c->fused ? bq : upload(k, nk * 4, "k");
    struct gpu_buffer *bv = c->fused ? bq : upload(v, nv * 4, "v");
    struct gpu_buffer *bdoc = doc ? upload(doc, nd * 4, "doc") : NULL, *bdout = upload(dout, no * 4, "dout");
    struct gpu_buffer *bout = gpu_buffer_create(g, no * 4, "out"), *blse = gpu_buffer_create(g, rows * 8, "lse");
    struct gpu_buffer *bstats = gpu_buffer_create(g, rows * 8, "stats");
    struct gpu_buffer *bdq = gpu_buffer_create(g, nq * 4, "dq");
    struct gpu_buffer *bdk = c->fused ? bdq : gpu_buffer_create(g, nk * 4, "dk");
    struct gpu_buffer *bdv = c->fused ? bdq : gpu_buffer_create(g, nv * 4, "dv");
    /* the outputs: device buffers, C's floats and their counts */
    struct gpu_buffer *bufs[5] = {bout, blse, bdq, bdk, bdv};
    const float *want[5] = {out, lse, dq, dk, dv};
    const size_t counts[5] = {no, rows, nq, nk, nv};
    static const char *names[5] = {"out", "lse", "dq", "dk", "dv"};
    int n_out = c->fused ? 3 : 5; /* fused: dq holds dk and dv */
    for (int run = 0; run < 7; run++) {
        /* texel, tiled, texel with the walks in parts; then the default
         * kernels in both families; then tiled in blocks
         * (repro_attention_block.comp, GPUs' default), and over head size
         * 32 in the blocks of 32 rows the default leaves to benchmarks
         * (VKTRAIN_FLASH_BLOCK_ROWS=32; the forward's where the backward's
         * exceed the shared memory) */
        int blocks = run >= 5, family = run % 2 == 1 || blocks, split = run == 2, repro = run < 3 || blocks;
        int rows32 = run == 6;
        if (rows32 && s->hd <= 32)
            continue;
        if (rows32)
            kernel_env_set("VKTRAIN_FLASH_BLOCK_ROWS", "32");
        char how[64];
        snprintf(how, sizeof how, "%s%s%s", family_names[family], split ? ", walk in parts" : "",
                 rows32   ? ", in blocks of 32 rows"
                 : blocks ? ", in blocks"
                          : "");
        gpu_set_kernel_class(g, family ? GPU_KERNELS_TILED : GPU_KERNELS_TEXEL);
        gpu_set_reproducible(g, repro);
        op_flash_attention_set_block(blocks);
        uint32_t part = s->T > 64 ? 48 : 5;
        op_flash_attention_set_walk(split ? part : 0); /* the sum's parts: 32, 4 */
        /* lse: twice the rows where the reproducible walk is cut (the
         * parts), once in the default kernels (blse holds twice) */
        size_t lse_floats = op_flash_attention_lse_floats(g, s);
        if (split || !repro)
            CHECK(lse_floats == (split && s->T > part ? 2 : 1) * rows,
                  "%s %s: op_flash_attention_lse_floats gives %zu for %zu rows", c->name, how, lse_floats, rows);
        gpu_upload(g, bdq, 0, dq0, nq * 4);
        if (!c->fused)
            gpu_upload(g, bdk, 0, dk0, nk * 4), gpu_upload(g, bdv, 0, dv0, nv * 4);
        int timed = gpu_profile_start(g);
        op_flash_attention(g, s, bq, bk, bv, bdoc, blse, bout);
        op_flash_attention_backward(g, s, bq, bk, bv, bdoc, bout, blse, bdout, bstats, bdq, bdk, bdv);
        gpu_profile_stop(g);
        if (timed && blocks)
            CHECK(profile_dispatches(g, "repro_attention_block_fwd") &&
                      profile_dispatches(g, "repro_attention_block_dq") &&
                      profile_dispatches(g, "repro_attention_block_dkv"),
                  "%s %s: the block kernels did not run", c->name, how);
        if (timed && rows32 && s->hd <= 64 && gpu_info(g)->shared_memory >= 32768)
            CHECK(profile_dispatches(g, "repro_attention_block_fwd64x32"), "%s %s: fwd64x32 did not run", c->name, how);
        /* over head size 64: blocks of 8 rows, or the forward's 16 */
        if (timed && blocks && s->hd > 64)
            CHECK(profile_dispatches(g, "repro_attention_block_dkv128x8") &&
                      (rows32 ? gpu_info(g)->shared_memory < 26176 ||
                                    profile_dispatches(g, "repro_attention_block_fwd128x16")
                              : profile_dispatches(g, "repro_attention_block_fwd128x8") > 0),
                  "%s %s: the blocks for head sizes over 64 did not run", c->name, how);
        kernel_env_set("VKTRAIN_FLASH_BLOCK_ROWS", NULL);
        gpu_submit(g);
        op_flash_attention_set_walk(0);
        op_flash_attention_set_block(-1);
        for (int i = 0; i < n_out; i++)
            (repro ? attn_bits : attn_close)(c->name, how, names[i], bufs[i], want[i], counts[i]);
    }
    gpu_set_reproducible(g, 0);
    gpu_buffer_destroy(g, bq), gpu_buffer_destroy(g, bdout), gpu_buffer_destroy(g, bout);
    gpu_buffer_destroy(g, blse), gpu_buffer_destroy(g, bstats), gpu_buffer_destroy(g, bdq);
    if (bdoc)
        gpu_buffer_destroy(g, bdoc);
    if (!c->fused) {
        gpu_buffer_destroy(g, bk), gpu_buffer_destroy(g, bv), gpu_buffer_destroy(g, bdk), gpu_buffer_destroy(g, bdv);
        free(k), free(v), free(dk0), free(dv0), free(dk), free(dv);
    }
    free(q), free(dout), free(dq0), free(doc), free(out), free(lse), free(dq);
}

int main(void)
{
    g = test_gpu();
    ref_rng_seed(&rng, 1414);
    ce_case(9, 1, 0.25f);
    ce_case(13, 5, 1.0f / 3.0f);
    ce_case(11, 50257, 1.0f / 7.0f);
    /* GPT-2's fused qkv: rows of 3·H·hd, q, k, v at 0, H·hd, 2·H·hd */
    const struct attn_case cases[] = {
        {"llama GQA T=37", {2, 37, 4, 2, 16, 0, 0, 0, 0, 0, 0, 0}, 0, 0},
        {"llama GQA T=37 docs", {2, 37, 4, 2, 16, 0, 0, 0, 0, 0, 0, 0}, 0, 1},
        {"GQA 4:1 T=1", {2, 1, 4, 1, 8, 0, 0, 0, 0, 0, 0, 0}, 0, 0},
        {"GQA 4:1 T=33 docs", {1, 33, 8, 2, 16, 0, 0, 0, 0, 0, 0, 0}, 0, 1},
        {"gpt2 fused T=29", {2, 29, 3, 3, 8, 0, 24, 48, 72, 72, 0, 0}, 1, 0},
        {"gpt2 fused T=29 docs", {2, 29, 3, 3, 8, 0, 24, 48, 72, 72, 0, 0}, 1, 1},
        {"head size 6 (scalar) T=19 docs", {1, 19, 2, 1, 6, 0, 0, 0, 0, 0, 0, 0}, 0, 1},
        {"T=256 hd=64 GQA docs", {1, 256, 2, 1, 64, 0, 0, 0, 0, 0, 0, 0}, 0, 1},
        {"T=45 hd=96 GQA docs", {1, 45, 4, 2, 96, 0, 0, 0, 0, 0, 0, 0}, 0, 1},
        /* walks near lavapipe's loop limit (dk, dv cut into dispatches) */
        {"T=1024 hd=64", {1, 1024, 1, 1, 64, 0, 0, 0, 0, 0, 0, 0}, 0, 0},
        /* four rows per invocation in the texel family's dq and dkv (head
         * sizes up to 32) over a long walk */
        {"T=2048 hd=32 GQA", {1, 2048, 2, 1, 32, 0, 0, 0, 0, 0, 0, 0}, 0, 0},
        /* sliding windows: masked keys +0 as another document's, the walks
         * bounded by the window (its parts and blocks across them) */
        {"llama GQA T=37 window 1 docs", {2, 37, 4, 2, 16, 0, 0, 0, 0, 0, 1, 0}, 0, 1},
        {"GQA 4:1 T=33 window 3", {1, 33, 8, 2, 16, 0, 0, 0, 0, 0, 3, 0}, 0, 0},
        {"gpt2 fused T=29 window 6 docs", {2, 29, 3, 3, 8, 0, 24, 48, 72, 72, 6, 0}, 1, 1},
        {"head size 6 (scalar) T=19 window 5 docs", {1, 19, 2, 1, 6, 0, 0, 0, 0, 0, 5, 0}, 0, 1},
        {"head size 6 (scalar) T=19 window 19 (none)", {1, 19, 2, 1, 6, 0, 0, 0, 0, 0, 19, 0}, 0, 0},
        {"T=256 hd=64 GQA window 50 docs", {1, 256, 2, 1, 64, 0, 0, 0, 0, 0, 50, 0}, 0, 80},
        {"T=256 hd=32 GQA window 40", {1, 256, 4, 2, 32, 0, 0, 0, 0, 0, 40, 0}, 0, 0},
        {"T=1024 hd=32 window 60 docs", {1, 1024, 2, 2, 32, 0, 0, 0, 0, 0, 60, 0}, 0, 200},
    };
    /* TEST_MAX_HEAD_SIZE=N runs the attention cases of head size <= N only
     * (test_lavapipe2 on Mesa 25.0, whose LLVM 15 takes minutes to compile
     * the kernels of the larger head sizes when its shader cache is cold;
     * the suite runs them all on the system's lavapipe). */
    const char *max_hd = getenv("TEST_MAX_HEAD_SIZE");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (max_hd && cases[i].s.hd > (uint32_t)atoi(max_hd)) {
            printf("not run: %s (head size %u > TEST_MAX_HEAD_SIZE %s)\n", cases[i].name, cases[i].s.hd, max_hd);
            continue;
        }
        attn_case(&cases[i]);
    }
    gpu_destroy(g);
    return test_failures ? 1 : 0;
}
