/* test_ops_nn: the transformer ops (norms, embeddings, RoPE, attention,
 * activations, bias, cross-entropy) against the double C reference in
 * tests/ref, forward and backward, on odd shapes.
 *
 * Tolerance: normalized error mse(gpu, ref)/mse(ref, 0) < 1e-9 per output,
 * for float32 kernels against a double reference given the same float
 * inputs (seen: 1e-14 .. 1e-12; an indexing or formula mistake gives
 * errors near 1). Backward outputs start from random values, so
 * accumulation (+=) is checked too. Determinism: two runs of the attention
 * and cross-entropy kernels give the same bits. Embedding tables in bf16
 * (model.base_dtype bf16): against the reference on the rounded tables,
 * and bit for bit the fp32 kernel's on them, in each kernel family. */
#include <math.h>
#include <string.h>

#include "gpu_testing.h"
#include "ref_ops.h"
#include "vktrain/ops.h"

static struct ref_rng rng;
static struct gpu *g;

static double *rnd(size_t n, double scale) { return random_floats(&rng, n, scale); }

static double *copy(const double *x, size_t n)
{
    double *y = vkt_malloc(n * sizeof *y, "test copy");
    memcpy(y, x, n * sizeof *y);
    return y;
}

static struct gpu_buffer *ints(const int32_t *x, size_t n, const char *name)
{
    struct gpu_buffer *b = gpu_buffer_create(g, n * sizeof *x, name);
    gpu_upload(g, b, 0, x, n * sizeof *x);
    return b;
}

/* Compares buffer b (n floats) with ref; frees nothing. */
static void expect(const char *what, struct gpu_buffer *b, const double *ref, size_t n)
{
    float *out = download_floats(g, b, n);
    double err = normalized_error(out, ref, n);
    CHECK(err < 1e-9, "%s: normalized error %.3g", what, err);
    if (getenv("TEST_VERBOSE")) printf("  %-48s normalized error %.2g\n", what, err);
    free(out);
}

/* The other kernel family than the current one (texel <-> tiled). */
static enum gpu_kernel_class other_class(void)
{
    return gpu_kernel_class(g) == GPU_KERNELS_TEXEL ? GPU_KERNELS_TILED : GPU_KERNELS_TEXEL;
}

/* Buffers a and b (n floats) hold the same bits: the two kernel families
 * do the same arithmetic for copies, sums and rotations. */
static void expect_same_bits(const char *what, struct gpu_buffer *a, struct gpu_buffer *b, size_t n)
{
    float *x = download_floats(g, a, n), *y = download_floats(g, b, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += memcmp(&x[i], &y[i], sizeof(float)) != 0;
    CHECK(bad == 0, "%s: %zu of %zu elements differ between the kernel families", what, bad, n);
    free(x), free(y);
}

static void test_rmsnorm(int N, int C)
{
    double *x = rnd((size_t)N * C, 2), *w = rnd(C, 1), *dy = rnd((size_t)N * C, 1), *dx0 = rnd((size_t)N * C, 1);
    double *dw0 = rnd(C, 1), *y = vkt_calloc((size_t)N * C, sizeof *y, "y"), *rstd = vkt_calloc(N, 8, "rstd");
    double *dx = copy(dx0, (size_t)N * C), *dw = copy(dw0, C);
    ref_rmsnorm_forward(y, rstd, x, w, N, C, 1e-5);
    ref_rmsnorm_backward(dx, dw, dy, x, w, rstd, N, C);
    struct gpu_buffer *bx = buffer_from_doubles(g, x, (size_t)N * C, "x"), *bw = buffer_from_doubles(g, w, C, "w");
    struct gpu_buffer *by = gpu_buffer_create(g, sizeof(float) * N * C, "y");
    struct gpu_buffer *br = gpu_buffer_create(g, sizeof(float) * N, "rstd");
    struct gpu_buffer *bdy = buffer_from_doubles(g, dy, (size_t)N * C, "dy");
    struct gpu_buffer *bdx = buffer_from_doubles(g, dx0, (size_t)N * C, "dx");
    struct gpu_buffer *bdw = buffer_from_doubles(g, dw0, C, "dw");
    op_rmsnorm(g, bx, bw, by, br, N, C, 1e-5f);
    op_rmsnorm_backward(g, bdy, bx, bw, br, bdx, bdw, N, C);
    char what[64];
    snprintf(what, sizeof what, "rmsnorm N=%d C=%d y", N, C);
    expect(what, by, y, (size_t)N * C);
    snprintf(what, sizeof what, "rmsnorm N=%d C=%d dx", N, C);
    expect(what, bdx, dx, (size_t)N * C);
    snprintf(what, sizeof what, "rmsnorm N=%d C=%d dw", N, C);
    expect(what, bdw, dw, C);
    struct gpu_buffer *bufs[] = {bx, bw, by, br, bdy, bdx, bdw};
    for (size_t i = 0; i < 7; i++)
        gpu_buffer_destroy(g, bufs[i]);
    free(x), free(w), free(dy), free(dx0), free(dw0), free(y), free(rstd), free(dx), free(dw);
}

static void test_layernorm(int N, int C)
{
    size_t n = (size_t)N * C;
    double *x = rnd(n, 2), *w = rnd(C, 1), *b = rnd(C, 1), *dy = rnd(n, 1), *dx0 = rnd(n, 1), *dw0 = rnd(C, 1);
    double *db0 = rnd(C, 1), *y = vkt_calloc(n, 8, "y"), *mean = vkt_calloc(N, 8, "m"), *rstd = vkt_calloc(N, 8, "r");
    double *dx = copy(dx0, n), *dw = copy(dw0, C), *db = copy(db0, C);
    ref_layernorm_forward(y, mean, rstd, x, w, b, N, C, 1e-5);
    ref_layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, N, C);
    struct gpu_buffer *bx = buffer_from_doubles(g, x, n, "x"), *bw = buffer_from_doubles(g, w, C, "w");
    struct gpu_buffer *bb = buffer_from_doubles(g, b, C, "b"), *by = gpu_buffer_create(g, 4 * n, "y");
    struct gpu_buffer *bm = gpu_buffer_create(g, 4 * N, "mean"), *br = gpu_buffer_create(g, 4 * N, "rstd");
    struct gpu_buffer *bdy = buffer_from_doubles(g, dy, n, "dy"), *bdx = buffer_from_doubles(g, dx0, n, "dx");
    struct gpu_buffer *bdw = buffer_from_doubles(g, dw0, C, "dw"), *bdb = buffer_from_doubles(g, db0, C, "db");
    op_layernorm(g, bx, bw, bb, by, bm, br, N, C, 1e-5f);
    op_layernorm_backward(g, bdy, bx, bw, bm, br, bdx, bdw, bdb, N, C);
    expect("layernorm y", by, y, n);
    expect("layernorm dx", bdx, dx, n);
    expect("layernorm dw", bdw, dw, C);
    expect("layernorm db", bdb, db, C);
    struct gpu_buffer *bufs[] = {bx, bw, bb, by, bm, br, bdy, bdx, bdw, bdb};
    for (size_t i = 0; i < 10; i++)
        gpu_buffer_destroy(g, bufs[i]);
    free(x), free(w), free(b), free(dy), free(dx0), free(dw0), free(db0), free(y), free(mean), free(rstd);
    free(dx), free(dw), free(db);
}

static void test_embedding(int N, int C, int V, int P, int with_pos)
{
    int32_t *tok = vkt_malloc(sizeof(int32_t) * N, "tok"), *pos = vkt_malloc(sizeof(int32_t) * N, "pos");
    for (int i = 0; i < N; i++) {
        tok[i] = (int32_t)(ref_rng_u64(&rng) % (uint64_t)(V < 4 ? V : 4)); /* repeated ids: scatter-add */
        pos[i] = (int32_t)(ref_rng_u64(&rng) % (uint64_t)P);
    }
    size_t n = (size_t)N * C;
    double *wte = rnd((size_t)V * C, 1), *wpe = rnd((size_t)P * C, 1), *dout = rnd(n, 1);
    double *dwte0 = rnd((size_t)V * C, 1), *dwpe0 = rnd((size_t)P * C, 1), *out = vkt_calloc(n, 8, "out");
    double *dwte = copy(dwte0, (size_t)V * C), *dwpe = copy(dwpe0, (size_t)P * C);
    ref_embedding_forward(out, tok, with_pos ? pos : NULL, wte, with_pos ? wpe : NULL, N, C);
    ref_embedding_backward(dwte, with_pos ? dwpe : NULL, dout, tok, with_pos ? pos : NULL, N, C);
    struct gpu_buffer *bt = ints(tok, N, "tokens"), *bp = ints(pos, N, "positions");
    struct gpu_buffer *bwte = buffer_from_doubles(g, wte, (size_t)V * C, "wte");
    struct gpu_buffer *bwpe = buffer_from_doubles(g, wpe, (size_t)P * C, "wpe");
    struct gpu_buffer *bout = gpu_buffer_create(g, 4 * n, "out"), *bdout = buffer_from_doubles(g, dout, n, "dout");
    struct gpu_buffer *bdwte = buffer_from_doubles(g, dwte0, (size_t)V * C, "dwte");
    struct gpu_buffer *bdwpe = buffer_from_doubles(g, dwpe0, (size_t)P * C, "dwpe");
    op_embedding(g, bt, with_pos ? bp : NULL, bwte, with_pos ? bwpe : NULL, bout, N, C, V, P);
    op_embedding_backward(g, bt, bdout, bdwte, N, C, V);
    if (with_pos)
        op_embedding_backward(g, bp, bdout, bdwpe, N, C, P);
    expect("embedding out", bout, out, n);
    expect("embedding dwte", bdwte, dwte, (size_t)V * C);
    expect("embedding dwpe", bdwpe, with_pos ? dwpe : dwpe0, (size_t)P * C);
    /* The same ops on the other kernel family give the same bits. */
    struct gpu_buffer *bout2 = gpu_buffer_create(g, 4 * n, "out 2");
    struct gpu_buffer *bdwte2 = buffer_from_doubles(g, dwte0, (size_t)V * C, "dwte 2");
    struct gpu_buffer *bdwpe2 = buffer_from_doubles(g, dwpe0, (size_t)P * C, "dwpe 2");
    enum gpu_kernel_class cls = gpu_kernel_class(g);
    gpu_set_kernel_class(g, other_class());
    op_embedding(g, bt, with_pos ? bp : NULL, bwte, with_pos ? bwpe : NULL, bout2, N, C, V, P);
    op_embedding_backward(g, bt, bdout, bdwte2, N, C, V);
    if (with_pos)
        op_embedding_backward(g, bp, bdout, bdwpe2, N, C, P);
    gpu_set_kernel_class(g, cls);
    expect_same_bits("embedding out", bout, bout2, n);
    expect_same_bits("embedding dwte", bdwte, bdwte2, (size_t)V * C);
    expect_same_bits("embedding dwpe", bdwpe, bdwpe2, (size_t)P * C);
    struct gpu_buffer *bufs[] = {bt, bp, bwte, bwpe, bout, bdout, bdwte, bdwpe, bout2, bdwte2, bdwpe2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        gpu_buffer_destroy(g, bufs[i]);
    free(tok), free(pos), free(wte), free(wpe), free(dout), free(dwte0), free(dwpe0), free(out), free(dwte);
    free(dwpe);
}

/* bf16 tables (a frozen base, model.base_dtype bf16) on the current kernel
 * family: the output is the reference's on the tables rounded to bf16,
 * and bit for bit the fp32 kernel's on those rounded tables. */
static void test_embedding_bf16(int N, int C, int V, int P, int with_pos)
{
    int32_t *tok = vkt_malloc(sizeof(int32_t) * N, "tok"), *pos = vkt_malloc(sizeof(int32_t) * N, "pos");
    for (int i = 0; i < N; i++) {
        tok[i] = (int32_t)(ref_rng_u64(&rng) % (uint64_t)V);
        pos[i] = (int32_t)(ref_rng_u64(&rng) % (uint64_t)P);
    }
    size_t n = (size_t)N * C;
    double *wte = rnd((size_t)V * C, 1), *wpe = rnd((size_t)P * C, 1), *out = vkt_calloc(n, 8, "out");
    /* buffer_bf16_from_doubles rounds the doubles first */
    struct gpu_buffer *hwte = buffer_bf16_from_doubles(g, wte, (size_t)V * C, "wte bf16");
    struct gpu_buffer *hwpe = buffer_bf16_from_doubles(g, wpe, (size_t)P * C, "wpe bf16");
    struct gpu_buffer *fwte = buffer_from_doubles(g, wte, (size_t)V * C, "wte rounded");
    struct gpu_buffer *fwpe = buffer_from_doubles(g, wpe, (size_t)P * C, "wpe rounded");
    ref_embedding_forward(out, tok, with_pos ? pos : NULL, wte, with_pos ? wpe : NULL, N, C);
    struct gpu_buffer *bt = ints(tok, N, "tokens"), *bp = ints(pos, N, "positions");
    struct gpu_buffer *bh = gpu_buffer_create(g, 4 * n, "out bf16"), *bf = gpu_buffer_create(g, 4 * n, "out fp32");
    op_embedding(g, bt, with_pos ? bp : NULL, hwte, with_pos ? hwpe : NULL, bh, N, C, V, P);
    op_embedding(g, bt, with_pos ? bp : NULL, fwte, with_pos ? fwpe : NULL, bf, N, C, V, P);
    expect("embedding out (bf16 tables)", bh, out, n);
    float *x = download_floats(g, bh, n), *y = download_floats(g, bf, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += memcmp(&x[i], &y[i], sizeof(float)) != 0;
    CHECK(bad == 0,
          "embedding %s N=%d C=%d V=%d P=%d: %zu of %zu outputs of the bf16 tables differ from the fp32 "
          "kernel's on the same rounded tables (bitwise expected)",
          gpu_kernel_class(g) == GPU_KERNELS_TEXEL ? "texel" : "tiled", N, C, V, P, bad, n);
    free(x), free(y);
    struct gpu_buffer *bufs[] = {hwte, hwpe, fwte, fwpe, bt, bp, bh, bf};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        gpu_buffer_destroy(g, bufs[i]);
    free(tok), free(pos), free(wte), free(wpe), free(out);
}

/* The reference RoPE over the first rot of each head's hd dimensions (the
 * rest unchanged): the whole-head reference on those dimensions alone. */
static void ref_rope_partial(double *y, const double *x, const int32_t *pos, int N, int H, int hd, int rot,
                             int backward)
{
    size_t n = (size_t)N * H;
    double *xs = vkt_calloc(n * rot, 8, "rope part"), *ys = vkt_calloc(n * rot, 8, "rope part");
    for (size_t r = 0; r < n; r++) {
        memcpy(xs + r * rot, x + r * hd, sizeof(double) * rot);
        memcpy(y + r * hd + rot, x + r * hd + rot, sizeof(double) * (hd - rot));
    }
    if (backward)
        ref_rope_backward(ys, xs, pos, N, H, rot, 10000.0);
    else
        ref_rope_forward(ys, xs, pos, N, H, rot, 10000.0);
    for (size_t r = 0; r < n; r++)
        memcpy(y + r * hd, ys + r * rot, sizeof(double) * rot);
    free(xs), free(ys);
}

/* rot < hd: partial rotary (Phi-4-mini's partial_rotary_factor). */
static void test_rope(int N, int H, int hd, int rot, int max_pos)
{
    size_t n = (size_t)N * H * hd;
    int32_t *pos = vkt_malloc(sizeof(int32_t) * N, "pos");
    for (int i = 0; i < N; i++)
        pos[i] = (int32_t)(ref_rng_u64(&rng) % (uint64_t)max_pos);
    double *x = rnd(n, 1), *y = vkt_calloc(n, 8, "y"), *dx = vkt_calloc(n, 8, "dx");
    ref_rope_partial(y, x, pos, N, H, hd, rot, 0);
    ref_rope_partial(dx, x, pos, N, H, hd, rot, 1); /* the backward of "dout = x" */
    float *table = vkt_malloc(sizeof(float) * max_pos * rot, "rope table");
    op_rope_table(table, max_pos, rot, 10000.0, NULL);
    struct gpu_buffer *bt = gpu_buffer_create(g, sizeof(float) * max_pos * rot, "rope table");
    gpu_upload(g, bt, 0, table, sizeof(float) * max_pos * rot);
    struct gpu_buffer *bp = ints(pos, N, "positions"), *bx = buffer_from_doubles(g, x, n, "x");
    struct gpu_buffer *bd = buffer_from_doubles(g, x, n, "dout");
    op_rope(g, bx, bp, bt, N, H, hd, rot, max_pos, 0);
    op_rope(g, bd, bp, bt, N, H, hd, rot, max_pos, 1);
    char what[64];
    snprintf(what, sizeof what, "rope forward (hd %d, rot %d)", hd, rot);
    expect(what, bx, y, n);
    snprintf(what, sizeof what, "rope backward (hd %d, rot %d)", hd, rot);
    expect(what, bd, dx, n);
    /* The same ops on the other kernel family give the same bits. */
    struct gpu_buffer *bx2 = buffer_from_doubles(g, x, n, "x 2"), *bd2 = buffer_from_doubles(g, x, n, "dout 2");
    enum gpu_kernel_class cls = gpu_kernel_class(g);
    gpu_set_kernel_class(g, other_class());
    op_rope(g, bx2, bp, bt, N, H, hd, rot, max_pos, 0);
    op_rope(g, bd2, bp, bt, N, H, hd, rot, max_pos, 1);
    gpu_set_kernel_class(g, cls);
    expect_same_bits("rope forward", bx, bx2, n);
    expect_same_bits("rope backward", bd, bd2, n);
    gpu_buffer_destroy(g, bx2), gpu_buffer_destroy(g, bd2);
    gpu_buffer_destroy(g, bt), gpu_buffer_destroy(g, bp), gpu_buffer_destroy(g, bx), gpu_buffer_destroy(g, bd);
    free(pos), free(x), free(y), free(dx), free(table);
}

static void test_attention(int B, int T, int H, int KVH, int hd, int with_doc)
{
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KVH * hd, np = (size_t)B * H * T * T;
    int32_t *doc = vkt_malloc(sizeof(int32_t) * B * T, "doc");
    random_documents(&rng, doc, B, T, 0.25);
    double *q = rnd(nq, 1), *k = rnd(nk, 1), *v = rnd(nk, 1), *dout = rnd(nq, 1);
    double *dq0 = rnd(nq, 1), *dk0 = rnd(nk, 1), *dv0 = rnd(nk, 1);
    double *out = vkt_calloc(nq, 8, "out"), *probs = vkt_calloc(np, 8, "probs");
    double *dq = copy(dq0, nq), *dk = copy(dk0, nk), *dv = copy(dv0, nk);
    ref_attention_forward(out, probs, q, k, v, with_doc ? doc : NULL, B, T, H, KVH, hd);
    ref_attention_backward(dq, dk, dv, dout, probs, q, k, v, B, T, H, KVH, hd);
    struct gpu_buffer *bq = buffer_from_doubles(g, q, nq, "q"), *bk = buffer_from_doubles(g, k, nk, "k");
    struct gpu_buffer *bv = buffer_from_doubles(g, v, nk, "v"), *bdoc = ints(doc, (size_t)B * T, "doc");
    struct gpu_buffer *bp = gpu_buffer_create(g, 4 * np, "probs"), *bo = gpu_buffer_create(g, 4 * nq, "out");
    struct gpu_buffer *bds = gpu_buffer_create(g, 4 * np, "dscores"), *bdo = buffer_from_doubles(g, dout, nq, "do");
    struct gpu_buffer *bdq = buffer_from_doubles(g, dq0, nq, "dq"), *bdk = buffer_from_doubles(g, dk0, nk, "dk");
    struct gpu_buffer *bdv = buffer_from_doubles(g, dv0, nk, "dv");
    struct op_attention_shape sh = {.B = B, .T = T, .H = H, .KVH = KVH, .hd = hd};
    op_attention(g, &sh, bq, bk, bv, with_doc ? bdoc : NULL, bp, bo);
    op_attention_backward(g, &sh, bq, bk, bv, bp, bdo, bds, bdq, bdk, bdv);
    char what[96];
    snprintf(what, sizeof what, "attention B=%d T=%d H=%d KVH=%d hd=%d doc=%d", B, T, H, KVH, hd, with_doc);
    expect(what, bo, out, nq);
    expect("  its probabilities", bp, probs, np);
    expect("  dq", bdq, dq, nq);
    expect("  dk", bdk, dk, nk);
    expect("  dv", bdv, dv, nk);
    /* Determinism: the same forward again gives the same bits. */
    float *o1 = download_floats(g, bo, nq);
    op_attention(g, &sh, bq, bk, bv, with_doc ? bdoc : NULL, bp, bo);
    float *o2 = download_floats(g, bo, nq);
    CHECK(!memcmp(o1, o2, 4 * nq), "%s: not deterministic", what);
    struct gpu_buffer *bufs[] = {bq, bk, bv, bdoc, bp, bo, bds, bdo, bdq, bdk, bdv};
    for (size_t i = 0; i < 11; i++)
        gpu_buffer_destroy(g, bufs[i]);
    free(doc), free(q), free(k), free(v), free(dout), free(dq0), free(dk0), free(dv0), free(out), free(probs);
    free(dq), free(dk), free(dv), free(o1), free(o2);
}

/* GELU far in its negative tail, where 0.5·x·(1 + tanh u) cancels: each
 * output must keep its relative precision (max relative error < 1e-5),
 * which the normalized error over mixed magnitudes would not show. The
 * expected values use the identity 0.5·(1 + tanh u) = 1/(1 + exp(−2u)) in
 * double, since the tanh form loses its digits there even in double. */
static void test_gelu_tail(void)
{
    enum { n = 64 };
    double x[n], y[n];
    for (int i = 0; i < n; i++) {
        x[i] = (double)(float)(-3.0 - 6.0 * i / (n - 1)); /* -3 .. -9 */
        double u = 0.7978845608028654 * (x[i] + 0.044715 * x[i] * x[i] * x[i]);
        y[i] = x[i] / (1.0 + exp(-2.0 * u));
    }
    struct gpu_buffer *bx = buffer_from_doubles(g, x, n, "x"), *by = gpu_buffer_create(g, 4 * n, "y");
    op_gelu(g, bx, by, n);
    float *out = download_floats(g, by, n);
    double worst = 0;
    for (int i = 0; i < n; i++)
        worst = fmax(worst, fabs(out[i] - y[i]) / fabs(y[i]));
    CHECK(worst < 1e-5, "gelu tail x in [-9, -3]: relative error %.3g", worst);
    free(out);
    gpu_buffer_destroy(g, bx), gpu_buffer_destroy(g, by);
}

static void test_activations(size_t n)
{
    double *a = rnd(n, 6), *b = rnd(n, 2), *dh = rnd(n, 1), *d0 = rnd(n, 1), *e0 = rnd(n, 1);
    double *h = vkt_calloc(n, 8, "h"), *y = vkt_calloc(n, 8, "y");
    double *dg = copy(d0, n), *du = copy(e0, n), *dx = copy(d0, n);
    ref_swiglu_forward(h, a, b, n);
    ref_swiglu_backward(dg, du, dh, a, b, n);
    ref_gelu_forward(y, a, n);
    ref_gelu_backward(dx, dh, a, n);
    struct gpu_buffer *ba = buffer_from_doubles(g, a, n, "gate"), *bb = buffer_from_doubles(g, b, n, "up");
    struct gpu_buffer *bdh = buffer_from_doubles(g, dh, n, "dh"), *bh = gpu_buffer_create(g, 4 * n, "h");
    struct gpu_buffer *by = gpu_buffer_create(g, 4 * n, "y"), *bdg = buffer_from_doubles(g, d0, n, "dgate");
    struct gpu_buffer *bdu = buffer_from_doubles(g, e0, n, "dup"), *bdx = buffer_from_doubles(g, d0, n, "dx");
    op_swiglu(g, ba, bb, bh, n);
    op_swiglu_backward(g, ba, bb, bdh, bdg, bdu, n);
    op_gelu(g, ba, by, n);
    op_gelu_backward(g, ba, bdh, bdx, n);
    expect("swiglu h", bh, h, n);
    expect("swiglu dgate", bdg, dg, n);
    expect("swiglu dup", bdu, du, n);
    expect("gelu y", by, y, n);
    expect("gelu dx", bdx, dx, n);
    struct gpu_buffer *bufs[] = {ba, bb, bdh, bh, by, bdg, bdu, bdx};
    for (size_t i = 0; i < 8; i++)
        gpu_buffer_destroy(g, bufs[i]);
    free(a), free(b), free(dh), free(d0), free(e0), free(h), free(y), free(dg), free(du), free(dx);
}

static void test_bias(int N, int C)
{
    size_t n = (size_t)N * C;
    double *bias = rnd(C, 1), *y0 = rnd(n, 1), *dy = rnd(n, 1), *db0 = rnd(C, 1);
    double *y = copy(y0, n), *db = copy(db0, C);
    for (size_t i = 0; i < n; i++)
        y[i] += bias[i % C];
    ref_bias_add_backward(db, dy, N, C);
    struct gpu_buffer *bb = buffer_from_doubles(g, bias, C, "bias"), *by = buffer_from_doubles(g, y0, n, "y");
    struct gpu_buffer *bdy = buffer_from_doubles(g, dy, n, "dy"), *bdb = buffer_from_doubles(g, db0, C, "db");
    op_bias_add(g, bb, by, N, C);
    op_bias_backward(g, bdy, bdb, N, C);
    expect("bias add", by, y, n);
    expect("bias gradient", bdb, db, C);
    gpu_buffer_destroy(g, bb), gpu_buffer_destroy(g, by), gpu_buffer_destroy(g, bdy), gpu_buffer_destroy(g, bdb);
    free(bias), free(y0), free(dy), free(db0), free(y), free(db);
}

/* softcap > 0: Gemma 2's final soft-capping, the reference's logits
 * softcap·tanh(x / softcap) and its dlogits times 1 − tanh². */
static void test_cross_entropy_capped(int N, int V, double softcap)
{
    size_t n = (size_t)N * V;
    int32_t *labels = vkt_malloc(sizeof(int32_t) * N, "labels");
    for (int i = 0; i < N; i++) {
        uint64_t r = ref_rng_u64(&rng) % 8;
        labels[i] = r == 0 ? -100 : r == 1 ? V + 3 : r == 2 ? -7 : (int32_t)(ref_rng_u64(&rng) % (uint64_t)V);
    }
    double *logits = rnd(n, 8), *dlogits = vkt_calloc(n, 8, "dlogits");
    double loss = 0;
    int count = 0;
    double scale = 1.0 / 37.0, *capped = vkt_malloc(sizeof(double) * n, "capped logits");
    for (size_t i = 0; i < n; i++)
        capped[i] = softcap > 0 ? softcap * tanh(logits[i] / softcap) : logits[i];
    ref_crossentropy_forward_backward(dlogits, &loss, &count, capped, labels, N, V, scale);
    for (size_t i = 0; i < n && softcap > 0; i++)
        dlogits[i] *= 1.0 - (capped[i] / softcap) * (capped[i] / softcap);
    struct gpu_buffer *bl = buffer_from_doubles(g, logits, n, "logits"), *blab = ints(labels, N, "labels");
    struct gpu_buffer *bloss = gpu_buffer_create(g, 4 * N, "row loss"), *bcnt = gpu_buffer_create(g, 4 * N, "count");
    op_cross_entropy_capped(g, bl, blab, bloss, bcnt, 0, N, V, V, (float)scale, (float)softcap);
    char what[96];
    snprintf(what, sizeof what, "cross_entropy N=%d V=%d softcap=%g dlogits", N, V, softcap);
    expect(what, bl, dlogits, n);
    float *rl = download_floats(g, bloss, N), *rc = download_floats(g, bcnt, N), *dl = download_floats(g, bl, n);
    double sum = 0, cnt = 0;
    size_t nonzero_ignored = 0;
    for (int i = 0; i < N; i++) {
        sum += rl[i], cnt += rc[i];
        if (labels[i] < 0 || labels[i] >= V)
            for (int j = 0; j < V; j++)
                nonzero_ignored += dl[(size_t)i * V + j] != 0.0f;
    }
    CHECK(cnt == count, "%s: counted %g valid rows, reference %d", what, cnt, count);
    CHECK(fabs(sum - loss) <= 1e-5 * fabs(loss) + 1e-6, "%s: loss %.9g vs reference %.9g", what, sum, loss);
    CHECK(nonzero_ignored == 0, "%s: %zu nonzero gradients on ignored rows", what, nonzero_ignored);
    gpu_buffer_destroy(g, bl), gpu_buffer_destroy(g, blab), gpu_buffer_destroy(g, bloss), gpu_buffer_destroy(g, bcnt);
    free(labels), free(logits), free(dlogits), free(rl), free(rc), free(dl), free(capped);
}

static void test_cross_entropy(int N, int V)
{
    test_cross_entropy_capped(N, V, 0);
}

/* Column sums (here the bias gradient) over many rows against exact
 * double sums: |gpu − exact| ≤ 1e-6·Σ_r |dy[r,c]| for each column (the
 * worst case of one float walk over N rows is (N−1)·2^-24 ≈ 2.4e-4 of
 * that; the blocked sums of colsum.comp round far less), and a rerun gives
 * the same bits. */
static void test_colsum_sums(int N, int C)
{
    size_t n = (size_t)N * C;
    double *dy = rnd(n, 1), *exact = vkt_calloc((size_t)C, sizeof(double), "exact sums");
    double *mag = vkt_calloc((size_t)C, sizeof(double), "sums of magnitudes");
    for (size_t i = 0; i < n; i++) {
        exact[i % (size_t)C] += dy[i];
        mag[i % (size_t)C] += fabs(dy[i]);
    }
    struct gpu_buffer *bdy = buffer_from_doubles(g, dy, n, "dy");
    struct gpu_buffer *db[2] = {gpu_buffer_create(g, sizeof(float) * (size_t)C, "db"),
                                gpu_buffer_create(g, sizeof(float) * (size_t)C, "db rerun")};
    float *out[2];
    for (int k = 0; k < 2; k++) {
        gpu_zero(g, db[k]);
        op_bias_backward(g, bdy, db[k], (uint32_t)N, (uint32_t)C);
        out[k] = download_floats(g, db[k], (size_t)C);
    }
    int bad = 0;
    double worst = 0;
    for (int c = 0; c < C; c++) {
        double rel = fabs(out[0][c] - exact[c]) / mag[c];
        worst = rel > worst ? rel : worst;
        bad += rel > 1e-6;
    }
    const char *family = gpu_kernel_class(g) == GPU_KERNELS_TEXEL ? "texel" : "tiled";
    CHECK(bad == 0, "column sums %s N=%d C=%d: %d columns off by more than 1e-6 of the sum of magnitudes (worst %.3g)",
          family, N, C, bad, worst);
    CHECK(!memcmp(out[0], out[1], sizeof(float) * (size_t)C), "column sums %s N=%d C=%d: a rerun gave other bits",
          family, N, C);
    printf("  column sums %s N=%d C=%d: worst error %.2g of the sum of magnitudes\n", family, N, C, worst);
    gpu_buffer_destroy(g, bdy), gpu_buffer_destroy(g, db[0]), gpu_buffer_destroy(g, db[1]);
    free(dy), free(exact), free(mag), free(out[0]), free(out[1]);
}

int main(void)
{
    ref_rng_seed(&rng, 7);
    g = test_gpu();
    /* Both kernel families on this device (texel: CPU, tiled: GPU). */
    enum gpu_kernel_class classes[2] = {GPU_KERNELS_TEXEL, GPU_KERNELS_TILED};
    for (int c = 0; c < 2; c++) {
        gpu_set_kernel_class(g, classes[c]);
        test_rmsnorm(1, 1);
        test_rmsnorm(7, 33);
        test_rmsnorm(5, 300);
        test_rmsnorm(6, 130);
        test_rmsnorm(70, 64);
        test_layernorm(1, 3);
        test_layernorm(9, 300);
        test_layernorm(7, 130);
        test_layernorm(70, 64);
        test_embedding(1, 1, 1, 1, 0);
        test_embedding(37, 13, 11, 9, 1);
        test_embedding(50, 70, 259, 64, 0);
        test_rope(1, 1, 2, 2, 1);
        test_rope(23, 3, 10, 10, 40);
        test_rope(16, 4, 64, 64, 2048);
        test_attention(1, 1, 1, 1, 2, 0);
        test_attention(2, 9, 4, 2, 6, 0);
        test_attention(2, 13, 6, 3, 8, 1);
        test_attention(3, 7, 2, 1, 5, 1);
        test_attention(2, 37, 4, 2, 32, 1); /* vec4 texel path, registers */
        test_attention(2, 21, 2, 2, 12, 0);
        test_attention(1, 9, 2, 1, 68, 0);  /* head too large for registers */
        test_activations(1);
        test_activations(1037);
        test_gelu_tail();
        test_bias(1, 1);
        test_bias(19, 67);
        test_cross_entropy(1, 1);
        test_cross_entropy(17, 259);
        test_cross_entropy(9, 1000);
        /* Walks longer than llvmpipe's 65,535-iteration loop limit: the
         * column sums and the embedding backward split their rows. */
        test_bias(70001, 3);
        test_embedding(70001, 5, 7, 3, 1);
        test_embedding(70001, 8, 7, 3, 0);
        /* Last, so the random inputs of the tests above stay as they were:
         * the vec4 texel embedding, and RoPE with hd/2 not a multiple of 4
         * (scalar texel path) and equal to 4 (one vec4 chunk per head). */
        test_embedding(41, 24, 19, 12, 1);
        test_rope(9, 2, 12, 12, 9);
        test_bias(19, 68); /* C % 4 == 0: the vec4 texel bias add */
        test_rope(7, 3, 8, 8, 5);
        /* partial rotary: 3/4 of heads of 64 (vec4 texel: 48 rotated), 1/2
         * of 12 (scalar), 2 of 10 */
        test_rope(11, 3, 64, 48, 37);
        test_rope(9, 2, 12, 6, 9);
        test_rope(5, 2, 10, 2, 7);
        /* bf16 tables: R16 views and odd rows (C = 13), bf16x4 views
         * (C = 24), one element, a table of 259 rows */
        test_embedding_bf16(1, 1, 1, 1, 0);
        test_embedding_bf16(37, 13, 11, 9, 1);
        test_embedding_bf16(41, 24, 19, 12, 1);
        test_embedding_bf16(50, 70, 259, 64, 0);
        /* Rows whose three passes exceed llvmpipe's loop limit (3V >
         * 65,535): the texel family's workgroup-per-row kernel (rows of
         * 120 KB: not under test_limits' 64 KiB bindings). */
        if (gpu_texel_limit(g, GPU_BIND_TEXEL_F32) >= 30011 && gpu_binding_limit(g, GPU_BIND_STORAGE) >= 4 * 30011) {
            test_cross_entropy(13, 30011);
            test_cross_entropy_capped(5, 30011, 3.0);
        }
        /* Gemma 2's final soft-capping (logits of ±8 against caps of 3
         * and 30: bent hard and barely), one invocation per row (texel) or
         * a workgroup per row */
        test_cross_entropy_capped(17, 259, 3.0);
        test_cross_entropy_capped(9, 1000, 30.0);
    }
    for (int c = 0; c < 2; c++) {
        gpu_set_kernel_class(g, classes[c]);
        test_colsum_sums(20011, 67);
    }
    /* Long attention on the texel kernels: 1024 keys at head size 64 stay
     * within llvmpipe's loop limit only because the per-head loops unroll. */
    gpu_set_kernel_class(g, GPU_KERNELS_TEXEL);
    /* The (T,T) kernels need one sequence's probabilities (8 MiB here) in
     * one binding: under limits tightened below that (test_limits runs
     * this test so) the case cannot run, and says so. */
    if (gpu_info(g)->max_storage_buffer_range >= (9u << 20))
        test_attention(1, 1024, 2, 1, 64, 1);
    else
        printf("not run under these device limits: attention at T = 1024 (one sequence's probabilities need 8 MiB "
               "in one binding)\n");
    gpu_destroy(g);
    return test_result("test_ops_nn");
}
