/* op_attention: causal grouped-query self-attention, block-causal by
 * document when document ids are given; forward saves the probabilities,
 * backward runs three deterministic passes (shaders/default/attention_back.comp).
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

static size_t lcm(size_t a, size_t b) { return a / ops_gcd(a, b) * b; }

/* Offsets of ranges: aligned for storage and texel views alike, and
 * whole vec4s (so float offsets stay multiples of 4). */
static size_t range_alignment(const struct gpu *g)
{
    return lcm(lcm(gpu_binding_alignment(g, GPU_BIND_STORAGE), gpu_binding_alignment(g, GPU_BIND_TEXEL_F32)), 16);
}

static size_t tail_bytes(const struct attention_bind *b) { return b->tail > 0 ? (size_t)b->tail * sizeof(float) : 0; }

int attention_texel_fits(const struct gpu *g, enum gpu_binding_kind kind, const struct attention_bind *b, int n)
{
    if (gpu_kernel_class(g) != GPU_KERNELS_TEXEL)
        return 0;
    size_t limit = gpu_binding_limit(g, kind), align = range_alignment(g);
    for (int i = 0; i < n; i++)
        if (gpu_buffer_size(b[i].buf) > limit && b[i].per_seq * sizeof(float) + tail_bytes(&b[i]) + align > limit)
            return 0;
    return 1;
}

void attention_bind_qkv(struct attention_bind *b, struct attention_push *p, struct gpu_buffer *q,
                        struct gpu_buffer *k, struct gpu_buffer *v)
{
    long long q_tail = (long long)p->H * p->hd - p->q_stride, kv_tail = (long long)p->KVH * p->hd - p->kv_stride;
    b[0] = (struct attention_bind){q, p->q_off, (size_t)p->T * p->q_stride, q_tail, 0, &p->q_off};
    b[1] = (struct attention_bind){k, p->k_off, (size_t)p->T * p->kv_stride, kv_tail, 0, &p->k_off};
    b[2] = (struct attention_bind){v, p->v_off, (size_t)p->T * p->kv_stride, kv_tail, 0, &p->v_off};
}

/* Whether the bindings are bound in ranges: all of them as soon as one
 * exceeds its limit, so bindings that share a base agree. */
static int sliced(const struct gpu *g, const struct gpu_kernel *k, const struct attention_bind *b, int n)
{
    for (int i = 0; i < n; i++)
        if (gpu_buffer_size(b[i].buf) > gpu_binding_limit(g, gpu_kernel_binding(k, i)))
            return 1;
    return 0;
}

/* The most sequences one range may hold: within the workgroup count and,
 * when bound in ranges, every binding's limit; all B at most. */
static size_t sequences_per_range(const struct gpu *g, const char *op, const struct gpu_kernel *k,
                                  const struct attention_bind *b, int n, size_t B, size_t rows_per_seq)
{
    size_t align = range_alignment(g), most = (size_t)gpu_info(g)->max_workgroup_count[0] * 64 / rows_per_seq;
    for (int i = 0; sliced(g, k, b, n) && i < n; i++) {
        size_t limit = gpu_binding_limit(g, gpu_kernel_binding(k, i)), per = b[i].per_seq * sizeof(float);
        size_t fit = limit > align + tail_bytes(&b[i]) ? (limit - align - tail_bytes(&b[i])) / (per ? per : 1) : 0;
        if (fit < most)
            most = fit;
    }
    if (most == 0)
        vkt_fatal("%s: one sequence of %zu rows does not fit this device's limits (storage range %zu bytes, %u "
                  "texels, %u workgroups); use a shorter max_seq_len",
                  op, rows_per_seq, ops_storage_limit(g), gpu_info(g)->max_texel_buffer_elements,
                  gpu_info(g)->max_workgroup_count[0]);
    return most < B ? most : B;
}

void attention_dispatch(struct gpu *g, const char *op, struct gpu_kernel *k, const struct attention_bind *b, int n,
                        struct attention_push *a, const void *push, size_t rows_per_seq, uint32_t walk,
                        uint32_t chunk, uint32_t *w)
{
    uint32_t B = a->B;
    size_t nb = sequences_per_range(g, op, k, b, n, B, rows_per_seq), align = range_alignment(g);
    int slice = sliced(g, k, b, n);
    struct gpu_arg args[GPU_MAX_BINDINGS];
    for (size_t b0 = 0; b0 < B; b0 += nb) {
        a->B = (uint32_t)(B - b0 < nb ? B - b0 : nb);
        for (int i = 0; i < n; i++) {
            const struct attention_bind *bd = &b[i];
            size_t first = bd->off + b0 * bd->per_seq, size = gpu_buffer_size(bd->buf);
            size_t end = (first + a->B * bd->per_seq) * sizeof(float) + tail_bytes(bd);
            args[i] = (struct gpu_arg){.buf = bd->buf, .write = bd->write};
            if (slice) {
                args[i].offset = first * sizeof(float) / align * align;
                args[i].range = (end < size ? end : size) - args[i].offset;
                first -= args[i].offset / sizeof(float);
            }
            *bd->base = (uint32_t)first;
        }
        for (uint32_t w0 = 0; w0 < walk; w0 += chunk) {
            if (w)
                w[0] = w0, w[1] = walk - w0 < chunk ? walk : w0 + chunk;
            gpu_dispatch(g, k, args, push, (uint32_t)((a->B * rows_per_seq + 63) / 64), 1, 1);
        }
    }
    a->B = B;
}

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

/* The texel variant for this shape and these texel inputs: 4 (RGBA32F,
 * every offset, stride and head size a multiple of 4), 1 (R32F), or 0
 * (use the storage kernels). */
static int texel_width(const struct gpu *g, const struct attention_push *p, const struct attention_bind *in, int n)
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
    return ops_texel_width(v4, attention_texel_fits(g, GPU_BIND_TEXEL_VEC4, in, n),
                           attention_texel_fits(g, GPU_BIND_TEXEL_F32, in, n), 1);
}

/* The R32F views among the backward kernels' texel bindings. */
enum {
    DS_PROBS = OPS_R32F(2),                   /* dS and dq: k, v, P, dO */
    DKV_PROBS_DS = OPS_R32F(1) | OPS_R32F(2), /* dk and dv: q, P, dS, dO */
};

/* The push constants of these kernels: the head, then where out (and
 * dout), probs (and dscores) and doc start in their bindings (floats). */
struct probs_push {
    struct attention_push a;
    uint32_t o_off, p_off, doc_off;
};

/* The texel kernel of widths (SHADER_WIDTHS) for width 4 or 1, head size
 * hd (its chunks are specialization constant 0). */
static struct gpu_kernel *texel_kernel(struct gpu *g, const enum shader_id *widths, int width, int n_tex, unsigned f32_mask,
                                       int n_bind, uint32_t hd)
{
    uint32_t hdc = hd / (uint32_t)width;
    return ops_texel_variant(g, widths, width, n_tex, f32_mask, n_bind, sizeof(struct probs_push), 1, &hdc);
}

/* Bindings of q, k, v at b[0..2] and of the document ids at b[3] (q
 * stands in, unread, without them). */
static void bind_inputs(struct attention_bind *b, struct probs_push *p, struct gpu_buffer *q, struct gpu_buffer *k,
                        struct gpu_buffer *v, struct gpu_buffer *doc)
{
    attention_bind_qkv(b, &p->a, q, k, v);
    b[3] = (struct attention_bind){doc ? doc : q, 0, doc ? p->a.T : 0, doc ? 0 : 1, 0, &p->doc_off};
}

void op_attention(struct gpu *g, const struct op_attention_shape *s, struct gpu_buffer *q, struct gpu_buffer *k,
                  struct gpu_buffer *v, struct gpu_buffer *doc, struct gpu_buffer *probs, struct gpu_buffer *out)
{
    if (s->window && s->window < s->T)
        vkt_fatal("attention: the kernels with (T,T) probabilities have no sliding window (op_flash_attention has)");
    if (s->softcap)
        vkt_fatal("attention: the kernels with (T,T) probabilities have no soft-capping (op_flash_attention has)");
    struct probs_push push = {.a = attention_push_of("attention", s, doc != NULL)};
    size_t F = sizeof(float), T = s->T;
    attention_check_views("attention", &push.a, q, k, v);
    ops_check("attention", "probabilities", probs, F * s->B * s->H * s->T * s->T);
    ops_check("attention", "output", out, F * s->B * s->T * s->H * s->hd);
    if (doc)
        ops_check("attention", "document ids", doc, sizeof(int32_t) * s->B * s->T);
    struct attention_bind b[6];
    bind_inputs(b, &push, q, k, v, doc);
    int width = texel_width(g, &push.a, b, 3);
    if (!width)
        check_storage_loops(g, "attention", &push.a);
    struct gpu_kernel *kern = width ? texel_kernel(g, SHADER_WIDTHS(attention_texel), width, 3, 0, 6, s->hd)
                                    : ops_kernel(g, SHADER_attention, 6, sizeof push, 0);
    b[4] = (struct attention_bind){probs, 0, s->H * T * T, 0, 1, &push.p_off};
    b[5] = (struct attention_bind){out, 0, T * s->H * s->hd, 0, 1, &push.o_off};
    attention_dispatch(g, "attention", kern, b, 6, &push.a, &push, T * s->H, 1, 1, NULL);
}

void op_attention_backward(struct gpu *g, const struct op_attention_shape *s, struct gpu_buffer *q,
                           struct gpu_buffer *k, struct gpu_buffer *v, struct gpu_buffer *probs,
                           struct gpu_buffer *dout, struct gpu_buffer *dscores, struct gpu_buffer *dq,
                           struct gpu_buffer *dk, struct gpu_buffer *dv)
{
    const char *op = "attention_backward";
    struct probs_push push = {.a = attention_push_of(op, s, 0)};
    size_t F = sizeof(float), T = s->T;
    attention_check_views(op, &push.a, q, k, v);
    attention_check_views("attention_backward (gradients)", &push.a, dq, dk, dv);
    ops_check(op, "output gradient", dout, F * s->B * s->T * s->H * s->hd);
    ops_check(op, "score gradient", dscores, F * s->B * s->H * s->T * s->T);
    size_t queries = T * s->H, keys = T * s->KVH;
    /* q, k, v and their gradients share the offsets in push; probs, dout
     * and dscores are indexed from the start of their bindings */
    struct attention_bind qkv[6], grad[3];
    attention_bind_qkv(qkv, &push.a, q, k, v);
    attention_bind_qkv(grad, &push.a, dq, dk, dv);
    for (int i = 0; i < 3; i++)
        grad[i].write = 1;
    struct attention_bind P = {probs, 0, s->H * T * T, 0, 0, &push.p_off};
    struct attention_bind dO = {dout, 0, T * s->H * s->hd, 0, 0, &push.o_off};
    struct attention_bind dS = {dscores, 0, s->H * T * T, 0, 1, &push.p_off}; /* laid out as probs */
    qkv[3] = P, qkv[4] = dO, qkv[5] = dS;
    int width = texel_width(g, &push.a, qkv, 6);
    if (width) {
        /* dS and dq in one pass, then dk and dv. */
        struct attention_bind a0[6] = {qkv[1], qkv[2], P, dO, dS, grad[0]};
        attention_dispatch(g, op, texel_kernel(g, SHADER_WIDTHS(attention_back_texel_ds), width, 4, DS_PROBS, 6, s->hd), a0, 6,
                           &push.a, &push, queries, 1, 1, NULL);
        dS.write = 0;
        struct attention_bind a1[6] = {qkv[0], P, dS, dO, grad[1], grad[2]};
        attention_dispatch(g, op, texel_kernel(g, SHADER_WIDTHS(attention_back_texel_dkv), width, 4, DKV_PROBS_DS, 6, s->hd), a1, 6,
                           &push.a, &push, keys, 1, 1, NULL);
        return;
    }
    check_storage_loops(g, op, &push.a);
    struct attention_bind args[8] = {qkv[0], qkv[1], qkv[2], P, dO, dS, grad[0], grad[2]};
    args[6].write = args[7].write = 0;
    attention_dispatch(g, op, ops_kernel(g, SHADER_attention_back_ds, 8, sizeof push, 0), args, 8, &push.a, &push, queries,
                       1, 1, NULL);
    args[5].write = 0;
    args[6].write = 1;
    attention_dispatch(g, op, ops_kernel(g, SHADER_attention_back_dq, 8, sizeof push, 0), args, 8, &push.a, &push, queries,
                       1, 1, NULL);
    args[6] = grad[1];
    args[7] = grad[2];
    attention_dispatch(g, op, ops_kernel(g, SHADER_attention_back_dkv, 8, sizeof push, 0), args, 8, &push.a, &push, keys, 1,
                       1, NULL);
}
