/* test_limits_ops: every op under tightened device limits (gpu_set_limits,
 * the runtime side of VKTRAIN_DEVICE_LIMITS) against the same op on the
 * same inputs without them, in one process, on both kernel families:
 *   tight:      storage_range=65536, workgroups=64, allocation=1048576,
 *               texel_elements=4096 (the shapes below exceed each);
 *   workgroups: workgroups=4 alone (dispatches split by the grid only).
 * The oracle is the unconstrained run of the same op (tests/test_ops and
 * test_ops_nn check that one against the C reference).
 *
 * Expected results (the contract of docs/devices.md):
 *   bit for bit where only rows, columns, elements or sequences are split:
 *     element-wise ops, AdamW, activations, bias add, LoRA dropout (its
 *     mask follows the rows of each range), embedding (tables in
 *     vocabulary ranges, also bf16 ones) and its backward, RoPE, norms forward and their
 *     input gradients, cross-entropy, attention and flash attention;
 *   within float rounding where a reduction is split or changes shape
 *     (sums, sums of squares, column sums behind the norm weight and bias
 *     gradients, matmul, also with a bf16 weight): max|a − b| ≤ 1e-5 · max|a|
 *     over the op's output.
 *     An indexing mistake in a range gives errors of the size of the values.
 * Each case must also take more dispatches under the limits it is meant to
 * split by (the profiler counts them), so a split path that silently did
 * not run fails the test. */
#include <string.h>

#include "gpu_testing.h"
#include "vktrain/ops.h"
#include "vktrain/ops_optim.h"

#define TIGHT "storage_range=65536,workgroups=64,allocation=1048576,texel_elements=4096"
#define WORKGROUPS "workgroups=4"
#define TOL 1e-5

/* An op's outputs: `exact` compared bit for bit, `rounded` within TOL. */
struct out {
    float *v[2];
    size_t n[2];
};
enum { EXACT, ROUNDED };

static struct ref_rng rng;

static void take(struct gpu *g, struct out *o, int kind, struct gpu_buffer *b, size_t n)
{
    o->v[kind] = vkt_realloc(o->v[kind], (o->n[kind] + n) * sizeof(float), "outputs");
    gpu_download(g, b, 0, o->v[kind] + o->n[kind], n * sizeof(float));
    o->n[kind] += n;
}

static struct gpu_buffer *rand_buf(struct gpu *g, size_t n, double scale, const char *name)
{
    double *x = random_floats(&rng, n, scale);
    struct gpu_buffer *b = buffer_from_doubles(g, x, n, name);
    free(x);
    return b;
}

/* n ids in [lo, hi) (values outside [0, V) test the kernels' clamping). */
static struct gpu_buffer *id_buf(struct gpu *g, size_t n, int lo, int hi, const char *name)
{
    int32_t *ids = vkt_malloc(n * sizeof *ids, name);
    for (size_t i = 0; i < n; i++)
        ids[i] = lo + (int)(ref_rng_uniform(&rng) * (hi - lo));
    struct gpu_buffer *b = gpu_buffer_create(g, n * sizeof *ids, name);
    gpu_upload(g, b, 0, ids, n * sizeof *ids);
    free(ids);
    return b;
}

static void destroy(struct gpu *g, struct gpu_buffer **b, int n)
{
    for (int i = 0; i < n; i++)
        gpu_buffer_destroy(g, b[i]);
}

static void run_elementwise(struct gpu *g, struct out *o)
{
    size_t n = 100003, y0 = 64; /* 256 bytes: aligned on any device */
    struct gpu_buffer *b[5] = {rand_buf(g, n, 1, "x"), rand_buf(g, n, 1, "y"), gpu_buffer_create(g, 4 * n, "z"),
                               gpu_buffer_create(g, 4 * n, "w"), rand_buf(g, n + y0, 1, "into")};
    op_add(g, b[0], b[1], b[2], n);
    op_copy(g, b[2], b[3], n);
    op_scale(g, b[3], 0.75f, n);
    op_axpy(g, -1.5f, b[0], b[3], n);
    op_copy_to(g, b[1], b[4], y0, n - 3);
    for (int i = 2; i < 5; i++)
        take(g, o, EXACT, b[i], n);
    destroy(g, b, 5);
}

static void run_dropout(struct gpu *g, struct out *o)
{
    uint32_t rows = 301, cols = 100; /* 120 KB: ranges of rows under storage_range */
    size_t n = (size_t)rows * cols;
    struct gpu_buffer *b[3] = {rand_buf(g, n, 1, "x"), gpu_buffer_create(g, 4 * n, "y"), rand_buf(g, n, 1, "dx")};
    struct op_dropout d = {.key = op_dropout_key(3, 1, 2), .sample0 = 4, .T = 7, .p = 0.25f};
    op_dropout(g, &d, b[0], b[1], rows, cols, 0);
    op_dropout(g, &d, b[1], b[2], rows, cols, 1);
    take(g, o, EXACT, b[1], n);
    take(g, o, EXACT, b[2], n);
    destroy(g, b, 3);
}

static void run_adamw(struct gpu *g, struct out *o)
{
    size_t n = 50001;
    struct gpu_buffer *b[4] = {rand_buf(g, n, 1, "param"), rand_buf(g, n, 1, "grad"), rand_buf(g, n, 0.1, "m"),
                               rand_buf(g, n, 0.01, "v")};
    op_scale(g, b[3], 0.0f, n); /* v ≥ 0: start from zero, then two steps */
    for (int t = 1; t <= 2; t++) {
        struct op_adamw_step s = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .t = t,
                                  .grad_scale = 0.5};
        op_adamw(g, b[0], b[1], b[2], b[3], n, &s);
    }
    take(g, o, EXACT, b[0], n);
    take(g, o, EXACT, b[2], n);
    take(g, o, EXACT, b[3], n);
    destroy(g, b, 4);
}

static void run_activations(struct gpu *g, struct out *o)
{
    size_t n = 40001;
    struct gpu_buffer *b[6] = {rand_buf(g, n, 3, "gate"), rand_buf(g, n, 2, "up"), gpu_buffer_create(g, 4 * n, "h"),
                               rand_buf(g, n, 1, "dh"), rand_buf(g, n, 1, "dgate"), rand_buf(g, n, 1, "dup")};
    op_swiglu(g, b[0], b[1], b[2], n);
    op_swiglu_backward(g, b[0], b[1], b[3], b[4], b[5], n);
    for (int i = 2; i < 6; i++)
        take(g, o, EXACT, b[i], n);
    op_gelu(g, b[0], b[2], n);
    op_gelu_backward(g, b[1], b[3], b[4], n);
    take(g, o, EXACT, b[2], n);
    take(g, o, EXACT, b[4], n);
    destroy(g, b, 6);
}

static void run_bias(struct gpu *g, struct out *o)
{
    uint32_t rows = 300, C = 97;
    struct gpu_buffer *b[3] = {rand_buf(g, C, 1, "bias"), rand_buf(g, (size_t)rows * C, 1, "y"),
                               rand_buf(g, C, 1, "db")};
    op_bias_add(g, b[0], b[1], rows, C);
    op_bias_backward(g, b[1], b[2], rows, C);
    take(g, o, EXACT, b[1], (size_t)rows * C);
    take(g, o, ROUNDED, b[2], C);
    destroy(g, b, 3);
}

static void run_embedding(struct gpu *g, struct out *o)
{
    uint32_t V = 1000, C = 64, P = 200, rows = 500;
    struct gpu_buffer *b[8] = {
        id_buf(g, rows, -3, V + 3, "tokens"),     id_buf(g, rows, 0, P, "positions"),
        rand_buf(g, (size_t)V * C, 1, "wte"),      rand_buf(g, (size_t)P * C, 1, "wpe"),
        gpu_buffer_create(g, 4 * rows * C, "out"), rand_buf(g, (size_t)rows * C, 1, "dout"),
        rand_buf(g, (size_t)V * C, 1, "dwte"),     rand_buf(g, (size_t)P * C, 1, "dwpe")};
    op_embedding(g, b[0], b[1], b[2], b[3], b[4], rows, C, V, P);
    take(g, o, EXACT, b[4], (size_t)rows * C);
    op_embedding(g, b[0], NULL, b[2], NULL, b[4], rows, C, V, 0);
    take(g, o, EXACT, b[4], (size_t)rows * C);
    op_embedding_backward(g, b[0], b[5], b[6], rows, C, V);
    op_embedding_backward(g, b[1], b[5], b[7], rows, C, P);
    take(g, o, EXACT, b[6], (size_t)V * C);
    take(g, o, EXACT, b[7], (size_t)P * C);
    destroy(g, b, 8);
}

/* bf16 tables (model.base_dtype bf16) in vocabulary ranges: vec4 rows
 * (C = 64, bf16x4 views) and odd rows (C = 13, R16 views; a storage range
 * of an odd number of rows ends mid-uint). */
static void run_embedding_bf16(struct gpu *g, struct out *o)
{
    const uint32_t shapes[2][2] = {{1000, 64}, {3001, 13}}; /* V, C */
    uint32_t P = 200, rows = 500;
    for (int s = 0; s < 2; s++) {
        uint32_t V = shapes[s][0], C = shapes[s][1];
        double *w = random_floats(&rng, (size_t)V * C, 1), *wp = random_floats(&rng, (size_t)P * C, 1);
        struct gpu_buffer *b[5] = {id_buf(g, rows, -3, V + 3, "tokens"), id_buf(g, rows, 0, P, "positions"),
                                   buffer_bf16_from_doubles(g, w, (size_t)V * C, "wte"),
                                   buffer_bf16_from_doubles(g, wp, (size_t)P * C, "wpe"),
                                   gpu_buffer_create(g, 4 * rows * C, "out")};
        op_embedding(g, b[0], b[1], b[2], b[3], b[4], rows, C, V, P);
        take(g, o, EXACT, b[4], (size_t)rows * C);
        op_embedding(g, b[0], NULL, b[2], NULL, b[4], rows, C, V, 0);
        take(g, o, EXACT, b[4], (size_t)rows * C);
        destroy(g, b, 5);
        free(w), free(wp);
    }
}

static void run_rope(struct gpu *g, struct out *o)
{
    uint32_t rows = 600, H = 4, hd = 16, P = 128;
    float *table = vkt_malloc(sizeof(float) * P * hd, "rope table");
    op_rope_table(table, P, hd, 10000.0, NULL);
    struct gpu_buffer *b[3] = {gpu_buffer_create(g, sizeof(float) * P * hd, "table"),
                               id_buf(g, rows, 0, P, "positions"), rand_buf(g, (size_t)rows * H * hd, 1, "x")};
    gpu_upload(g, b[0], 0, table, sizeof(float) * P * hd);
    op_rope(g, b[2], b[1], b[0], rows, H, hd, hd, P, 0);
    take(g, o, EXACT, b[2], (size_t)rows * H * hd);
    op_rope(g, b[2], b[1], b[0], rows, H, hd, hd, P, 1);
    take(g, o, EXACT, b[2], (size_t)rows * H * hd);
    destroy(g, b, 3);
    free(table);
}

static void run_norms(struct gpu *g, struct out *o)
{
    uint32_t rows = 700, C = 48;
    size_t n = (size_t)rows * C;
    struct gpu_buffer *b[10] = {rand_buf(g, n, 2, "x"),        rand_buf(g, C, 1, "w"),
                                rand_buf(g, C, 1, "b"),        gpu_buffer_create(g, 4 * n, "y"),
                                gpu_buffer_create(g, 4 * rows, "mean"), gpu_buffer_create(g, 4 * rows, "rstd"),
                                rand_buf(g, n, 1, "dy"),       rand_buf(g, n, 1, "dx"),
                                rand_buf(g, C, 1, "dw"),       rand_buf(g, C, 1, "db")};
    op_rmsnorm(g, b[0], b[1], b[3], b[5], rows, C, 1e-5f);
    op_rmsnorm_backward(g, b[6], b[0], b[1], b[5], b[7], b[8], rows, C);
    take(g, o, EXACT, b[3], n);
    take(g, o, EXACT, b[5], rows);
    take(g, o, EXACT, b[7], n);
    take(g, o, ROUNDED, b[8], C);
    op_layernorm(g, b[0], b[1], b[2], b[3], b[4], b[5], rows, C, 1e-5f);
    op_layernorm_backward(g, b[6], b[0], b[1], b[4], b[5], b[7], b[8], b[9], rows, C);
    take(g, o, EXACT, b[3], n);
    take(g, o, EXACT, b[4], rows);
    take(g, o, EXACT, b[5], rows);
    take(g, o, EXACT, b[7], n);
    take(g, o, ROUNDED, b[8], C);
    take(g, o, ROUNDED, b[9], C);
    destroy(g, b, 10);
}

static void run_cross_entropy(struct gpu *g, struct out *o)
{
    uint32_t rows = 300, V = 301;
    struct gpu_buffer *b[4] = {rand_buf(g, (size_t)rows * V, 4, "logits"), id_buf(g, rows, -40, V, "labels"),
                               gpu_buffer_create(g, 4 * rows, "loss"), gpu_buffer_create(g, 4 * rows, "count")};
    int32_t ignore = -100; /* ignore_index, and negative ids from id_buf: both masked */
    gpu_upload(g, b[1], 4 * 7, &ignore, sizeof ignore);
    op_cross_entropy(g, b[0], b[1], b[2], b[3], rows, V, 1.0f / rows);
    take(g, o, EXACT, b[0], (size_t)rows * V);
    take(g, o, EXACT, b[2], rows);
    take(g, o, EXACT, b[3], rows);
    destroy(g, b, 4);
}

static void run_reduce(struct gpu *g, struct out *o)
{
    size_t n = 250000; /* 1,000,000 bytes: within the 1 MiB allocation */
    double *x = random_floats(&rng, n, 1);
    for (size_t i = 0; i < n; i++)
        x[i] = (double)(float)(x[i] + 0.1); /* the sum is not ~0 */
    struct gpu_buffer *b[3] = {buffer_from_doubles(g, x, n, "x"),
                               gpu_buffer_create(g, 4 * op_reduce_scratch(g, n), "scratch"),
                               gpu_buffer_create(g, 8, "out")};
    op_sum(g, b[0], n, b[1], b[2], 0);
    op_sumsq(g, b[0], n, b[1], b[2], 1);
    take(g, o, ROUNDED, b[2], 2);
    destroy(g, b, 3);
    free(x);
}

static struct op_attention_shape attention_shape(void)
{
    return (struct op_attention_shape){.B = 8, .T = 24, .H = 4, .KVH = 2, .hd = 16};
}

static void run_attention(struct gpu *g, struct out *o)
{
    struct op_attention_shape s = attention_shape();
    size_t rows = (size_t)s.B * s.T, nq = rows * s.H * s.hd, nk = rows * s.KVH * s.hd;
    size_t np = (size_t)s.B * s.H * s.T * s.T;
    int32_t *doc = vkt_malloc(sizeof(int32_t) * rows, "doc");
    random_documents(&rng, doc, (int)s.B, (int)s.T, 0.1);
    struct gpu_buffer *b[11] = {rand_buf(g, nq, 1, "q"),  rand_buf(g, nk, 1, "k"),  rand_buf(g, nk, 1, "v"),
                                gpu_buffer_create(g, sizeof(int32_t) * rows, "doc"),
                                gpu_buffer_create(g, 4 * np, "probs"), gpu_buffer_create(g, 4 * nq, "out"),
                                rand_buf(g, nq, 1, "dout"),  gpu_buffer_create(g, 4 * np, "dscores"),
                                rand_buf(g, nq, 1, "dq"), rand_buf(g, nk, 1, "dk"), rand_buf(g, nk, 1, "dv")};
    gpu_upload(g, b[3], 0, doc, sizeof(int32_t) * rows);
    op_attention(g, &s, b[0], b[1], b[2], b[3], b[4], b[5]);
    op_attention_backward(g, &s, b[0], b[1], b[2], b[4], b[6], b[7], b[8], b[9], b[10]);
    take(g, o, EXACT, b[4], np);
    take(g, o, EXACT, b[5], nq);
    take(g, o, EXACT, b[7], np);
    take(g, o, EXACT, b[8], nq);
    take(g, o, EXACT, b[9], nk);
    take(g, o, EXACT, b[10], nk);
    destroy(g, b, 11);
    free(doc);
}

/* Flash attention on q, k, v as views into one fused buffer (GPT-2's
 * c_attn output), so the ranges start inside rows of the fused layout. */
static void run_flash(struct gpu *g, struct out *o)
{
    struct op_attention_shape s = attention_shape();
    uint32_t width = (s.H + 2 * s.KVH) * s.hd;
    s.q_stride = s.kv_stride = width, s.k_off = s.H * s.hd, s.v_off = (s.H + s.KVH) * s.hd;
    size_t rows = (size_t)s.B * s.T, n = rows * width, nq = rows * s.H * s.hd, nr = (size_t)s.B * s.H * s.T;
    int32_t *doc = vkt_malloc(sizeof(int32_t) * rows, "doc");
    random_documents(&rng, doc, (int)s.B, (int)s.T, 0.1);
    struct gpu_buffer *b[7] = {rand_buf(g, n, 1, "qkv"), gpu_buffer_create(g, sizeof(int32_t) * rows, "doc"),
                               gpu_buffer_create(g, 4 * nr, "lse"), gpu_buffer_create(g, 4 * nq, "out"),
                               rand_buf(g, nq, 1, "dout"), gpu_buffer_create(g, 8 * nr, "stats"),
                               rand_buf(g, n, 1, "dqkv")};
    gpu_upload(g, b[1], 0, doc, sizeof(int32_t) * rows);
    op_flash_attention(g, &s, b[0], b[0], b[0], b[1], b[2], b[3]);
    op_flash_attention_backward(g, &s, b[0], b[0], b[0], b[1], b[3], b[2], b[4], b[5], b[6], b[6], b[6]);
    take(g, o, EXACT, b[2], nr);
    take(g, o, EXACT, b[3], nq);
    take(g, o, EXACT, b[6], n);
    destroy(g, b, 7);
    free(doc);
}

static void run_matmul(struct gpu *g, struct out *o)
{
    /* M = 520: five rows of 128-row texel tiles, more than workgroups=4 */
    uint32_t M = 520, N = 200, K = 68;
    struct gpu_buffer *b[5] = {rand_buf(g, (size_t)M * K, 1, "x"), rand_buf(g, (size_t)N * K, 1, "w"),
                               rand_buf(g, (size_t)M * N, 1, "y"), rand_buf(g, (size_t)M * K, 1, "dx"),
                               rand_buf(g, (size_t)N * K, 1, "dw")};
    op_matmul_nt(g, b[0], b[1], b[2], M, N, K, 1);
    op_matmul_nn(g, b[2], b[1], b[3], M, N, K, 1);
    op_matmul_tn(g, b[2], b[0], b[4], M, N, K, 1);
    take(g, o, ROUNDED, b[2], (size_t)M * N);
    take(g, o, ROUNDED, b[3], (size_t)M * K);
    take(g, o, ROUNDED, b[4], (size_t)N * K);
    destroy(g, b, 5);
}

/* A bf16 weight (model.base_dtype bf16): nt and nn read it in ranges too
 * (texel_elements=4096 sends them to the storage path). */
static void run_matmul_bf16(struct gpu *g, struct out *o)
{
    uint32_t M = 520, N = 200, K = 68;
    double *w = random_floats(&rng, (size_t)N * K, 1);
    struct gpu_buffer *b[4] = {rand_buf(g, (size_t)M * K, 1, "x"), buffer_bf16_from_doubles(g, w, (size_t)N * K, "w"),
                               rand_buf(g, (size_t)M * N, 1, "y"), rand_buf(g, (size_t)M * K, 1, "dx")};
    op_matmul_nt(g, b[0], b[1], b[2], M, N, K, 1);
    op_matmul_nn(g, b[2], b[1], b[3], M, N, K, 1);
    take(g, o, ROUNDED, b[2], (size_t)M * N);
    take(g, o, ROUNDED, b[3], (size_t)M * K);
    destroy(g, b, 4);
    free(w);
}

enum { SPLIT_TIGHT = 1, SPLIT_WORKGROUPS = 2 };
static const struct {
    const char *name;
    void (*run)(struct gpu *g, struct out *o);
    unsigned splits; /* the profiles that must take more dispatches */
} cases[] = {
    {"elementwise", run_elementwise, SPLIT_TIGHT},
    {"dropout", run_dropout, SPLIT_TIGHT},
    {"adamw", run_adamw, SPLIT_TIGHT},
    {"activations", run_activations, SPLIT_TIGHT},
    {"bias", run_bias, SPLIT_TIGHT},
    {"embedding", run_embedding, SPLIT_TIGHT},
    {"embedding_bf16", run_embedding_bf16, SPLIT_TIGHT},
    {"rope", run_rope, SPLIT_TIGHT},
    {"norms", run_norms, SPLIT_TIGHT | SPLIT_WORKGROUPS},
    {"cross_entropy", run_cross_entropy, SPLIT_TIGHT | SPLIT_WORKGROUPS},
    {"reduce", run_reduce, SPLIT_TIGHT | SPLIT_WORKGROUPS},
    {"attention", run_attention, SPLIT_TIGHT | SPLIT_WORKGROUPS},
    {"flash_attention", run_flash, SPLIT_TIGHT | SPLIT_WORKGROUPS},
    {"matmul", run_matmul, SPLIT_TIGHT | SPLIT_WORKGROUPS},
    {"matmul_bf16", run_matmul_bf16, SPLIT_TIGHT | SPLIT_WORKGROUPS},
};

/* Runs case c under limits spec (NULL: none) from the same seed; returns
 * its dispatches (0 without timestamps). */
static uint64_t run_case(struct gpu *g, int c, const char *spec, struct out *o)
{
    gpu_set_limits(g, spec);
    ref_rng_seed(&rng, 1000 + (uint64_t)c);
    int timed = gpu_profile_start(g);
    cases[c].run(g, o);
    gpu_profile_stop(g);
    uint64_t dispatches = timed ? profile_dispatches(g, "") : 0;
    gpu_set_limits(g, NULL);
    return dispatches;
}

static void compare(const char *family, int c, const char *profile, unsigned bit, const struct out *a,
                    uint64_t da, const struct out *b, uint64_t db)
{
    const char *name = cases[c].name;
    size_t differ = 0;
    double worst = 0, scale = 0;
    CHECK(a->n[EXACT] == b->n[EXACT] && a->n[ROUNDED] == b->n[ROUNDED], "%s %s: output sizes differ", family, name);
    for (size_t i = 0; i < a->n[EXACT] && i < b->n[EXACT]; i++)
        differ += memcmp(&a->v[EXACT][i], &b->v[EXACT][i], sizeof(float)) != 0;
    for (size_t i = 0; i < a->n[ROUNDED] && i < b->n[ROUNDED]; i++) {
        double d = fabs((double)a->v[ROUNDED][i] - b->v[ROUNDED][i]), m = fabs(a->v[ROUNDED][i]);
        worst = d > worst ? d : worst;
        scale = m > scale ? m : scale;
    }
    CHECK(differ == 0, "%s %s under %s: %zu of %zu outputs differ from the unconstrained run (bitwise expected)",
          family, name, profile, differ, a->n[EXACT]);
    CHECK(worst <= TOL * scale, "%s %s under %s: max |difference| %.3g over %.3g of scale %.3g", family, name,
          profile, worst, TOL * scale, scale);
    if (da && (cases[c].splits & bit))
        CHECK(db > da, "%s %s under %s: %llu dispatches, no more than the %llu without limits: nothing was split",
              family, name, profile, (unsigned long long)db, (unsigned long long)da);
    printf("  %-6s %-16s %-10s dispatches %4llu -> %4llu, %zu exact%s, rounded max diff %.2g (scale %.2g)\n", family,
           name, profile, (unsigned long long)da, (unsigned long long)db, a->n[EXACT], differ ? " (DIFFER)" : "",
           worst, scale);
}

static void out_free(struct out *o)
{
    free(o->v[0]), free(o->v[1]);
    *o = (struct out){{0}, {0}};
}

int main(void)
{
    struct gpu *g = test_gpu();
    static const char *profiles[2] = {TIGHT, WORKGROUPS};
    static const char *profile_names[2] = {"tight", "workgroups"};
    enum gpu_kernel_class classes[2] = {GPU_KERNELS_TEXEL, GPU_KERNELS_TILED};
    for (int f = 0; f < 2; f++) {
        gpu_set_kernel_class(g, classes[f]);
        const char *family = f == 0 ? "texel" : "tiled";
        for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
            struct out free_run = {{0}, {0}};
            uint64_t d0 = run_case(g, c, NULL, &free_run);
            for (int p = 0; p < 2; p++) {
                struct out limited = {{0}, {0}};
                uint64_t d1 = run_case(g, c, profiles[p], &limited);
                compare(family, c, profile_names[p], 1u << p, &free_run, d0, &limited, d1);
                out_free(&limited);
            }
            out_free(&free_run);
        }
    }
    gpu_destroy(g);
    return test_result("test_limits_ops");
}
