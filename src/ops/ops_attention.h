/* ops_attention: what the two attention ops (op_attention.c, with the
 * (T,T) probabilities, and op_flash_attention.c, without) share: the push
 * constants every attention shader starts with and the checks of the q, k,
 * v views. Nothing outside src/ops includes it. */
#ifndef VKTRAIN_OPS_ATTENTION_H
#define VKTRAIN_OPS_ATTENTION_H

#include "vktrain/ops.h"

/* The push constants' head, as the shaders declare them. */
struct attention_push {
    uint32_t B, T, H, KVH, hd, has_doc;
    float scale;
    uint32_t q_off, k_off, v_off, q_stride, kv_stride;
};

/* The push constants for shape s (0 strides made packed); fatal, naming op,
 * unless KVH divides H. */
struct attention_push attention_push_of(const char *op, const struct op_attention_shape *s, int has_doc);

/* Fatal unless q, k, v hold the views p describes; names op and the view. */
void attention_check_views(const char *op, const struct attention_push *p, struct gpu_buffer *q,
                           struct gpu_buffer *k, struct gpu_buffer *v);

#endif
