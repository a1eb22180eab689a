/* test_descriptors: how a dispatch gets its descriptors, and batched
 * uploads (src/gpu/gpu_exec.c, src/gpu/gpu_memory.c).
 *
 *   - Both ways of binding: descriptors pushed into the command buffer
 *     (VK_KHR_push_descriptor, where the device has it) and the fallback,
 *     one set per dispatch from a pool of GPU_POOL_SETS that is submitted
 *     and reset when full. 1,500 dependent dispatches (more than one pool
 *     holds), whole buffers and an offset range, in both kernel families:
 *     y += x on small integers is exact in fp32, so the result must equal
 *     the C loop's bit for bit.
 *   - gpu_upload_batch, staged (unified cleared, as on a discrete GPU) and
 *     mapped: four arrays of different sizes, one of them empty, land
 *     where they belong; staged, in one submit. */
#include <string.h>

#include "../src/gpu/gpu_internal.h"
#include "gpu_testing.h"
#include "vktrain/ops.h"

enum { N = 1000, STEPS = 1500 };

static void test_dispatches(int push)
{
    struct gpu *g = test_gpu();
    if (push && !g->push_descriptors) {
        printf("test_descriptors: %s has no VK_KHR_push_descriptor; the pool path only\n", gpu_info(g)->name);
        gpu_destroy(g);
        return;
    }
    if (!push)
        g->push_descriptors = NULL; /* before any kernel exists: their layouts are the pool's */
    static const enum gpu_kernel_class classes[] = {GPU_KERNELS_TEXEL, GPU_KERNELS_TILED};
    for (int c = 0; c < 2; c++) {
        gpu_set_kernel_class(g, classes[c]);
        float x[N], y[N], want[2 * N];
        for (int i = 0; i < N; i++)
            x[i] = (float)(i % 7 - 3), y[i] = (float)(i % 5);
        struct gpu_buffer *bx = gpu_buffer_create(g, sizeof x, "x"), *by = gpu_buffer_create(g, sizeof y, "y");
        struct gpu_buffer *bz = gpu_buffer_create(g, sizeof want, "z");
        gpu_upload(g, bx, 0, x, sizeof x);
        gpu_upload(g, by, 0, y, sizeof y);
        gpu_zero(g, bz);
        for (int s = 0; s < STEPS; s++)
            op_axpy(g, 1.0f, bx, by, N);
        op_copy_to(g, by, bz, N, N); /* an offset binding: a texel view of a sub-range */
        gpu_submit(g);
        for (int i = 0; i < N; i++) {
            for (int s = 0; s < STEPS; s++)
                y[i] += x[i];
            want[i] = 0, want[N + i] = y[i];
        }
        float *got = download_floats(g, bz, 2 * N);
        CHECK(!memcmp(got, want, sizeof want), "%s descriptors, %s kernels: %d dispatches gave another result",
              push ? "pushed" : "pool", c ? "tiled" : "texel", STEPS);
        free(got);
        gpu_buffer_destroy(g, bx), gpu_buffer_destroy(g, by), gpu_buffer_destroy(g, bz);
    }
    gpu_destroy(g);
}

static void test_upload_batch(int staged)
{
    struct gpu *g = test_gpu();
    g->unified = !staged;
    static const size_t n[4] = {37, 1, 0, 4000};
    struct gpu_buffer *b[4];
    struct gpu_copy c[4];
    int32_t *src[4];
    for (int k = 0; k < 4; k++) {
        src[k] = vkt_malloc(n[k] * 4 + 4, "source");
        for (size_t i = 0; i < n[k]; i++)
            src[k][i] = (int32_t)(1000 * k + i);
        b[k] = gpu_buffer_create(g, n[k] * 4 + 8, "array");
        CHECK((gpu_buffer_host(b[k]) == NULL) == staged, "buffer %d is %smapped", k, staged ? "" : "not ");
        c[k] = (struct gpu_copy){b[k], 8, src[k], n[k] * 4}; /* at an offset */
    }
    gpu_upload_batch(g, c, 4);
    for (int k = 0; k < 4; k++) {
        int32_t *back = vkt_malloc(n[k] * 4 + 4, "back");
        gpu_download(g, b[k], 8, back, n[k] * 4);
        CHECK(!memcmp(back, src[k], n[k] * 4), "%s batch upload: array %d differs", staged ? "staged" : "mapped", k);
        free(back), free(src[k]);
        gpu_buffer_destroy(g, b[k]);
    }
    g->unified = 1;
    gpu_destroy(g);
}

int main(void)
{
    test_dispatches(1);
    test_dispatches(0);
    test_upload_batch(1);
    test_upload_batch(0);
    return test_result("test_descriptors");
}
