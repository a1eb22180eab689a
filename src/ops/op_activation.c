/* op_activation: the MLP activations SwiGLU, GeGLU and GELU (tanh), forward and
 * backward, elementwise (shaders/default/activation.comp; on CPU devices, the
 * texel family, activation_texel.comp: vec4 chunks read through RGBA32F
 * texel views). In the reproducible mode: the formulas of
 * shaders/reproducible/repro_ops.glsl, in repro_activation_texel.comp on CPU devices
 * (the same access pattern), repro_activation.comp (storage) on GPUs
 * (kernel_pick_elementwise chooses). Never allocates. */
#include "ops_internal.h"
#include "ops_texel.h"
#include "vktrain/kernel_select.h"
#include "vktrain/util.h"

/* One activation's kernels, in each family and mode. */
#define ACTIVATION(v)                                                                                      \
    (&(const struct kernel_set){"activation_" #v, SHADER_activation_##v, SHADER_activation_texel_##v, \
                                        SHADER_repro_activation_texel_##v,                       \
                                        {SHADER_repro_activation_##v, SHADER_repro_activation_##v##_runs}})

static void activation(struct gpu *g, const struct kernel_set *ks, struct gpu_buffer *a, struct gpu_buffer *b,
                       struct gpu_buffer *c, struct gpu_buffer *d, struct gpu_buffer *e, size_t n, int writes_c)
{
    struct gpu_arg args[5] = {{.buf = a}, {.buf = b}, {.buf = c, .write = writes_c},
                              {.buf = d, .write = !writes_c}, {.buf = e, .write = !writes_c}};
    for (int i = 0; i < 5; i++)
        ops_check(ks->op, "a", args[i].buf, n * sizeof(float));
    struct {
        uint32_t n;
        float unused;
    } push = {0, 0.0f};
    struct kernel_pick pick = kernel_pick_elementwise(g, ks);
    if (kernel_path_texel(pick.path)) {
        /* a, b, c, d, e as texels (d, e: the gradients added to), then c,
         * d, e as storage (outputs): activation_texel.comp, or in the
         * reproducible mode repro_activation_texel.comp */
        struct gpu_arg targs[8] = {{.buf = a}, {.buf = b}, {.buf = c}, {.buf = d},
                                   {.buf = e}, args[2],    args[3],    args[4]};
        enum gpu_binding_kind kinds[8] = {GPU_BIND_TEXEL_VEC4, GPU_BIND_TEXEL_VEC4, GPU_BIND_TEXEL_VEC4,
                                          GPU_BIND_TEXEL_VEC4, GPU_BIND_TEXEL_VEC4, GPU_BIND_STORAGE,
                                          GPU_BIND_STORAGE,    GPU_BIND_STORAGE};
        uint32_t wg = gpu_workgroup_1d(g);
        const size_t vec4[8] = {16, 16, 16, 16, 16, 16, 16, 16};
        ops_elements(g, ops_texel_kernel(g, pick.shader, 8, kinds, sizeof push, 1, &wg), targs, vec4, &push, n, 4, 4);
        return;
    }
    if (pick.path == KPATH_REPRO) {
        /* repro_activation.comp: a, b (and c, d, e) read, then c (or d, e)
         * written */
        struct gpu_arg rargs[7] = {{.buf = a}, {.buf = b}, {.buf = c, .write = writes_c}};
        int n_in = writes_c ? 2 : 5;
        if (!writes_c) {
            rargs[2].write = 0;
            rargs[3] = (struct gpu_arg){.buf = d}, rargs[4] = (struct gpu_arg){.buf = e};
            rargs[5] = (struct gpu_arg){.buf = d, .write = 1}, rargs[6] = (struct gpu_arg){.buf = e, .write = 1};
        }
        const size_t floats[7] = {4, 4, 4, 4, 4, 4, 4};
        ops_elements(g, ops_repro_kernel(g, pick.walks, writes_c ? 3 : 7, n_in, sizeof push), rargs, floats, &push, n, 1,
                     1);
        return;
    }
    const size_t floats[5] = {4, 4, 4, 4, 4};
    ops_elements(g, ops_kernel(g, pick.shader, 5, sizeof push, 1), args, floats, &push, n, 1, 1);
}

void op_swiglu(struct gpu *g, struct gpu_buffer *gate, struct gpu_buffer *up, struct gpu_buffer *h, size_t n)
{
    activation(g, ACTIVATION(swiglu), gate, up, h, h, h, n, 1);
}

void op_swiglu_backward(struct gpu *g, struct gpu_buffer *gate, struct gpu_buffer *up, struct gpu_buffer *dh,
                        struct gpu_buffer *dgate, struct gpu_buffer *dup, size_t n)
{
    activation(g, ACTIVATION(swiglu_back), gate, up, dh, dgate, dup, n, 0);
}

/* GeGLU has no reproducible kernel (the recipe check refuses it there). */
#define ACTIVATION_FP32(v)                                                                                 \
    (&(const struct kernel_set){"activation_" #v, SHADER_activation_##v, SHADER_activation_texel_##v, SHADER_NONE, \
                                {SHADER_NONE, SHADER_NONE}})

void op_geglu(struct gpu *g, struct gpu_buffer *gate, struct gpu_buffer *up, struct gpu_buffer *h, size_t n)
{
    if (gpu_reproducible(g))
        vkt_fatal("geglu: no kernel of the reproducible mode (the recipe check refuses GeGLU there)");
    activation(g, ACTIVATION_FP32(geglu), gate, up, h, h, h, n, 1);
}

void op_geglu_backward(struct gpu *g, struct gpu_buffer *gate, struct gpu_buffer *up, struct gpu_buffer *dh,
                       struct gpu_buffer *dgate, struct gpu_buffer *dup, size_t n)
{
    activation(g, ACTIVATION_FP32(geglu_back), gate, up, dh, dgate, dup, n, 0);
}

void op_gelu(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *y, size_t n)
{
    activation(g, ACTIVATION(gelu), x, x, y, y, y, n, 1);
}

void op_gelu_backward(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *dy, struct gpu_buffer *dx, size_t n)
{
    activation(g, ACTIVATION(gelu_back), x, x, dy, dx, dx, n, 0);
}
