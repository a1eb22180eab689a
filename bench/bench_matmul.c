/* bench_matmul: GFLOP/s of the three matmul layouts on the chosen device.
 * usage: bench_matmul [M N K [reps [layouts [samples [compare]]]]]   (default 4096 768
 * 768, 5 reps, layouts "nt,nn,tn"; name a subset to time only those;
 * samples > 0: the reproducible mode, tn summing the M rows as that many
 * samples of M / samples rows, as into a parameter gradient; then compare
 * = 1 alternates single calls of the reproducible and the default mode
 * in the one process and prints the best call of each and their ratio,
 * which the bursts of other work on a shared machine disturb far less
 * than separate runs; compare = 2 alternates the reproducible tn and nn narrow
 * and wide tiles, VKTRAIN_REPRO_WIDE=0 and 1, the ratio wide / narrow speed;
 * compare = 3 the reproducible tn over samples one at a time and in pairs,
 * VKTRAIN_REPRO_PAIRS=0 and 1, each with the tiles it picks). tn runs
 * as training runs it (through transposes and nt where the device takes
 * that path, op_matmul_tn_scratch); the layout "tnk" times the tn kernel,
 * "ntb" nt with a bias added as the outputs are stored (op_matmul_nt_bias)
 * and "ntp" nt followed by the bias pass (op_bias_add), the path it spares
 * (their GFLOP/s count the product's operations alone); "ntw" and "nnw"
 * nt and nn with the weight as a frozen base stores it, single calls
 * alternated over fp32, bf16, NF4 and NF4 with double quantization
 * (model.base_dtype), the best call of each and the ratios to bf16.
 * Prints one line per layout, named by kernel family (VKTRAIN_KERNELS
 * picks it); scripts/bench_matmul.sh runs both families and puts numpy
 * beside them.
 * Times come from timestamp queries around the dispatches (wall clock when
 * the queue has none); the first dispatch, which compiles the shader on
 * lavapipe, is not timed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vktrain/gpu.h"
#include "vktrain/ops.h"
#include "vktrain/quant4.h"
#include "vktrain/repro.h"
#include "vktrain/util.h"

#include "bench_util.h"
#include "vktrain/kernel_select.h"

/* Whether the comma-separated list names key. */
static int names_key(const char *list, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, key, n))
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

static struct gpu_buffer *bias; /* N floats: the layouts "ntb" and "ntp" */

/* nt with the bias added as the outputs are stored (one dispatch of a
 * texel kernel; a pass after it elsewhere), and nt followed by the pass */
static void nt_bias(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *w, struct gpu_buffer *y, uint32_t M,
                    uint32_t N, uint32_t K, int accumulate)
{
    op_matmul_nt_bias(g, x, w, bias, y, M, N, K, accumulate);
}
static void nt_then_bias(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *w, struct gpu_buffer *y, uint32_t M,
                         uint32_t N, uint32_t K, int accumulate)
{
    op_matmul_nt(g, x, w, y, M, N, K, accumulate);
    op_bias_add(g, bias, y, M, N);
}

typedef void (*matmul_fn)(struct gpu *, struct gpu_buffer *, struct gpu_buffer *, struct gpu_buffer *, uint32_t,
                          uint32_t, uint32_t, int);

/* "ntw", "nnw": fn with W (N x K, from host) in the four storages of a
 * frozen base, single calls alternated, the best of reps each. */
static void weights_compare(struct gpu *g, matmul_fn fn, const char *name, const char *family, struct gpu_buffer *a,
                            struct gpu_buffer *c, const float *host, uint32_t M, uint32_t N, uint32_t K, int reps)
{
    size_t n = (size_t)N * K;
    struct gpu_buffer *w[4];
    w[0] = gpu_buffer_create(g, n * 4, "w fp32");
    gpu_upload(g, w[0], 0, host, n * 4);
    uint16_t *h = vkt_malloc(n * 2 + 4, "bf16 weight");
    vkt_bf16_round(h, host, n);
    w[1] = gpu_buffer_create(g, (n * 2 + 3) / 4 * 4, "w bf16");
    gpu_buffer_set_dtype(w[1], GPU_DTYPE_BF16);
    gpu_upload(g, w[1], 0, h, n * 2);
    free(h);
    for (int dq = 0; dq < 2; dq++) {
        size_t bytes = q4_bytes(n, 64, dq);
        uint32_t *q = vkt_malloc(bytes, "4-bit weight");
        q4_quantize(q, host, n, 64, dq);
        w[2 + dq] = gpu_buffer_create(g, bytes, dq ? "w nf4 dq" : "w nf4");
        gpu_buffer_set_dtype(w[2 + dq], GPU_DTYPE_Q4);
        gpu_buffer_set_q4_flags(w[2 + dq], q[Q4_W_FLAGS]);
        gpu_upload(g, w[2 + dq], 0, q, bytes);
        free(q);
    }
    double best[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++) /* compiles each kernel */
        fn(g, a, w[i], c, M, N, K, 0);
    gpu_submit(g);
    for (int r = 0; r < 4 * reps; r++) {
        struct bench_clock clock = bench_begin(g);
        fn(g, a, w[r % 4], c, M, N, K, 0);
        double ms = bench_end(g, clock);
        if (r < 4 || ms < best[r % 4])
            best[r % 4] = ms;
    }
    double flop = 2.0 * M * N * K * 1e-6;
    printf("vktrain %-5s %-18s GFLOP/s fp32 %.2f, bf16 %.2f, nf4 %.2f, nf4 dq %.2f; nf4 / bf16 %.3f, nf4 dq / bf16 "
           "%.3f\n",
           family, name, flop / best[0], flop / best[1], flop / best[2], flop / best[3], best[1] / best[2],
           best[1] / best[3]);
    for (int i = 0; i < 4; i++)
        gpu_buffer_destroy(g, w[i]);
}

int main(int argc, char **argv)
{
    uint32_t M = 4096, N = 768, K = 768;
    int reps = 5;
    if (argc >= 4)
        M = (uint32_t)atoi(argv[1]), N = (uint32_t)atoi(argv[2]), K = (uint32_t)atoi(argv[3]);
    if (argc >= 5)
        reps = atoi(argv[4]);
    const char *layouts = argc >= 6 ? argv[5] : "nt,nn,tn";
    uint32_t samples = argc >= 7 ? (uint32_t)atoi(argv[6]) : 0;
    int compare = argc >= 8 && samples > 0 ? atoi(argv[7]) : 0;
    struct gpu_options opt = {.device_index = -1, .quiet = 1};
    struct gpu *g = gpu_create(&opt);
    gpu_set_reproducible(g, samples > 0);
    size_t big = (size_t)M * (N > K ? N : K) > (size_t)N * K ? (size_t)M * (N > K ? N : K) : (size_t)N * K;
    float *host = vkt_malloc(big * sizeof(float), "bench data");
    for (size_t i = 0; i < big; i++)
        host[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    struct gpu_buffer *a = gpu_buffer_create(g, big * sizeof(float), "a");
    struct gpu_buffer *b = gpu_buffer_create(g, big * sizeof(float), "b");
    struct gpu_buffer *c = gpu_buffer_create(g, big * sizeof(float), "c");
    gpu_upload(g, a, 0, host, big * sizeof(float));
    gpu_upload(g, b, 0, host, big * sizeof(float));
    struct gpu_buffer *stack = NULL;
    if (samples > 1 && M % samples != 0)
        vkt_fatal("bench_matmul: %u samples do not divide M = %u rows", samples, M);
    if (samples > 1) {
        uint32_t levels = 0;
        while ((1u << levels) < samples)
            levels++;
        stack = gpu_buffer_create(g, repro_stack_floats((size_t)N * K, levels) * sizeof(float), "stack");
        gpu_buffer_set_stack(c, stack);
        gpu_set_repro_samples(g, M / samples, samples);
    }
    size_t tn_scratch = samples ? 0 : op_matmul_tn_scratch(g, M, N, K);
    struct gpu_buffer *scratch = tn_scratch ? gpu_buffer_create(g, tn_scratch, "tn scratch") : NULL;
    bias = gpu_buffer_create(g, N * sizeof(float), "bias");
    gpu_upload(g, bias, 0, host, N * sizeof(float));
    static const char *names[] = {"nt  Y = X.W^T ",    "nn  dX = dY.W ",    "tn  dW += dY^T.X",
                                  "tn  (tn kernel)  ", "nt  Y = X.W^T + b", "nt, then Y += b"};
    static const char *keys[] = {"nt", "nn", "tn", "tnk", "ntb", "ntp"};
    matmul_fn fns[] = {op_matmul_nt, op_matmul_nn, op_matmul_tn, op_matmul_tn, nt_bias, nt_then_bias};
    /* one word (scripts/gpu_check.sh reads the lines): the kernel family,
     * or the cooperative matrices' input type (VKTRAIN_MATMUL_INPUTS) */
    enum gpu_matmul_inputs inputs = gpu_matmul_inputs(g);
    const char *family = inputs == GPU_MATMUL_F16                   ? "f16-cm"
                         : inputs == GPU_MATMUL_BF16                ? "bf16-cm"
                         : gpu_kernel_class(g) == GPU_KERNELS_TEXEL ? "texel"
                                                                    : "tiled";
    printf("device: %s (%s kernels%s), M=%u N=%u K=%u, %d reps\n", gpu_info(g)->name, family,
           samples ? ", reproducible" : "", M, N, K, reps);
    static const char *wkeys[] = {"ntw", "nnw"};
    for (int l = 0; l < 2; l++)
        if (names_key(layouts, wkeys[l]))
            weights_compare(g, fns[l], names[l], family, a, c, host, M, N, K, reps);
    for (int l = 0; l < 6; l++) {
        if (!names_key(layouts, keys[l]))
            continue;
        gpu_set_matmul_scratch(g, l == 2 ? scratch : NULL);
        fns[l](g, a, b, c, M, N, K, l == 2 || l == 3);
        if (compare) { /* reps of each profile, alternated: the best of each */
            double best[2] = {0, 0};
            for (int r = 0; r < 2 * reps; r++) {
                if (compare == 2) /* the reproducible tn and nn tiles: narrow, wide */
                    kernel_env_set("VKTRAIN_REPRO_WIDE", r % 2 ? "1" : "0");
                else if (compare == 3) /* tn over samples one at a time, then in pairs */
                    kernel_env_set("VKTRAIN_REPRO_PAIRS", r % 2 ? "1" : "0");
                else
                    gpu_set_reproducible(g, r % 2 == 0);
                struct bench_clock clock = bench_begin(g);
                fns[l](g, a, b, c, M, N, K, l == 2 || l == 3);
                double ms = bench_end(g, clock);
                if (r < 2 || ms < best[r % 2])
                    best[r % 2] = ms;
            }
            gpu_set_reproducible(g, 1);
            if (compare == 3) {
                kernel_env_set("VKTRAIN_REPRO_PAIRS", NULL);
                printf("vktrain %-5s %-18s %8.2f GFLOP/s samples one at a time, %8.2f in pairs, ratio %.3f\n", family,
                       names[l], 2.0 * M * N * K / best[0] * 1e-6, 2.0 * M * N * K / best[1] * 1e-6, best[0] / best[1]);
                continue;
            }
            if (compare == 2) {
                kernel_env_set("VKTRAIN_REPRO_WIDE", NULL);
                printf("vktrain %-5s %-18s %8.2f GFLOP/s narrow tiles, %8.2f wide, ratio %.3f\n", family, names[l],
                       2.0 * M * N * K / best[0] * 1e-6, 2.0 * M * N * K / best[1] * 1e-6, best[0] / best[1]);
                continue;
            }
            printf("vktrain %-5s %-18s %8.2f GFLOP/s reproducible, %8.2f default, ratio %.3f\n", family, names[l],
                   2.0 * M * N * K / best[0] * 1e-6, 2.0 * M * N * K / best[1] * 1e-6, best[1] / best[0]);
            continue;
        }
        struct bench_clock clock = bench_begin(g);
        for (int r = 0; r < reps; r++)
            fns[l](g, a, b, c, M, N, K, l == 2 || l == 3);
        double secs = bench_end(g, clock) * 1e-3;
        printf("vktrain %-5s %-18s %8.2f GFLOP/s\n", family, names[l], 2.0 * M * N * K * reps / secs * 1e-9);
    }
    gpu_buffer_destroy(g, a);
    gpu_buffer_destroy(g, b);
    gpu_buffer_destroy(g, c);
    gpu_buffer_destroy(g, bias);
    gpu_set_matmul_scratch(g, NULL);
    gpu_buffer_destroy(g, scratch);
    if (stack)
        gpu_buffer_destroy(g, stack);
    free(host);
    gpu_destroy(g);
    return 0;
}
