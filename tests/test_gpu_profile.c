/* test_gpu_profile: the per-dispatch profile (gpu_profile_*) in both kernel
 * families.
 *  - Each dispatch lands in the row of its phase and kernel, with its
 *    count and the FLOPs the op declared (2·M·N·K per matmul, also when a
 *    small binding limit splits one product into several dispatches).
 *  - The per-dispatch times add up to the gpu_timer_* total around the same
 *    work: between 50 % and 102 % of it (+0.05 ms). The pairs exclude the
 *    barriers between dispatches, so the sum may fall short of the total;
 *    over it would mean a dispatch counted twice or ticks misread.
 *  - Profiling off writes no timestamp: dispatches after gpu_profile_stop
 *    change no row, and gpu_profile_start clears the rows.
 *  - gpu_profile_print lists each phase and the kernels with GFLOP/s.
 *  - A queue without timestamps: gpu_profile_start says so (returns 0)
 *    and nothing is timed. */
#include <math.h>
#include <string.h>

#include "../src/gpu/gpu_internal.h"
#include "gpu_testing.h"
#include "vktrain/ops.h"

enum { M = 256, N = 192, K = 320 };

static const struct gpu_profile_row *find_row(struct gpu *g, const char *phase, const char *kernel_prefix)
{
    const struct gpu_profile_row *rows;
    int n = gpu_profile_rows(g, &rows);
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].phase, phase) && !strncmp(rows[i].kernel, kernel_prefix, strlen(kernel_prefix)))
            return &rows[i];
    return NULL;
}

static void test_family(struct gpu *g, enum gpu_kernel_class c)
{
    const char *family = c == GPU_KERNELS_TEXEL ? "texel" : "tiled";
    const char *kernel_nt = c == GPU_KERNELS_TEXEL ? "matmul_nt" : "matmul_tiled";
    const char *kernel_nn = c == GPU_KERNELS_TEXEL ? "matmul_nn" : "matmul_tiled";
    gpu_set_kernel_class(g, c);
    struct gpu_buffer *x = gpu_buffer_create(g, sizeof(float) * M * K, "x");
    struct gpu_buffer *w = gpu_buffer_create(g, sizeof(float) * N * K, "w");
    struct gpu_buffer *y = gpu_buffer_create(g, sizeof(float) * M * N, "y");
    gpu_zero(g, x);
    gpu_zero(g, w);
    op_matmul_nt(g, x, w, y, M, N, K, 0); /* compiles the kernels before timing */
    op_matmul_nn(g, y, w, x, M, N, K, 0);
    op_scale(g, y, 0.5f, (size_t)M * N);
    gpu_submit(g);

    CHECK(gpu_profile_start(g), "%s: lavapipe has timestamps, yet profiling did not start", family);
    int timer = gpu_timer_start(g);
    gpu_profile_phase(g, "first");
    for (int i = 0; i < 5; i++)
        op_matmul_nt(g, x, w, y, M, N, K, 0);
    gpu_profile_phase(g, "second");
    for (int i = 0; i < 3; i++) {
        op_matmul_nn(g, y, w, x, M, N, K, 0);
        op_scale(g, y, 0.5f, (size_t)M * N);
    }
    gpu_timer_stop(g, timer);
    gpu_profile_stop(g);
    double total = gpu_timer_ms(g, timer);

    const struct gpu_profile_row *rows;
    int n = gpu_profile_rows(g, &rows);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += rows[i].ms;
    printf("%s: %d rows, per-dispatch sum %.3f ms, timer %.3f ms\n", family, n, sum, total);
    CHECK(n == 3, "%s: %d rows, expected first/nt, second/nn, second/scale", family, n);
    CHECK(sum >= 0.5 * total && sum <= 1.02 * total + 0.05, "%s: per-dispatch sum %.3f ms vs timer %.3f ms", family,
          sum, total);
    const double flops = 2.0 * M * N * K;
    const struct gpu_profile_row *nt = find_row(g, "first", kernel_nt), *nn = find_row(g, "second", kernel_nn);
    const struct gpu_profile_row *scale = find_row(g, "second", c == GPU_KERNELS_TEXEL ? "elementwise" : "scale");
    CHECK(nt && nt->dispatches == 5 && nt->flops == 5 * flops && nt->ms > 0, "%s: the nt row", family);
    CHECK(nn && nn->dispatches == 3 && nn->flops == 3 * flops && nn->ms > 0, "%s: the nn row", family);
    CHECK(scale && scale->dispatches == 3 && scale->flops == 0, "%s: the scale row", family);
    if (nt)
        printf("%s: %s %.1f GFLOP/s\n", family, nt->kernel, nt->flops / (nt->ms * 1e-3) * 1e-9);

    /* Off: nothing more is timed. */
    op_matmul_nt(g, x, w, y, M, N, K, 0);
    gpu_submit(g);
    CHECK(nt && nt->dispatches == 5 && gpu_profile_rows(g, &rows) == 3, "%s: a dispatch was timed while off", family);

    /* A product split into blocks by a small binding limit declares its
     * FLOPs once: the row still holds 2·M·N·K over more dispatches. */
    CHECK(gpu_profile_start(g) && gpu_profile_rows(g, &rows) == 0, "%s: start did not clear the rows", family);
    gpu_set_limits(g, "storage_range=60000");
    gpu_profile_phase(g, "split");
    op_matmul_nt(g, x, w, y, M, N, K, 0);
    gpu_profile_stop(g);
    gpu_set_limits(g, NULL);
    const struct gpu_profile_row *split = find_row(g, "split", kernel_nt);
    CHECK(split && split->dispatches > 1 && split->flops == flops, "%s: the split product's row (%llu dispatches)",
          family, split ? (unsigned long long)split->dispatches : 0ULL);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    gpu_profile_print(g, f, 1, "run");
    fclose(f);
    printf("%s", text);
    CHECK(strstr(text, "ms/run") && strstr(text, "split ") && strstr(text, "GFLOP/s") && strstr(text, kernel_nt),
          "%s: the printed table", family);
    free(text);

    gpu_buffer_destroy(g, x);
    gpu_buffer_destroy(g, w);
    gpu_buffer_destroy(g, y);
}

/* Dispatches counted in all rows. */
static uint64_t timed_dispatches(struct gpu *g)
{
    const struct gpu_profile_row *rows;
    uint64_t n = 0;
    for (int i = gpu_profile_rows(g, &rows) - 1; i >= 0; i--)
        n += rows[i].dispatches;
    return n;
}

/* As if timestampValidBits were 0 (lavapipe has timestamps): start says
 * no, and the rows of the last profile stay as they were. */
static void test_no_timestamps(struct gpu *g)
{
    struct gpu_buffer *x = gpu_buffer_create(g, sizeof(float) * 64, "x");
    gpu_zero(g, x);
    uint64_t before = timed_dispatches(g);
    g->timestamps_ok = 0;
    CHECK(!gpu_profile_start(g), "profiling started without timestamps");
    op_scale(g, x, 0.5f, 64);
    gpu_profile_stop(g);
    g->timestamps_ok = 1;
    CHECK(before > 0 && timed_dispatches(g) == before, "without timestamps: %llu timed dispatches, %llu before",
          (unsigned long long)timed_dispatches(g), (unsigned long long)before);
    gpu_buffer_destroy(g, x);
}

int main(void)
{
    struct gpu *g = test_gpu();
    test_family(g, GPU_KERNELS_TEXEL);
    test_family(g, GPU_KERNELS_TILED);
    test_no_timestamps(g);
    gpu_destroy(g);
    if (test_failures)
        fprintf(stderr, "test_gpu_profile: %d check(s) failed\n", test_failures);
    return test_failures ? 1 : 0;
}
