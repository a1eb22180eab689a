/* op_attention: causal grouped-query self-attention, block-causal by
 * document when document ids are given; forward saves the probabilities,
 * backward runs three deterministic passes (shaders/attention_back.comp).
 * q, k, v may be views into one fused buffer (GPT-2's c_attn output).
 * On CPU devices (texel family) the kernels are attention_texel.comp and
 * attention_back_texel.comp: per-head vectors in registers, inputs read
 * through texel buffers, dq fused into the dS pass. Never allocates. */
#include <math.h>

#include <stdio.h>

#include "ops_attention.h"
#include "ops_internal.h"
#include "ops_texel.h"
#include "vktrain/util.h"

struct attention_push attention_push_of(const char *op, const struct op_attention_shape *s, int has_doc)
{
    if (s->KVH == 0 || s->H % s->KVH)
        vkt_fatal("%s: %u key/value heads do not divide %u heads", op, s->KVH, s->H);
    struct attention_push p = {s->B, s->T, s->H, s->KVH, s->hd, (uint32_t)has_doc, (float)(1.0 / sqrt((double)s->hd)),
                               s->q_off, s->k_off, s->v_off, s->q_stride, s->kv_stride};
    if (!p.q_stride)
        p.q_stride = s->H * s->hd;
    if (!p.kv_stride)
        p.kv_stride = s->KVH * s->hd;
    return p;
}

/* Bytes a q-like (heads H) or kv-like view needs in its buffer. */
static size_t view_bytes(const struct attention_push *p, uint32_t off, uint32_t stride, uint32_t heads)
{
    return sizeof(float) * ((size_t)off + (size_t)(p->B * p->T - 1) * stride + (size_t)heads * p->hd);
}

void attention_check_views(const char *op, const struct attention_push *p, struct gpu_buffer *q, struct gpu_buffer *k,
                           struct gpu_buffer *v)
{
    ops_check(op, "q", q, view_bytes(p, p->q_off, p->q_stride, p->H));
    ops_check(op, "k", k, view_bytes(p, p->k_off, p->kv_stride, p->KVH));
    ops_check(op, "v", v, view_bytes(p, p->v_off, p->kv_stride, p->KVH));
}

static uint32_t groups64(size_t n) { return (uint32_t)((n + 63) / 64); }

/* The storage kernels loop over keys and, inside, over the head: on a
 * device with a loop limit (llvmpipe) a shape past it would be cut short
 * silently, so it is an error instead. */
static void check_storage_loops(const struct gpu *g, const char *op, const struct attention_push *p)
{
    size_t group = p->H / p->KVH;
    size_t iterations = (size_t)p->T * (2 * (size_t)p->hd + 2) * (group > 1 ? group : 1);
    uint32_t limit = gpu_info(g)->max_loop_iterations;
    if (limit && iterations > limit)
        vkt_fatal("%s: %u positions with head size %u need about %zu loop iterations per invocation, over the %u "
                  "%s allows; on this device use a head size of at most 64 (the texel kernels) or a shorter "
                  "max_seq_len",
                  op, p->T, p->hd, iterations, limit, gpu_info(g)->name);
}

/* Head sizes up to this many floats keep their vectors in registers in the
 * texel kernels; larger ones use the storage kernels. */
#define TEXEL_MAX_HD 64

/* The texel variant for this shape and these buffers: 4 (RGBA32F, every
 * offset, stride and head size a multiple of 4), 1 (R32F), or 0 (use the
 * storage kernels). */
static int texel_width(const struct gpu *g, const struct attention_push *p, struct gpu_buffer *const *bufs, int n)
{
    if (p->hd > TEXEL_MAX_HD)
        return 0;
    int v4 = p->hd % 4 == 0 && p->q_off % 4 == 0 && p->k_off % 4 == 0 && p->v_off % 4 == 0 &&
             p->q_stride % 4 == 0 && p->kv_stride % 4 == 0;
    /* Loop iterations per invocation against the device's loop limit: the
     * per-head loops run HDC times, a specialization constant, and are
     * unrolled (test_ops_nn runs T = 1024, hd = 64 on lavapipe, which would
     * fail otherwise), so the walks over keys are what count: forward and
     * dS about 3T, dk/dv (H/KVH)·T. */
    size_t group = p->H / p->KVH;
    if ((size_t)p->T * (group > 3 ? group : 3) > ops_loop_chunk(g))
        return 0;
    /* probabilities and score gradients are always read as R32F */
    if (!ops_texel_usable(g, GPU_BIND_TEXEL_F32, bufs, n))
        return 0;
    if (v4 && ops_texel_usable(g, GPU_BIND_TEXEL_VEC4, bufs, n))
        return 4;
    return 1;
}

/* The texel kernel `base` for width 4 or 1, head size hd (its chunks are
 * specialization constant 0). */
static struct gpu_kernel *texel_kernel(struct gpu *g, const char *base, int width, int n_tex, unsigned f32_mask,
                                       int n_bind, uint32_t hd)
{
    uint32_t hdc = hd / (uint32_t)width;
    return ops_texel_variant(g, base, width, n_tex, f32_mask, n_bind, sizeof(struct attention_push), 1, &hdc);
}

void op_attention(struct gpu *g, const struct op_attention_shape *s, struct gpu_buffer *q, struct gpu_buffer *k,
                  struct gpu_buffer *v, struct gpu_buffer *doc, struct gpu_buffer *probs, struct gpu_buffer *out)
{
    struct attention_push push = attention_push_of("attention", s, doc != NULL);
    size_t F = sizeof(float);
    attention_check_views("attention", &push, q, k, v);
    ops_check("attention", "probabilities", probs, F * s->B * s->H * s->T * s->T);
    ops_check("attention", "output", out, F * s->B * s->T * s->H * s->hd);
    if (doc)
        ops_check("attention", "document ids", doc, sizeof(int32_t) * s->B * s->T);
    struct gpu_arg args[6] = {{.buf = q}, {.buf = k}, {.buf = v}, {.buf = doc ? doc : q},
                              {.buf = probs, .write = 1}, {.buf = out, .write = 1}};
    struct gpu_buffer *in[3] = {q, k, v};
    int width = texel_width(g, &push, in, 3);
    if (!width)
        check_storage_loops(g, "attention", &push);
    struct gpu_kernel *kern = width ? texel_kernel(g, "attention_texel", width, 3, 0, 6, s->hd)
                                    : ops_kernel(g, "attention", 6, sizeof push, 0);
    gpu_dispatch(g, kern, args, &push, groups64((size_t)s->B * s->T * s->H), 1, 1);
}

void op_attention_backward(struct gpu *g, const struct op_attention_shape *s, struct gpu_buffer *q,
                           struct gpu_buffer *k, struct gpu_buffer *v, struct gpu_buffer *probs,
                           struct gpu_buffer *dout, struct gpu_buffer *dscores, struct gpu_buffer *dq,
                           struct gpu_buffer *dk, struct gpu_buffer *dv)
{
    struct attention_push push = attention_push_of("attention_backward", s, 0);
    size_t F = sizeof(float);
    attention_check_views("attention_backward", &push, q, k, v);
    attention_check_views("attention_backward (gradients)", &push, dq, dk, dv);
    ops_check("attention_backward", "output gradient", dout, F * s->B * s->T * s->H * s->hd);
    ops_check("attention_backward", "score gradient", dscores, F * s->B * s->H * s->T * s->T);
    size_t queries = (size_t)s->B * s->T * s->H, keys = (size_t)s->B * s->T * s->KVH;
    struct gpu_buffer *in[6] = {q, k, v, probs, dout, dscores};
    int width = texel_width(g, &push, in, 6);
    if (width) {
        /* dS and dq in one pass, then dk and dv. */
        struct gpu_arg a0[6] = {{.buf = k}, {.buf = v}, {.buf = probs}, {.buf = dout},
                                {.buf = dscores, .write = 1}, {.buf = dq, .write = 1}};
        gpu_dispatch(g, texel_kernel(g, "attention_back_texel_ds", width, 4, 1u << 2, 6, s->hd), a0, &push,
                     groups64(queries), 1, 1);
        struct gpu_arg a1[6] = {{.buf = q}, {.buf = probs}, {.buf = dscores}, {.buf = dout},
                                {.buf = dk, .write = 1}, {.buf = dv, .write = 1}};
        gpu_dispatch(g, texel_kernel(g, "attention_back_texel_dkv", width, 4, 3u << 1, 6, s->hd), a1, &push,
                     groups64(keys), 1, 1);
        return;
    }
    check_storage_loops(g, "attention_backward", &push);
    struct gpu_arg args[8] = {{.buf = q}, {.buf = k}, {.buf = v}, {.buf = probs}, {.buf = dout},
                              {.buf = dscores, .write = 1}, {.buf = dq}, {.buf = dv}};
    gpu_dispatch(g, ops_kernel(g, "attention_back_ds", 8, sizeof push, 0), args, &push, groups64(queries), 1, 1);
    args[5].write = 0;
    args[6] = (struct gpu_arg){.buf = dq, .write = 1};
    gpu_dispatch(g, ops_kernel(g, "attention_back_dq", 8, sizeof push, 0), args, &push, groups64(queries), 1, 1);
    args[6] = (struct gpu_arg){.buf = dk, .write = 1};
    args[7] = (struct gpu_arg){.buf = dv, .write = 1};
    gpu_dispatch(g, ops_kernel(g, "attention_back_dkv", 8, sizeof push, 0), args, &push, groups64(keys), 1, 1);
}
