/* test_repro_matmul: the reproducible matmul (one accumulator
 * per output in k order) gives the same bits in both kernel
 * families as the C reference repro_matmul_ref, in the three layouts, with
 * and without accumulate, at shapes that are not multiples of any tile
 * (edges), with a reduction longer than lavapipe lets one invocation loop
 * (cut into dispatches), and with signed zeros in the data; the texel
 * family's tn and nn with both their tile sizes (narrow and wide,
 * VKTRAIN_REPRO_WIDE=0|1), which a shape rule chooses between.
 * Negative control: the same C sum with four interleaved accumulators (the
 * order of a vectorized kernel) must differ on many outputs, so a bitwise
 * match is a statement about the order, not luck.
 * Sums over samples (precision: reproducible's micro-batches): the weight
 * gradient (tn), the bias gradient and the embedding backward over B
 * samples of T rows, recorded with gpu_set_repro_samples, equal the
 * pairwise tree over samples of each sample's own sum, computed here one
 * sample at a time; control: one sum over all the rows differs.
 * A 4-bit weight (NF4, FP4, double quantization, bf16 and f16 values) as
 * B of nt and nn: the C reference's bits on the dequantized weight. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_testing.h"
#include "repro_testing.h"
#include "vktrain/ops.h"
#include "repro_ref.h"
#include "vktrain/kernel_select.h"

static const char *layout_names[] = {"nt", "nn", "tn"};

/* Operand sizes of each layout (elements): a, b, c. */
static void sizes(enum repro_layout l, uint32_t M, uint32_t N, uint32_t K, size_t s[3])
{
    size_t mn = (size_t)M * N, mk = (size_t)M * K, nk = (size_t)N * K;
    if (l == REPRO_NT) {
        s[0] = mk, s[1] = nk, s[2] = mn;
    } else if (l == REPRO_NN) {
        s[0] = mn, s[1] = nk, s[2] = mk;
    } else {
        s[0] = mn, s[1] = mk, s[2] = nk;
    }
}

static float *random_data(struct ref_rng *rng, size_t n)
{
    float *x = vkt_malloc(n * sizeof *x, "data");
    for (size_t i = 0; i < n; i++) {
        double u = ref_rng_uniform(rng);
        x[i] = u < 0.02 ? -0.0f : u < 0.04 ? 0.0f : (float)ref_rng_normal(rng);
    }
    return x;
}

/* nt with four accumulators over k mod 4, summed at the end. */
static void four_accumulators_nt(const float *x, const float *w, float *y, uint32_t M, uint32_t N, uint32_t K)
{
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            float acc[4] = {0, 0, 0, 0};
            for (size_t k = 0; k < K; k++)
                acc[k % 4] += x[i * K + k] * w[j * K + k];
            y[i * N + j] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        }
}

/* The texel family's tn and nn tiles: 0 narrow, 1 wide
 * (VKTRAIN_REPRO_WIDE), -1 chosen by shape. Both must give the C
 * reference's bits. */
static void set_wide(int wide)
{
    if (wide < 0)
        kernel_env_set("VKTRAIN_REPRO_WIDE", NULL);
    else
        kernel_env_set("VKTRAIN_REPRO_WIDE", wide ? "1" : "0");
}

static void check_case(struct gpu *g, struct ref_rng *rng, enum repro_layout l, uint32_t M, uint32_t N, uint32_t K,
                       int accumulate)
{
    size_t s[3];
    sizes(l, M, N, K, s);
    float *a = random_data(rng, s[0]), *b = random_data(rng, s[1]), *c0 = random_data(rng, s[2]);
    float *ref = vkt_malloc(s[2] * sizeof *ref, "ref");
    memcpy(ref, c0, s[2] * sizeof *ref);
    repro_matmul_ref(l, a, b, ref, M, N, K, accumulate);
    struct gpu_buffer *ba = gpu_buffer_create(g, s[0] * 4, "repro a");
    struct gpu_buffer *bb = gpu_buffer_create(g, s[1] * 4, "repro b");
    struct gpu_buffer *bc = gpu_buffer_create(g, s[2] * 4, "repro c");
    gpu_upload(g, ba, 0, a, s[0] * 4);
    gpu_upload(g, bb, 0, b, s[1] * 4);
    /* texel, tiled; tn and nn: the texel family's narrow and wide tiles */
    int tiles = l != REPRO_NT;
    for (int run = 0; run < (tiles ? 3 : 2); run++) {
        int family = run & 1;
        const char *kind = family ? "tiled" : !tiles ? "texel" : run ? "texel, wide" : "texel, narrow";
        set_wide(tiles && !family ? run >> 1 : -1);
        gpu_set_kernel_class(g, family ? GPU_KERNELS_TILED : GPU_KERNELS_TEXEL);
        gpu_upload(g, bc, 0, c0, s[2] * 4);
        repro_matmul(g, l, ba, bb, bc, M, N, K, accumulate);
        gpu_submit(g);
        float *out = download_floats(g, bc, s[2]);
        size_t d = repro_bit_differences(out, ref, s[2]);
        printf("%s %ux%ux%u%s %s: %zu of %zu outputs differ from C\n", layout_names[l], M, N, K,
               accumulate ? " accumulate" : "", kind, d, s[2]);
        CHECK(d == 0, "%s %ux%ux%u %s: %zu outputs differ", layout_names[l], M, N, K, kind, d);
        free(out);
    }
    set_wide(-1);
    if (l == REPRO_NT && !accumulate && K >= 64) {
        float *other = vkt_malloc(s[2] * sizeof *other, "other order");
        four_accumulators_nt(a, b, other, M, N, K);
        size_t d = repro_bit_differences(other, ref, s[2]);
        printf("negative control: four accumulators differ on %zu of %zu outputs\n", d, s[2]);
        CHECK(d > s[2] / 4, "another order should differ on many outputs, differs on %zu", d);
        free(other);
    }
    gpu_buffer_destroy(g, ba);
    gpu_buffer_destroy(g, bb);
    gpu_buffer_destroy(g, bc);
    free(a);
    free(b);
    free(c0);
    free(ref);
}

/* nt and nn with a 4-bit weight as B (each variant of gpu_testing.h's):
 * both families give the C reference's bits on the dequantized weight. */
static void check_q4_case(struct gpu *g, struct ref_rng *rng, enum repro_layout l, uint32_t M, uint32_t N, uint32_t K,
                          enum q4_variant variant)
{
    size_t s[3];
    sizes(l, M, N, K, s);
    float *a = random_data(rng, s[0]), *c0 = random_data(rng, s[2]);
    double *w = vkt_malloc(s[1] * sizeof *w, "weight");
    for (size_t i = 0; i < s[1]; i++)
        w[i] = ref_rng_normal(rng);
    struct gpu_buffer *bb = buffer_q4_from_doubles(g, w, s[1], K % 64 ? 32 : 64, variant, "q4 b");
    float *b = vkt_malloc(s[1] * sizeof *b, "dequantized weight"), *ref = vkt_malloc(s[2] * sizeof *ref, "ref");
    for (size_t i = 0; i < s[1]; i++)
        b[i] = (float)w[i];
    memcpy(ref, c0, s[2] * sizeof *ref);
    repro_matmul_ref(l, a, b, ref, M, N, K, 1);
    struct gpu_buffer *ba = gpu_buffer_create(g, s[0] * 4, "repro a"), *bc = gpu_buffer_create(g, s[2] * 4, "repro c");
    gpu_upload(g, ba, 0, a, s[0] * 4);
    for (int family = 0; family < 2; family++) {
        gpu_set_kernel_class(g, family ? GPU_KERNELS_TILED : GPU_KERNELS_TEXEL);
        gpu_upload(g, bc, 0, c0, s[2] * 4);
        repro_matmul(g, l, ba, bb, bc, M, N, K, 1);
        gpu_submit(g);
        float *out = download_floats(g, bc, s[2]);
        size_t d = repro_bit_differences(out, ref, s[2]);
        printf("%s %ux%ux%u, 4-bit weight (%s) %s: %zu of %zu outputs differ from C on the dequantized weight\n",
               layout_names[l], M, N, K, q4_variant_name(variant), family ? "tiled" : "texel", d, s[2]);
        CHECK(d == 0, "%s %ux%ux%u 4-bit (%s) %s: %zu outputs differ", layout_names[l], M, N, K,
              q4_variant_name(variant), family ? "tiled" : "texel", d);
        free(out);
    }
    gpu_buffer_destroy(g, ba), gpu_buffer_destroy(g, bb), gpu_buffer_destroy(g, bc);
    free(a), free(b), free(c0), free(w), free(ref);
}

/* The canonical pairwise tree over samples [s0, s0 + n) of output o. */
static float tree(float *const *parts, size_t s0, size_t n, size_t o)
{
    if (n == 1)
        return parts[s0][o];
    float left = tree(parts, s0, n / 2, o), right = tree(parts, s0 + n / 2, n / 2, o);
    return left + right;
}

/* A parameter gradient dW[N,K] = dYᵀ·X over a micro-batch of B samples of
 * T rows (precision: reproducible's sums over samples): recorded in two
 * calls that cut a sample (the LM head's chunks), it must equal the tree
 * over samples of each sample's own product, computed here one sample at
 * a time: in both families, with the vec4 kernel's in-loop push (N, K
 * multiples of 4) and the per-sample dispatches of the others. */
static void check_samples(struct gpu *g, struct ref_rng *rng, uint32_t B, uint32_t T, uint32_t N, uint32_t K)
{
    uint32_t R = B * T, levels = 0;
    while ((1u << levels) < B)
        levels++;
    float *dy = random_data(rng, (size_t)R * N), *x = random_data(rng, (size_t)R * K);
    float **parts = vkt_malloc(B * sizeof *parts, "parts");
    for (uint32_t s = 0; s < B; s++) {
        parts[s] = vkt_calloc((size_t)N * K, sizeof(float), "part");
        repro_matmul_ref(REPRO_TN, dy + (size_t)s * T * N, x + (size_t)s * T * K, parts[s], T, N, K, 1);
    }
    float *ref = vkt_malloc((size_t)N * K * sizeof *ref, "ref");
    for (size_t o = 0; o < (size_t)N * K; o++)
        ref[o] = tree(parts, 0, B, o);
    struct gpu_buffer *bdy = gpu_buffer_create(g, (size_t)R * N * 4, "dy");
    struct gpu_buffer *bx = gpu_buffer_create(g, (size_t)R * K * 4, "x");
    struct gpu_buffer *bw = gpu_buffer_create(g, (size_t)N * K * 4, "dw");
    struct gpu_buffer *bs = gpu_buffer_create(g, repro_stack_floats((size_t)N * K, levels) * 4, "dw's stack");
    gpu_upload(g, bdy, 0, dy, (size_t)R * N * 4);
    gpu_upload(g, bx, 0, x, (size_t)R * K * 4);
    gpu_buffer_set_stack(bw, bs);
    /* the stack starts as junk: no kernel may read a level that its own
     * samples did not fill */
    size_t stack_floats = repro_stack_floats((size_t)N * K, levels);
    float *junk = vkt_malloc(stack_floats * sizeof *junk, "junk");
    for (size_t o = 0; o < stack_floats; o++)
        junk[o] = 1e30f;
    /* The cut after 1.5 samples, then after 3.5 (B >= 4: the stack's two
     * lowest levels filled across it), then after 2 (B >= 4) and none:
     * calls of whole pairs of samples, which the texel family's "_seg2"
     * kernels take where T % 4 == 0 (checked in the profile). */
    uint32_t cuts[4] = {T + T / 2, 3 * T + T / 2, 2 * T, R};
    for (int run = 0; run < 12; run++) {
        /* texel narrow, tiled, texel wide at each cut */
        int family = run % 3 == 1, wide = run % 3 == 2;
        uint32_t cut = cuts[run / 3];
        if (B < 4 && run / 3 < 3 && run / 3 > 0)
            continue;
        set_wide(family ? -1 : wide);
        gpu_set_kernel_class(g, family ? GPU_KERNELS_TILED : GPU_KERNELS_TEXEL);
        gpu_zero(g, bw);
        gpu_upload(g, bs, 0, junk, stack_floats * 4);
        gpu_submit(g);
        int timed = gpu_profile_start(g);
        gpu_set_repro_samples(g, T, B);
        repro_matmul_grad(g, bdy, bx, bw, cut, N, K, 1, NULL);
        if (cut < R)
            repro_matmul_grad(g, bdy, bx, bw, R - cut, N, K, 1, (size_t[3]){(size_t)cut * N, (size_t)cut * K, 0});
        gpu_set_repro_samples(g, 0, 0);
        gpu_profile_stop(g);
        uint64_t pairs = profile_dispatches(g, "repro_matmul_vec4_tn_seg2") +
                         profile_dispatches(g, "repro_matmul_vec4_tn_shift_seg2");
        float *out = download_floats(g, bw, (size_t)N * K);
        size_t d = repro_bit_differences(out, ref, (size_t)N * K);
        const char *kind = family ? "tiled" : wide ? "texel, wide" : "texel, narrow";
        printf("tn over %u samples of %u rows cut at row %u, %ux%u, %s: %zu of %u outputs differ from the tree of C "
               "products (%llu dispatches of pairs)\n",
               B, T, cut, N, K, kind, d, N * K, (unsigned long long)pairs);
        CHECK(d == 0, "tn over samples %ux%u %s: %zu outputs differ", N, K, kind, d);
        int whole_pairs = cut % (2 * T) == 0 && T % 4 == 0 && !family;
        CHECK(!timed || (pairs > 0) == whole_pairs, "tn over samples cut at %u, %s: %llu dispatches of pairs", cut,
              kind, (unsigned long long)pairs);
        free(out);
    }
    set_wide(-1);
    /* negative control: one sum over all the rows is another order */
    float *flat = vkt_calloc((size_t)N * K, sizeof(float), "one sum");
    repro_matmul_ref(REPRO_TN, dy, x, flat, R, N, K, 1);
    size_t d = repro_bit_differences(flat, ref, (size_t)N * K);
    printf("negative control: one sum over the %u rows differs on %zu of %u outputs\n", R, d, N * K);
    CHECK(d > (size_t)N * K / 4, "one sum over all rows should differ on many outputs, differs on %zu", d);
    /* The bias gradient (repro_colsum.comp, its push in the loop) and the
     * embedding backward (per-sample dispatches and repro_push) over the
     * same samples: dy's columns, and dy's rows into V = 7 table rows. */
    const uint32_t V = 7;
    int32_t *ids = vkt_malloc(R * sizeof *ids, "ids");
    for (uint32_t r = 0; r < R; r++)
        ids[r] = (int32_t)(ref_rng_uniform(rng) * V) % (int32_t)V;
    for (uint32_t s = 0; s < B; s++) {
        memset(parts[s], 0, (size_t)N * K * sizeof(float));
        for (uint32_t r = s * T; r < (s + 1) * T; r++)
            for (uint32_t c = 0; c < N; c++) {
                float v = parts[s][c] + dy[(size_t)r * N + c];
                parts[s][c] = v;
                float w = parts[s][N + (size_t)ids[r] * N + c] + dy[(size_t)r * N + c];
                parts[s][N + (size_t)ids[r] * N + c] = w;
            }
    }
    for (size_t o = 0; o < (size_t)N * (V + 1); o++)
        ref[o] = tree(parts, 0, B, o);
    struct gpu_buffer *bb = gpu_buffer_create(g, (size_t)N * 4, "db"),
                      *bbs = gpu_buffer_create(g, repro_stack_floats(N, levels) * 4, "db's stack");
    struct gpu_buffer *be = gpu_buffer_create(g, (size_t)N * V * 4, "de"),
                      *bes = gpu_buffer_create(g, repro_stack_floats((size_t)N * V, levels) * 4, "de's stack");
    struct gpu_buffer *bi = gpu_buffer_create(g, R * 4, "ids");
    gpu_upload(g, bi, 0, ids, R * 4);
    gpu_buffer_set_stack(bb, bbs);
    gpu_buffer_set_stack(be, bes);
    /* texel, tiled, tiled in bindings of 8 KiB (the column sums cut
     * into ranges of rows that start inside a sample), and tiled with one
     * workgroup across (the column sums in windows of 32 columns; the bias
     * alone: repro_push takes windows of at least 256 elements); then
     * texel with the embedding's calls per sample
     * (VKTRAIN_REPRO_EMBED_LOOP=0), where the first texel pass, with N % 4
     * == 0, runs the whole micro-batch in one dispatch (its samples
     * variant, checked in the profile) */
    static const char *how[5] = {"texel", "tiled", "tiled, 8 KiB bindings", "tiled, 1 workgroup across",
                                 "texel, embedding per sample"};
    static const char *limits[5] = {NULL, NULL, "storage_range=8192", "workgroups=1", NULL};
    for (int pass = 0; pass < 5; pass++) {
        gpu_set_kernel_class(g, pass % 4 ? GPU_KERNELS_TILED : GPU_KERNELS_TEXEL);
        gpu_set_limits(g, limits[pass]);
        if (pass == 4)
            kernel_env_set("VKTRAIN_REPRO_EMBED_LOOP", "0");
        gpu_zero(g, bb);
        gpu_zero(g, be);
        gpu_set_reproducible(g, 1); /* the ops record the reproducible kernels */
        gpu_submit(g);
        int timed = gpu_profile_start(g);
        gpu_set_repro_samples(g, T, B);
        op_bias_backward(g, bdy, bb, R, N);
        int embedding = pass < 3 || pass == 4;
        if (embedding)
            op_embedding_backward(g, bi, bdy, be, R, N, V);
        gpu_set_repro_samples(g, 0, 0);
        gpu_set_reproducible(g, 0);
        gpu_profile_stop(g);
        uint64_t one = profile_dispatches(g, "repro_embedding_back_texel_vec4_samples");
        kernel_env_set("VKTRAIN_REPRO_EMBED_LOOP", NULL);
        gpu_set_limits(g, NULL);
        /* (within the device's loop bound: its rows, then V per sample;
         * the 12000-row samples take the calls per sample) */
        uint32_t bound = gpu_info(g)->max_loop_iterations;
        int loop_fits = !bound || (size_t)R + (size_t)B * (V + 1) + 1 <= bound - bound / 16;
        CHECK(!timed || (one > 0) == (pass == 0 && N % 4 == 0 && loop_fits),
              "embedding over samples, %s: %llu dispatches of the one-dispatch kernel", how[pass],
              (unsigned long long)one);
        float *db = download_floats(g, bb, N), *de = download_floats(g, be, (size_t)N * V);
        size_t d1 = repro_bit_differences(db, ref, N),
               d2 = embedding ? repro_bit_differences(de, ref + N, (size_t)N * V) : 0;
        printf("bias %s over %u samples of %u rows, %s: %zu of %u and %zu of %u differ\n",
               embedding ? "and embedding gradients" : "gradient (embedding not run)", B, T, how[pass], d1, N, d2,
               embedding ? N * V : 0);
        CHECK(d1 == 0 && d2 == 0, "bias / embedding over samples %s: %zu, %zu differ", how[pass], d1, d2);
        free(db);
        free(de);
    }
    gpu_buffer_set_stack(bb, NULL);
    gpu_buffer_set_stack(be, NULL);
    gpu_buffer_destroy(g, bb);
    gpu_buffer_destroy(g, bbs);
    gpu_buffer_destroy(g, be);
    gpu_buffer_destroy(g, bes);
    gpu_buffer_destroy(g, bi);
    free(ids);
    gpu_buffer_set_stack(bw, NULL);
    free(junk);
    gpu_buffer_destroy(g, bdy);
    gpu_buffer_destroy(g, bx);
    gpu_buffer_destroy(g, bw);
    gpu_buffer_destroy(g, bs);
    for (uint32_t s = 0; s < B; s++)
        free(parts[s]);
    free(parts);
    free(dy);
    free(x);
    free(flat);
    free(ref);
}

int main(void)
{
    struct gpu *g = test_gpu();
    struct ref_rng rng;
    ref_rng_seed(&rng, 1414);
    for (int l = 0; l < 3; l++) {
        check_case(g, &rng, (enum repro_layout)l, 67, 45, 83, 0);
        check_case(g, &rng, (enum repro_layout)l, 33, 70, 19, 1);
    }
    check_case(g, &rng, REPRO_NT, 128, 96, 256, 0);
    /* Rows of whole texels: the texel family's vec4 kernel, past its 128
     * x 64 workgroup tile on both sides, its second group of four
     * columns in part past N, and a reduction cut into dispatches. */
    for (int l = 0; l < 3; l++) {
        check_case(g, &rng, (enum repro_layout)l, 131, 52, 68, 0);
        check_case(g, &rng, (enum repro_layout)l, 131, 52, 68, 1);
        check_case(g, &rng, (enum repro_layout)l, 131, 148, 68, 1);
    }
    check_case(g, &rng, REPRO_NT, 19, 45, 84, 1);
    check_case(g, &rng, REPRO_NT, 2, 3, 70004, 1);
    check_case(g, &rng, REPRO_TN, 70001, 4, 8, 1);
    /* nn and tn with A's rows not whole texels (the LM head's dlogits): its
     * floats moved out of two texels, nn's last K % 4 one at a time. */
    for (int l = 1; l < 3; l++)
        check_case(g, &rng, (enum repro_layout)l, 131, 53, 68, 1);
    check_case(g, &rng, REPRO_NN, 19, 7, 44, 0);
    check_case(g, &rng, REPRO_TN, 70001, 5, 8, 1);
    /* tn under a 4 KiB storage range: blocks of 2 rows of dW, which the
     * vec4 kernel cannot start on a texel (the shift one takes them). */
    gpu_set_limits(g, "storage_range=4096");
    check_case(g, &rng, REPRO_TN, 9, 12, 400, 1);
    gpu_set_limits(g, NULL);
    /* Over lavapipe's loop bound: the reduction is cut into dispatches. */
    check_case(g, &rng, REPRO_TN, 2, 3, 70001, 1);
    /* A 4-bit weight in nt and nn, each variant: blocks across rows (K = 83,
     * 68), a reduction over lavapipe's loop bound (cut into dispatches: B
     * read from the range's first element), and under a 4 KiB storage
     * range (blocks of rows of the output; the weight still bound whole). */
    for (int v = 0; v < Q4V_N; v++)
        for (int l = 0; l < 2; l++)
            check_q4_case(g, &rng, (enum repro_layout)l, 67, 45, v % 2 ? 68 : 83, (enum q4_variant)v);
    check_q4_case(g, &rng, REPRO_NT, 2, 3, 70004, Q4V_NF4_DQ);
    check_q4_case(g, &rng, REPRO_NN, 2, 70004, 3, Q4V_NF4_DQ_F16);
    gpu_set_limits(g, "storage_range=4096");
    for (int l = 0; l < 2; l++)
        check_q4_case(g, &rng, (enum repro_layout)l, 200, 12, 20, Q4V_FP4_BF16);
    gpu_set_limits(g, NULL);
    /* Sums over samples: rows per sample not a multiple of 4; the vec4
     * kernel (52 x 68) and the storage one (53 x 68). */
    check_samples(g, &rng, 4, 37, 52, 68);
    check_samples(g, &rng, 8, 9, 53, 68);
    /* 64 samples: more than one batch of 32 in the storage column sums'
     * workgroups (repro_colsum.comp), 37 columns over two of them */
    check_samples(g, &rng, 64, 2, 37, 12);
    /* Rows per sample a multiple of 4: the pairs kernels, from whole
     * texels (52 x 68) and through the shift one (53 x 68); and a
     * reduction past lavapipe's loop bound, cut into dispatches that end
     * on pairs of samples (12000 rows each). */
    check_samples(g, &rng, 8, 12, 52, 68);
    check_samples(g, &rng, 4, 20, 53, 68);
    check_samples(g, &rng, 8, 12000, 4, 8);
    gpu_destroy(g);
    return test_failures ? 1 : 0;
}
