/* model_backward: records the backward pass of the last forward. The
 * forward already ran the head's backward (dxf in m->dxn); every
 * parameter gradient is accumulated (+=), so micro-batches add up. dres
 * carries the gradient of the residual stream down the layers: each norm
 * backward adds its input gradient into it, and the residual connections
 * pass it through unchanged. */
#include "model_internal.h"
#include "vktrain/ops.h"
#include "vktrain/util.h"

/* d(norm input) of a post norm y = norm(x) (weight w, rstd) from d(y): in
 * m->dpost, with w's gradient; without post norms (w < 0), d(y) itself. */
static struct gpu_buffer *post_norm_backward(struct model *m, struct gpu_buffer *dy, struct gpu_buffer *x, int w,
                                             struct gpu_buffer *rstd)
{
    if (w < 0)
        return dy;
    uint32_t R = m->last.B * m->last.T;
    gpu_zero(m->g, m->dpost);
    op_rmsnorm_backward(m->g, dy, x, norm_w(m, w), rstd, m->dpost, norm_grad(m, w, 0), R, m->c.dim);
    return m->dpost;
}

static void layer_backward(struct model *m, uint32_t l)
{
    const struct model_config *c = &m->c;
    struct layer_params *p = &m->lp[l];
    struct layer_acts *a = model_layer_acts(m, l);
    struct gpu *g = m->g;
    uint32_t R = m->last.B * m->last.T, C = c->dim, F = c->hidden_dim, hd = model_head_dim(c);
    uint32_t qd = c->n_heads * hd, kv = c->n_kv_heads * hd;
    size_t RF = (size_t)R * F;
    if (c->activation_checkpointing)
        model_layer_forward(m, l, NULL);

    /* MLP: out = x2 + h·Wdownᵀ (+ b); dres is d(out). With post norms,
     * out = x2 + norm(mlp_o): dy = d(mlp_o) through the norm. */
    struct gpu_buffer *dy = post_norm_backward(m, m->dres, a->mlp_o, p->post2, a->rstd_p2);
    op_matmul_nn(g, dy, weight(m, p->down), m->dh, R, C, F, 0);
    model_lora_backward(m, l, LS_DOWN, a->h, dy, m->dh, C, F);
    if (grad(m, p->down))
        op_matmul_tn(g, dy, a->h, grad(m, p->down), R, C, F, 1);
    if (p->bdown >= 0)
        if (grad(m, p->bdown))
            op_bias_backward(g, dy, grad(m, p->bdown), R, C);
    gpu_zero(g, m->dup);
    if (c->arch == MODEL_LLAMA) {
        gpu_zero(g, m->dgate);
        if (c->mlp_gelu)
            op_geglu_backward(g, a->gate, a->up, m->dh, m->dgate, m->dup, RF);
        else
            op_swiglu_backward(g, a->gate, a->up, m->dh, m->dgate, m->dup, RF);
        if (p->bgate >= 0) {
            if (grad(m, p->bgate))
                op_bias_backward(g, m->dgate, grad(m, p->bgate), R, F);
            if (grad(m, p->bup))
                op_bias_backward(g, m->dup, grad(m, p->bup), R, F);
        }
        op_matmul_nn(g, m->dgate, weight(m, p->gate), m->dxn, R, F, C, 0);
        op_matmul_nn(g, m->dup, weight(m, p->up), m->dxn, R, F, C, 1);
        model_lora_backward(m, l, LS_GATE, a->xn2, m->dgate, m->dxn, F, C);
        model_lora_backward(m, l, LS_UP, a->xn2, m->dup, m->dxn, F, C);
        if (grad(m, p->gate))
            op_matmul_tn(g, m->dgate, a->xn2, grad(m, p->gate), R, F, C, 1);
        if (grad(m, p->up))
            op_matmul_tn(g, m->dup, a->xn2, grad(m, p->up), R, F, C, 1);
        op_rmsnorm_backward(g, m->dxn, a->x2, norm_w(m, p->norm2), a->rstd2, m->dres, norm_grad(m, p->norm2, 0), R, C);
    } else {
        op_gelu_backward(g, a->up, m->dh, m->dup, RF);
        if (grad(m, p->bup))
            op_bias_backward(g, m->dup, grad(m, p->bup), R, F);
        op_matmul_nn(g, m->dup, weight(m, p->up), m->dxn, R, F, C, 0);
        model_lora_backward(m, l, LS_UP, a->xn2, m->dup, m->dxn, F, C);
        if (grad(m, p->up))
            op_matmul_tn(g, m->dup, a->xn2, grad(m, p->up), R, F, C, 1);
        op_layernorm_backward(g, m->dxn, a->x2, weight(m, p->norm2), a->mean2, a->rstd2, m->dres,
                              norm_grad(m, p->norm2, 0), norm_grad(m, p->norm2_b, 1), R, C);
    }

    /* Attention: x2 = x + att·Woᵀ (+ b), or x + norm(attn_o); dres is now d(x2). */
    dy = post_norm_backward(m, m->dres, a->attn_o, p->post1, a->rstd_p1);
    op_matmul_nn(g, dy, weight(m, p->wo), m->datt, R, C, qd, 0);
    model_lora_backward(m, l, LS_O, a->att, dy, m->datt, C, qd);
    if (grad(m, p->wo))
        op_matmul_tn(g, dy, a->att, grad(m, p->wo), R, C, qd, 1);
    if (p->bo >= 0)
        if (grad(m, p->bo))
            op_bias_backward(g, dy, grad(m, p->bo), R, C);
    struct op_attention_shape s = model_attention_shape(m, l);
    struct gpu_buffer *doc = m->has_doc ? m->doc_ids : NULL;
    if (c->arch == MODEL_LLAMA) {
        gpu_zero(g, m->dq);
        gpu_zero(g, m->dk);
        gpu_zero(g, m->dv);
        op_flash_attention_backward(g, &s, a->q, a->k, a->v, doc, a->att, a->lse, m->datt, m->att_stats, m->dq, m->dk,
                                    m->dv);
        float qs = model_query_scale(c);
        if (qs != 1.0f)
            op_scale(g, m->dq, qs, (size_t)R * qd);
        if (model_layer_rope(c, l)) {
            uint32_t rot = model_rotary_dim(c);
            op_rope(g, m->dq, m->positions, model_rope(m, l), R, c->n_heads, hd, rot, c->max_seq_len, 1);
            op_rope(g, m->dk, m->positions, model_rope(m, l), R, c->n_kv_heads, hd, rot, c->max_seq_len, 1);
        }
        /* dq, dk: of the projections' outputs (through the per-head norms with qk_norm) */
        struct gpu_buffer *dq = m->dq, *dk = m->dk;
        if (c->qk_norm) {
            gpu_zero(g, m->dq_pre);
            gpu_zero(g, m->dk_pre);
            op_rmsnorm_backward(g, m->dq, a->q_pre, norm_w(m, p->q_norm), a->rstd_q, m->dq_pre,
                                norm_grad(m, p->q_norm, 0), R * c->n_heads, hd);
            op_rmsnorm_backward(g, m->dk, a->k_pre, norm_w(m, p->k_norm), a->rstd_k, m->dk_pre,
                                norm_grad(m, p->k_norm, 1), R * c->n_kv_heads, hd);
            dq = m->dq_pre, dk = m->dk_pre;
        }
        if (p->bq >= 0) { /* the biases are added before RoPE: their gradients are the rotated-back ones */
            if (grad(m, p->bq))
                op_bias_backward(g, dq, grad(m, p->bq), R, qd);
            if (grad(m, p->bk))
                op_bias_backward(g, dk, grad(m, p->bk), R, kv);
            if (grad(m, p->bv))
                op_bias_backward(g, m->dv, grad(m, p->bv), R, kv);
        }
        op_matmul_nn(g, dq, weight(m, p->wq), m->dxn, R, qd, C, 0);
        op_matmul_nn(g, dk, weight(m, p->wk), m->dxn, R, kv, C, 1);
        op_matmul_nn(g, m->dv, weight(m, p->wv), m->dxn, R, kv, C, 1);
        model_lora_backward(m, l, LS_Q, a->xn, dq, m->dxn, qd, C);
        model_lora_backward(m, l, LS_K, a->xn, dk, m->dxn, kv, C);
        model_lora_backward(m, l, LS_V, a->xn, m->dv, m->dxn, kv, C);
        if (grad(m, p->wq))
            op_matmul_tn(g, dq, a->xn, grad(m, p->wq), R, qd, C, 1);
        if (grad(m, p->wk))
            op_matmul_tn(g, dk, a->xn, grad(m, p->wk), R, kv, C, 1);
        if (grad(m, p->wv))
            op_matmul_tn(g, m->dv, a->xn, grad(m, p->wv), R, kv, C, 1);
        op_rmsnorm_backward(g, m->dxn, a->x, norm_w(m, p->norm1), a->rstd1, m->dres, norm_grad(m, p->norm1, 0), R, C);
    } else {
        gpu_zero(g, m->dqkv);
        op_flash_attention_backward(g, &s, a->qkv, a->qkv, a->qkv, doc, a->att, a->lse, m->datt, m->att_stats, m->dqkv,
                                    m->dqkv, m->dqkv);
        if (grad(m, p->bqkv))
            op_bias_backward(g, m->dqkv, grad(m, p->bqkv), R, 3 * C);
        op_matmul_nn(g, m->dqkv, weight(m, p->wqkv), m->dxn, R, 3 * C, C, 0);
        model_lora_backward(m, l, LS_QKV, a->xn, m->dqkv, m->dxn, 3 * C, C);
        if (grad(m, p->wqkv))
            op_matmul_tn(g, m->dqkv, a->xn, grad(m, p->wqkv), R, 3 * C, C, 1);
        op_layernorm_backward(g, m->dxn, a->x, weight(m, p->norm1), a->mean1, a->rstd1, m->dres,
                              norm_grad(m, p->norm1, 0), norm_grad(m, p->norm1_b, 1), R, C);
    }
}

/* LoRA dropout of layer l's adapter s over x (rows, in) into y, or added
 * into y: the mask of the last forward's counter, the same in the forward,
 * its recompute and the backward. */
static void lora_dropout(struct model *m, uint32_t l, enum lora_slot s, struct gpu_buffer *x, struct gpu_buffer *y,
                         uint32_t in, int accumulate)
{
    const struct model_batch *b = &m->last;
    /* the parts of a fused weight (one adapter, one A) share its mask */
    while (s > 0 && m->lp[l].lora_a[s - 1] == m->lp[l].lora_a[s])
        s--;
    struct op_dropout d = {.key = op_dropout_key(b->seed, b->step, l * LS_N + (uint32_t)s),
                           .sample0 = b->sample0,
                           .T = b->T,
                           .p = m->c.lora_dropout};
    op_dropout(m->g, &d, x, y, b->B * b->T, in, accumulate);
}

void model_lora_forward(struct model *m, uint32_t l, enum lora_slot s, struct gpu_buffer *x, struct gpu_buffer *y,
                        uint32_t out, uint32_t in)
{
    const struct layer_params *p = &m->lp[l];
    if (p->lora_a[s] < 0)
        return;
    struct gpu_buffer *u = model_layer_acts(m, l)->lora_u[s];
    uint32_t R = m->last.B * m->last.T, r = m->c.lora_rank;
    if (m->lora_drop) { /* the adapter reads drop(x) */
        lora_dropout(m, l, s, x, m->lora_xd, in, 0);
        x = m->lora_xd;
    }
    op_matmul_nt(m->g, x, weight(m, p->lora_a[s]), u, R, r, in, 0); /* u = x·Aᵀ (R, r) */
    op_scale(m->g, u, m->lora_scale, (size_t)R * r);
    if (!y)
        return;
    op_matmul_nt(m->g, u, weight(m, p->lora_b[s]), y, R, out, r, 1); /* y += u·Bᵀ */
}

void model_lora_backward(struct model *m, uint32_t l, enum lora_slot s, struct gpu_buffer *x, struct gpu_buffer *dy,
                         struct gpu_buffer *dx, uint32_t out, uint32_t in)
{
    const struct layer_params *p = &m->lp[l];
    if (p->lora_a[s] < 0)
        return;
    struct gpu *g = m->g;
    struct gpu_buffer *u = model_layer_acts(m, l)->lora_u[s], *du = m->lora_du;
    uint32_t R = m->last.B * m->last.T, r = m->c.lora_rank;
    int a = p->lora_a[s], b = p->lora_b[s];
    op_matmul_tn(g, dy, u, grad(m, b), R, out, r, 1);    /* dB += dyᵀ·u */
    op_matmul_nn(g, dy, weight(m, b), du, R, out, r, 0); /* du = dy·B, then ·alpha/rank */
    op_scale(g, du, m->lora_scale, (size_t)R * r);
    if (!m->lora_drop) {
        op_matmul_tn(g, du, x, grad(m, a), R, r, in, 1);    /* dA += duᵀ·x */
        op_matmul_nn(g, du, weight(m, a), dx, R, r, in, 1); /* dx += du·A */
        return;
    }
    /* The mask recomputed: dA += duᵀ·drop(x), dx += drop(du·A). */
    struct gpu_buffer *xd = m->lora_xd;
    lora_dropout(m, l, s, x, xd, in, 0);
    op_matmul_tn(g, du, xd, grad(m, a), R, r, in, 1);
    op_matmul_nn(g, du, weight(m, a), xd, R, r, in, 0);
    lora_dropout(m, l, s, xd, dx, in, 1);
}

int model_backward_stages(const struct model *m)
{
    return (int)m->c.n_layers + 2;
}

void model_backward_stage(struct model *m, int stage)
{
    const struct model_config *c = &m->c;
    struct gpu *g = m->g;
    uint32_t R = m->last.B * m->last.T, C = c->dim, V = c->vocab_size;
    if (stage == 0) {
        if (m->last_scale == 0.0f)
            vkt_fatal("model: a backward needs a forward with a nonzero loss scale (scale 0 is evaluation)");
        /* Final norm; the forward left d(xf) in m->dxn. */
        gpu_zero(g, m->dres);
        if (c->arch == MODEL_GPT2)
            op_layernorm_backward(g, m->dxn, m->x_final, weight(m, m->norm_f), m->mean_f, m->rstd_f, m->dres,
                                  norm_grad(m, m->norm_f, 0), norm_grad(m, m->norm_f_b, 1), R, C);
        else
            op_rmsnorm_backward(g, m->dxn, m->x_final, norm_w(m, m->norm_f), m->rstd_f, m->dres,
                                norm_grad(m, m->norm_f, 0), R, C);
    } else if (stage <= (int)c->n_layers) {
        layer_backward(m, c->n_layers - (uint32_t)stage);
    } else if (grad(m, m->embed)) { /* else frozen (LoRA) */
        if (c->embed_scale) /* the forward scaled the embeddings */
            op_scale(g, m->dres, c->embed_scale, (size_t)R * C);
        op_embedding_backward(g, m->tokens, m->dres, grad(m, m->embed), R, C, V);
        if (c->arch == MODEL_GPT2)
            op_embedding_backward(g, m->positions, m->dres, grad(m, m->pos_embed), R, C, c->max_seq_len);
    }
}

void model_backward(struct model *m)
{
    for (int s = 0; s < model_backward_stages(m); s++)
        model_backward_stage(m, s);
}
