/* test_flash_attention: op_flash_attention and its backward against the
 * double C reference (tests/ref/ref_attention.c) and the present kernels
 * (op_attention, which keeps the (T,T) probabilities), on both kernel
 * families, the tiled one also in blocks (shaders/default/flash_block.comp,
 * GPUs' default; the test checks they ran): causal, packed with documents, grouped-query
 * heads, GPT-2's fused qkv views, short and long sequences (T = 1024, 2048), the walk split over dispatches (as under
 * llvmpipe's loop limit) and bindings in sequence ranges (as under a small storage range), and
 * sliding windows (1 to 40 keys, with documents, GQA, fused views, parts).
 *
 * Tolerance: normalized error mse(gpu, ref)/mse(ref, 0) < 1e-9 for out,
 * lse, dq, dk, dv against the reference and against the present kernels
 * (float32 against double; seen 1e-14 .. 1e-11; a wrong mask, scale or
 * index gives errors near 1). At T = 4096 (head size 128, and 64 with
 * four heads per kv head) the walk in one dispatch must match the walk in
 * parts of 128: without the unrolled per-head loops llvmpipe's loop limit
 * cuts the first short (seen: normalized error 369 on out).
 * Backward outputs start from random values,
 * so accumulation (+=) is checked. Determinism: a second forward and
 * backward give the same bits. */
#include <string.h>

#include "../src/ops/ops_internal.h"
#include "gpu_testing.h"
#include "ref_ops.h"
#include "vktrain/kernel_select.h"

static struct ref_rng rng;
static struct gpu *g;
static int block_pass; /* attention in blocks (op_flash_attention_set_block) */
static int last_timed; /* whether test_flash's last run was profiled */
static uint32_t window; /* the cases' sliding window (0: none) */
static float softcap;   /* the cases' soft-capping of the scores (0: none) */

/* Whether the profile since gpu_profile_start ran a kernel whose name
 * starts with prefix (a whole name: that kernel). */
static int ran(const char *prefix)
{
    return profile_dispatches(g, prefix) > 0;
}

static double *rnd(size_t n, double scale) { return random_floats(&rng, n, scale); }

/* Compares n floats of b from float `at` in steps of `stride`, `width`
 * at a time, with the packed ref. */
static void expect_view(const char *what, struct gpu_buffer *b, size_t at, size_t stride, size_t width,
                        const double *ref, size_t n)
{
    size_t rows = n / width, total = at + (rows - 1) * stride + width;
    float *all = download_floats(g, b, total), *out = vkt_malloc(n * sizeof *out, "view");
    for (size_t r = 0; r < rows; r++)
        memcpy(out + r * width, all + at + r * stride, width * sizeof *out);
    double err = normalized_error(out, ref, n);
    CHECK(err < 1e-9, "%s: normalized error %.3g", what, err);
    if (getenv("TEST_VERBOSE"))
        printf("  %-60s normalized error %.2g\n", what, err);
    free(all), free(out);
}

static double *doubles_of(struct gpu_buffer *b, size_t n)
{
    float *f = download_floats(g, b, n);
    double *d = vkt_malloc(n * sizeof *d, "doubles");
    for (size_t i = 0; i < n; i++)
        d[i] = f[i];
    free(f);
    return d;
}

/* lse[b,h,t] = log Σ exp(s) over the allowed keys, from the reference's
 * probabilities: P[t,t] = exp(s_tt − lse), so lse = s_tt − log P[t,t]. */
static double *ref_lse(const double *probs, const double *q, const double *k, int B, int T, int H, int KVH, int hd)
{
    double *lse = vkt_malloc(sizeof(double) * B * H * T, "lse"), scale = 1.0 / sqrt((double)hd);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const double *qt = q + (((size_t)b * T + t) * H + h) * hd;
                const double *kt = k + (((size_t)b * T + t) * KVH + h / (H / KVH)) * hd;
                double s = 0;
                for (int i = 0; i < hd; i++)
                    s += qt[i] * kt[i];
                size_t r = ((size_t)b * H + h) * T + t;
                s *= scale;
                lse[r] = (softcap > 0 ? softcap * tanh(s / softcap) : s) - log(probs[r * T + t]);
            }
    return lse;
}

/* Packs rows of a (rows, width) into a buffer of rows of `stride` floats
 * at `at` (the rest from `fill`). */
static void place(float *dst, size_t at, size_t stride, const double *src, size_t rows, size_t width)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < width; i++)
            dst[at + r * stride + i] = (float)src[r * width + i];
}

struct views {
    struct gpu_buffer *q, *k, *v;
    size_t q_at, k_at, v_at, q_stride, kv_stride;
};

/* q, k, v (packed) on the device: three buffers, or one fused buffer of
 * rows [pad | q | k | v] as GPT-2's c_attn output (pad floats first). */
static struct views upload(const double *q, const double *k, const double *v, size_t rows, size_t qw, size_t kw,
                           int fused, size_t pad, const char *name)
{
    struct views w = {0};
    if (!fused) {
        w.q_stride = qw, w.kv_stride = kw;
        w.q = buffer_from_doubles(g, q, rows * qw, name);
        w.k = buffer_from_doubles(g, k, rows * kw, name);
        w.v = buffer_from_doubles(g, v, rows * kw, name);
        return w;
    }
    size_t stride = pad + qw + 2 * kw, n = rows * stride;
    float *f = vkt_calloc(n, sizeof *f, "fused");
    w.q_at = pad, w.k_at = pad + qw, w.v_at = pad + qw + kw, w.q_stride = w.kv_stride = stride;
    place(f, w.q_at, stride, q, rows, qw);
    place(f, w.k_at, stride, k, rows, kw);
    place(f, w.v_at, stride, v, rows, kw);
    w.q = w.k = w.v = gpu_buffer_create(g, n * sizeof *f, name);
    gpu_upload(g, w.q, 0, f, n * sizeof *f);
    free(f);
    return w;
}

/* The views' buffers' contents (one buffer when fused). */
struct snapshot {
    float *f[3];
    size_t n[3];
};

static struct snapshot snapshot_take(const struct views *w)
{
    struct gpu_buffer *b[3] = {w->q, w->k, w->v};
    struct snapshot s = {{NULL}, {0}};
    for (int i = 0; i < (w->k == w->q ? 1 : 3); i++) {
        s.n[i] = gpu_buffer_size(b[i]) / 4;
        s.f[i] = download_floats(g, b[i], s.n[i]);
    }
    return s;
}

static void snapshot_put(const struct snapshot *s, const struct views *w)
{
    struct gpu_buffer *b[3] = {w->q, w->k, w->v};
    for (int i = 0; i < 3; i++)
        if (s->f[i])
            gpu_upload(g, b[i], 0, s->f[i], 4 * s->n[i]);
}

/* Nonzero when a and b hold the same bits. */
static int snapshot_same(const struct snapshot *a, const struct snapshot *b)
{
    for (int i = 0; i < 3; i++)
        if (a->f[i] && memcmp(a->f[i], b->f[i], 4 * a->n[i]))
            return 0;
    return 1;
}

static void snapshot_free(struct snapshot *s)
{
    for (int i = 0; i < 3; i++)
        free(s->f[i]);
}

/* The views' buffers now hold what snapshot want holds, within the
 * normalized error. */
static void expect_like(const char *what, const char *against, const struct snapshot *want, const struct views *w)
{
    struct gpu_buffer *b[3] = {w->q, w->k, w->v};
    for (int i = 0; i < 3; i++) {
        if (!want->f[i])
            continue;
        double *x = doubles_of(b[i], want->n[i]);
        double err = normalized_error(want->f[i], x, want->n[i]);
        CHECK(err < 1e-9, "%s: %s (buffer %d): normalized error %.3g", what, against, i, err);
        if (getenv("TEST_VERBOSE"))
            printf("  %-60s normalized error %.2g\n", against, err);
        free(x);
    }
}

static void release(struct views *w)
{
    gpu_buffer_destroy(g, w->q);
    if (w->k != w->q) {
        gpu_buffer_destroy(g, w->k);
        gpu_buffer_destroy(g, w->v);
    }
}

/* One case. present: also run op_attention on the same inputs and compare. */
static void test_flash(int B, int T, int H, int KVH, int hd, int with_doc, int fused, int present)
{
    size_t rows = (size_t)B * T, qw = (size_t)H * hd, kw = (size_t)KVH * hd, nq = rows * qw, nk = rows * kw;
    size_t np = (size_t)B * H * T * T, nr = (size_t)B * H * T;
    int32_t *doc = vkt_malloc(sizeof(int32_t) * rows, "doc");
    random_documents(&rng, doc, B, T, T > 100 ? 0.005 : 0.25);
    double *q = rnd(nq, 1), *k = rnd(nk, 1), *v = rnd(nk, 1), *dout = rnd(nq, 1);
    double *dq = rnd(nq, 1), *dk = rnd(nk, 1), *dv = rnd(nk, 1);
    double *out = vkt_calloc(nq, 8, "out"), *probs = vkt_calloc(np, 8, "probs");
    struct views in = upload(q, k, v, rows, qw, kw, fused, 3, "input");
    struct views grad = upload(dq, dk, dv, rows, qw, kw, fused, 3, "gradient");
    ref_attention_forward_capped(out, probs, q, k, v, with_doc ? doc : NULL, B, T, H, KVH, hd, (int)window, softcap);
    ref_attention_backward_capped(dq, dk, dv, dout, probs, q, k, v, B, T, H, KVH, hd, softcap);
    double *lse = ref_lse(probs, q, k, B, T, H, KVH, hd);
    struct gpu_buffer *bdoc = gpu_buffer_create(g, sizeof(int32_t) * rows, "doc");
    gpu_upload(g, bdoc, 0, doc, sizeof(int32_t) * rows);
    struct gpu_buffer *bo = gpu_buffer_create(g, 4 * nq, "out"), *bl = gpu_buffer_create(g, 4 * nr, "lse");
    struct gpu_buffer *bst = gpu_buffer_create(g, 8 * nr, "stats"), *bdo = buffer_from_doubles(g, dout, nq, "do");
    struct op_attention_shape sh = {.B = B, .T = T, .H = H, .KVH = KVH, .hd = hd, .q_off = in.q_at,
                                    .k_off = in.k_at, .v_off = in.v_at, .q_stride = in.q_stride,
                                    .kv_stride = in.kv_stride, .window = window, .softcap = softcap};
    struct gpu_buffer *d = with_doc ? bdoc : NULL;
    CHECK(!present || (!window && !softcap), "the present kernels have no sliding window or soft-capping");
    struct snapshot g0 = snapshot_take(&grad);
    int timed = last_timed = gpu_profile_start(g);
    op_flash_attention(g, &sh, in.q, in.k, in.v, d, bl, bo);
    op_flash_attention_backward(g, &sh, in.q, in.k, in.v, d, bo, bl, bdo, bst, grad.q, grad.k, grad.v);
    gpu_profile_stop(g);
    char what[128];
    snprintf(what, sizeof what, "%s B=%d T=%d H=%d KVH=%d hd=%d doc=%d fused=%d window=%u softcap=%g",
             gpu_kernel_class(g) == GPU_KERNELS_TEXEL ? "texel"
             : block_pass                             ? "tiled, blocks"
                                                      : "tiled",
             B, T, H, KVH, hd, with_doc, fused, window, (double)softcap);
    if (timed && block_pass)
        CHECK(ran("flash_block_fwd") && ran("flash_block_dq") && ran("flash_block_dk"), /* dkv, or dk and dv */
              "%s: the block kernels did not run", what);
    expect_view(what, bo, 0, qw, qw, out, nq);
    expect_view("  lse", bl, 0, 1, 1, lse, nr);
    expect_view("  dq", grad.q, grad.q_at, grad.q_stride, qw, dq, nq);
    expect_view("  dk", grad.k, grad.k_at, grad.kv_stride, kw, dk, nk);
    expect_view("  dv", grad.v, grad.v_at, grad.kv_stride, kw, dv, nk);
    /* Determinism: the same forward and backward again give the same bits. */
    float *o1 = download_floats(g, bo, nq);
    struct snapshot g1 = snapshot_take(&grad);
    snapshot_put(&g0, &grad);
    op_flash_attention(g, &sh, in.q, in.k, in.v, d, bl, bo);
    op_flash_attention_backward(g, &sh, in.q, in.k, in.v, d, bo, bl, bdo, bst, grad.q, grad.k, grad.v);
    float *o2 = download_floats(g, bo, nq);
    struct snapshot g2 = snapshot_take(&grad);
    CHECK(!memcmp(o1, o2, 4 * nq) && snapshot_same(&g1, &g2), "%s: not deterministic", what);
    if (present) {
        /* The present kernels on the same float inputs, views and start. */
        struct gpu_buffer *bp = gpu_buffer_create(g, 4 * np, "probs"), *bds = gpu_buffer_create(g, 4 * np, "ds");
        snapshot_put(&g0, &grad);
        op_attention(g, &sh, in.q, in.k, in.v, d, bp, bo);
        op_attention_backward(g, &sh, in.q, in.k, in.v, bp, bdo, bds, grad.q, grad.k, grad.v);
        expect_like(what, "gradients against the present kernel", &g1, &grad);
        float *po = download_floats(g, bo, nq);
        double *od = vkt_malloc(nq * sizeof *od, "o1");
        for (size_t i = 0; i < nq; i++)
            od[i] = o1[i];
        double err = normalized_error(po, od, nq);
        CHECK(err < 1e-9, "%s: out against the present kernel: normalized error %.3g", what, err);
        if (getenv("TEST_VERBOSE"))
            printf("  %-60s normalized error %.2g\n", "out against the present kernel", err);
        free(po), free(od);
        gpu_buffer_destroy(g, bp), gpu_buffer_destroy(g, bds);
    }
    snapshot_free(&g0), snapshot_free(&g1), snapshot_free(&g2);
    release(&in), release(&grad);
    gpu_buffer_destroy(g, bdoc), gpu_buffer_destroy(g, bo), gpu_buffer_destroy(g, bl), gpu_buffer_destroy(g, bst);
    gpu_buffer_destroy(g, bdo);
    free(doc), free(q), free(k), free(v), free(dout), free(dq), free(dk), free(dv), free(out), free(probs);
    free(lse), free(o1), free(o2);
}

/* The texel family's several-row kernels (fwd4, dq2, dkv2: rows that share
 * each fetch) against the one-row storage kernels (dk and dv apart) on the
 * same inputs, bit for bit: each row takes its keys in the same steps of eight from the
 * walk's start and the same operations, whatever rows share its
 * invocation (texel_elements=64 makes the views too large for texel
 * bindings). T not a multiple of 8 or of the rows per invocation,
 * documents and grouped heads put rows at every offset in a step. */
static void test_rows_same_bits(int B, int T, int H, int KVH, int hd, uint32_t walk)
{
    size_t rows = (size_t)B * T, qw = (size_t)H * hd, kw = (size_t)KVH * hd, nq = rows * qw, nk = rows * kw;
    size_t nr = (size_t)B * H * T;
    int32_t *doc = vkt_malloc(sizeof(int32_t) * rows, "doc");
    random_documents(&rng, doc, B, T, 0.1);
    double *q = rnd(nq, 1), *k = rnd(nk, 1), *v = rnd(nk, 1), *dout = rnd(nq, 1);
    struct views in = upload(q, k, v, rows, qw, kw, 0, 0, "input");
    struct views grad = upload(q, k, v, rows, qw, kw, 0, 0, "gradient");
    struct gpu_buffer *bdoc = gpu_buffer_create(g, sizeof(int32_t) * rows, "doc");
    gpu_upload(g, bdoc, 0, doc, sizeof(int32_t) * rows);
    struct gpu_buffer *bo = gpu_buffer_create(g, 4 * nq, "out"), *bl = gpu_buffer_create(g, 4 * nr, "lse");
    struct gpu_buffer *bst = gpu_buffer_create(g, 8 * nr, "stats"), *bdo = buffer_from_doubles(g, dout, nq, "do");
    struct op_attention_shape sh = {
        .B = B, .T = T, .H = H, .KVH = KVH, .hd = hd, .q_stride = qw, .kv_stride = kw, .window = window,
        .softcap = softcap};
    struct snapshot g0 = snapshot_take(&grad), got[2][2];
    struct views outs = {.q = bo, .k = bo, .v = bo};
    static const char *want[2][4] = {
        {"flash_attention_fwd4_texel_vec4", "flash_attention_dq2_texel_vec4", "flash_attention_dkv2_texel_vec4", NULL},
        {"flash_attention_fwd_storage_vec4", "flash_attention_dq_storage_vec4", "flash_attention_dk_storage_vec4",
         "flash_attention_dv_storage_vec4"}};
    char what[96];
    snprintf(what, sizeof what, "rows per invocation B=%d T=%d H=%d KVH=%d hd=%d walk=%u window=%u", B, T, H, KVH, hd,
             walk, window);
    op_flash_attention_set_walk(walk);
    for (int one = 0; one < 2; one++) {
        gpu_set_limits(g, one ? "texel_elements=64" : NULL);
        snapshot_put(&g0, &grad);
        int timed = gpu_profile_start(g);
        op_flash_attention(g, &sh, in.q, in.k, in.v, bdoc, bl, bo);
        op_flash_attention_backward(g, &sh, in.q, in.k, in.v, bdoc, bo, bl, bdo, bst, grad.q, grad.k, grad.v);
        gpu_profile_stop(g);
        for (int i = 0; timed && i < 4 && want[one][i]; i++)
            CHECK(ran(want[one][i]), "%s: %s did not run", what, want[one][i]);
        got[one][0] = snapshot_take(&outs); /* out, and lse beside it */
        got[one][0].f[1] = download_floats(g, bl, nr), got[one][0].n[1] = nr;
        got[one][1] = snapshot_take(&grad);
    }
    gpu_set_limits(g, NULL);
    op_flash_attention_set_walk(0);
    CHECK(snapshot_same(&got[0][0], &got[1][0]), "%s: out or lse differ from the one-row kernel's", what);
    CHECK(snapshot_same(&got[0][1], &got[1][1]), "%s: dq, dk or dv differ from the one-row kernels'", what);
    for (int i = 0; i < 2; i++)
        snapshot_free(&got[i][0]), snapshot_free(&got[i][1]);
    snapshot_free(&g0);
    release(&in), release(&grad);
    gpu_buffer_destroy(g, bdoc), gpu_buffer_destroy(g, bo), gpu_buffer_destroy(g, bl), gpu_buffer_destroy(g, bst);
    gpu_buffer_destroy(g, bdo);
    free(doc), free(q), free(k), free(v), free(dout);
}

/* A long walk, whole (one dispatch per pass, as llvmpipe's loop limit
 * allows only if the per-head loops unroll) and in parts of 128 keys or
 * query rows (within the limit whatever the compiler does), give the same
 * results: a walk cut short by the limit would not. */
static void test_long_walk(int T, int H, int KVH, int hd, int fused)
{
    size_t rows = (size_t)T, qw = (size_t)H * hd, kw = (size_t)KVH * hd, nq = rows * qw, nk = rows * kw;
    double *q = rnd(nq, 1), *k = rnd(nk, 1), *v = rnd(nk, 1), *dout = rnd(nq, 1);
    struct views in = upload(q, k, v, rows, qw, kw, fused, 3, "input"), grad = upload(q, k, v, rows, qw, kw, fused, 3,
                                                                                    "gradient");
    struct gpu_buffer *bo = gpu_buffer_create(g, 4 * nq, "out"), *bl = gpu_buffer_create(g, 4 * H * rows, "lse");
    struct gpu_buffer *bst = gpu_buffer_create(g, 8 * H * rows, "stats"), *bdo = buffer_from_doubles(g, dout, nq, "do");
    struct op_attention_shape sh = {.B = 1, .T = T, .H = H, .KVH = KVH, .hd = hd, .q_off = in.q_at,
                                    .k_off = in.k_at, .v_off = in.v_at, .q_stride = in.q_stride,
                                    .kv_stride = in.kv_stride};
    struct snapshot g0 = snapshot_take(&grad), whole[2];
    struct views outs = {.q = bo, .k = bo, .v = bo};
    for (int part = 0; part < 2; part++) {
        op_flash_attention_set_walk(part ? 128 : 0);
        snapshot_put(&g0, &grad);
        op_flash_attention(g, &sh, in.q, in.k, in.v, NULL, bl, bo);
        op_flash_attention_backward(g, &sh, in.q, in.k, in.v, NULL, bo, bl, bdo, bst, grad.q, grad.k, grad.v);
        if (!part) {
            whole[0] = snapshot_take(&outs);
            whole[1] = snapshot_take(&grad);
        }
    }
    op_flash_attention_set_walk(0);
    char what[96];
    snprintf(what, sizeof what, "long walk T=%d H=%d KVH=%d hd=%d fused=%d", T, H, KVH, hd, fused);
    expect_like(what, "out, whole against in parts", &whole[0], &outs);
    expect_like(what, "gradients, whole against in parts", &whole[1], &grad);
    release(&in), release(&grad);
    gpu_buffer_destroy(g, bo), gpu_buffer_destroy(g, bl), gpu_buffer_destroy(g, bst), gpu_buffer_destroy(g, bdo);
    snapshot_free(&g0), snapshot_free(&whole[0]), snapshot_free(&whole[1]);
    free(q), free(k), free(v), free(dout);
}

int main(void)
{
    ref_rng_seed(&rng, 11);
    g = test_gpu();
    /* the texel family, the tiled one with the row kernels' backward and
     * with the block kernels' (shaders/default/flash_block.comp, the default on
     * GPUs) */
    enum gpu_kernel_class classes[3] = {GPU_KERNELS_TEXEL, GPU_KERNELS_TILED, GPU_KERNELS_TILED};
    for (int c = 0; c < 3; c++) {
        gpu_set_kernel_class(g, classes[c]);
        block_pass = c == 2;
        op_flash_attention_set_block(block_pass);
        test_flash(1, 1, 1, 1, 2, 0, 0, 1);
        test_flash(2, 9, 4, 2, 6, 0, 0, 1);
        test_flash(2, 13, 6, 3, 8, 1, 0, 1);
        test_flash(3, 7, 2, 1, 5, 1, 0, 1);
        test_flash(2, 37, 4, 2, 32, 1, 0, 1); /* vec4 */
        test_flash(2, 21, 3, 3, 12, 1, 1, 1); /* fused views, pad 3: scalar */
        test_flash(2, 19, 2, 2, 16, 0, 1, 1); /* fused views, pad 3: scalar */
        test_flash(1, 9, 2, 1, 68, 0, 0, 1);
        CHECK(!block_pass || !last_timed || (ran("flash_block_fwd128x8") && ran("flash_block_dkv128x8")),
              "head size 68 in blocks: the 8-row blocks (the default over 64) did not run");
        test_flash(1, 11, 2, 1, 128, 1, 0, 0);
        /* The walk in parts of 5 keys (as under a loop limit) and the
         * bindings in ranges of sequences (as under a small storage range). */
        op_flash_attention_set_walk(5);
        test_flash(2, 23, 4, 2, 8, 1, 0, 0);
        test_flash(3, 17, 2, 2, 12, 1, 1, 0);
        op_flash_attention_set_walk(0);
        gpu_set_limits(g, "storage_range=4096");
        test_flash(5, 13, 2, 1, 16, 1, 0, 0);
        test_flash(5, 13, 2, 2, 8, 0, 1, 0); /* no documents: a stand-in binding */
        gpu_set_limits(g, NULL);
        /* Sliding windows (the reference's mask; the present kernels have
         * none): one key, windows across steps of 8 and blocks of 16 or
         * 32 rows, with documents, GQA, fused views, the walk in parts. */
        window = 1;
        test_flash(2, 9, 2, 1, 16, 0, 1, 0);
        window = 3;
        test_flash(2, 23, 4, 2, 8, 1, 0, 0);
        window = 13;
        test_flash(2, 37, 4, 2, 32, 1, 0, 0);
        window = 40;
        test_flash(1, 300, 2, 1, 64, 1, 0, 0);
        test_flash(1, 90, 3, 3, 12, 0, 1, 0);
        window = 6;
        op_flash_attention_set_walk(5);
        test_flash(2, 23, 4, 2, 8, 1, 0, 0);
        op_flash_attention_set_walk(0);
        /* Soft-capping (Gemma 2; a cap near the scores' size, so that tanh
         * bends them): alone, with a window and documents, in parts. */
        softcap = 0.7f;
        test_flash(2, 23, 4, 2, 8, 1, 0, 0);
        test_flash(2, 37, 4, 2, 32, 1, 1, 0);
        op_flash_attention_set_walk(5);
        test_flash(1, 19, 2, 1, 64, 0, 0, 0);
        op_flash_attention_set_walk(0);
        softcap = 0;
        window = 0;
        /* Long sequences: the present kernels keep T² floats per head. */
        test_flash(1, 1024, 2, 1, 64, 1, 0, c == 0);
        test_flash(1, 2048, 1, 1, 64, 0, 0, 0);
        if (block_pass) {
            /* over head size 32, the blocks of 32 rows the default leaves
             * to benchmarks (VKTRAIN_FLASH_BLOCK_ROWS=32): the forward's,
             * and the backward's where the shared memory has room */
            kernel_env_set("VKTRAIN_FLASH_BLOCK_ROWS", "32");
            test_flash(2, 37, 4, 2, 64, 1, 0, 1);
            CHECK(!last_timed || gpu_info(g)->shared_memory < 32768 || ran("flash_block_fwd64x32"),
                  "VKTRAIN_FLASH_BLOCK_ROWS=32, head size 64: flash_block_fwd64x32 did not run");
            test_flash(2, 70, 2, 1, 40, 0, 1, 0);
            /* over head size 64: the forward's 16 rows (26 KB) */
            test_flash(2, 45, 2, 1, 96, 1, 0, 1);
            CHECK(!last_timed || gpu_info(g)->shared_memory < 26176 || ran("flash_block_fwd128x16"),
                  "VKTRAIN_FLASH_BLOCK_ROWS=32, head size 96: flash_block_fwd128x16 did not run");
            kernel_env_set("VKTRAIN_FLASH_BLOCK_ROWS", NULL);
            /* dk and dv in two kernels (VKTRAIN_FLASH_DKV=split, 64 x 16) */
            kernel_env_set("VKTRAIN_FLASH_DKV", "split");
            test_flash(2, 37, 4, 2, 64, 1, 0, 1);
            CHECK(!last_timed ||
                      (ran("flash_block_dk64x16") && ran("flash_block_dv64x16") && !ran("flash_block_dkv64x16")),
                  "VKTRAIN_FLASH_DKV=split: flash_block_dk64x16 and dv64x16 did not run in place of dkv64x16");
            kernel_env_set("VKTRAIN_FLASH_DKV", NULL);
        }
    }
    gpu_set_kernel_class(g, GPU_KERNELS_TEXEL);
    op_flash_attention_set_block(0);
    /* the texel attention kernels run on CPU devices only (other devices
     * take the storage ones in both families) */
    if (gpu_cpu_device(gpu_info(g))) {
        test_rows_same_bits(3, 45, 4, 2, 16, 0);
        test_rows_same_bits(2, 61, 2, 1, 32, 13); /* the walk in parts of 13 */
        window = 11;
        test_rows_same_bits(2, 61, 2, 1, 32, 13);
        softcap = 0.7f;
        test_rows_same_bits(2, 61, 2, 1, 32, 13);
        softcap = 0;
        window = 0;
    } else
        printf("test_flash_attention: %s is not a CPU device: the texel attention kernels' bits against the storage "
               "ones not compared (those kernels run on CPU devices only)\n",
               gpu_info(g)->name);
    op_flash_attention_set_block(-1);
    test_long_walk(4096, 1, 1, 128, 1); /* scalar: 128 floats per head in registers */
    test_long_walk(4096, 4, 1, 64, 0);  /* vec4; dk, dv walk 4 heads × 4096 rows */
    gpu_destroy(g);
    return test_result("test_flash_attention");
}
