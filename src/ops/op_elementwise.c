/* op_elementwise: add, scale, axpy, copy over n floats, one dispatch each.
 * The workgroup size comes from the device (gpu_workgroup_1d); the grid is
 * capped and the shaders stride, so any n fits. Never allocates. */
#include "vktrain/ops.h"
#include "vktrain/util.h"

struct elementwise_push {
    uint32_t n;
    float a;
};

static void check(const char *op, const struct gpu_buffer *b, size_t n)
{
    if (n > UINT32_MAX)
        vkt_fatal("%s: %zu elements exceed the 2^32 limit of one dispatch", op, n);
    if (gpu_buffer_size(b) < n * sizeof(float))
        vkt_fatal("%s: buffer '%s' holds %zu bytes, %zu floats need %zu", op, gpu_buffer_name(b),
                  gpu_buffer_size(b), n, n * sizeof(float));
}

static void run(struct gpu *g, const char *shader, int n_bind, const struct gpu_arg *args, size_t n, float a)
{
    for (int i = 0; i < n_bind; i++)
        check(shader, args[i].buf, n);
    uint32_t wg = gpu_workgroup_1d(g);
    struct gpu_kernel_desc d = {.shader = shader, .n_bindings = n_bind, .push_size = sizeof(struct elementwise_push),
                                .n_spec = 1, .spec = {wg}};
    for (int i = 0; i < n_bind; i++)
        d.bindings[i] = GPU_BIND_STORAGE;
    size_t groups = (n + wg - 1) / wg;
    uint32_t cap = gpu_info(g)->max_workgroup_count[0] < 4096 ? gpu_info(g)->max_workgroup_count[0] : 4096;
    struct elementwise_push push = {(uint32_t)n, a};
    gpu_dispatch(g, gpu_kernel_get(g, &d), args, &push, groups < cap ? (uint32_t)groups : cap, 1, 1);
}

void op_add(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *y, struct gpu_buffer *z, size_t n)
{
    struct gpu_arg args[3] = {{.buf = x}, {.buf = y}, {.buf = z, .write = 1}};
    run(g, "add", 3, args, n, 0.0f);
}

void op_scale(struct gpu *g, struct gpu_buffer *x, float a, size_t n)
{
    struct gpu_arg args[1] = {{.buf = x, .write = 1}};
    run(g, "scale", 1, args, n, a);
}

void op_axpy(struct gpu *g, float a, struct gpu_buffer *x, struct gpu_buffer *y, size_t n)
{
    struct gpu_arg args[2] = {{.buf = x}, {.buf = y, .write = 1}};
    run(g, "axpy", 2, args, n, a);
}

void op_copy(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *y, size_t n)
{
    struct gpu_arg args[2] = {{.buf = x}, {.buf = y, .write = 1}};
    run(g, "copy", 2, args, n, 0.0f);
}
