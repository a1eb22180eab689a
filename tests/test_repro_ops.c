/* test_repro_ops: with gpu_set_reproducible(g, 1), every op of ops.h and
 * ops_optim.h but attention and cross-entropy records its reproducible
 * kernel, and that kernel gives the bits of its C reference
 * (tests/ref/ref_repro_ops.c, repro_matmul_ref, repro_sum_ref, ...) in both
 * kernel families (memcmp of every output), on random data of awkward
 * sizes (odd rows, C not a multiple of 4, K = 1). As a check of the
 * formulas, the reference is also within REL of the default kernels'
 * result: max |default − reference| <= REL · max |reference| per output
 * array (and, as a control, differs from it in the bits on many words).
 * Cutting the rows of the LM head's _at products and of a column
 * sum (bias gradient, embedding gradient) into calls gives the bits of one
 * call. A bf16 weight or table is refused with a clear error (a child
 * process of this program runs the op and must fail). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "gpu_testing.h"
#include "repro_testing.h"
#include "vktrain/ops.h"
#include "vktrain/ops_optim.h"
#include "repro_ref.h"

/* The default kernels against the reproducible reference. */
#define REL 1e-5

/* One op's operands: n[i] words (floats, or int32 ids) of array i, the
 * ones with out[i] set compared. */
#define MAX_ARR 8
struct arrays {
    int count;
    size_t n[MAX_ARR];
    int out[MAX_ARR];
    float *h[MAX_ARR];
};

/* The shapes and scalars an op takes. */
struct shape {
    uint32_t M, N, K, rows, C, V, P, H, hd, max_pos;
    size_t n, off[3];
    float a, eps;
    int flag; /* accumulate, backward, with positions */
    struct op_adamw_step step;
};

typedef void (*device_fn)(struct gpu *g, struct gpu_buffer **b, const struct shape *s);
typedef void (*reference_fn)(float **h, const struct shape *s);

static struct ref_rng rng;
static enum gpu_kernel_class device_family; /* the device's own: the default kernels' */
/* Words where the default kernels' bits differ from the reference: a
 * control that the bitwise comparisons are not vacuous (the reproducible
 * mode does record other kernels). */
static size_t default_differences;

static float *random_words(size_t n, double scale)
{
    float *x = vkt_malloc(n * sizeof *x, "test data");
    for (size_t i = 0; i < n; i++) {
        double u = ref_rng_uniform(&rng);
        x[i] = u < 0.01 ? -0.0f : u < 0.02 ? 0.0f : (float)(scale * ref_rng_normal(&rng));
    }
    return x;
}

/* ids in [0, bound) as int32 words */
static float *random_ids(size_t n, uint32_t bound)
{
    float *x = vkt_malloc(n * sizeof *x, "test ids");
    for (size_t i = 0; i < n; i++) {
        int32_t v = (int32_t)(ref_rng_u64(&rng) % bound);
        memcpy(&x[i], &v, sizeof v);
    }
    return x;
}

static void add_array(struct arrays *a, float *h, size_t n, int out)
{
    a->h[a->count] = h;
    a->n[a->count] = n;
    a->out[a->count] = out;
    a->count++;
}

static float **copy_arrays(const struct arrays *a)
{
    float **c = vkt_calloc(MAX_ARR, sizeof *c, "test arrays");
    for (int i = 0; i < a->count; i++) {
        c[i] = vkt_malloc(a->n[i] * sizeof(float), "test array");
        memcpy(c[i], a->h[i], a->n[i] * sizeof(float));
    }
    return c;
}

static void free_arrays(float **c, int count)
{
    for (int i = 0; i < count; i++)
        free(c[i]);
    free(c);
}

/* Uploads the arrays, records the op under the given mode and family,
 * returns the arrays downloaded. */
static float **run_device(struct gpu *g, const struct arrays *a, device_fn dev, const struct shape *s, int repro,
                          enum gpu_kernel_class family)
{
    struct gpu_buffer *b[MAX_ARR] = {0};
    for (int i = 0; i < a->count; i++) {
        b[i] = gpu_buffer_create(g, a->n[i] * sizeof(float), "test operand");
        gpu_upload(g, b[i], 0, a->h[i], a->n[i] * sizeof(float));
    }
    gpu_set_reproducible(g, repro);
    gpu_set_kernel_class(g, family);
    dev(g, b, s);
    gpu_submit(g);
    float **out = vkt_calloc(MAX_ARR, sizeof *out, "test outputs");
    for (int i = 0; i < a->count; i++) {
        out[i] = download_floats(g, b[i], a->n[i]);
        gpu_buffer_destroy(g, b[i]);
    }
    gpu_set_reproducible(g, 0);
    return out;
}

/* The case: the reference's bits in both families, the default kernels
 * within REL (skipped where rel < 0: ops without a default twin). */
static void check_op(struct gpu *g, const char *name, struct arrays *a, device_fn dev, reference_fn ref,
                     const struct shape *s, double rel)
{
    float **want = copy_arrays(a);
    ref(want, s);
    for (int family = 0; family < 2; family++) {
        float **got = run_device(g, a, dev, s, 1, family ? GPU_KERNELS_TILED : GPU_KERNELS_TEXEL);
        for (int i = 0; i < a->count; i++) {
            if (!a->out[i])
                continue;
            size_t d = repro_bit_differences(got[i], want[i], a->n[i]);
            CHECK(d == 0, "%s (%s): output %d: %zu of %zu words differ from the C reference", name,
                  family ? "tiled" : "texel", i, d, a->n[i]);
        }
        free_arrays(got, a->count);
    }
    if (rel >= 0) {
        float **def = run_device(g, a, dev, s, 0, device_family);
        for (int i = 0; i < a->count; i++) {
            if (!a->out[i])
                continue;
            default_differences += repro_bit_differences(def[i], want[i], a->n[i]);
            double most = 0, diff = 0;
            for (size_t j = 0; j < a->n[i]; j++) {
                most = fmax(most, fabs(want[i][j]));
                diff = fmax(diff, fabs((double)def[i][j] - want[i][j]));
            }
            CHECK(diff <= rel * most, "%s: output %d: the default kernel differs by %g (max |value| %g)", name, i, diff,
                  most);
        }
        free_arrays(def, a->count);
    }
    printf("%s: ok\n", name);
    free_arrays(want, a->count);
    for (int i = 0; i < a->count; i++)
        free(a->h[i]);
    a->count = 0;
}

/* ---- matmul ---------------------------------------------------------- */

static const char *layout_names[] = {"nt", "nn", "tn"};

static void dev_matmul(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    void (*f[3])(struct gpu *, struct gpu_buffer *, struct gpu_buffer *, struct gpu_buffer *, uint32_t, uint32_t,
                 uint32_t, int, const size_t *, const uint32_t *) = {op_matmul_nt_at, op_matmul_nn_at, op_matmul_tn_at};
    f[s->P](g, b[0], b[1], b[2], s->M, s->N, s->K, s->flag, s->off, NULL);
}
static void ref_matmul(float **h, const struct shape *s)
{
    repro_matmul_ref((enum repro_layout)s->P, h[0] + s->off[0], h[1] + s->off[1], h[2] + s->off[2], s->M, s->N, s->K,
                     s->flag);
}

/* b[0] = X, b[1] = W, b[2] = bias, b[3] = Y (op_matmul_nt_bias) */
static void dev_matmul_bias(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    op_matmul_nt_bias(g, b[0], b[1], b[2], b[3], s->M, s->N, s->K, s->flag);
}
static void ref_matmul_bias(float **h, const struct shape *s)
{
    repro_matmul_ref(REPRO_NT, h[0], h[1], h[3], s->M, s->N, s->K, s->flag);
    repro_bias_add_ref(h[2], h[3], s->M, s->N);
}

/* Operand sizes (a, b, c) of a layout. */
static void matmul_sizes(int l, uint32_t M, uint32_t N, uint32_t K, size_t sz[3])
{
    size_t mn = (size_t)M * N, mk = (size_t)M * K, nk = (size_t)N * K;
    sz[0] = l == 2 ? mn : l == 1 ? mn : mk;
    sz[1] = l == 2 ? mk : nk;
    sz[2] = l == 0 ? mn : l == 1 ? mk : nk;
}

static void check_matmul(struct gpu *g, int l, uint32_t M, uint32_t N, uint32_t K, int accumulate, const size_t *off)
{
    struct shape s = {.M = M, .N = N, .K = K, .P = (uint32_t)l, .flag = accumulate};
    size_t sz[3];
    matmul_sizes(l, M, N, K, sz);
    struct arrays a = {0};
    for (int i = 0; i < 3; i++) {
        s.off[i] = off ? off[i] : 0;
        add_array(&a, random_words(s.off[i] + sz[i], 1.0), s.off[i] + sz[i], i == 2);
    }
    char name[64];
    snprintf(name, sizeof name, "matmul_%s%s %ux%ux%u%s", layout_names[l], off ? "_at" : "", M, N, K,
             accumulate ? " accumulate" : "");
    check_op(g, name, &a, dev_matmul, ref_matmul, &s, REL);
}

/* nt with the bias added as the outputs are stored (the texel family's
 * vec4 kernel, K % 4 == 0) or by the pass after (the others): the bits
 * of the product and the bias add. */
static void check_matmul_bias(struct gpu *g, uint32_t M, uint32_t N, uint32_t K, int accumulate)
{
    struct shape s = {.M = M, .N = N, .K = K, .flag = accumulate};
    struct arrays a = {0};
    add_array(&a, random_words((size_t)M * K, 1.0), (size_t)M * K, 0);
    add_array(&a, random_words((size_t)N * K, 1.0), (size_t)N * K, 0);
    add_array(&a, random_words(N, 1.0), N, 0);
    add_array(&a, random_words((size_t)M * N, 1.0), (size_t)M * N, 1);
    char name[64];
    snprintf(name, sizeof name, "matmul_nt_bias %ux%ux%u%s", M, N, K, accumulate ? " accumulate" : "");
    check_op(g, name, &a, dev_matmul_bias, ref_matmul_bias, &s, REL);
}

/* The LM head's row chunks: Y rows (nt), dX rows (nn), dW accumulated over
 * token chunks (tn), each in chunks of `chunk` rows, give the bits of one
 * call over all rows. */
static void check_matmul_chunks(struct gpu *g, uint32_t M, uint32_t N, uint32_t K, uint32_t chunk)
{
    gpu_set_reproducible(g, 1);
    for (int l = 0; l < 3; l++) {
        size_t sz[3];
        matmul_sizes(l, M, N, K, sz);
        float *h[3];
        struct gpu_buffer *b[3], *whole = gpu_buffer_create(g, sz[2] * 4, "whole");
        for (int i = 0; i < 3; i++) {
            h[i] = random_words(sz[i], 1.0);
            b[i] = gpu_buffer_create(g, sz[i] * 4, "chunked");
            gpu_upload(g, b[i], 0, h[i], sz[i] * 4);
        }
        gpu_upload(g, whole, 0, h[2], sz[2] * 4);
        dev_matmul(g, (struct gpu_buffer *[3]){b[0], b[1], whole},
                   &(struct shape){.M = M, .N = N, .K = K, .P = (uint32_t)l, .flag = 1});
        for (uint32_t r0 = 0; r0 < M; r0 += chunk) {
            uint32_t n = M - r0 < chunk ? M - r0 : chunk;
            /* nt: X rows, Y rows; nn: dY rows, dX rows; tn: dY rows, X rows */
            size_t off[3] = {(size_t)r0 * (l == 0 ? K : N), l == 2 ? (size_t)r0 * K : 0,
                             l == 2 ? 0 : (size_t)r0 * (l == 0 ? N : K)};
            struct shape s = {.M = n, .N = N, .K = K, .P = (uint32_t)l, .flag = 1};
            memcpy(s.off, off, sizeof off);
            dev_matmul(g, b, &s);
        }
        gpu_submit(g);
        float *x = download_floats(g, whole, sz[2]), *y = download_floats(g, b[2], sz[2]);
        size_t d = repro_bit_differences(x, y, sz[2]);
        CHECK(d == 0, "matmul_%s_at in chunks of %u rows: %zu of %zu outputs differ from one call", layout_names[l],
              chunk, d, sz[2]);
        printf("matmul_%s_at %ux%ux%u in chunks of %u rows = one call: %s\n", layout_names[l], M, N, K, chunk,
               d ? "no" : "ok");
        free(x);
        free(y);
        for (int i = 0; i < 3; i++) {
            free(h[i]);
            gpu_buffer_destroy(g, b[i]);
        }
        gpu_buffer_destroy(g, whole);
    }
    gpu_set_reproducible(g, 0);
}

/* Under a storage range of 4 KiB (and texel views of 1024 floats) the
 * products are cut into blocks of output rows: the same bits. */
static void check_matmul_small_bindings(struct gpu *g)
{
    gpu_set_limits(g, "storage_range=4096,texel_elements=1024");
    for (int l = 0; l < 3; l++) {
        check_matmul(g, l, 41, 45, 7, 1, (size_t[3]){1, 2, 3});
        /* operands of whole texels (the texel family's vec4 kernel) */
        check_matmul(g, l, 41, 44, 8, 1, (size_t[3]){4, 8, 12});
        check_matmul(g, l, 40, 44, 8, 1, (size_t[3]){4, 8, 3});
    }
    check_matmul(g, 1, 6, 400, 12, 1, (size_t[3]){4, 8, 12});
    gpu_set_limits(g, NULL);
}

/* ---- elementwise, bias, sums ------------------------------------------ */

static void dev_add(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    op_add(g, b[0], b[1], b[2], s->n);
}
static void ref_add(float **h, const struct shape *s)
{
    repro_add_ref(h[0], h[1], h[2], s->n);
}
static void dev_scale(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    op_scale(g, b[0], s->a, s->n);
}
static void ref_scale(float **h, const struct shape *s)
{
    repro_scale_ref(h[0], s->a, s->n);
}
static void dev_axpy(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    op_axpy(g, s->a, b[0], b[1], s->n);
}
static void ref_axpy(float **h, const struct shape *s)
{
    repro_axpy_ref(s->a, h[0], h[1], s->n);
}
static void dev_copy(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    op_copy_to(g, b[0], b[1], s->off[0], s->n);
}
static void ref_copy(float **h, const struct shape *s)
{
    memcpy(h[1] + s->off[0], h[0], s->n * sizeof(float));
}
static void dev_bias_add(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    op_bias_add(g, b[0], b[1], s->rows, s->C);
}
static void ref_bias_add(float **h, const struct shape *s)
{
    repro_bias_add_ref(h[0], h[1], s->rows, s->C);
}
static void dev_bias_back(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    op_bias_backward(g, b[0], b[1], s->rows, s->C);
}
static void ref_bias_back(float **h, const struct shape *s)
{
    repro_colsum_ref(REPRO_COLSUM_PLAIN, h[0], h[0], h[0], h[0], h[1], s->rows, s->C);
}
/* b[0] = x, b[1] = scratch, b[2] = out (index 1) */
static void dev_sum(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    (s->flag ? op_sumsq : op_sum)(g, b[0], s->n, b[1], b[2], 1);
}
static void ref_sum(float **h, const struct shape *s)
{
    h[2][1] = s->flag ? repro_sumsq_ref(h[0], s->n) : repro_sum_ref(h[0], s->n);
}
/* grad_norm_record over two tensors (b[0], b[3]) into slots b[2][0..1] */
static void dev_grad_norm(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    struct grad_tensor t[2] = {{b[0], s->n}, {b[3], s->rows}};
    grad_norm_record(g, t, 2, b[1], b[2], 0);
}
static void ref_grad_norm(float **h, const struct shape *s)
{
    h[2][0] = repro_sumsq_ref(h[0], s->n);
    h[2][1] = repro_sumsq_ref(h[3], s->rows);
}

static void check_elementwise(struct gpu *g)
{
    struct arrays a = {0};
    struct shape s = {.n = 1001, .a = -0.3f};
    add_array(&a, random_words(s.n, 1), s.n, 0);
    add_array(&a, random_words(s.n, 1), s.n, 0);
    add_array(&a, random_words(s.n, 1), s.n, 1);
    check_op(g, "add", &a, dev_add, ref_add, &s, REL);
    add_array(&a, random_words(s.n, 1), s.n, 1);
    check_op(g, "scale", &a, dev_scale, ref_scale, &s, REL);
    add_array(&a, random_words(s.n, 1), s.n, 0);
    add_array(&a, random_words(s.n, 1), s.n, 1);
    check_op(g, "axpy", &a, dev_axpy, ref_axpy, &s, REL);
    size_t align = gpu_info(g)->min_storage_offset_alignment / 4;
    s.off[0] = align ? 3 * align : 3;
    add_array(&a, random_words(s.n, 1), s.n, 0);
    add_array(&a, random_words(s.n + s.off[0] + 5, 1), s.n + s.off[0] + 5, 1);
    check_op(g, "copy_to", &a, dev_copy, ref_copy, &s, 0);

    uint32_t shapes[][2] = {{7, 75}, {1, 1}, {33, 6}, {9, 20}}; /* C % 4 == 0: the texel family's vec4 kernel */
    for (int i = 0; i < 4; i++) {
        s.rows = shapes[i][0], s.C = shapes[i][1];
        char name[64];
        snprintf(name, sizeof name, "bias_add %ux%u", s.rows, s.C);
        add_array(&a, random_words(s.C, 1), s.C, 0);
        add_array(&a, random_words((size_t)s.rows * s.C, 1), (size_t)s.rows * s.C, 1);
        check_op(g, name, &a, dev_bias_add, ref_bias_add, &s, REL);
        snprintf(name, sizeof name, "bias_backward %ux%u", s.rows, s.C);
        add_array(&a, random_words((size_t)s.rows * s.C, 1), (size_t)s.rows * s.C, 0);
        add_array(&a, random_words(s.C, 1), s.C, 1);
        check_op(g, name, &a, dev_bias_back, ref_bias_back, &s, REL);
    }

    size_t lengths[] = {1, 3, 4097, 100003};
    for (int i = 0; i < 4; i++)
        for (int sq = 0; sq < 2; sq++) {
            s.n = lengths[i], s.flag = sq;
            gpu_set_reproducible(g, 1);
            size_t scratch = op_reduce_scratch(g, s.n);
            gpu_set_reproducible(g, 0);
            size_t def = op_reduce_scratch(g, s.n);
            char name[64];
            snprintf(name, sizeof name, "%s of %zu", sq ? "sumsq" : "sum", s.n);
            add_array(&a, random_words(s.n, 1), s.n, 0);
            add_array(&a, random_words(scratch > def ? scratch : def, 0), scratch > def ? scratch : def, 0);
            add_array(&a, random_words(3, 1), 3, 1);
            check_op(g, name, &a, dev_sum, ref_sum, &s, 2e-6);
        }
    s.n = 5003, s.rows = 77;
    add_array(&a, random_words(s.n, 1), s.n, 0);
    gpu_set_reproducible(g, 1);
    size_t scratch = op_reduce_scratch(g, s.n);
    gpu_set_reproducible(g, 0);
    scratch = scratch > op_reduce_scratch(g, s.n) ? scratch : op_reduce_scratch(g, s.n);
    add_array(&a, random_words(scratch, 0), scratch, 0);
    add_array(&a, random_words(2, 1), 2, 1);
    add_array(&a, random_words(s.rows, 1), s.rows, 0);
    check_op(g, "grad_norm_record", &a, dev_grad_norm, ref_grad_norm, &s, 2e-6);
}

/* The bias gradient of all rows in one call equals two calls over the
 * first 5 and the other rows (the old value carried). */
static void check_colsum_chunks(struct gpu *g, uint32_t rows, uint32_t C, uint32_t first)
{
    gpu_set_reproducible(g, 1);
    float *dy = random_words((size_t)rows * C, 1), *db = random_words(C, 1);
    struct gpu_buffer *all = gpu_buffer_create(g, (size_t)rows * C * 4, "dy");
    struct gpu_buffer *part0 = gpu_buffer_create(g, (size_t)first * C * 4, "dy rows 0");
    struct gpu_buffer *part1 = gpu_buffer_create(g, (size_t)(rows - first) * C * 4, "dy rows 1");
    struct gpu_buffer *one = gpu_buffer_create(g, C * 4, "db one"), *two = gpu_buffer_create(g, C * 4, "db two");
    gpu_upload(g, all, 0, dy, (size_t)rows * C * 4);
    gpu_upload(g, part0, 0, dy, (size_t)first * C * 4);
    gpu_upload(g, part1, 0, dy + (size_t)first * C, (size_t)(rows - first) * C * 4);
    gpu_upload(g, one, 0, db, C * 4);
    gpu_upload(g, two, 0, db, C * 4);
    op_bias_backward(g, all, one, rows, C);
    op_bias_backward(g, part0, two, first, C);
    op_bias_backward(g, part1, two, rows - first, C);
    gpu_submit(g);
    float *x = download_floats(g, one, C), *y = download_floats(g, two, C);
    size_t d = repro_bit_differences(x, y, C);
    CHECK(d == 0, "bias_backward in two calls: %zu of %u columns differ from one call", d, C);
    printf("bias_backward %ux%u as %u + %u rows = one call: %s\n", rows, C, first, rows - first, d ? "no" : "ok");
    free(x), free(y), free(dy), free(db);
    gpu_buffer_destroy(g, all), gpu_buffer_destroy(g, part0), gpu_buffer_destroy(g, part1);
    gpu_buffer_destroy(g, one), gpu_buffer_destroy(g, two);
    gpu_set_reproducible(g, 0);
}

/* ---- norms ------------------------------------------------------------- */

/* rmsnorm: x, w, y, rstd; backward: dy, x, w, rstd, dx, dw */
static void dev_rms(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    if (s->flag)
        op_rmsnorm_backward(g, b[0], b[1], b[2], b[3], b[4], b[5], s->rows, s->C);
    else
        op_rmsnorm(g, b[0], b[1], b[2], b[3], s->rows, s->C, s->eps);
}
static void ref_rms(float **h, const struct shape *s)
{
    if (s->flag)
        repro_rmsnorm_backward_ref(h[0], h[1], h[2], h[3], h[4], h[5], s->rows, s->C);
    else
        repro_rmsnorm_ref(h[0], h[1], h[2], h[3], s->rows, s->C, s->eps);
}
/* layernorm: x, w, b, y, mean, rstd; backward: dy, x, w, mean, rstd, dx, dw, db */
static void dev_ln(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    if (s->flag)
        op_layernorm_backward(g, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], s->rows, s->C);
    else
        op_layernorm(g, b[0], b[1], b[2], b[3], b[4], b[5], s->rows, s->C, s->eps);
}
static void ref_ln(float **h, const struct shape *s)
{
    if (s->flag)
        repro_layernorm_backward_ref(h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], s->rows, s->C);
    else
        repro_layernorm_ref(h[0], h[1], h[2], h[3], h[4], h[5], s->rows, s->C, s->eps);
}

static void check_norms(struct gpu *g, int count)
{
    /* C % 4 == 0: the texel family's _row4 kernels (RGBA32F rows) */
    uint32_t shapes[][2] = {{7, 75}, {5, 130}, {3, 1}, {2, 4096}, {67, 20}};
    for (int i = 0; i < count; i++) {
        struct shape s = {.rows = shapes[i][0], .C = shapes[i][1], .eps = 1e-5f};
        size_t rc = (size_t)s.rows * s.C;
        char name[64];
        struct arrays a = {0};
        /* the backward takes the forward's statistics (the reference's) */
        float *x = random_words(rc, 2), *w = random_words(s.C, 1), *b = random_words(s.C, 1);
        float *y = vkt_malloc(rc * 4, "y"), *mean = vkt_malloc(s.rows * 4, "m"), *rstd = vkt_malloc(s.rows * 4, "r");
        snprintf(name, sizeof name, "rmsnorm %ux%u", s.rows, s.C);
        add_array(&a, random_words(rc, 1), rc, 0);
        memcpy(a.h[0], x, rc * 4);
        add_array(&a, random_words(s.C, 1), s.C, 0);
        memcpy(a.h[1], w, s.C * 4);
        add_array(&a, random_words(rc, 1), rc, 1);
        add_array(&a, random_words(s.rows, 1), s.rows, 1);
        check_op(g, name, &a, dev_rms, ref_rms, &s, REL);
        repro_rmsnorm_ref(x, w, y, rstd, s.rows, s.C, s.eps);
        s.flag = 1;
        snprintf(name, sizeof name, "rmsnorm_backward %ux%u", s.rows, s.C);
        add_array(&a, random_words(rc, 1), rc, 0);
        float *xs[3] = {x, w, rstd};
        size_t ns[3] = {rc, s.C, s.rows};
        for (int j = 0; j < 3; j++) {
            add_array(&a, vkt_malloc(ns[j] * 4, "copy"), ns[j], 0);
            memcpy(a.h[a.count - 1], xs[j], ns[j] * 4);
        }
        add_array(&a, random_words(rc, 1), rc, 1);
        add_array(&a, random_words(s.C, 1), s.C, 1);
        check_op(g, name, &a, dev_rms, ref_rms, &s, REL);

        s.flag = 0;
        snprintf(name, sizeof name, "layernorm %ux%u", s.rows, s.C);
        float *ins[3] = {x, w, b};
        size_t nin[3] = {rc, s.C, s.C};
        for (int j = 0; j < 3; j++) {
            add_array(&a, vkt_malloc(nin[j] * 4, "copy"), nin[j], 0);
            memcpy(a.h[a.count - 1], ins[j], nin[j] * 4);
        }
        add_array(&a, random_words(rc, 1), rc, 1);
        add_array(&a, random_words(s.rows, 1), s.rows, 1);
        add_array(&a, random_words(s.rows, 1), s.rows, 1);
        /* C = 1: the variance is 0 and rstd = 1/sqrt(eps) ~ 316, y = b.
         * rstd multiplies the default kernels' rounding of x - mean (an
         * H200's backward differed by 9.7e-6 against values of 0.68, most
         * likely (x - mean) rstd contracted into an FMA): their tolerance
         * grows by rstd there. */
        double ln_rel = s.C == 1 ? REL / sqrt(s.eps) : REL;
        check_op(g, name, &a, dev_ln, ref_ln, &s, ln_rel);
        repro_layernorm_ref(x, w, b, y, mean, rstd, s.rows, s.C, s.eps);
        s.flag = 1;
        snprintf(name, sizeof name, "layernorm_backward %ux%u", s.rows, s.C);
        add_array(&a, random_words(rc, 1), rc, 0);
        float *bins[4] = {x, w, mean, rstd};
        size_t nb[4] = {rc, s.C, s.rows, s.rows};
        for (int j = 0; j < 4; j++) {
            add_array(&a, vkt_malloc(nb[j] * 4, "copy"), nb[j], 0);
            memcpy(a.h[a.count - 1], bins[j], nb[j] * 4);
        }
        add_array(&a, random_words(rc, 1), rc, 1);
        add_array(&a, random_words(s.C, 1), s.C, 1);
        add_array(&a, random_words(s.C, 1), s.C, 1);
        check_op(g, name, &a, dev_ln, ref_ln, &s, ln_rel);
        free(x), free(w), free(b), free(y), free(mean), free(rstd);
    }
}

/* ---- activations ------------------------------------------------------- */

/* swiglu: gate, up, h; backward: gate, up, dh, dgate, dup; gelu: x, y;
 * backward: x, dy, dx (s->P picks which) */
static void dev_act(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    if (s->P == 0)
        op_swiglu(g, b[0], b[1], b[2], s->n);
    else if (s->P == 1)
        op_swiglu_backward(g, b[0], b[1], b[2], b[3], b[4], s->n);
    else if (s->P == 2)
        op_gelu(g, b[0], b[1], s->n);
    else
        op_gelu_backward(g, b[0], b[1], b[2], s->n);
}
static void ref_act(float **h, const struct shape *s)
{
    if (s->P == 0)
        repro_swiglu_ref(h[0], h[1], h[2], s->n);
    else if (s->P == 1)
        repro_swiglu_backward_ref(h[0], h[1], h[2], h[3], h[4], s->n);
    else if (s->P == 2)
        repro_gelu_ref(h[0], h[1], s->n);
    else
        repro_gelu_backward_ref(h[0], h[1], h[2], s->n);
}

static void check_activations(struct gpu *g)
{
    static const char *names[] = {"swiglu", "swiglu_backward", "gelu", "gelu_backward"};
    static const int counts[] = {3, 5, 2, 3}, inputs[] = {2, 3, 1, 2};
    for (uint32_t op = 0; op < 4; op++) {
        struct shape s = {.n = 3001, .P = op};
        struct arrays a = {0};
        for (int i = 0; i < counts[op]; i++)
            add_array(&a, random_words(s.n, i == 0 ? 4 : 1), s.n, i >= inputs[op]);
        /* the first input over the whole range: ±2^-40 .. ±2^7 */
        for (size_t i = 0; i < 200; i++)
            a.h[0][i] = (i % 2 ? -1.0f : 1.0f) * ldexpf(1.0f + (float)i / 256.0f, (int)(i % 48) - 40);
        check_op(g, names[op], &a, dev_act, ref_act, &s, REL);
    }
}

/* ---- rope, embeddings, adamw ------------------------------------------ */

/* x, positions, table */
static void dev_rope(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    op_rope(g, b[0], b[1], b[2], s->rows, s->H, s->hd, s->hd, s->max_pos, s->flag);
}
static void ref_rope(float **h, const struct shape *s)
{
    repro_rope_ref(h[0], (const int32_t *)(const void *)h[1], h[2], s->rows, s->H, s->hd, s->max_pos, s->flag);
}
/* tokens, positions, wte, wpe, out (s->flag: with wpe) */
static void dev_embed(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    op_embedding(g, b[0], b[1], b[2], s->flag ? b[3] : NULL, b[4], s->rows, s->C, s->V, s->P);
}
static void ref_embed(float **h, const struct shape *s)
{
    repro_embedding_ref((const int32_t *)(const void *)h[0], (const int32_t *)(const void *)h[1], h[2],
                        s->flag ? h[3] : NULL, h[4], s->rows, s->C, s->V, s->P);
}
/* ids, dout, dtable */
static void dev_embed_back(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    op_embedding_backward(g, b[0], b[1], b[2], s->rows, s->C, s->V);
}
static void ref_embed_back(float **h, const struct shape *s)
{
    repro_embedding_backward_ref((const int32_t *)(const void *)h[0], h[1], h[2], s->rows, s->C, s->V);
}
/* param, grad, m, v */
static void dev_adamw(struct gpu *g, struct gpu_buffer **b, const struct shape *s)
{
    op_adamw(g, b[0], b[1], b[2], b[3], s->n, &s->step);
}
static void ref_adamw(float **h, const struct shape *s)
{
    repro_adamw_ref(h[0], h[1], h[2], h[3], s->n, &s->step);
}

static void check_rope_embedding_adamw(struct gpu *g)
{
    struct arrays a = {0};
    struct shape s;
    /* hd 16: the texel family's vec4 kernel (hd a multiple of 8) */
    for (uint32_t hd = 10; hd <= 16; hd += 6) {
        s = (struct shape){.rows = 61, .H = 3, .hd = hd, .max_pos = 67};
        float *table = vkt_malloc((size_t)s.max_pos * s.hd * 4, "table");
        op_rope_table(table, s.max_pos, s.hd, 10000.0, NULL);
        for (int back = 0; back < 2; back++) {
            s.flag = back;
            size_t n = (size_t)s.rows * s.H * s.hd;
            add_array(&a, random_words(n, 1), n, 1);
            add_array(&a, random_ids(s.rows, s.max_pos), s.rows, 0);
            add_array(&a, vkt_malloc((size_t)s.max_pos * s.hd * 4, "table"), (size_t)s.max_pos * s.hd, 0);
            memcpy(a.h[2], table, (size_t)s.max_pos * s.hd * 4);
            check_op(g, back ? "rope backward" : "rope", &a, dev_rope, ref_rope, &s, REL);
        }
        free(table);
    }

    /* C 31 and 32: the texel family's scalar and vec4 kernels */
    for (uint32_t C = 31; C <= 32; C++) {
        s = (struct shape){.rows = 41, .C = C, .V = 53, .P = 43};
        for (int pos = 0; pos < 2; pos++) {
            s.flag = pos;
            add_array(&a, random_ids(s.rows, s.V), s.rows, 0);
            add_array(&a, random_ids(s.rows, s.P), s.rows, 0);
            add_array(&a, random_words((size_t)s.V * s.C, 1), (size_t)s.V * s.C, 0);
            add_array(&a, random_words((size_t)s.P * s.C, 1), (size_t)s.P * s.C, 0);
            add_array(&a, random_words((size_t)s.rows * s.C, 1), (size_t)s.rows * s.C, 1);
            check_op(g, pos ? "embedding with positions" : "embedding", &a, dev_embed, ref_embed, &s, REL);
        }
        add_array(&a, random_ids(s.rows, s.V), s.rows, 0);
        add_array(&a, random_words((size_t)s.rows * s.C, 1), (size_t)s.rows * s.C, 0);
        add_array(&a, random_words((size_t)s.V * s.C, 1), (size_t)s.V * s.C, 1);
        check_op(g, "embedding_backward", &a, dev_embed_back, ref_embed_back, &s, REL);
    }

    s = (struct shape){
        .n = 1001,
        .step = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .t = 3, .grad_scale = 0.7}};
    add_array(&a, random_words(s.n, 1), s.n, 1);
    add_array(&a, random_words(s.n, 1), s.n, 0);
    add_array(&a, random_words(s.n, 0.1), s.n, 1);
    float *v = random_words(s.n, 0.01);
    for (size_t i = 0; i < s.n; i++)
        v[i] = v[i] * v[i];
    add_array(&a, v, s.n, 1);
    check_op(g, "adamw", &a, dev_adamw, ref_adamw, &s, REL);
}

/* The embedding gradient of all rows in one call equals two calls over
 * the first rows and the rest (the old value carried). */
static void check_embedding_chunks(struct gpu *g)
{
    uint32_t rows = 13, C = 5, V = 3, first = 6;
    gpu_set_reproducible(g, 1);
    float *ids = random_ids(rows, V), *dout = random_words((size_t)rows * C, 1), *t = random_words(V * C, 1);
    struct gpu_buffer *bi = gpu_buffer_create(g, rows * 4, "ids"), *bd = gpu_buffer_create(g, rows * C * 4, "dout");
    struct gpu_buffer *bi1 = gpu_buffer_create(g, (rows - first) * 4, "ids 1");
    struct gpu_buffer *bd1 = gpu_buffer_create(g, (rows - first) * C * 4, "dout 1");
    struct gpu_buffer *one = gpu_buffer_create(g, V * C * 4, "one"), *two = gpu_buffer_create(g, V * C * 4, "two");
    gpu_upload(g, bi, 0, ids, rows * 4);
    gpu_upload(g, bd, 0, dout, rows * C * 4);
    gpu_upload(g, bi1, 0, ids + first, (rows - first) * 4);
    gpu_upload(g, bd1, 0, dout + first * C, (rows - first) * C * 4);
    gpu_upload(g, one, 0, t, V * C * 4);
    gpu_upload(g, two, 0, t, V * C * 4);
    op_embedding_backward(g, bi, bd, one, rows, C, V);
    op_embedding_backward(g, bi, bd, two, first, C, V);
    op_embedding_backward(g, bi1, bd1, two, rows - first, C, V);
    gpu_submit(g);
    float *x = download_floats(g, one, V * C), *y = download_floats(g, two, V * C);
    size_t d = repro_bit_differences(x, y, V * C);
    CHECK(d == 0, "embedding_backward in two calls: %zu of %u differ from one call", d, V * C);
    printf("embedding_backward %u rows as %u + %u = one call: %s\n", rows, first, rows - first, d ? "no" : "ok");
    free(x), free(y), free(ids), free(dout), free(t);
    gpu_buffer_destroy(g, bi), gpu_buffer_destroy(g, bd), gpu_buffer_destroy(g, bi1), gpu_buffer_destroy(g, bd1);
    gpu_buffer_destroy(g, one), gpu_buffer_destroy(g, two);
    gpu_set_reproducible(g, 0);
}

/* The child: an op on a bf16 weight (matmul) or table (embedding) in the
 * reproducible mode, which must end the process with an error. */
static int run_bf16(const char *op)
{
    struct gpu *g = test_gpu();
    gpu_set_reproducible(g, 1);
    double w[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    struct gpu_buffer *bw = buffer_bf16_from_doubles(g, w, 8, "bf16 weight");
    struct gpu_buffer *x = gpu_buffer_create(g, 32, "x"), *y = gpu_buffer_create(g, 32, "y");
    gpu_zero(g, x);
    if (!strcmp(op, "matmul"))
        op_matmul_nt(g, x, bw, y, 2, 2, 4, 0);
    else
        op_embedding(g, x, NULL, bw, NULL, y, 2, 4, 2, 1);
    gpu_submit(g);
    printf("the %s of a bf16 operand ran\n", op);
    return 0;
}

static void check_bf16_refused(const char *self, const char *op)
{
    char cmd[1024], out[4096] = "";
    snprintf(cmd, sizeof cmd, "'%s' bf16-%s 2>&1", self, op);
    FILE *p = popen(cmd, "r");
    CHECK(p, "cannot run %s", cmd);
    if (!p)
        return;
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0, "the %s of a bf16 operand did not fail: %s", op, out);
    CHECK_MSG(out, "model.base_dtype: bf16 is not supported with precision: reproducible");
    printf("the %s of a bf16 operand is refused: %s", op, out);
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strncmp(argv[1], "bf16-", 5))
        return run_bf16(argv[1] + 5);
    check_bf16_refused(argv[0], "matmul");
    check_bf16_refused(argv[0], "embedding");
    struct gpu *g = test_gpu();
    ref_rng_seed(&rng, 1414);
    device_family = gpu_kernel_class(g);
    for (int l = 0; l < 3; l++) {
        check_matmul(g, l, 7, 5, 3, 0, NULL);
        check_matmul(g, l, 33, 19, 1, 1, NULL);
        check_matmul(g, l, 17, 70, 13, 1, (size_t[3]){5, 3, 11});
        /* whole texels: the texel kernel's RGBA32F variants, at offsets
         * on a texel and off one */
        check_matmul(g, l, 36, 20, 12, 0, NULL);
        check_matmul(g, l, 36, 20, 12, 1, (size_t[3]){4, 8, 13});
        check_matmul(g, l, 36, 20, 12, 1, (size_t[3]){6, 8, 3});
    }
    /* tn's reduction (the tokens) not a multiple of 4: the RGBA32F variant
     * over k % 4 == 0, the tail in the R32F kernel */
    check_matmul(g, 2, 37, 20, 12, 1, NULL);
    check_matmul(g, 2, 3, 20, 12, 1, NULL);
    check_matmul_bias(g, 36, 21, 12, 0);
    check_matmul_bias(g, 130, 20, 8, 1);
    check_matmul_bias(g, 17, 70, 13, 1);
    check_matmul_small_bindings(g);
    check_elementwise(g);
    check_norms(g, 5);
    check_activations(g);
    check_rope_embedding_adamw(g);
    /* The ops that bind rows, tables and elements in ranges within the
     * binding limits, under a storage range of 4 KiB: the same bits. */
    gpu_set_limits(g, "storage_range=4096");
    check_elementwise(g);
    check_norms(g, 2);
    check_activations(g);
    check_rope_embedding_adamw(g);
    gpu_set_limits(g, NULL);
    for (int family = 0; family < 2; family++) {
        gpu_set_kernel_class(g, family ? GPU_KERNELS_TILED : GPU_KERNELS_TEXEL);
        check_matmul_chunks(g, 23, 37, 9, 5);
        check_matmul_chunks(g, 24, 36, 8, 8);
        check_colsum_chunks(g, 11, 13, 5);
        check_embedding_chunks(g);
    }
    printf("control: the default kernels differ from the references' bits on %zu words\n", default_differences);
    CHECK(default_differences > 1000,
          "the default kernels gave the reproducible bits almost everywhere (%zu "
          "differences): is the reproducible mode routed at all?",
          default_differences);
    gpu_destroy(g);
    return test_failures ? 1 : 0;
}
