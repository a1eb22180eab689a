/* test_ops: the foundation ops against the C reference (tests/ref), on
 * shapes that are not multiples of any tile (1 included), in both kernel
 * families (texel and tiled) on the same device.
 *
 * Tolerances:
 *   matmul (also split into blocks by a small storage binding limit, the
 *     path tensors over maxStorageBufferRange take; see test_large):
 *     normalized error mse(gpu, ref)/mse(ref, 0) < 1e-10. fp32 dot
 *     products of length K err by about sqrt(K)·2^-24 relative; at K ≤ 300
 *     that is ≤ 1e-12 in this measure, so 1e-10 leaves margin yet catches
 *     any indexing mistake (which gives errors near 1).
 *   add, scale, copy, axpy: exact (the same fp32 roundings as C, never fused).
 *   sum, sumsq: |gpu − exact| ≤ (4 + log2 WG + log2 G)·2^-24·Σ|x_i| (the
 *     bound derived in src/ops/op_reduce.c), and bit-identical on a rerun. */
#include <math.h>
#include <string.h>

#include "matmul_testing.h"
#include "vktrain/kernel_select.h"

static struct ref_rng rng;

static double *random_doubles(size_t n)
{
    double *x = vkt_malloc(n * sizeof *x, "test data");
    for (size_t i = 0; i < n; i++)
        x[i] = (double)(float)(2.0 * ref_rng_uniform(&rng) - 1.0);
    return x;
}

static float *download_at(struct gpu *g, struct gpu_buffer *b, size_t lead, size_t n)
{
    float *out = vkt_malloc(n * sizeof *out, "matmul output");
    gpu_download(g, b, lead * sizeof(float), out, n * sizeof *out);
    return out;
}

/* The matmul of layout l against the C reference, its first input and
 * output `lead` floats into their buffers. bf16 (nt, nn): the weight b is rounded to bf16 and given as a bf16
 * buffer; with `same_order` (no limits that split the reduction, which
 * may split at other places for a 2-byte weight) the result must also
 * equal, bit for bit, the fp32 kernel's on the rounded weight. */
/* the weight b's storage in matmul_case; the last two as bitsandbytes
 * folders may hold them: FP4 rounded to bf16, NF4 with double quant
 * rounded to f16 (its values scaled by 1e-4: f16's subnormals too) */
enum weight { W_FP32, W_BF16, W_NF4, W_NF4_DQ, W_FP4_BF16, W_NF4_DQ_F16 };
_Static_assert(W_NF4_DQ_F16 - W_NF4 == Q4V_NF4_DQ_F16, "the 4-bit weights in q4_variant's order");
static const char *const weight_name[] = {"",
                                          " (bf16 weight)",
                                          " (NF4 weight)",
                                          " (NF4 weight, double quant)",
                                          " (FP4 weight, bf16 values)",
                                          " (NF4 weight, double quant, f16 values)"};

static void matmul_case(struct gpu *g, enum matmul_layout l, int M, int N, int K, int accumulate, size_t lead, int wt,
                        int same_order)
{
    int bf16 = wt != W_FP32; /* a weight of other storage: its values compared with the fp32 kernel's */
    /* nt: a = X (M,K), b = W (N,K), c = Y (M,N)
     * nn: a = dY (M,N), b = W (N,K), c = dX (M,K)
     * tn: a = dY (M,N), b = X (M,K), c = dW (N,K) */
    size_t na = (size_t)M * (l == NT ? K : N), nb = (size_t)(l == TN ? M : N) * K;
    size_t nc = l == NT ? (size_t)M * N : l == NN ? (size_t)M * K : (size_t)N * K;
    double *a = random_doubles(na), *b = random_doubles(nb), *c0 = random_doubles(nc);
    /* NF4: blocks of 64, or of 32 (blocks that straddle the rows of W
     * where K is not a multiple of them) */
    uint32_t block = (K % 64 == 0 || (M + N) % 2) ? 64 : 32;
    if (wt == W_NF4_DQ_F16)
        for (size_t i = 0; i < nb; i++)
            b[i] *= 1e-4;
    struct gpu_buffer *bb = wt == W_BF16   ? buffer_bf16_from_doubles(g, b, nb, "b")
                            : wt == W_FP32 ? buffer_from_doubles(g, b, nb, "b")
                                           : buffer_q4_from_doubles(g, b, nb, block, (enum q4_variant)(wt - W_NF4), "b");
    double *ref = vkt_calloc(nc, sizeof *ref, "reference");
    if (accumulate)
        memcpy(ref, c0, nc * sizeof *ref);
    matmul_reference(l, a, b, ref, M, N, K);
    struct gpu_buffer *ba = buffer_at(g, a, na, lead, "a");
    struct gpu_buffer *bc = buffer_at(g, c0, nc, lead, "c");
    matmul_run(g, l, ba, bb, bc, M, N, K, accumulate, lead);
    float *out = download_at(g, bc, lead, nc);
    const char *family = gpu_kernel_class(g) == GPU_KERNELS_TEXEL ? "texel" : "tiled";
    /* A sum of n fp32 products in one accumulator: relative error about
     * 2^-24 sqrt(n) for random terms, so a normalized (squared) error of
     * about 2^-48 n; four times that, and 1e-10 below 7,000 terms. An
     * H200 gave 1.4e-10 at n = 270,001 (0.15 of this bound's 2^-48 n). */
    int n_sum = l == NT ? K : l == NN ? N : M;
    double bound = fmax(1e-10, 4.0 * ldexp(1.0, -48) * n_sum);
    double err = normalized_error(out, ref, nc);
    CHECK(err < bound, "matmul_%s%s %s M=%d N=%d K=%d acc=%d lead=%zu: normalized error %.3g (bound %.3g)",
          matmul_layout_name[l], weight_name[wt], family, M, N, K, accumulate, lead, err, bound);
    if (bf16 && same_order) {
        struct gpu_buffer *b32 = buffer_from_doubles(g, b, nb, "b fp32"), *c32 = buffer_at(g, c0, nc, lead, "c");
        matmul_run(g, l, ba, b32, c32, M, N, K, accumulate, lead);
        float *want = download_at(g, c32, lead, nc);
        size_t differ = floats_differing(out, want, nc);
        CHECK(differ == 0,
              "matmul_%s%s %s M=%d N=%d K=%d: %zu of %zu outputs differ from the fp32 kernel's on the same "
              "rounded or dequantized weight (bitwise expected)",
              matmul_layout_name[l], weight_name[wt], family, M, N, K, differ, nc);
        free(want);
        gpu_buffer_destroy(g, b32);
        gpu_buffer_destroy(g, c32);
    }
    free(out);
    gpu_buffer_destroy(g, ba);
    gpu_buffer_destroy(g, bb);
    gpu_buffer_destroy(g, bc);
    free(a), free(b), free(c0), free(ref);
}

/* tn through the gpu's matmul scratch (op_matmul_tn_scratch: the texel
 * family copies dYᵀ out and runs nn): against the reference, and the path
 * checked in the profile (its one transpose_texel dispatch); with a
 * scratch one float short, the tn kernel and no transpose. */
static void test_tn_transposed(struct gpu *g, int M, int N, int K, size_t lead)
{
    size_t bytes = op_matmul_tn_scratch(g, (uint32_t)M, (uint32_t)N, (uint32_t)K);
    CHECK(bytes == (size_t)N * M * sizeof(float), "op_matmul_tn_scratch %dx%dx%d: %zu bytes, not N·M floats", M, N, K,
          bytes);
    for (int shortfall = 0; shortfall < 2; shortfall++) {
        struct gpu_buffer *scratch = gpu_buffer_create(g, bytes - 4 * (size_t)shortfall, "tn scratch");
        gpu_set_matmul_scratch(g, scratch);
        int timed = gpu_profile_start(g);
        matmul_case(g, TN, M, N, K, 1, lead, 0, 0);
        gpu_profile_stop(g);
        uint64_t transposes = profile_dispatches(g, "transpose_texel");
        CHECK(!timed || transposes == (shortfall ? 0u : 1u),
              "matmul_tn %dx%dx%d lead %zu, scratch %s: %llu transpose dispatches, expected %d", M, N, K, lead,
              shortfall ? "a float short" : "of op_matmul_tn_scratch's size", (unsigned long long)transposes,
              shortfall ? 0 : 1);
        gpu_set_matmul_scratch(g, NULL);
        gpu_buffer_destroy(g, scratch);
    }
}

/* tn in parts of the reduction (the tiled family's split-k, where the
 * gpu's matmul scratch has op_matmul_tn_scratch's bytes): `parts`
 * partial products, then the pass that adds them in order
 * (matmul_splitk_sum), against the reference at leads 0 and 1; with a
 * scratch a float short, one product and no such pass. parts = 1: no
 * scratch asked for, and none used where there is room for 16 parts.
 * force: the parts through VKTRAIN_TILED_SPLITK (NULL: the shape's own). */
static void test_tn_split(struct gpu *g, int M, int N, int K, const char *force, uint32_t parts)
{
    if (force)
        kernel_env_set("VKTRAIN_TILED_SPLITK", force);
    size_t bytes = op_matmul_tn_scratch(g, (uint32_t)M, (uint32_t)N, (uint32_t)K);
    CHECK(bytes == (parts > 1 ? (size_t)parts * N * K * sizeof(float) : 0),
          "op_matmul_tn_scratch %dx%dx%d (VKTRAIN_TILED_SPLITK=%s): %zu bytes, not %u parts of N·K floats", M, N, K,
          force ? force : "", bytes, parts);
    for (int shortfall = 0; shortfall < (parts > 1 ? 2 : 1); shortfall++) {
        size_t room = parts > 1 ? bytes - 4 * (size_t)shortfall : (size_t)16 * N * K * sizeof(float);
        struct gpu_buffer *scratch = gpu_buffer_create(g, room, "tn scratch");
        gpu_set_matmul_scratch(g, scratch);
        for (size_t lead = 0; lead < 2; lead++) {
            int timed = gpu_profile_start(g);
            matmul_case(g, TN, M, N, K, (int)lead, lead, 0, 0);
            gpu_profile_stop(g);
            uint64_t sums = profile_dispatches(g, "matmul_splitk_sum");
            int want = parts > 1 && !shortfall;
            CHECK(!timed || sums == (uint64_t)want,
                  "matmul_tn %dx%dx%d lead %zu, scratch of %zu bytes: %llu split-k sums, expected %d", M, N, K, lead,
                  room, (unsigned long long)sums, want);
        }
        gpu_set_matmul_scratch(g, NULL);
        gpu_buffer_destroy(g, scratch);
    }
    kernel_env_set("VKTRAIN_TILED_SPLITK", NULL);
}

/* The LM head's operands, rows of V floats ld apart (op_matmul_*_at with
 * ld): nt writes Y's rows and leaves the pad as it was; nn reads a dY
 * whose pad holds zeros (as the cross-entropy leaves it), as whole texels
 * on the texel family; tn a dY whose pad holds NaN, which no output may
 * read (through the transpose where `scratch`). Against the reference on
 * the packed matrices. */
static void test_padded_rows(struct gpu *g, int M, int V, int C, uint32_t ld, int scratch)
{
    size_t nx = (size_t)M * C, nw = (size_t)V * C, ny = (size_t)M * V, np = (size_t)M * ld;
    double *x = random_doubles(nx), *w = random_doubles(nw), *dy = random_doubles(ny);
    double *y = vkt_calloc(ny, sizeof *y, "reference"), *dx = vkt_calloc(nx, sizeof *dx, "reference");
    double *dw = vkt_calloc(nw, sizeof *dw, "reference");
    ref_matmul_forward(y, x, w, NULL, M, C, V);
    ref_matmul_backward(dx, dw, NULL, dy, x, w, M, C, V);
    double *padded[2] = {vkt_malloc(np * sizeof(double), "padded"), vkt_malloc(np * sizeof(double), "padded")};
    for (size_t r = 0; r < (size_t)M; r++)
        for (size_t j = 0; j < ld; j++) {
            padded[0][r * ld + j] = j < (size_t)V ? dy[r * V + j] : 0.0;
            padded[1][r * ld + j] = j < (size_t)V ? dy[r * V + j] : NAN;
        }
    struct gpu_buffer *bx = buffer_from_doubles(g, x, nx, "x"), *bw = buffer_from_doubles(g, w, nw, "w");
    struct gpu_buffer *by = buffer_from_doubles(g, padded[1], np, "y"),
                      *bdy = buffer_from_doubles(g, padded[0], np, "dy");
    struct gpu_buffer *bdyn = buffer_from_doubles(g, padded[1], np, "dy, NaN pad");
    struct gpu_buffer *bdx = gpu_buffer_create(g, nx * sizeof(float), "dx");
    struct gpu_buffer *bdw = gpu_buffer_create(g, nw * sizeof(float), "dw");
    struct gpu_buffer *sc = NULL;
    if (scratch) {
        size_t bytes = op_matmul_tn_scratch(g, (uint32_t)M, (uint32_t)V, (uint32_t)C);
        CHECK(bytes > 0, "padded rows M=%d V=%d C=%d: no path through the transpose", M, V, C);
        sc = gpu_buffer_create(g, bytes ? bytes : 4, "tn scratch");
        gpu_set_matmul_scratch(g, sc);
    }
    op_matmul_nt_at(g, bx, bw, by, (uint32_t)M, (uint32_t)V, (uint32_t)C, 0, NULL, (uint32_t[3]){0, 0, ld});
    op_matmul_nn_at(g, bdy, bw, bdx, (uint32_t)M, (uint32_t)V, (uint32_t)C, 0, NULL, (uint32_t[3]){ld, 0, 0});
    op_matmul_tn_at(g, bdyn, bx, bdw, (uint32_t)M, (uint32_t)V, (uint32_t)C, 0, NULL, (uint32_t[3]){ld, 0, 0});
    float *oy = download_floats(g, by, np), *odx = download_floats(g, bdx, nx), *odw = download_floats(g, bdw, nw);
    float *packed = vkt_malloc(ny * sizeof(float), "packed");
    size_t pad_written = 0;
    for (size_t r = 0; r < (size_t)M; r++)
        for (size_t j = 0; j < ld; j++) {
            if (j < (size_t)V)
                packed[r * V + j] = oy[r * ld + j];
            else
                pad_written += !isnan(oy[r * ld + j]);
        }
    const char *family = gpu_kernel_class(g) == GPU_KERNELS_TEXEL ? "texel" : "tiled";
    double e[3] = {normalized_error(packed, y, ny), normalized_error(odx, dx, nx), normalized_error(odw, dw, nw)};
    CHECK(e[0] < 1e-10 && pad_written == 0,
          "padded rows %s M=%d V=%d C=%d ld=%u: nt normalized error %.3g, %zu pad floats written", family, M, V, C, ld,
          e[0], pad_written);
    CHECK(e[1] < 1e-10, "padded rows %s M=%d V=%d C=%d ld=%u: nn normalized error %.3g", family, M, V, C, ld, e[1]);
    CHECK(e[2] < 1e-10, "padded rows %s M=%d V=%d C=%d ld=%u: tn normalized error %.3g", family, M, V, C, ld, e[2]);
    if (sc) {
        gpu_set_matmul_scratch(g, NULL);
        gpu_buffer_destroy(g, sc);
    }
    struct gpu_buffer *bufs[] = {bx, bw, by, bdy, bdyn, bdx, bdw};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        gpu_buffer_destroy(g, bufs[i]);
    free(x), free(w), free(dy), free(y), free(dx), free(dw), free(padded[0]), free(padded[1]);
    free(oy), free(odx), free(odw), free(packed);
}

static void test_matmul(struct gpu *g, enum matmul_layout l, int M, int N, int K, int accumulate)
{
    matmul_case(g, l, M, N, K, accumulate, 0, 0, 0);
}

/* The tiled kernel's large configuration with each 32 invocations on a
 * 32 x 64 block of the tile (VKTRAIN_TILED_WARPTILE=1, benchmarks on a
 * GPU): vec4 and float loads, accumulating or not, and split-k. */
static void test_tiled_warp_tiles(struct gpu *g)
{
    kernel_env_set("VKTRAIN_TILED_WARPTILE", "1");
    test_matmul(g, NT, 2055, 2053, 9, 1);
    test_matmul(g, NT, 2052, 2052, 12, 0);
    test_matmul(g, NN, 2052, 12, 2052, 1);
    test_matmul(g, TN, 12, 2052, 2052, 0);
    test_tn_split(g, 5000, 200, 136, NULL, 4);
    kernel_env_set("VKTRAIN_TILED_WARPTILE", NULL);
}

/* The tiled kernel in steps of 16 along the reduction
 * (VKTRAIN_TILED_BK=16, benchmarks on a GPU: its vec4 variants "k16"; the
 * others keep 8): small tiles with vec4 loads of both operands and of B
 * alone, and, where the device's shared memory holds them (33,792 bytes:
 * a GPU's, not lavapipe's 32 KiB, which this says), large ones and split-k. */
static void test_tiled_k16(struct gpu *g)
{
    kernel_env_set("VKTRAIN_TILED_BK", "16");
    static const int shapes[][3] = {{128, 64, 64}, {130, 37, 68}, {64, 4, 300}, {5, 259, 12}};
    int timed = gpu_profile_start(g);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int l = 0; l < 3; l++)
            for (int acc = 0; acc < 2; acc++)
                test_matmul(g, (enum matmul_layout)l, shapes[s][0], shapes[s][1], shapes[s][2], acc);
    gpu_profile_stop(g);
    for (int l = 0; l < 3; l++) {
        char kernel[40];
        snprintf(kernel, sizeof kernel, "matmul_tiled_%s_vec4_k16", matmul_layout_name[l]);
        CHECK(!timed || profile_dispatches(g, kernel) > 0, "VKTRAIN_TILED_BK=16: no %s dispatch in the profile",
              kernel);
    }
    if (gpu_info(g)->shared_memory >= 33792) {
        test_matmul(g, NT, 2052, 2052, 12, 1);
        test_matmul(g, NN, 2052, 12, 2052, 0);
        test_matmul(g, TN, 12, 2052, 2052, 1);
        test_tn_split(g, 5000, 200, 136, NULL, 4);
        kernel_env_set("VKTRAIN_TILED_WARPTILE", "1");
        test_matmul(g, NT, 2052, 2052, 12, 1);
        kernel_env_set("VKTRAIN_TILED_WARPTILE", NULL);
    } else {
        printf("  VKTRAIN_TILED_BK=16 with 128 x 128 tiles: not run on %s (%u bytes of shared memory, 33,792 "
               "needed)\n",
               gpu_info(g)->name, gpu_info(g)->shared_memory);
    }
    kernel_env_set("VKTRAIN_TILED_BK", NULL);
}

/* op_matmul_nt_bias against op_matmul_nt then op_bias_add on the same
 * inputs, in precision fp32 or reproducible (repro): the same bits, and
 * within the matmul tolerance of the C reference. The profile must name
 * the kernel that adds the bias as it stores (one dispatch of a texel
 * kernel; in the reproducible mode its vec4 kernel, K % 4 == 0) where the
 * op should take it, and a bias pass elsewhere (the tiled family, or the
 * product split under `limits`). */
static void test_matmul_bias(struct gpu *g, int M, int N, int K, int accumulate, int repro, const char *limits)
{
    size_t nx = (size_t)M * K, nw = (size_t)N * K, ny = (size_t)M * N;
    double *x = random_doubles(nx), *w = random_doubles(nw), *b = random_doubles((size_t)N), *y0 = random_doubles(ny);
    double *ref = vkt_calloc(ny, sizeof *ref, "reference");
    ref_matmul_forward(ref, x, w, b, M, K, N);
    for (size_t i = 0; accumulate && i < ny; i++)
        ref[i] += y0[i];
    struct gpu_buffer *bx = buffer_from_doubles(g, x, nx, "x"), *bw = buffer_from_doubles(g, w, nw, "w");
    struct gpu_buffer *bb = buffer_from_doubles(g, b, (size_t)N, "bias");
    struct gpu_buffer *apart = buffer_from_doubles(g, y0, ny, "y"), *fused = buffer_from_doubles(g, y0, ny, "y");
    gpu_set_reproducible(g, repro);
    op_matmul_nt(g, bx, bw, apart, (uint32_t)M, (uint32_t)N, (uint32_t)K, accumulate);
    op_bias_add(g, bb, apart, (uint32_t)M, (uint32_t)N);
    gpu_set_limits(g, limits);
    int timed = gpu_profile_start(g);
    op_matmul_nt_bias(g, bx, bw, bb, fused, (uint32_t)M, (uint32_t)N, (uint32_t)K, accumulate);
    gpu_profile_stop(g);
    gpu_set_limits(g, NULL);
    gpu_set_reproducible(g, 0);
    int texel = gpu_kernel_class(g) == GPU_KERNELS_TEXEL;
    int expect = texel && !limits && (!repro || K % 4 == 0);
    uint64_t in_store =
        repro ? profile_dispatches(g, "repro_matmul_vec4_nt_bias")
              : profile_dispatches(g, "matmul_nt_vec4_bias") + profile_dispatches(g, "matmul_nt_scalar_bias");
    uint64_t pass = profile_dispatches(g, "bias_add") + profile_dispatches(g, "repro_elementwise_bias") +
                    profile_dispatches(g, "repro_elementwise_texel_bias");
    /* the fused kernel stores whole texels where the output's rows are */
    uint64_t img = profile_dispatches(g, "matmul_nt_vec4_bias_img");
    int expect_img = expect && !repro && N % 4 == 0 && K % 4 == 0 && gpu_info(g)->image_vec4;
    float *want = download_floats(g, apart, ny), *got = download_floats(g, fused, ny);
    size_t differ = 0;
    for (size_t i = 0; i < ny; i++)
        differ += memcmp(&want[i], &got[i], sizeof *got) != 0;
    const char *name = texel ? "texel" : "tiled";
    /* Each output against the reference within the worst case of K + 2
     * fp32 roundings of its terms' magnitudes, (K + 2) 2^-24 sum |term|
     * (times 2): a bound on the sum's terms, not on the result, which
     * cancellation can make small (a normalized error of 1e-10 failed at
     * 1.4e-10 on a one-output K = 4 product). Seen: within 3 2^-24 sum
     * |term|. */
    double *ax = vkt_malloc(nx * sizeof *ax, "|x|"), *aw = vkt_malloc(nw * sizeof *aw, "|w|");
    double *ab = vkt_malloc((size_t)N * sizeof *ab, "|b|"), *mag = vkt_calloc(ny, sizeof *mag, "|terms|");
    for (size_t i = 0; i < nx; i++)
        ax[i] = fabs(x[i]);
    for (size_t i = 0; i < nw; i++)
        aw[i] = fabs(w[i]);
    for (int i = 0; i < N; i++)
        ab[i] = fabs(b[i]);
    ref_matmul_forward(mag, ax, aw, ab, M, K, N);
    size_t outside = 0;
    double worst = 0;
    for (size_t i = 0; i < ny; i++) {
        double m = mag[i] + (accumulate ? fabs(y0[i]) : 0.0), e = fabs((double)got[i] - ref[i]);
        double bound = 2.0 * (K + 2) * ldexp(1.0, -24) * m;
        outside += e > bound;
        worst = fmax(worst, m > 0 ? e / bound : 0.0);
    }
    CHECK(differ == 0 && outside == 0,
          "matmul_nt_bias %s%s M=%d N=%d K=%d acc=%d%s%s: %zu of %zu outputs differ from the product and the bias "
          "pass (bitwise expected); %zu outside the rounding bound (worst at %.3g of it)",
          name, repro ? " reproducible" : "", M, N, K, accumulate, limits ? " under " : "", limits ? limits : "",
          differ, ny, outside, worst);
    free(ax), free(aw), free(ab), free(mag);
    CHECK(!timed || (expect ? in_store == 1 && pass == 0 : in_store == 0 && pass > 0),
          "matmul_nt_bias %s%s M=%d N=%d K=%d%s%s: %llu dispatches adding the bias as they store and %llu bias "
          "passes, where %s was expected",
          name, repro ? " reproducible" : "", M, N, K, limits ? " under " : "", limits ? limits : "",
          (unsigned long long)in_store, (unsigned long long)pass, expect ? "the first alone" : "a pass");
    CHECK(!timed || img == (uint64_t)expect_img,
          "matmul_nt_bias %s M=%d N=%d K=%d: %llu dispatches of the kernel that "
          "stores whole texels, expected %d",
          name, M, N, K, (unsigned long long)img, expect_img);
    struct gpu_buffer *bufs[] = {bx, bw, bb, apart, fused};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        gpu_buffer_destroy(g, bufs[i]);
    free(x), free(w), free(b), free(y0), free(ref), free(want), free(got);
}

static void test_elementwise(struct gpu *g, size_t n)
{
    double *x = random_doubles(n), *y = random_doubles(n);
    struct gpu_buffer *bx = buffer_from_doubles(g, x, n, "x"), *by = buffer_from_doubles(g, y, n, "y");
    struct gpu_buffer *bz = gpu_buffer_create(g, n * sizeof(float), "z");
    struct gpu_buffer *bw = gpu_buffer_create(g, n * sizeof(float), "w");
    /* One batch, with dependent ops: z = x + y; w = z; w *= 0.75; w += -1.5·x. */
    op_add(g, bx, by, bz, n);
    op_copy(g, bz, bw, n);
    op_scale(g, bw, 0.75f, n);
    op_axpy(g, -1.5f, bx, bw, n);
    float *z = download_floats(g, bz, n), *w = download_floats(g, bw, n);
    size_t bad_z = 0, bad_w = 0;
    for (size_t i = 0; i < n; i++) {
        float ez = (float)x[i] + (float)y[i];
        float ew = ez * 0.75f + -1.5f * (float)x[i]; /* C11: no contraction */
        bad_z += z[i] != ez;
        bad_w += w[i] != ew;
    }
    CHECK(bad_z == 0, "add n=%zu: %zu elements differ from C", n, bad_z);
    CHECK(bad_w == 0, "copy/scale/axpy chain n=%zu: %zu elements differ from C", n, bad_w);
    free(z), free(w), free(x), free(y);
    gpu_buffer_destroy(g, bx);
    gpu_buffer_destroy(g, by);
    gpu_buffer_destroy(g, bz);
    gpu_buffer_destroy(g, bw);
}

static void test_reduce(struct gpu *g, size_t n)
{
    float *x = vkt_malloc(n * sizeof *x, "reduce input");
    double exact = 0, exact_sq = 0, abs_sum = 0;
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)(2.0 * ref_rng_uniform(&rng) - 0.9); /* biased: the sum is not ~0 */
        exact += x[i];
        exact_sq += (double)x[i] * x[i];
        abs_sum += fabs(x[i]);
    }
    struct gpu_buffer *bx = gpu_buffer_create(g, n * sizeof *x, "reduce x");
    gpu_upload(g, bx, 0, x, n * sizeof *x);
    size_t groups = op_reduce_scratch(g, n);
    struct gpu_buffer *scratch = gpu_buffer_create(g, groups * sizeof(float), "reduce scratch");
    struct gpu_buffer *out = gpu_buffer_create(g, 4 * sizeof(float), "reduce out");
    op_sum(g, bx, n, scratch, out, 0);
    op_sumsq(g, bx, n, scratch, out, 1);
    op_sum(g, bx, n, scratch, out, 2);
    op_sumsq(g, bx, n, scratch, out, 3);
    float r[4];
    gpu_download(g, out, 0, r, sizeof r);
    double levels = 4 + log2((double)gpu_workgroup_1d(g)) + log2((double)groups);
    double u = ldexp(1.0, -24);
    double bound = levels * u * abs_sum, bound_sq = levels * u * exact_sq;
    CHECK(fabs(r[0] - exact) <= bound, "sum n=%zu: %.9g vs exact %.9g, error %.3g > bound %.3g", n, r[0], exact,
          fabs(r[0] - exact), bound);
    CHECK(fabs(r[1] - exact_sq) <= bound_sq, "sumsq n=%zu: %.9g vs exact %.9g, error %.3g > bound %.3g", n, r[1],
          exact_sq, fabs(r[1] - exact_sq), bound_sq);
    CHECK(!memcmp(&r[0], &r[2], sizeof(float)) && !memcmp(&r[1], &r[3], sizeof(float)),
          "reduction n=%zu not deterministic: %.9g/%.9g and %.9g/%.9g", n, r[0], r[2], r[1], r[3]);
    printf("  reduce n=%zu: sum rel. error %.2g (bound %.2g), sumsq rel. error %.2g (bound %.2g)\n", n,
           fabs(r[0] - exact) / abs_sum, bound / abs_sum, fabs(r[1] - exact_sq) / exact_sq, bound_sq / exact_sq);
    free(x);
    gpu_buffer_destroy(g, bx);
    gpu_buffer_destroy(g, scratch);
    gpu_buffer_destroy(g, out);
}

int main(void)
{
    ref_rng_seed(&rng, 42);
    struct gpu *g = test_gpu();
    /* (M, N, K): ones, primes, one past a tile, and aligned (vec4) shapes. */
    static const int shapes[][3] = {{1, 1, 1},    {1, 7, 3},     {7, 5, 3},     {33, 17, 9},   {129, 33, 65},
                                    {130, 37, 68}, {128, 64, 64}, {5, 259, 12},  {64, 4, 300},  {200, 96, 1},
                                    {33, 17, 12}};
    enum gpu_kernel_class classes[2] = {GPU_KERNELS_TEXEL, GPU_KERNELS_TILED};
    for (int c = 0; c < 2; c++) {
        gpu_set_kernel_class(g, classes[c]);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int l = 0; l < 3; l++)
                for (int acc = 0; acc < 2; acc++)
                    test_matmul(g, (enum matmul_layout)l, shapes[s][0], shapes[s][1], shapes[s][2], acc);
        /* Binding limits of a few KiB split these into blocks of rows,
         * columns and (tiled) the reduction, at unaligned offsets and with
         * odd remainders; vec4 and scalar shapes. */
        static const int split_shapes[][3] = {{300, 200, 68}, {261, 203, 67}, {37, 129, 300}};
        static const char *limits[] = {"storage_range=20000", "storage_range=4099"};
        for (size_t s = 0; s < sizeof split_shapes / sizeof split_shapes[0]; s++)
            for (size_t li = 0; li < sizeof limits / sizeof limits[0]; li++) {
                gpu_set_limits(g, limits[li]);
                for (int l = 0; l < 3; l++)
                    test_matmul(g, (enum matmul_layout)l, split_shapes[s][0], split_shapes[s][1], split_shapes[s][2],
                                1);
            }
        gpu_set_limits(g, NULL);
        if (classes[c] == GPU_KERNELS_TILED) {
            /* The tiled kernel's other configurations (the shapes above
             * take its small one, 64 x 64 tiles): 128 x 128 tiles, which
             * it takes for a grid of at least 256 of them, here with
             * vec4 and float loads and K = 1; and the fallback of 64
             * invocations for a device with Vulkan's minimum 16 KiB of
             * shared memory. (R, C, red): the output is R x C. */
            static const int wide[][3] = {{2055, 2053, 9}, {2052, 2052, 12}, {2048, 2048, 1}};
            for (size_t s = 0; s < sizeof wide / sizeof wide[0]; s++) {
                int R = wide[s][0], C = wide[s][1], red = wide[s][2];
                test_matmul(g, NT, R, C, red, 1);
                test_matmul(g, NN, R, red, C, 0);
                test_matmul(g, TN, red, R, C, 1);
                /* a bf16 weight in the large configuration: bitwise the fp32 kernel's */
                matmul_case(g, NT, R, C, red, 1, 0, 1, 1);
                matmul_case(g, NN, R, red, C, 0, 0, 1, 1);
            }
            /* tn in parts of its reduction (split-k): a grid of 4 large
             * tiles over 5,000 rows takes 4 parts (1,256 rows, the last
             * 1,232), vec4 loads at lead 0, float ones at lead 1; forced
             * parts over an odd shape (3 of 32, 32 and 13 rows); none
             * where the parts' products exceed the binding limit. */
            test_tn_split(g, 5000, 200, 136, NULL, 4);
            test_tn_split(g, 77, 37, 19, "3", 3);
            gpu_set_limits(g, "storage_range=20000");
            test_tn_split(g, 77, 37, 19, "3", 3);
            test_tn_split(g, 77, 61, 41, "3", 1);
            gpu_set_limits(g, NULL);
            test_tiled_k16(g);
            test_tiled_warp_tiles(g);
            gpu_set_limits(g, "shared=16384");
            static const int few[][3] = {{33, 17, 9}, {130, 37, 68}, {128, 64, 64}, {200, 96, 1}};
            for (size_t s = 0; s < sizeof few / sizeof few[0]; s++)
                for (int l = 0; l < 3; l++)
                    test_matmul(g, (enum matmul_layout)l, few[s][0], few[s][1], few[s][2], 1);
            gpu_set_limits(g, NULL);
        }
        /* The first input and the output 1 and 4 floats into their
         * buffers (as the LM head's chunks are): at 1, the second input
         * alone is read as vec4 (tiled bvec4, texel shift or scalar). */
        for (int l = 0; l < 3; l++) {
            matmul_case(g, (enum matmul_layout)l, 37, 20, 12, 1, 1, 0, 0);
            matmul_case(g, (enum matmul_layout)l, 37, 20, 12, 0, 4, 0, 0);
        }
        /* The bias added as the product is stored (vec4 and scalar
         * views, N not a multiple of the tile or of 4), in both
         * precisions; and the pass after a product split into blocks. */
        static const int bias_shapes[][3] = {{130, 37, 68}, {33, 17, 9},  {1, 1, 4},
                                             {5, 259, 12},  {70, 36, 20}, {130, 132, 68}};
        for (size_t s = 0; s < sizeof bias_shapes / sizeof bias_shapes[0]; s++)
            for (int repro = 0; repro < 2; repro++)
                test_matmul_bias(g, bias_shapes[s][0], bias_shapes[s][1], bias_shapes[s][2], (int)s % 2, repro, NULL);
        test_matmul_bias(g, 300, 200, 68, 1, 0, "storage_range=20000");
        test_matmul_bias(g, 300, 20, 68, 0, 1, "storage_range=20000");
        /* The LM head's padded rows: V = 37 in rows of 40 (and 44), and
         * the texel family's transpose path (V = 517 in rows of 520) */
        test_padded_rows(g, 9, 37, 12, 40, 0);
        test_padded_rows(g, 5, 37, 8, 44, 0);
        if (classes[c] == GPU_KERNELS_TEXEL && gpu_info(g)->image_vec4)
            test_padded_rows(g, 36, 517, 520, 520, 1);
        /* Reductions longer than llvmpipe's 65,535-iteration loop limit:
         * tn walks 140,003 tokens (split into accumulating blocks), nt and
         * nn 4 elements per iteration over 270,001 and 270,004. */
        test_matmul(g, TN, 140003, 5, 6, 1);
        if (classes[c] == GPU_KERNELS_TEXEL && gpu_info(g)->image_vec4) {
            /* tn through the transpose: at offsets, and with nn's output
             * split by the storage limit */
            test_tn_transposed(g, 36, 516, 520, 0);
            test_tn_transposed(g, 36, 516, 520, 4);
            /* rows of dY and X that are not whole texels, dY from float 1
             * (the shift transpose) */
            test_tn_transposed(g, 36, 517, 521, 1);
            gpu_set_limits(g, "storage_range=20000");
            test_tn_transposed(g, 40, 512, 600, 0);
            /* copies past the texel views' limit (40·600 floats over 4,096
             * texels): no scratch asked for, and none used (the tn kernel,
             * bound in ranges, against the reference) */
            gpu_set_limits(g, "texel_elements=4096");
            CHECK(op_matmul_tn_scratch(g, 40, 512, 600) == 0,
                  "op_matmul_tn_scratch: a path for copies over the texel views' limit");
            gpu_set_matmul_scratch(g, gpu_buffer_create(g, (512 + 600) * 40 * sizeof(float), "tn scratch"));
            int timed = gpu_profile_start(g);
            matmul_case(g, TN, 40, 512, 600, 1, 0, 0, 0);
            gpu_profile_stop(g);
            CHECK(!timed || profile_dispatches(g, "transpose_texel") == 0,
                  "matmul_tn 40x512x600 under texel_elements=4096: transposes over the limit");
            gpu_buffer_destroy(g, gpu_matmul_scratch(g));
            gpu_set_matmul_scratch(g, NULL);
            gpu_set_limits(g, NULL);
            CHECK(op_matmul_tn_scratch(g, 2048, 128, 128) == 0 && op_matmul_tn_scratch(g, 38, 516, 520) == 0,
                  "op_matmul_tn_scratch: a path for N = 128 or M %% 4 != 0");
        }
        test_matmul(g, NT, 3, 5, 270001, 0);
        test_matmul(g, NN, 3, 270004, 4, 1);
        /* A bf16 weight (model.base_dtype bf16) in nt and nn: against the
         * reference on the rounded weight, and bit for bit against the fp32
         * kernel on it; vec4, scalar and (nn, N % 4 != 0) shift views. Then
         * split by the storage limits, against the reference only. */
        static const int bf16_shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {129, 33, 65}, {130, 37, 68}, {33, 18, 20}};
        for (size_t s = 0; s < sizeof bf16_shapes / sizeof bf16_shapes[0]; s++)
            for (int l = 0; l < 2; l++)
                matmul_case(g, (enum matmul_layout)l, bf16_shapes[s][0], bf16_shapes[s][1], bf16_shapes[s][2], l, 0, 1,
                            1);
        for (size_t li = 0; li < sizeof limits / sizeof limits[0]; li++) {
            gpu_set_limits(g, limits[li]);
            for (int l = 0; l < 2; l++)
                matmul_case(g, (enum matmul_layout)l, 261, 203, 67, 1, 0, 1, 0);
            gpu_set_limits(g, NULL);
        }
        /* A 4-bit weight (model.base_dtype nf4), with and without double
         * quantization, in nt and nn: against the reference on the
         * dequantized weight and bit for bit against the fp32 kernel on
         * it, also under limits that split the product (it is cut as its
         * fp32 self is); shapes with blocks across rows (K = 3, 65, 68),
         * vec4, scalar and shift views, and more than 256 blocks; FP4's
         * code and the bf16 and f16 roundings of bitsandbytes folders. */
        struct ref_rng before_q4 = rng; /* the cases after keep the data they had before these */
        static const int q4_shapes[][3] = {{1, 1, 1},    {7, 5, 3},      {129, 33, 65}, {130, 37, 68},
                                           {33, 18, 20}, {40, 300, 256}, {61, 300, 128}};
        for (size_t s = 0; s < sizeof q4_shapes / sizeof q4_shapes[0]; s++)
            for (int l = 0; l < 2; l++)
                for (int wt = W_NF4; wt <= W_NF4_DQ_F16; wt++)
                    matmul_case(g, (enum matmul_layout)l, q4_shapes[s][0], q4_shapes[s][1], q4_shapes[s][2], l, 0, wt,
                                1);
        static const char *q4_limits[] = {"storage_range=20000", "texel_elements=4096"};
        for (size_t li = 0; li < sizeof q4_limits / sizeof q4_limits[0]; li++) {
            gpu_set_limits(g, q4_limits[li]);
            for (int l = 0; l < 2; l++)
                for (int wt = W_NF4_DQ; wt <= W_NF4_DQ_F16; wt += W_NF4_DQ_F16 - W_NF4_DQ)
                    matmul_case(g, (enum matmul_layout)l, 61, 300, 68, 1, 0, wt, 1);
            gpu_set_limits(g, NULL);
        }
        rng = before_q4;
    }
    /* Elementwise ops on both families: exact C bits; odd lengths leave a
     * tail of n % 4 after the texel kernels' vec4 chunks. */
    static const size_t lengths[] = {1, 6, 7, 1000, 4097, 100003};
    for (int c = 0; c < 2; c++) {
        gpu_set_kernel_class(g, classes[c]);
        for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++)
            test_elementwise(g, lengths[i]);
        /* More than the grid cap (4096 groups), in floats and in vec4 chunks:
         * strided loops. */
        test_elementwise(g, ((size_t)1 << 22) + 4099);
    }
    /* Reductions on both families (texel: vec4 reads of pass 1). */
    for (int c = 0; c < 2; c++) {
        gpu_set_kernel_class(g, classes[c]);
        test_reduce(g, 1);
        test_reduce(g, 1000);
        test_reduce(g, ((size_t)1 << 24) + 12345);
    }
    gpu_destroy(g);
    return test_result("test_ops");
}
