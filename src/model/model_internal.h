/* model_internal: the model's structures, shared by the files of
 * src/model. The interface is include/vktrain/model.h. */
#ifndef VKTRAIN_MODEL_INTERNAL_H
#define VKTRAIN_MODEL_INTERNAL_H

#include "vktrain/model.h"
#include "vktrain/ops.h"

#define MODEL_MAX_PARAMS 1024
#define NF4_BLOCK 64u /* model.base_dtype nf4: bitsandbytes' and QLoRA's block (and transformers' folders') */

/* The linear layers LoRA may adapt (llama: q k v o gate up down; gpt2:
 * qkv = c_attn, o = attn.c_proj, up = c_fc, down = mlp.c_proj). */
enum lora_slot { LS_Q, LS_K, LS_V, LS_QKV, LS_O, LS_GATE, LS_UP, LS_DOWN, LS_N };

/* Per-layer parameter indices into the table. */
struct layer_params {
    /* llama: norm1 = input_layernorm, norm2 = post_attention_layernorm,
     * wq/wk/wv/wo, gate/up/down. gpt2: norm1/2 = ln_1/ln_2 (+ biases),
     * wqkv = c_attn (3C, C), wo = attn.c_proj, up = mlp.c_fc,
     * down = mlp.c_proj (+ biases); llama's optional biases bq/bk/bv, bo,
     * bgate/bup/bdown, the per-head q_norm and k_norm (qk_norm). Unused
     * entries are -1. */
    int norm1, norm1_b, wq, bq, wk, bk, wv, bv, wqkv, bqkv, wo, bo, norm2, norm2_b, gate, bgate, up, bup, down, bdown;
    int q_norm, k_norm;
    int post1, post2; /* post_norms: post_attention_layernorm, post_feedforward_layernorm */
    int lora_a[LS_N], lora_b[LS_N]; /* LoRA's A and B of each linear layer, or -1 */
};

/* The linear weight of each LoRA slot in a layer (-1: the arch has none). */
static inline void model_linear_slots(const struct layer_params *p, int base[LS_N])
{
    const int w[LS_N] = {p->wq, p->wk, p->wv, p->wqkv, p->wo, p->gate, p->up, p->down};
    for (int s = 0; s < LS_N; s++)
        base[s] = w[s];
}

/* Saved activations of one layer (rows = B·T). */
struct layer_acts {
    struct gpu_buffer *x;  /* residual stream entering the layer (rows, C) */
    struct gpu_buffer *xn; /* norm1(x) */
    struct gpu_buffer *mean1, *rstd1;
    struct gpu_buffer *q, *k, *v; /* llama: (rows, H·hd), (rows, KVH·hd) after RoPE */
    struct gpu_buffer *q_pre, *k_pre, *rstd_q, *rstd_k; /* qk_norm: q and k before their norms, the norms' rstd */
    struct gpu_buffer *qkv;       /* gpt2: (rows, 3C) */
    struct gpu_buffer *lse;       /* attention log-sum-exp per query row (B, H, T) */
    struct gpu_buffer *att;       /* attention output (rows, H·hd) */
    struct gpu_buffer *x2;        /* residual after attention */
    struct gpu_buffer *xn2, *mean2, *rstd2;
    struct gpu_buffer *gate, *up;    /* llama (rows, hidden); gpt2: up = c_fc output */
    struct gpu_buffer *h;            /* activation output (rows, hidden) */
    struct gpu_buffer *lora_u[LS_N]; /* LoRA: (alpha/rank)·x·Aᵀ of each adapted layer (rows, rank) */
    /* post_norms: the attention's and the MLP's outputs before their norms
     * (rows, C), the norms' rstd, and where the normed ones go (the
     * decoder's; NULL: the model's post_tmp, shared by the layers) */
    struct gpu_buffer *attn_o, *mlp_o, *rstd_p1, *rstd_p2, *post;
};

struct model {
    struct gpu *g;
    struct model_config c;
    uint32_t max_rows;
    struct model_param params[MODEL_MAX_PARAMS];
    int n_params;
    int *trained, n_trained;           /* the trained parameters' indices (LoRA: the adapters) */
    float lora_scale;                  /* alpha / rank */
    struct gpu_buffer *lora_du;        /* LoRA backward scratch (rows, rank) */
    struct gpu_buffer *lora_xd;        /* LoRA dropout: the dropped input, or dx's part (rows, widest input) */
    int lora_drop;                     /* the last forward applies LoRA dropout (training, rate > 0) */
    struct gpu_buffer *frozen_sink[2]; /* the norm backward's weight gradients of a frozen norm (C or hd floats) */
    int building_stage;                /* backward stage of the parameters being added */
    int adding_adapter;                /* the parameters being added are LoRA's */
    int embed, pos_embed, norm_f, norm_f_b, lm_head; /* indices (-1 if absent) */
    struct layer_params *lp;
    struct layer_acts *la;  /* with activation checkpointing, only la[l].x */
    struct layer_acts ckpt; /* checkpointing: the set shared by all layers (x: the current layer's) */
    size_t act_bytes;       /* model_activation_bytes */
    uint32_t head_rows;     /* rows per LM-head chunk */
    uint32_t logits_ld;     /* floats between rows of the logits: V rounded up to 4 (V in the reproducible mode) */
    float last_scale;       /* of the last forward: 0 = no head backward was recorded */
    /* Activations shared by all layers and the head. */
    struct gpu_buffer *tokens, *labels, *positions, *doc_ids; /* int32 (rows) */
    struct gpu_buffer *x_final, *xf, *mean_f, *rstd_f;        /* final norm */
    struct gpu_buffer *logits;                                /* (head_rows, logits_ld): becomes dlogits */
    struct gpu_buffer *logits_kept;                           /* copy when keep_logits (rows logits_ld apart) */
    struct gpu_buffer *row_loss, *row_count, *stats, *scratch;
    struct gpu_buffer *tn_scratch; /* the matmul tn's transposes (gpu_set_matmul_scratch), or NULL */
    struct gpu_buffer *loss_acc;   /* (loss sum, count) since model_loss_reset */
    struct gpu_buffer *rope_table; /* llama: (max_seq_len, rot/2, 2) */
    /* longrope: the table of its long factors, and whether the forward being
     * recorded uses it (its last position is original_max or more) */
    struct gpu_buffer *rope_long;
    int rope_use_long;
    struct gpu_buffer *rope_local; /* rope_local_theta: the sliding layers' table */
    /* norm_offset: 1 + w of each norm parameter (by index; NULL elsewhere),
     * made from the weights at each forward (model_norm_weights) */
    struct gpu_buffer **norm1p, *ones;
    struct gpu_buffer *dpost;    /* post_norms: the gradient into a post norm's input (rows, C) */
    struct gpu_buffer *post_tmp; /* post_norms: a post norm's output before its residual add (rows, C) */
    /* Backward scratch. */
    struct gpu_buffer *dres;                   /* gradient of the residual stream (rows, C) */
    struct gpu_buffer *dxn, *datt, *att_stats; /* (rows, C), (rows, H·hd), (B,H,T,2) */
    struct gpu_buffer *dq, *dk, *dv, *dqkv;    /* llama / gpt2 */
    struct gpu_buffer *dq_pre, *dk_pre;        /* qk_norm: gradients of q and k before their norms */
    struct gpu_buffer *dh, *dgate, *dup;       /* (rows, hidden) */
    int keep_logits;
    struct gpu_buffer *head_grad; /* model_set_head_grad, else NULL */
    struct model_batch last; /* shape of the last forward (pointers not kept) */
    int has_doc;
};

/* Parameter i's weight buffer, and its gradient (NULL: frozen). */
static inline struct gpu_buffer *weight(struct model *m, int i)
{
    return m->params[i].w;
}
static inline struct gpu_buffer *grad(struct model *m, int i)
{
    return m->params[i].grad;
}
/* The weight a norm multiplies by: w, or 1 + w (norm_offset). */
static inline struct gpu_buffer *norm_w(struct model *m, int i)
{
    return m->norm1p && m->norm1p[i] ? m->norm1p[i] : m->params[i].w;
}
/* A norm's weight (k = 0) or bias (k = 1) gradient, or where a frozen
 * norm's go (the kernels write both outputs). */
static inline struct gpu_buffer *norm_grad(struct model *m, int i, int k)
{
    return m->params[i].grad ? m->params[i].grad : m->frozen_sink[k];
}

/* Layer l's activations: its own, or with checkpointing its input la[l].x
 * and the shared set. */
static inline struct layer_acts *model_layer_acts(struct model *m, uint32_t l)
{
    if (!m->c.activation_checkpointing)
        return &m->la[l];
    m->ckpt.x = m->la[l].x;
    return &m->ckpt;
}

/* What one layer's forward records on: the training forward's
 * activations over the batch with flash attention (model_layer_forward),
 * or the decoder's one row with its key/value cache (model_generate.c). */
struct layer_run {
    struct layer_acts *a; /* a->x is the input; a->x2 == a->x adds the attention in place */
    uint32_t rows;
    struct gpu_buffer *positions; /* int32 (rows), for RoPE */
    int adapters;                 /* record the LoRA adapters (the decoder does not) */
    /* Attention of a->q, a->k, a->v after RoPE (gpt2: a->qkv) into a->att. */
    void (*attend)(struct model *m, uint32_t l, struct layer_acts *a, void *ctx);
    void *ctx;
};

/* Records layer l's forward into out (out == a->x2: the MLP added in
 * place); out NULL: only as far as the activations its backward reads
 * (the checkpointing recompute). */
void model_layer_record(struct model *m, uint32_t l, const struct layer_run *run, struct gpu_buffer *out);
/* The same on the training activations of layer l, from la[l].x. */
void model_layer_forward(struct model *m, uint32_t l, struct gpu_buffer *out);

/* model_activations.c: a buffer of `floats` floats counted in the
 * activation bytes; the activation buffers of a batch of `batch` rows of
 * max_seq_len (and the matmul tn workspace, registered with the gpu);
 * their release. */
struct gpu_buffer *model_act(struct model *m, size_t floats, const char *name);
void model_build_activations(struct model *m, uint32_t batch);
void model_destroy_activations(struct model *m);

/* LoRA of one linear layer y (rows, out) = x (rows, in)·Wᵀ: the forward
 * adds (alpha/rank)·(x·Aᵀ)·Bᵀ into y; the backward, given dy, accumulates
 * the adapters' gradients and adds the adapter's part of dx into dx. No-ops
 * for a layer without an adapter. y NULL: only the saved u (the
 * checkpointing recompute). */
void model_lora_forward(struct model *m, uint32_t l, enum lora_slot s, struct gpu_buffer *x, struct gpu_buffer *y,
                        uint32_t out, uint32_t in);
void model_lora_backward(struct model *m, uint32_t l, enum lora_slot s, struct gpu_buffer *x, struct gpu_buffer *dy,
                         struct gpu_buffer *dx, uint32_t out, uint32_t in);

/* Layer l's attention layout in the last forward: GPT-2 reads q, k, v as
 * views into its fused (rows, 3C) c_attn output; llama has separate
 * buffers. */
static inline struct op_attention_shape model_attention_shape(const struct model *m, uint32_t l)
{
    const struct model_config *c = &m->c;
    struct op_attention_shape s = {.B = m->last.B,
                                   .T = m->last.T,
                                   .H = c->n_heads,
                                   .KVH = c->n_kv_heads,
                                   .hd = model_head_dim(c),
                                   .window = model_layer_window(c, l),
                                   .softcap = c->attn_softcap};
    if (c->arch == MODEL_GPT2) /* views into the fused (rows, 3C) c_attn output */
        s.q_off = 0, s.k_off = c->dim, s.v_off = 2 * c->dim, s.q_stride = s.kv_stride = 3 * c->dim;
    return s;
}

/* The RoPE table of layer l in the forward being recorded. */
static inline struct gpu_buffer *model_rope(const struct model *m, uint32_t l)
{
    if (m->rope_local && model_layer_sliding(&m->c, l))
        return m->rope_local;
    return m->rope_use_long ? m->rope_long : m->rope_table;
}

/* norm_offset: 1 + w of every norm into norm1p (before a forward reads them). */
void model_norm_weights(struct model *m);

/* longrope: whether a forward whose last position is last uses the long
 * table (transformers: seq_len = last + 1 > original_max_position_embeddings). */
static inline int model_rope_long(const struct model *m, uint32_t last)
{
    return m->c.rope_scaling.type == OP_ROPE_LONGROPE && last + 1 > m->c.rope_scaling.original_max;
}

/* How many parameters from k on make up tensor k's hf of the files: 1, or
 * the parts of a fused one (consecutive in the table). */
int model_fused_parts(const struct model *m, int k);

/* model_bnb.c: a bitsandbytes 4-bit folder's layer matrices, uploaded as
 * stored. The loader holds a weight's tensors until all have come (a
 * shard boundary may cut them). */
struct bnb_loader;
struct st_tensor;
struct bnb_loader *bnb_loader_new(struct model *m);
/* With name a part of a weight's quantization state (W.absmax,
 * W.quant_state.bitsandbytes__nf4, ...): W into base, and the part's
 * number (>= 0); -1 for any other name. */
int bnb_part_of(const char *name, char *base, size_t cap);
/* Takes tensor t of the file path (its buffers move to the loader): the
 * packed weight of p (part -1) or a part of its state; uploads p (its
 * fused parts) once complete, marking them in found. -1 with the
 * message. */
int bnb_take(struct bnb_loader *L, struct model_param *p, int part, struct st_tensor *t, const char *path, int *found,
             char *err, size_t errlen);
/* -1 naming the first weight with a tensor missing; frees L either way. */
int bnb_finish(struct bnb_loader *L, char *err, size_t errlen);

#endif
