/* op_elementwise: add, scale, axpy, copy over n floats, one dispatch each
 * (one per range where a buffer exceeds a binding: ops_elements). The
 * workgroup size comes from the device (gpu_workgroup_1d); the grid is
 * capped and the shaders stride, so any n fits. On CPU devices (texel
 * family) the kernels are elementwise_texel.comp: vec4 chunks read through
 * RGBA32F texel views, written to storage (scale and axpy read their
 * in/out buffer through a view and write it as storage). In the
 * reproducible mode: one rounded operation per element (axpy: a
 * product, then a sum), repro_elementwise_texel.comp on CPU devices (the
 * same access pattern), repro_elementwise.comp (storage) on GPUs
 * (kernel_pick_elementwise chooses). Never allocates. */
#include <stdio.h>

#include "ops_internal.h"
#include "ops_texel.h"
#include "vktrain/kernel_select.h"
#include "vktrain/util.h"

struct elementwise_push {
    uint32_t n;
    float a;
};

/* args: the storage kernel's bindings, the written one last. The texel
 * kernel binds the n_in inputs as views, then the written buffer as
 * storage; in-place ops name it among the inputs too. Buffers larger than
 * a binding are done in ranges (ops_elements). */
#define ELEMENTWISE(v)                                                                                       \
    (&(const struct kernel_set){#v, SHADER_##v, SHADER_elementwise_texel_##v,                       \
                                         SHADER_repro_elementwise_texel_##v,                                 \
                                         {SHADER_repro_elementwise_##v, SHADER_repro_elementwise_##v##_runs}})

static void run(struct gpu *g, const struct kernel_set *ks, int n_bind, const struct gpu_arg *args, int n_in,
                struct gpu_buffer *const *in, size_t n, float a)
{
    for (int i = 0; i < n_bind; i++)
        ops_check(ks->op, "an", args[i].buf, n * sizeof(float));
    struct elementwise_push push = {0, a};
    struct kernel_pick pick = kernel_pick_elementwise(g, ks);
    if (pick.path == KPATH_REPRO) {
        /* repro_elementwise.comp: the inputs, then the written buffer */
        struct {
            uint32_t n;
            float a;
            uint32_t C;
        } rpush = {0, a, 1};
        struct gpu_arg rargs[3];
        for (int i = 0; i < n_in; i++)
            rargs[i] = (struct gpu_arg){.buf = in[i]};
        rargs[n_in] = args[n_bind - 1];
        const size_t floats[3] = {4, 4, 4};
        ops_elements(g, ops_repro_kernel(g, pick.walks, n_in + 1, n_in, sizeof rpush), rargs, floats, &rpush, n, 1, 1);
        return;
    }
    if (kernel_path_texel(pick.path)) {
        struct gpu_arg targs[3];
        enum gpu_binding_kind kinds[3];
        for (int i = 0; i < n_in; i++)
            targs[i] = (struct gpu_arg){.buf = in[i]}, kinds[i] = GPU_BIND_TEXEL_VEC4;
        targs[n_in] = args[n_bind - 1], kinds[n_in] = GPU_BIND_STORAGE;
        uint32_t wg = gpu_workgroup_1d(g);
        const size_t vec4[3] = {16, 16, 16};
        ops_elements(g, ops_texel_kernel(g, pick.shader, n_in + 1, kinds, sizeof push, 1, &wg), targs, vec4, &push, n, 4,
                     4);
        return;
    }
    const size_t floats[3] = {4, 4, 4};
    ops_elements(g, ops_kernel(g, pick.shader, n_bind, sizeof push, 1), args, floats, &push, n, 1, 1);
}

void op_add(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *y, struct gpu_buffer *z, size_t n)
{
    struct gpu_arg args[3] = {{.buf = x}, {.buf = y}, {.buf = z, .write = 1}};
    struct gpu_buffer *in[2] = {x, y};
    run(g, ELEMENTWISE(add), 3, args, 2, in, n, 0.0f);
}

void op_scale(struct gpu *g, struct gpu_buffer *x, float a, size_t n)
{
    struct gpu_arg args[1] = {{.buf = x, .write = 1}};
    struct gpu_buffer *in[1] = {x};
    run(g, ELEMENTWISE(scale), 1, args, 1, in, n, a);
}

void op_axpy(struct gpu *g, float a, struct gpu_buffer *x, struct gpu_buffer *y, size_t n)
{
    struct gpu_arg args[2] = {{.buf = x}, {.buf = y, .write = 1}};
    struct gpu_buffer *in[2] = {x, y};
    run(g, ELEMENTWISE(axpy), 2, args, 2, in, n, a);
}

void op_copy(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *y, size_t n)
{
    op_copy_to(g, x, y, 0, n);
}

void op_copy_to(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *y, size_t y0, size_t n)
{
    size_t first = y0 * sizeof(float), align = gpu_info(g)->min_storage_offset_alignment;
    ops_check("copy", "output", y, first + n * sizeof(float));
    if (align && first % align)
        vkt_fatal("copy: the output offset of %zu floats in '%s' is not a multiple of the storage offset alignment "
                  "(%zu bytes)",
                  y0, gpu_buffer_name(y), align);
    struct gpu_arg args[2] = {{.buf = x}, {.buf = y, .write = 1, .offset = first, .range = n * sizeof(float)}};
    struct gpu_buffer *in[1] = {x};
    run(g, ELEMENTWISE(copy), 2, args, 1, in, n, 0.0f);
}
