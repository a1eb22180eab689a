/* test_validation: proves that the validation passes can fail.
 *
 *   test_validation       one deliberately invalid Vulkan call (a
 *                         zero-sized buffer) with the Khronos layer on;
 *   test_validation oob   a shader reading past the end of a buffer (the
 *                         copy kernel over 2,048 floats of a buffer of
 *                         1,024), which only GPU-assisted validation sees
 *                         (tests/test_validation_passes.sh runs it so);
 *   test_validation race  a dispatch reading a buffer the one before it
 *                         wrote, the barrier between them left out, which
 *                         only synchronization validation sees (ditto).
 * Either must end the process through vkt_fatal in gpu_destroy. If the
 * layer were silently absent or its messages ignored, this test would
 * fail. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../src/gpu/gpu_internal.h"
#include "vktrain/util.h"

static void caught(int code)
{
    (void)code;
    printf("test_validation: the validation message ended the run, as it must\n");
    fflush(stdout);
    _exit(0);
}

static void invalid_call(struct gpu *g)
{
    VkBufferCreateInfo bad = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = 0, /* VUID-VkBufferCreateInfo-size-00912 */
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
    };
    VkBuffer b = VK_NULL_HANDLE;
    if (vkCreateBuffer(g->device, &bad, NULL, &b) == VK_SUCCESS && b)
        vkDestroyBuffer(g->device, b, NULL);
}

/* The copy kernel told to copy 2N floats out of a buffer of N. (The
 * layer, 1.3.239, checks accesses against the buffer's size, not the
 * range bound: a read past a bound range inside the buffer goes unseen.) */
static void out_of_bounds_read(struct gpu *g)
{
    enum { N = 1024 };
    struct gpu_kernel_desc d = {.shader = SHADER_copy, .n_bindings = 2, .bindings = {GPU_BIND_STORAGE, GPU_BIND_STORAGE},
                                .push_size = 8, .n_spec = 1, .spec = {64}};
    struct gpu_kernel *k = gpu_kernel_get(g, &d);
    struct gpu_buffer *x = gpu_buffer_create(g, N * sizeof(float), "x");
    struct gpu_buffer *y = gpu_buffer_create(g, 2 * N * sizeof(float), "y");
    gpu_zero(g, x);
    struct gpu_arg args[2] = {{.buf = x}, {.buf = y, .write = 1}};
    struct { uint32_t n; float a; } push = {2 * N, 0.0f};
    gpu_dispatch(g, k, args, &push, 2 * N / 64, 1, 1);
    gpu_submit(g);
    gpu_buffer_destroy(g, x);
    gpu_buffer_destroy(g, y);
}

/* The copy kernel writes y, then reads it into z; the hazard tracker is
 * told y was never written, so no barrier separates the write from the
 * read. */
static void read_after_write(struct gpu *g)
{
    enum { N = 1024 };
    struct gpu_kernel_desc d = {.shader = SHADER_copy, .n_bindings = 2, .bindings = {GPU_BIND_STORAGE, GPU_BIND_STORAGE},
                                .push_size = 8, .n_spec = 1, .spec = {64}};
    struct gpu_kernel *k = gpu_kernel_get(g, &d);
    struct gpu_buffer *x = gpu_buffer_create(g, N * sizeof(float), "x");
    struct gpu_buffer *y = gpu_buffer_create(g, N * sizeof(float), "y");
    struct gpu_buffer *z = gpu_buffer_create(g, N * sizeof(float), "z");
    gpu_zero(g, x);
    gpu_submit(g);
    struct { uint32_t n; float a; } push = {N, 0.0f};
    gpu_dispatch(g, k, (struct gpu_arg[]){{.buf = x}, {.buf = y, .write = 1}}, &push, N / 64, 1, 1);
    y->written_epoch = 0;
    gpu_dispatch(g, k, (struct gpu_arg[]){{.buf = y}, {.buf = z, .write = 1}}, &push, N / 64, 1, 1);
    gpu_submit(g);
    gpu_buffer_destroy(g, x);
    gpu_buffer_destroy(g, y);
    gpu_buffer_destroy(g, z);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int oob = !strcmp(mode, "oob"), race = !strcmp(mode, "race");
    struct gpu_options opt = {.device_index = -1, .validate = 1, .quiet = 1};
    struct gpu *g = gpu_create(&opt);
    vkt_set_exit_hook(caught);
    if (oob)
        out_of_bounds_read(g);
    else if (race)
        read_after_write(g);
    else
        invalid_call(g);
    gpu_destroy(g);
    fprintf(stderr, "FAIL test_validation: %s went unreported\n",
            oob ? "an out-of-bounds read" : race ? "a read-after-write race" : "an invalid call");
    return 1;
}
