/* op_attention: causal grouped-query self-attention, block-causal by
 * document when document ids are given; forward saves the probabilities,
 * backward runs three deterministic passes (shaders/attention_back.comp).
 * Never allocates. */
#include <math.h>

#include "ops_internal.h"
#include "vktrain/util.h"

struct attention_push {
    uint32_t B, T, H, KVH, hd, has_doc;
    float scale;
};

static struct attention_push shape(const char *op, uint32_t B, uint32_t T, uint32_t H, uint32_t KVH, uint32_t hd,
                                   int has_doc)
{
    if (KVH == 0 || H % KVH)
        vkt_fatal("%s: %u key/value heads do not divide %u heads", op, KVH, H);
    return (struct attention_push){B, T, H, KVH, hd, (uint32_t)has_doc, (float)(1.0 / sqrt((double)hd))};
}

static uint32_t groups64(size_t n) { return (uint32_t)((n + 63) / 64); }

void op_attention(struct gpu *g, struct gpu_buffer *q, struct gpu_buffer *k, struct gpu_buffer *v,
                  struct gpu_buffer *doc, struct gpu_buffer *probs, struct gpu_buffer *out, uint32_t B, uint32_t T,
                  uint32_t H, uint32_t KVH, uint32_t hd)
{
    struct attention_push push = shape("attention", B, T, H, KVH, hd, doc != NULL);
    size_t F = sizeof(float);
    ops_check("attention", "q", q, F * B * T * H * hd);
    ops_check("attention", "k", k, F * B * T * KVH * hd);
    ops_check("attention", "v", v, F * B * T * KVH * hd);
    ops_check("attention", "probabilities", probs, F * B * H * T * T);
    ops_check("attention", "output", out, F * B * T * H * hd);
    if (doc)
        ops_check("attention", "document ids", doc, sizeof(int32_t) * B * T);
    struct gpu_arg args[6] = {{.buf = q}, {.buf = k}, {.buf = v}, {.buf = doc ? doc : q},
                              {.buf = probs, .write = 1}, {.buf = out, .write = 1}};
    gpu_dispatch(g, ops_kernel(g, "attention", 6, sizeof push, 0), args, &push, groups64((size_t)B * T * H), 1, 1);
}

void op_attention_backward(struct gpu *g, struct gpu_buffer *q, struct gpu_buffer *k, struct gpu_buffer *v,
                           struct gpu_buffer *probs, struct gpu_buffer *dout, struct gpu_buffer *dscores,
                           struct gpu_buffer *dq, struct gpu_buffer *dk, struct gpu_buffer *dv, uint32_t B,
                           uint32_t T, uint32_t H, uint32_t KVH, uint32_t hd)
{
    struct attention_push push = shape("attention_backward", B, T, H, KVH, hd, 0);
    size_t F = sizeof(float);
    ops_check("attention_backward", "output gradient", dout, F * B * T * H * hd);
    ops_check("attention_backward", "score gradient", dscores, F * B * H * T * T);
    ops_check("attention_backward", "dq", dq, F * B * T * H * hd);
    ops_check("attention_backward", "dk", dk, F * B * T * KVH * hd);
    ops_check("attention_backward", "dv", dv, F * B * T * KVH * hd);
    struct gpu_arg args[8] = {{.buf = q}, {.buf = k}, {.buf = v}, {.buf = probs}, {.buf = dout},
                              {.buf = dscores, .write = 1}, {.buf = dq}, {.buf = dv}};
    gpu_dispatch(g, ops_kernel(g, "attention_back_ds", 8, sizeof push, 0), args, &push,
                 groups64((size_t)B * T * H), 1, 1);
    args[5].write = 0;
    args[6] = (struct gpu_arg){.buf = dq, .write = 1};
    gpu_dispatch(g, ops_kernel(g, "attention_back_dq", 8, sizeof push, 0), args, &push,
                 groups64((size_t)B * T * H), 1, 1);
    args[6] = (struct gpu_arg){.buf = dk, .write = 1};
    args[7] = (struct gpu_arg){.buf = dv, .write = 1};
    gpu_dispatch(g, ops_kernel(g, "attention_back_dkv", 8, sizeof push, 0), args, &push,
                 groups64((size_t)B * T * KVH), 1, 1);
}
