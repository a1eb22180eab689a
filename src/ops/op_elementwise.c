/* op_elementwise: add, scale, axpy, copy over n floats, one dispatch each.
 * The workgroup size comes from the device (gpu_workgroup_1d); the grid is
 * capped and the shaders stride, so any n fits. Never allocates. */
#include "ops_internal.h"
#include "vktrain/util.h"

struct elementwise_push {
    uint32_t n;
    float a;
};

static void run(struct gpu *g, const char *shader, int n_bind, const struct gpu_arg *args, size_t n, float a)
{
    if (n > UINT32_MAX)
        vkt_fatal("%s: %zu elements exceed the 2^32 limit of one dispatch", shader, n);
    for (int i = 0; i < n_bind; i++)
        ops_check(shader, "an", args[i].buf, n * sizeof(float));
    struct elementwise_push push = {(uint32_t)n, a};
    ops_dispatch_elements(g, ops_kernel(g, shader, n_bind, sizeof push, 1), args, &push, n, 1);
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
