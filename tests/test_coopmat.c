/* test_coopmat: the cooperative-matrix matmul (shaders/default/matmul_coopmat.comp,
 * gpu_set_matmul_inputs) against the C reference, for each 16-bit input
 * type the device offers (f16, bf16): the three layouts on shapes that
 * are not multiples of any tile (1 included), accumulating or not, the
 * first input and the output 1 float into their buffers, products split
 * into blocks by a small storage binding limit and by llvmpipe's loop
 * bound, and tn in parts of its reduction (split-k); nt and nn with a
 * 4-bit weight, bit for bit the kernel's on the dequantized weight.
 *
 * The reference multiplies, in double, the operands rounded to the type
 * (to nearest even) as the kernel must round them, so the kernel's only
 * error is its fp32 accumulation: normalized error mse(gpu, ref) /
 * mse(ref, 0) under 16·2^-48·n for a sum of n products (about 2^-48·n for
 * random terms; the margin covers accumulators that round otherwise), and
 * 1e-10 at least. Against the product of the unrounded operands the error
 * must be 10 times the bound and more (about 4e-8 for f16): the inputs were rounded,
 * so the 16-bit kernel ran. The profile shows which kernel ran, with
 * which loads: vec4 ones (aligned operands), vec4 for B alone, or floats.
 *
 * A device without cooperative matrices (Debian 12's lavapipe) skips the
 * test (exit 77, "skipped" in ctest, never a pass), saying why;
 * tests/test_coopmat_sid.sh runs it on Debian unstable's lavapipe, which
 * has f16 ones, and fails if it skips there. */
#include <math.h>
#include <string.h>

#include "matmul_testing.h"
#include "vktrain/kernel_select.h"

static struct ref_rng rng;

static const char *type_name[] = {"fp32", "f16", "bf16"};

/* x rounded to f16, to nearest even (the test values are within its range). */
static double round_f16(double x)
{
    if (x == 0)
        return x;
    if (fabs(x) < ldexp(1.0, -14)) /* subnormal: multiples of 2^-24 */
        return ldexp(nearbyint(ldexp(x, 24)), -24);
    int e;
    frexp(x, &e); /* |x| in [2^(e-1), 2^e): 11 significant bits */
    return ldexp(nearbyint(ldexp(x, 11 - e)), e - 11);
}

static void round_to(enum gpu_matmul_inputs t, double *x, size_t n)
{
    if (t == GPU_MATMUL_BF16) {
        round_to_bf16(x, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = round_f16(x[i]);
}

static double *random_doubles(size_t n)
{
    double *x = vkt_malloc(n * sizeof *x, "test data");
    for (size_t i = 0; i < n; i++)
        x[i] = (double)(float)(2.0 * ref_rng_uniform(&rng) - 1.0);
    return x;
}

/* The profile (when timed) shows the kernel of the loads' variant that
 * the product needs: vec4 where an operand's rows and first element are
 * whole vec4 (a4: A's; B's rows are K floats), "bvec4" where B's alone
 * are; `extra` ends its name ("_q4": a 4-bit weight). */
static void check_ran(struct gpu *g, int timed, enum gpu_matmul_inputs t, enum matmul_layout l, int M, int N, int K,
                      int a4, const char *extra)
{
    int b4 = K % 4 == 0;
    char kernel[56];
    snprintf(kernel, sizeof kernel, "matmul_coopmat_%s_%s_%s%s", matmul_layout_name[l], type_name[t],
             a4 && b4 ? "vec4"
             : b4     ? "bvec4"
                      : "scalar",
             extra);
    CHECK(!timed || profile_dispatches(g, kernel) > 0, "matmul_%s %s M=%d N=%d K=%d: no %s dispatch in the profile",
          matmul_layout_name[l], type_name[t], M, N, K, kernel);
}

/* One product on 16-bit inputs t against both references; `splits`: the
 * split-k sums the profile must show (-1: not checked). */
static void coop_case(struct gpu *g, enum gpu_matmul_inputs t, enum matmul_layout l, int M, int N, int K,
                      int accumulate, size_t lead, int splits)
{
    size_t na = (size_t)M * (l == NT ? K : N), nb = (size_t)(l == TN ? M : N) * K;
    size_t nc = l == NT ? (size_t)M * N : l == NN ? (size_t)M * K : (size_t)N * K;
    double *a = random_doubles(na), *b = random_doubles(nb), *c0 = random_doubles(nc);
    double *ref16 = vkt_calloc(nc, sizeof *ref16, "reference"), *ref32 = vkt_calloc(nc, sizeof *ref32, "reference");
    if (accumulate) {
        memcpy(ref16, c0, nc * sizeof *ref16);
        memcpy(ref32, c0, nc * sizeof *ref32);
    }
    matmul_reference(l, a, b, ref32, M, N, K);
    struct gpu_buffer *ba = buffer_at(g, a, na, lead, "a"), *bb = buffer_from_doubles(g, b, nb, "b");
    struct gpu_buffer *bc = buffer_at(g, c0, nc, lead, "c");
    round_to(t, a, na);
    round_to(t, b, nb);
    matmul_reference(l, a, b, ref16, M, N, K);

    int timed = gpu_profile_start(g);
    matmul_run(g, l, ba, bb, bc, M, N, K, accumulate, lead);
    gpu_profile_stop(g);
    float *out = vkt_malloc(nc * sizeof *out, "matmul output");
    gpu_download(g, bc, lead * sizeof(float), out, nc * sizeof *out);

    int n_sum = l == NT ? K : l == NN ? N : M;
    double bound = fmax(1e-10, 16.0 * ldexp(1.0, -48) * n_sum);
    double err = normalized_error(out, ref16, nc), err32 = normalized_error(out, ref32, nc);
    CHECK(err < bound, "matmul_%s %s M=%d N=%d K=%d acc=%d lead=%zu: normalized error %.3g (bound %.3g)",
          matmul_layout_name[l], type_name[t], M, N, K, accumulate, lead, err, bound);
    /* enough products that some input was not already a 16-bit value */
    if (nc * (size_t)n_sum >= 64)
        CHECK(err32 > 10 * bound,
              "matmul_%s %s M=%d N=%d K=%d: error %.3g against the fp32 product, not above 10x %.3g: were the "
              "inputs rounded?",
              matmul_layout_name[l], type_name[t], M, N, K, err32, bound);
    /* A's rows are K floats in nt, N in nn and tn; it starts `lead` floats in */
    check_ran(g, timed, t, l, M, N, K, (l == NT ? K : N) % 4 == 0 && lead % 4 == 0, "");
    if (splits >= 0)
        CHECK(!timed || profile_dispatches(g, "matmul_splitk_sum") == (uint64_t)splits,
              "matmul_%s %s M=%d N=%d K=%d: %llu split-k sums, expected %d", matmul_layout_name[l], type_name[t], M, N,
              K, (unsigned long long)profile_dispatches(g, "matmul_splitk_sum"), splits);
    free(out);
    gpu_buffer_destroy(g, ba);
    gpu_buffer_destroy(g, bb);
    gpu_buffer_destroy(g, bc);
    free(a), free(b), free(c0), free(ref16), free(ref32);
}

/* nt or nn on 16-bit inputs t with a 4-bit weight (each variant of
 * gpu_testing.h's): bit for bit the same kernel's outputs on the
 * dequantized fp32 weight, and its q4 variant in the profile. */
static void coop_q4_case(struct gpu *g, enum gpu_matmul_inputs t, enum matmul_layout l, int M, int N, int K,
                         enum q4_variant variant)
{
    size_t na = (size_t)M * (l == NT ? K : N), nb = (size_t)N * K, nc = l == NT ? (size_t)M * N : (size_t)M * K;
    double *a = random_doubles(na), *b = random_doubles(nb), *c0 = random_doubles(nc);
    struct gpu_buffer *ba = buffer_from_doubles(g, a, na, "a");
    struct gpu_buffer *bq = buffer_q4_from_doubles(g, b, nb, K % 64 ? 32 : 64, variant, "b (4-bit)");
    struct gpu_buffer *bf = buffer_from_doubles(g, b, nb, "b (dequantized)"); /* b holds the dequantized values */
    struct gpu_buffer *cq = buffer_from_doubles(g, c0, nc, "c"), *cf = buffer_from_doubles(g, c0, nc, "c");
    int timed = gpu_profile_start(g);
    matmul_run(g, l, ba, bq, cq, M, N, K, 1, 0);
    gpu_profile_stop(g);
    matmul_run(g, l, ba, bf, cf, M, N, K, 1, 0);
    float *got = vkt_malloc(nc * sizeof *got, "q4 output"), *want = vkt_malloc(nc * sizeof *want, "fp32 output");
    gpu_download(g, cq, 0, got, nc * sizeof *got);
    gpu_download(g, cf, 0, want, nc * sizeof *want);
    size_t differ = floats_differing(got, want, nc);
    CHECK(differ == 0,
          "matmul_%s %s M=%d N=%d K=%d, 4-bit weight (%s): %zu of %zu outputs differ from the kernel's on the "
          "dequantized weight (bitwise expected)",
          matmul_layout_name[l], type_name[t], M, N, K, q4_variant_name(variant), differ, nc);
    check_ran(g, timed, t, l, M, N, K, (l == NT ? K : N) % 4 == 0, "_q4");
    free(got), free(want);
    gpu_buffer_destroy(g, ba), gpu_buffer_destroy(g, bq), gpu_buffer_destroy(g, bf);
    gpu_buffer_destroy(g, cq), gpu_buffer_destroy(g, cf);
    free(a), free(b), free(c0);
}

/* The three layouts at M x N x K (accumulating, lead 1) with the
 * environment's `var` at each of its three values, then unset. */
static void layouts_under(struct gpu *g, enum gpu_matmul_inputs t, const char *var, const char *const *values, int M,
                          int N, int K)
{
    for (int i = 0; i < 3; i++) {
        kernel_env_set(var, values[i]);
        for (int l = 0; l < 3; l++)
            coop_case(g, t, (enum matmul_layout)l, M, N, K, 1, 1, -1);
    }
    kernel_env_set(var, NULL);
}

static void test_type(struct gpu *g, enum gpu_matmul_inputs t)
{
    const uint32_t *shape = t == GPU_MATMUL_F16 ? gpu_info(g)->coopmat_f16 : gpu_info(g)->coopmat_bf16;
    printf("%s inputs: %u x %u x %u matrices\n", type_name[t], shape[0], shape[1], shape[2]);
    gpu_set_matmul_inputs(g, t);
    /* (M, N, K): ones, primes, one past a tile, aligned shapes, K = 1 */
    static const int shapes[][3] = {{1, 1, 1},     {7, 5, 3},    {33, 17, 9},  {129, 33, 65}, {130, 37, 68},
                                    {128, 64, 64}, {5, 259, 12}, {64, 4, 300}, {200, 96, 1},  {66, 70, 130}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int l = 0; l < 3; l++)
            for (int acc = 0; acc < 2; acc++)
                coop_case(g, t, (enum matmul_layout)l, shapes[s][0], shapes[s][1], shapes[s][2], acc, (size_t)acc, -1);
    /* a 4-bit weight in nt and nn: vec4, B-only vec4 and scalar loads,
     * blocks across rows (K = 3, 65, 68), more than 256 blocks; each
     * variant of coop_q4_case */
    static const int q4_shapes[][3] = {{7, 5, 3}, {129, 33, 65}, {130, 37, 68}, {33, 17, 12}, {40, 300, 256}};
    for (size_t s = 0; s < sizeof q4_shapes / sizeof q4_shapes[0]; s++)
        for (int l = 0; l < 2; l++)
            coop_q4_case(g, t, (enum matmul_layout)l, q4_shapes[s][0], q4_shapes[s][1], q4_shapes[s][2], (enum q4_variant)(s % Q4V_N));
    /* accumulating into an output on 16 bytes (lead 4): the workgroups
     * inside the block load C and store by coopMatStore, the edges stage */
    for (int l = 0; l < 3; l++)
        coop_case(g, t, (enum matmul_layout)l, 130, 68, 72, 1, 4, -1);
    /* blocks of rows, columns and the reduction under a small binding limit */
    static const int split_shapes[][3] = {{300, 200, 68}, {37, 129, 300}};
    gpu_set_limits(g, "storage_range=20000");
    for (size_t s = 0; s < sizeof split_shapes / sizeof split_shapes[0]; s++)
        for (int l = 0; l < 3; l++)
            coop_case(g, t, (enum matmul_layout)l, split_shapes[s][0], split_shapes[s][1], split_shapes[s][2], 1, 1,
                      -1);
    gpu_set_limits(g, NULL);
    /* a reduction of 20,000: past one walk on llvmpipe (accumulating blocks) */
    coop_case(g, t, NT, 9, 10, 20000, 0, 0, -1);
    coop_case(g, t, TN, 20000, 9, 10, 1, 1, -1);
    /* workgroups of 1, 2 (the subgroup tiles in turns) and 8 subgroups
     * (the extra ones only load), where the driver's subgroups differ
     * from the size the kernel was sized for */
    static const char *const subgroups[] = {"1", "2", "8"};
    layouts_under(g, t, "VKTRAIN_COOPMAT_SUBGROUPS", subgroups, 66, 70, 130);
    /* other accumulators per subgroup (the workgroup tile 2·RM·CM x
     * 2·RN·CN): 1 x 1, 4 x 2, 1 x 3 */
    static const char *const tiles[] = {"1x1", "4x2", "1x3"};
    layouts_under(g, t, "VKTRAIN_COOPMAT_TILE", tiles, 130, 37, 68);
    /* one subgroup's turns over a long reduction, which op_matmul.c cuts
     * into shorter blocks for llvmpipe's loop bound (its count of loop
     * iterations per step is an upper bound: llvmpipe unrolls the tile
     * loads, whose counts the specialization fixes, and the blocks of
     * 64 iterations per step passed here too) */
    kernel_env_set("VKTRAIN_COOPMAT_SUBGROUPS", "1");
    coop_case(g, t, NT, 9, 10, 20000, 0, 0, -1);
    kernel_env_set("VKTRAIN_COOPMAT_SUBGROUPS", NULL);
    /* split-k: 3 parts (32, 32 and 13 rows), summed in one pass */
    kernel_env_set("VKTRAIN_TILED_SPLITK", "3");
    size_t bytes = op_matmul_tn_scratch(g, 77, 37, 19);
    CHECK(bytes == (size_t)3 * 37 * 19 * sizeof(float), "op_matmul_tn_scratch 77x37x19 %s: %zu bytes, not 3 parts",
          type_name[t], bytes);
    struct gpu_buffer *scratch = gpu_buffer_create(g, bytes ? bytes : 4, "tn scratch");
    gpu_set_matmul_scratch(g, scratch);
    coop_case(g, t, TN, 77, 37, 19, 0, 0, 1);
    coop_case(g, t, TN, 77, 37, 19, 1, 1, 1);
    gpu_set_matmul_scratch(g, NULL);
    gpu_buffer_destroy(g, scratch);
    kernel_env_set("VKTRAIN_TILED_SPLITK", NULL);
}

int main(void)
{
    ref_rng_seed(&rng, 7);
    struct gpu_options opt = {.device_index = -1, .quiet = 1, .coopmat = 1};
    struct gpu *g = gpu_create(&opt);
    const char *f16 = gpu_coopmat_missing(g, GPU_MATMUL_F16), *bf16 = gpu_coopmat_missing(g, GPU_MATMUL_BF16);
    if (f16 && bf16) {
        printf("test_coopmat: SKIPPED on %s: %s\n", gpu_info(g)->name, f16);
        gpu_destroy(g);
        return 77;
    }
    if (!f16)
        test_type(g, GPU_MATMUL_F16);
    else
        printf("no f16 inputs: %s\n", f16);
    if (!bf16)
        test_type(g, GPU_MATMUL_BF16);
    else
        printf("no bf16 inputs: %s\n", bf16);
    gpu_destroy(g);
    return test_result("test_coopmat");
}
