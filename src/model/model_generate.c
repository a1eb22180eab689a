/* model_generate: the single-token decode path with a key/value cache, and
 * host-side sampling (see include/vktrain/generate.h).
 *
 * A step records, for one token at position pos: embedding; per layer the
 * training forward's layer recorder (model_layer_record, model_forward.c)
 * on this one row, its attention hook appending k, v to the layer's cache
 * row pos and attending the one query over cache rows 0..pos (those of
 * its window)
 * (shaders/common/attention_decode.comp), the residual stream updated in place;
 * the final norm and the logits; then it submits once and reads the
 * logits back. The arithmetic is the training forward's for the last row,
 * so the logits match it to fp32 rounding (tests/test_generate.c). It owns
 * its buffers and only reads the model's weights (and the llama RoPE
 * table); LoRA adapters are not applied (generation runs merged models). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "vktrain/generate.h"
#include "vktrain/ops.h"
#include "vktrain/util.h"

struct decoder {
    struct model *m;
    uint32_t pos;
    uint32_t C, F, H, KVH, hd, kvd, V, T;
    struct gpu_buffer *token, *position; /* int32 (1) */
    struct gpu_buffer *x;                /* residual stream (C), updated in place */
    struct gpu_buffer *xn, *mean, *rstd; /* norm output (C), statistics (1) */
    struct gpu_buffer *q, *k, *v;        /* llama: (H·hd), (kvd), (kvd) */
    struct gpu_buffer *q_pre, *k_pre;    /* qk_norm: q and k before their norms */
    struct gpu_buffer *rstd_q, *rstd_k;  /* qk_norm: (H), (KVH) */
    struct gpu_buffer *qkv;              /* gpt2: (3C) */
    struct gpu_buffer *att;              /* attention output (H·hd) */
    struct gpu_buffer *gate, *up, *h;    /* MLP (F) */
    struct gpu_buffer *attn_o, *mlp_o, *post, *rstd_p1, *rstd_p2; /* post_norms: (C), (C), (C), (1), (1) */
    struct gpu_buffer *scores;           /* (H, T) */
    struct gpu_buffer *logits;           /* (V) */
    struct gpu_buffer **kc, **vc;        /* per layer (T, kvd) */
    struct layer_acts acts;              /* the layer recorder's view of the buffers above */
    float *host_logits;
};

static struct gpu_buffer *buf(struct decoder *d, size_t floats, const char *name)
{
    return gpu_buffer_create(d->m->g, (floats ? floats : 1) * sizeof(float), name);
}

struct decoder *decoder_create(struct model *m)
{
    const struct model_config *c = &m->c;
    struct decoder *d = vkt_calloc(1, sizeof *d, "the decoder");
    d->m = m;
    d->C = c->dim, d->F = c->hidden_dim, d->H = c->n_heads, d->KVH = c->n_kv_heads;
    d->hd = model_head_dim(c), d->kvd = d->KVH * d->hd, d->V = c->vocab_size, d->T = c->max_seq_len;
    int llama = c->arch == MODEL_LLAMA;
    d->token = buf(d, 1, "decode token");
    d->position = buf(d, 1, "decode position");
    d->x = buf(d, d->C, "decode x");
    d->xn = buf(d, d->C, "decode xn");
    d->mean = buf(d, 1, "decode mean");
    d->rstd = buf(d, 1, "decode rstd");
    if (llama) {
        d->q = buf(d, (size_t)d->H * d->hd, "decode q");
        d->k = buf(d, d->kvd, "decode k");
        d->v = buf(d, d->kvd, "decode v");
        d->gate = buf(d, d->F, "decode gate");
        if (c->qk_norm) {
            d->q_pre = buf(d, (size_t)d->H * d->hd, "decode q before its norm");
            d->k_pre = buf(d, d->kvd, "decode k before its norm");
            d->rstd_q = buf(d, d->H, "decode rstd q");
            d->rstd_k = buf(d, d->KVH, "decode rstd k");
        }
    } else {
        d->qkv = buf(d, 3 * (size_t)d->C, "decode qkv");
    }
    if (c->post_norms) {
        d->attn_o = buf(d, d->C, "decode attention output");
        d->mlp_o = buf(d, d->C, "decode MLP output");
        d->post = buf(d, d->C, "decode post norm output");
        d->rstd_p1 = buf(d, 1, "decode rstd post attention");
        d->rstd_p2 = buf(d, 1, "decode rstd post MLP");
    }
    d->att = buf(d, llama ? (size_t)d->H * d->hd : d->C, "decode att");
    d->up = buf(d, d->F, "decode up");
    d->h = buf(d, d->F, "decode h");
    d->scores = buf(d, (size_t)d->H * d->T, "decode scores");
    d->logits = buf(d, d->V, "decode logits");
    d->kc = vkt_calloc(c->n_layers, sizeof *d->kc, "key cache");
    d->vc = vkt_calloc(c->n_layers, sizeof *d->vc, "value cache");
    for (uint32_t l = 0; l < c->n_layers; l++) {
        d->kc[l] = buf(d, (size_t)d->T * d->kvd, "key cache");
        d->vc[l] = buf(d, (size_t)d->T * d->kvd, "value cache");
    }
    d->host_logits = vkt_malloc(sizeof(float) * d->V, "logits");
    /* One row: both norms share xn, mean and rstd; the residual x is
     * updated in place (x2 = x). */
    d->acts = (struct layer_acts){.x = d->x,
                                  .xn = d->xn,
                                  .mean1 = d->mean,
                                  .rstd1 = d->rstd,
                                  .q = d->q,
                                  .k = d->k,
                                  .v = d->v,
                                  .q_pre = d->q_pre,
                                  .k_pre = d->k_pre,
                                  .rstd_q = d->rstd_q,
                                  .rstd_k = d->rstd_k,
                                  .qkv = d->qkv,
                                  .att = d->att,
                                  .x2 = d->x,
                                  .xn2 = d->xn,
                                  .mean2 = d->mean,
                                  .rstd2 = d->rstd,
                                  .gate = d->gate,
                                  .up = d->up,
                                  .h = d->h,
                                  .attn_o = d->attn_o,
                                  .mlp_o = d->mlp_o,
                                  .rstd_p1 = d->rstd_p1,
                                  .rstd_p2 = d->rstd_p2,
                                  .post = d->post};
    model_norm_weights(m); /* 1 + w of the norms, fixed while it decodes */
    return d;
}

void decoder_destroy(struct decoder *d)
{
    if (!d)
        return;
    struct gpu *g = d->m->g;
    struct gpu_buffer *all[] = {d->token, d->position, d->x,   d->xn,   d->mean, d->rstd, d->q,      d->k,
                                d->v,     d->qkv,      d->att, d->gate, d->up,   d->h,    d->scores, d->logits,
                                d->q_pre, d->k_pre,    d->rstd_q, d->rstd_k, d->attn_o, d->mlp_o, d->post,
                                d->rstd_p1, d->rstd_p2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gpu_buffer_destroy(g, all[i]);
    for (uint32_t l = 0; l < d->m->c.n_layers; l++) {
        gpu_buffer_destroy(g, d->kc[l]);
        gpu_buffer_destroy(g, d->vc[l]);
    }
    free(d->kc);
    free(d->vc);
    free(d->host_logits);
    free(d);
}

void decoder_reset(struct decoder *d)
{
    d->pos = 0;
}
uint32_t decoder_position(const struct decoder *d)
{
    return d->pos;
}

/* Kc[pos] = k[k_off..], Vc[pos] = v[v_off..] for layer l. */
static void cache_append(struct decoder *d, uint32_t l, struct gpu_buffer *k, uint32_t k_off, struct gpu_buffer *v,
                         uint32_t v_off)
{
    struct gpu *g = d->m->g;
    struct gpu_kernel_desc desc = {
        .shader = SHADER_attention_decode_append, .n_bindings = 4, .push_size = 4 * sizeof(uint32_t)};
    struct gpu_arg args[4] = {{.buf = k}, {.buf = v}, {.buf = d->kc[l], .write = 1}, {.buf = d->vc[l], .write = 1}};
    uint32_t push[4] = {d->pos, d->kvd, k_off, v_off};
    gpu_dispatch(g, gpu_kernel_get(g, &desc), args, push, (d->kvd + 63) / 64, 1, 1);
}

/* att (H, hd) = attention of the query at q[q_off..] over cache rows
 * first..pos: 0, or the first of layer l's window. */
static void cache_attend(struct decoder *d, uint32_t l, struct gpu_buffer *q, uint32_t q_off)
{
    uint32_t w = model_layer_window(&d->m->c, l), first = w && d->pos >= w ? d->pos + 1 - w : 0;
    struct gpu *g = d->m->g;
    struct gpu_kernel_desc desc = {.shader = SHADER_attention_decode_attend,
                                   .n_bindings = 5,
                                   .push_size = 9 * sizeof(uint32_t),
                                   .n_spec = 1,
                                   .spec = {gpu_workgroup_1d(g)}};
    struct gpu_arg args[5] = {
        {.buf = q}, {.buf = d->kc[l]}, {.buf = d->vc[l]}, {.buf = d->scores, .write = 1}, {.buf = d->att, .write = 1}};
    struct {
        uint32_t pos, H, KVH, hd, q_off, max_pos;
        float scale;
        uint32_t first;
        float softcap;
    } push = {d->pos, d->H, d->KVH, d->hd, q_off, d->T, (float)(1.0 / sqrt((double)d->hd)), first,
              d->m->c.attn_softcap};
    gpu_dispatch(g, gpu_kernel_get(g, &desc), args, &push, d->H, 1, 1);
}

/* The layer recorder's attention: k and v appended to the cache at pos,
 * then the one query over cache rows 0..pos. */
static void attend_cache(struct model *m, uint32_t l, struct layer_acts *a, void *ctx)
{
    struct decoder *d = ctx;
    if (m->c.arch == MODEL_LLAMA) {
        cache_append(d, l, a->k, 0, a->v, 0);
        cache_attend(d, l, a->q, 0);
    } else { /* q, k, v at 0, C, 2C of the fused row */
        cache_append(d, l, a->qkv, d->C, a->qkv, 2 * d->C);
        cache_attend(d, l, a->qkv, 0);
    }
}

const float *decoder_step(struct decoder *d, int32_t token)
{
    struct model *m = d->m;
    const struct model_config *c = &m->c;
    struct gpu *g = m->g;
    if (token < 0 || (uint32_t)token >= d->V)
        vkt_fatal("decoder: token %d is outside the vocabulary [0, %u)", token, d->V);
    if (d->pos >= d->T)
        vkt_fatal("decoder: the key/value cache is full (max_seq_len %u)", d->T);
    int32_t pos = (int32_t)d->pos;
    m->rope_use_long = model_rope_long(m, d->pos); /* as transformers' cached decoding: per step */
    gpu_upload_batch(g, (struct gpu_copy[]){{d->token, 0, &token, sizeof token}, {d->position, 0, &pos, sizeof pos}},
                     2);
    int gpt2 = c->arch == MODEL_GPT2;
    op_embedding(g, d->token, gpt2 ? d->position : NULL, weight(m, m->embed), gpt2 ? weight(m, m->pos_embed) : NULL,
                 d->x, 1, d->C, d->V, d->T);
    if (c->embed_scale)
        op_scale(g, d->x, c->embed_scale, d->C);
    struct layer_run run = {.a = &d->acts, .rows = 1, .positions = d->position, .attend = attend_cache, .ctx = d};
    for (uint32_t l = 0; l < c->n_layers; l++)
        model_layer_record(m, l, &run, d->x);
    if (gpt2)
        op_layernorm(g, d->x, weight(m, m->norm_f), weight(m, m->norm_f_b), d->xn, d->mean, d->rstd, 1, d->C,
                     c->norm_eps);
    else
        op_rmsnorm(g, d->x, norm_w(m, m->norm_f), d->xn, d->rstd, 1, d->C, c->norm_eps);
    op_matmul_nt(g, d->xn, weight(m, m->lm_head), d->logits, 1, d->V, d->C, 0);
    gpu_download(g, d->logits, 0, d->host_logits, sizeof(float) * d->V);
    float cap = c->final_softcap; /* Gemma 2's final soft-capping, as the training loss sees the logits */
    for (uint32_t i = 0; cap > 0 && i < d->V; i++)
        d->host_logits[i] = (float)(cap * tanh((double)d->host_logits[i] / cap));
    d->pos++;
    return d->host_logits;
}

struct candidate {
    float logit;
    int32_t id;
};

/* Largest logit first, ties by the lower id. */
static int by_logit(const void *a, const void *b)
{
    const struct candidate *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

int32_t generate_sample(const float *logits, uint32_t n, float temperature, uint32_t top_k, uint64_t *rng)
{
    if (n == 0)
        vkt_fatal("generate_sample: no ids to draw from");
    int32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = (int32_t)i;
    if (temperature <= 0 || top_k == 1)
        return best;
    /* The candidates: every id in order, or the top_k largest. */
    uint32_t k = top_k && top_k < n ? top_k : n;
    struct candidate *cand = vkt_malloc(sizeof *cand * n, "sampling candidates");
    for (uint32_t i = 0; i < n; i++)
        cand[i] = (struct candidate){logits[i], (int32_t)i};
    if (k < n)
        qsort(cand, n, sizeof *cand, by_logit);
    /* softmax(l / T) over the candidates, in double, the max subtracted;
     * u uniform in [0, sum) picks the first candidate whose running sum
     * exceeds it. */
    double sum = 0;
    for (uint32_t i = 0; i < k; i++)
        sum += exp(((double)cand[i].logit - (double)logits[best]) / temperature);
    double u = (double)(vkt_splitmix64(rng) >> 11) * 0x1.0p-53 * sum, acc = 0;
    int32_t pick = cand[k - 1].id;
    for (uint32_t i = 0; i < k; i++) {
        acc += exp(((double)cand[i].logit - (double)logits[best]) / temperature);
        if (u < acc) {
            pick = cand[i].id;
            break;
        }
    }
    free(cand);
    return pick;
}

size_t generate_tokens(struct decoder *d, const int32_t *prompt, size_t n_prompt, const struct generate_options *o,
                       int32_t *out, enum generate_stop *stop)
{
    if (n_prompt == 0 || n_prompt > d->T)
        vkt_fatal("generate: a prompt of %zu tokens does not fit 1..max_seq_len (%u)", n_prompt, d->T);
    uint32_t n_vocab = o->n_vocab && o->n_vocab < d->V ? o->n_vocab : d->V;
    uint64_t rng = o->seed;
    decoder_reset(d);
    const float *logits = NULL;
    for (size_t i = 0; i < n_prompt; i++)
        logits = decoder_step(d, prompt[i]);
    size_t n = 0;
    *stop = GENERATE_STOP_LENGTH;
    while (n < o->max_new_tokens) {
        int32_t tok = generate_sample(logits, n_vocab, o->temperature, o->top_k, &rng);
        size_t k = 0;
        while (k < o->n_stop && o->stop_ids[k] != tok)
            k++;
        if (k < o->n_stop) {
            *stop = GENERATE_STOP_EOS;
            break;
        }
        out[n++] = tok;
        if (o->on_token)
            o->on_token(tok, o->ctx);
        if (n == o->max_new_tokens)
            break;
        if (d->pos == d->T) {
            *stop = GENERATE_STOP_CONTEXT;
            break;
        }
        logits = decoder_step(d, tok);
    }
    return n;
}
