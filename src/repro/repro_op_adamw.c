/* repro_op_adamw: the wrapper of shaders/reproducible/repro_adamw.comp, one AdamW step
 * of one parameter tensor in the reproducible mode (its scalars from
 * repro_adamw_scalars), in both kernel families (on CPU devices the
 * variant that reads through texel views).
 * Never allocates, never submits. */
#include "../ops/ops_internal.h"
#include "../ops/ops_texel.h"
#include "vktrain/repro.h"
#include "vktrain/util.h"

void op_repro_adamw(struct gpu *g, struct gpu_buffer *param, struct gpu_buffer *grad, struct gpu_buffer *m,
                    struct gpu_buffer *v, size_t n, const struct op_adamw_step *s)
{
    if (n == 0)
        return;
    if (s->t < 1)
        vkt_fatal("repro adamw: step count t = %lld (the first step is t = 1)", (long long)s->t);
    if (n >= ((size_t)1 << 32))
        vkt_fatal("repro adamw: %zu floats, 2^32 or more", n);
    ops_check("repro adamw", "the parameter", param, n * sizeof(float));
    ops_check("repro adamw", "the gradient", grad, n * sizeof(float));
    ops_check("repro adamw", "the first-moment", m, n * sizeof(float));
    ops_check("repro adamw", "the second-moment", v, n * sizeof(float));
    struct repro_adamw_push push;
    repro_adamw_scalars(s, (uint32_t)n, &push);
    /* θ, grad, m, v read, then θ, m, v written */
    struct gpu_arg args[7] = {{.buf = param},         {.buf = grad},         {.buf = m},
                              {.buf = v},             {.buf = param, .write = 1}, {.buf = m, .write = 1},
                              {.buf = v, .write = 1}};
    if (gpu_kernel_class(g) == GPU_KERNELS_TEXEL) {
        /* CPU devices: the reads as RGBA32F views, vec4 stores (adamw_texel's pattern) */
        enum gpu_binding_kind kinds[7] = {GPU_BIND_TEXEL_VEC4, GPU_BIND_TEXEL_VEC4, GPU_BIND_TEXEL_VEC4,
                                          GPU_BIND_TEXEL_VEC4, GPU_BIND_STORAGE,    GPU_BIND_STORAGE,
                                          GPU_BIND_STORAGE};
        uint32_t wg = gpu_workgroup_1d(g);
        const size_t vec4[7] = {16, 16, 16, 16, 16, 16, 16};
        ops_elements(g, ops_texel_kernel(g, SHADER_repro_adamw_vec4, 7, kinds, sizeof push, 1, &wg), args, vec4, &push, n, 4,
                     4);
        return;
    }
    const size_t floats[7] = {4, 4, 4, 4, 4, 4, 4};
    ops_elements(g, ops_repro_kernel(g, SHADER_WALKS(repro_adamw), 7, 4, sizeof push), args, floats, &push, n, 1, 1);
}
