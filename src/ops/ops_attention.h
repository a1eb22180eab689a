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

/* One binding of an attention kernel that attention_dispatch runs over
 * ranges of sequences: floats [off + b0·per_seq, + nb·per_seq + tail) of
 * buf serve sequences b0 .. b0+nb−1 (per_seq 0: the same `tail` floats
 * for every sequence). The kernel finds the first float at *base (a push
 * constant) from the start of the binding: the binding is the whole
 * buffer while every binding fits its limit, else it starts at an aligned
 * offset at or before that float. Bindings laid out alike (out and dout)
 * may share a base. */
struct attention_bind {
    struct gpu_buffer *buf;
    size_t off, per_seq;
    long long tail;
    int write;
    uint32_t *base;
};

/* Bindings of q, k, v at b[0..2] whose offsets are p's q_off, k_off and
 * v_off (their bases). */
void attention_bind_qkv(struct attention_bind *b, struct attention_push *p, struct gpu_buffer *q,
                        struct gpu_buffer *k, struct gpu_buffer *v);

/* Nonzero when g runs the texel family and views of `kind` can hold one
 * sequence of each of the bindings b[0..n) (with their aligned starts), so
 * attention_dispatch can bind them in ranges. */
int attention_texel_fits(const struct gpu *g, enum gpu_binding_kind kind, const struct attention_bind *b, int n);

/* Records kernel k with bindings b[0..n) over the sequences [0, a->B) in
 * ranges: each binding within the limit of its kind, rows_per_seq
 * invocations per sequence in workgroups of 64 within the device's count.
 * a (inside push) has its B set to each range's count, restored after.
 * Within each range the walk [0, walk) goes in parts of `chunk`, the
 * part's [w[0], w[1]) in push when w is set (w[1] following w[0]). Fatal,
 * naming op, when one sequence does not fit. */
void attention_dispatch(struct gpu *g, const char *op, struct gpu_kernel *k, const struct attention_bind *b, int n,
                        struct attention_push *a, const void *push, size_t rows_per_seq, uint32_t walk,
                        uint32_t chunk, uint32_t *w);

#endif
