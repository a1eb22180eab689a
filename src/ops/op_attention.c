/* op_attention: causal grouped-query self-attention, block-causal by
 * document when document ids are given; forward saves the probabilities,
 * backward runs three deterministic passes (shaders/attention_back.comp).
 * q, k, v may be views into one fused buffer (GPT-2's c_attn output).
 * Never allocates. */
#include <math.h>

#include "ops_internal.h"
#include "vktrain/util.h"

struct attention_push {
    uint32_t B, T, H, KVH, hd, has_doc;
    float scale;
    uint32_t q_off, k_off, v_off, q_stride, kv_stride;
};

static struct attention_push shape(const char *op, const struct op_attention_shape *s, int has_doc)
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

static void check_views(const char *op, const struct attention_push *p, struct gpu_buffer *q, struct gpu_buffer *k,
                        struct gpu_buffer *v)
{
    ops_check(op, "q", q, view_bytes(p, p->q_off, p->q_stride, p->H));
    ops_check(op, "k", k, view_bytes(p, p->k_off, p->kv_stride, p->KVH));
    ops_check(op, "v", v, view_bytes(p, p->v_off, p->kv_stride, p->KVH));
}

static uint32_t groups64(size_t n) { return (uint32_t)((n + 63) / 64); }

void op_attention(struct gpu *g, const struct op_attention_shape *s, struct gpu_buffer *q, struct gpu_buffer *k,
                  struct gpu_buffer *v, struct gpu_buffer *doc, struct gpu_buffer *probs, struct gpu_buffer *out)
{
    struct attention_push push = shape("attention", s, doc != NULL);
    size_t F = sizeof(float);
    check_views("attention", &push, q, k, v);
    ops_check("attention", "probabilities", probs, F * s->B * s->H * s->T * s->T);
    ops_check("attention", "output", out, F * s->B * s->T * s->H * s->hd);
    if (doc)
        ops_check("attention", "document ids", doc, sizeof(int32_t) * s->B * s->T);
    struct gpu_arg args[6] = {{.buf = q}, {.buf = k}, {.buf = v}, {.buf = doc ? doc : q},
                              {.buf = probs, .write = 1}, {.buf = out, .write = 1}};
    gpu_dispatch(g, ops_kernel(g, "attention", 6, sizeof push, 0), args, &push,
                 groups64((size_t)s->B * s->T * s->H), 1, 1);
}

void op_attention_backward(struct gpu *g, const struct op_attention_shape *s, struct gpu_buffer *q,
                           struct gpu_buffer *k, struct gpu_buffer *v, struct gpu_buffer *probs,
                           struct gpu_buffer *dout, struct gpu_buffer *dscores, struct gpu_buffer *dq,
                           struct gpu_buffer *dk, struct gpu_buffer *dv)
{
    struct attention_push push = shape("attention_backward", s, 0);
    size_t F = sizeof(float);
    check_views("attention_backward", &push, q, k, v);
    check_views("attention_backward (gradients)", &push, dq, dk, dv);
    ops_check("attention_backward", "output gradient", dout, F * s->B * s->T * s->H * s->hd);
    ops_check("attention_backward", "score gradient", dscores, F * s->B * s->H * s->T * s->T);
    struct gpu_arg args[8] = {{.buf = q}, {.buf = k}, {.buf = v}, {.buf = probs}, {.buf = dout},
                              {.buf = dscores, .write = 1}, {.buf = dq}, {.buf = dv}};
    size_t queries = (size_t)s->B * s->T * s->H, keys = (size_t)s->B * s->T * s->KVH;
    gpu_dispatch(g, ops_kernel(g, "attention_back_ds", 8, sizeof push, 0), args, &push, groups64(queries), 1, 1);
    args[5].write = 0;
    args[6] = (struct gpu_arg){.buf = dq, .write = 1};
    gpu_dispatch(g, ops_kernel(g, "attention_back_dq", 8, sizeof push, 0), args, &push, groups64(queries), 1, 1);
    args[6] = (struct gpu_arg){.buf = dk, .write = 1};
    args[7] = (struct gpu_arg){.buf = dv, .write = 1};
    gpu_dispatch(g, ops_kernel(g, "attention_back_dkv", 8, sizeof push, 0), args, &push, groups64(keys), 1, 1);
}
