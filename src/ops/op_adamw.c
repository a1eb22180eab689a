/* op_adamw: the wrapper of shaders/default/adamw.comp, one AdamW step of one
 * parameter tensor (torch.optim.AdamW semantics; the formula and its
 * operation order are in include/vktrain/ops_optim.h and the shader).
 *
 * Owns the host side of the step: the bias corrections and the other scalars
 * are computed here in double and rounded once to float push constants, as
 * torch rounds its Python-float scalars. On CPU devices (texel family) the
 * kernel is adamw_texel.comp, the same arithmetic with vec4 texel reads.
 * In the reproducible mode it records op_repro_adamw instead
 * (kernel_pick_adamw chooses that, and the operation order VKTRAIN_ADAMW
 * names).
 * Never allocates, never submits, and never decides the learning rate, the
 * step count or which tensors decay. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"
#include "ops_texel.h"
#include "vktrain/kernel_select.h"
#include "vktrain/ops_optim.h"
#include "vktrain/repro.h"
#include "vktrain/util.h"

struct adamw_push {
    uint32_t n;
    float grad_scale;
    float decay;
    float beta1, one_minus_beta1;
    float beta2, one_minus_beta2;
    float bc2_sqrt;
    float neg_step_size;
    float eps;
};

void op_adamw(struct gpu *g, struct gpu_buffer *param, struct gpu_buffer *grad, struct gpu_buffer *m,
              struct gpu_buffer *v, size_t n, const struct op_adamw_step *s)
{
    struct kernel_pick pick = kernel_pick_adamw(g);
    if (kernel_path_repro(pick.path)) {
        op_repro_adamw(g, param, grad, m, v, n, s);
        return;
    }
    if (n == 0)
        return;
    if (s->t < 1)
        vkt_fatal("adamw: step count t = %lld (the first step is t = 1)", (long long)s->t);
    ops_check("adamw", "the parameter", param, n * sizeof(float));
    ops_check("adamw", "the gradient", grad, n * sizeof(float));
    ops_check("adamw", "the first-moment", m, n * sizeof(float));
    ops_check("adamw", "the second-moment", v, n * sizeof(float));
    double t = (double)s->t;
    double bc1 = 1.0 - pow(s->beta1, t), bc2 = 1.0 - pow(s->beta2, t);
    struct adamw_push push = {
        .grad_scale = (float)s->grad_scale,
        .decay = (float)(1.0 - s->lr * s->weight_decay),
        .beta1 = (float)s->beta1,
        .one_minus_beta1 = (float)(1.0 - s->beta1),
        .beta2 = (float)s->beta2,
        .one_minus_beta2 = (float)(1.0 - s->beta2),
        .bc2_sqrt = (float)sqrt(bc2),
        .neg_step_size = (float)(-(s->lr / bc1)),
        .eps = (float)s->eps,
    };
    struct gpu_arg args[4] = {{.buf = param, .write = 1}, {.buf = grad}, {.buf = m, .write = 1}, {.buf = v, .write = 1}};
    if (pick.path == KPATH_TEXEL) {
        /* θ, grad, m, v read as vec4 views; θ, m, v written as storage */
        struct gpu_arg targs[7] = {{.buf = param}, {.buf = grad}, {.buf = m}, {.buf = v}, args[0], args[2], args[3]};
        enum gpu_binding_kind kinds[7] = {GPU_BIND_TEXEL_VEC4, GPU_BIND_TEXEL_VEC4, GPU_BIND_TEXEL_VEC4,
                                          GPU_BIND_TEXEL_VEC4, GPU_BIND_STORAGE,    GPU_BIND_STORAGE,
                                          GPU_BIND_STORAGE};
        uint32_t wg = gpu_workgroup_1d(g);
        const size_t vec4[7] = {16, 16, 16, 16, 16, 16, 16};
        ops_elements(g, ops_texel_kernel(g, pick.shader, 7, kinds, sizeof push, 1, &wg), targs, vec4, &push, n, 4,
                     4);
        return;
    }
    const size_t floats[4] = {4, 4, 4, 4};
    ops_elements(g, ops_kernel(g, pick.shader, 4, sizeof push, 1), args, floats, &push, n, 1, 1);
}
