/* model_backward: records the backward pass of the last forward. The
 * forward already ran the head's backward (dxf in m->dxn); every
 * parameter gradient is accumulated (+=), so micro-batches add up. dres
 * carries the gradient of the residual stream down the layers: each norm
 * backward adds its input gradient into it, and the residual connections
 * pass it through unchanged. */
#include "model_internal.h"
#include "vktrain/ops.h"
#include "vktrain/util.h"

static void layer_backward(struct model *m, uint32_t l)
{
    const struct model_config *c = &m->c;
    struct layer_params *p = &m->lp[l];
    struct layer_acts *a = model_layer_acts(m, l);
    struct gpu *g = m->g;
    uint32_t R = m->last.B * m->last.T, C = c->dim, F = c->hidden_dim, hd = C / c->n_heads;
    uint32_t kv = c->n_kv_heads * hd;
    size_t RF = (size_t)R * F;
    if (c->activation_checkpointing)
        model_layer_forward(m, l, NULL);

    /* MLP: out = x2 + h·Wdownᵀ (+ b); dres is d(out). */
    op_matmul_nn(g, m->dres, W(m, p->down), m->dh, R, C, F, 0);
    op_matmul_tn(g, m->dres, a->h, G(m, p->down), R, C, F, 1);
    if (p->bdown >= 0)
        op_bias_backward(g, m->dres, G(m, p->bdown), R, C);
    gpu_zero(g, m->dup);
    if (c->arch == MODEL_LLAMA) {
        gpu_zero(g, m->dgate);
        op_swiglu_backward(g, a->gate, a->up, m->dh, m->dgate, m->dup, RF);
        if (p->bgate >= 0) {
            op_bias_backward(g, m->dgate, G(m, p->bgate), R, F);
            op_bias_backward(g, m->dup, G(m, p->bup), R, F);
        }
        op_matmul_nn(g, m->dgate, W(m, p->gate), m->dxn, R, F, C, 0);
        op_matmul_nn(g, m->dup, W(m, p->up), m->dxn, R, F, C, 1);
        op_matmul_tn(g, m->dgate, a->xn2, G(m, p->gate), R, F, C, 1);
        op_matmul_tn(g, m->dup, a->xn2, G(m, p->up), R, F, C, 1);
        op_rmsnorm_backward(g, m->dxn, a->x2, W(m, p->norm2), a->rstd2, m->dres, G(m, p->norm2), R, C);
    } else {
        op_gelu_backward(g, a->up, m->dh, m->dup, RF);
        op_bias_backward(g, m->dup, G(m, p->bup), R, F);
        op_matmul_nn(g, m->dup, W(m, p->up), m->dxn, R, F, C, 0);
        op_matmul_tn(g, m->dup, a->xn2, G(m, p->up), R, F, C, 1);
        op_layernorm_backward(g, m->dxn, a->x2, W(m, p->norm2), a->mean2, a->rstd2, m->dres, G(m, p->norm2),
                              G(m, p->norm2_b), R, C);
    }

    /* Attention: x2 = x + att·Woᵀ (+ b); dres is now d(x2). */
    op_matmul_nn(g, m->dres, W(m, p->wo), m->datt, R, C, C, 0);
    op_matmul_tn(g, m->dres, a->att, G(m, p->wo), R, C, C, 1);
    if (p->bo >= 0)
        op_bias_backward(g, m->dres, G(m, p->bo), R, C);
    struct op_attention_shape s = model_attention_shape(m);
    struct gpu_buffer *doc = m->has_doc ? m->doc_ids : NULL;
    if (c->arch == MODEL_LLAMA) {
        gpu_zero(g, m->dq);
        gpu_zero(g, m->dk);
        gpu_zero(g, m->dv);
        op_flash_attention_backward(g, &s, a->q, a->k, a->v, doc, a->att, a->lse, m->datt, m->att_stats, m->dq, m->dk,
                                    m->dv);
        op_rope(g, m->dq, m->positions, m->rope_table, R, c->n_heads, hd, c->max_seq_len, 1);
        op_rope(g, m->dk, m->positions, m->rope_table, R, c->n_kv_heads, hd, c->max_seq_len, 1);
        if (p->bq >= 0) { /* the biases are added before RoPE: their gradients are the rotated-back ones */
            op_bias_backward(g, m->dq, G(m, p->bq), R, C);
            op_bias_backward(g, m->dk, G(m, p->bk), R, kv);
            op_bias_backward(g, m->dv, G(m, p->bv), R, kv);
        }
        op_matmul_nn(g, m->dq, W(m, p->wq), m->dxn, R, C, C, 0);
        op_matmul_nn(g, m->dk, W(m, p->wk), m->dxn, R, kv, C, 1);
        op_matmul_nn(g, m->dv, W(m, p->wv), m->dxn, R, kv, C, 1);
        op_matmul_tn(g, m->dq, a->xn, G(m, p->wq), R, C, C, 1);
        op_matmul_tn(g, m->dk, a->xn, G(m, p->wk), R, kv, C, 1);
        op_matmul_tn(g, m->dv, a->xn, G(m, p->wv), R, kv, C, 1);
        op_rmsnorm_backward(g, m->dxn, a->x, W(m, p->norm1), a->rstd1, m->dres, G(m, p->norm1), R, C);
    } else {
        gpu_zero(g, m->dqkv);
        op_flash_attention_backward(g, &s, a->qkv, a->qkv, a->qkv, doc, a->att, a->lse, m->datt, m->att_stats,
                                    m->dqkv, m->dqkv, m->dqkv);
        op_bias_backward(g, m->dqkv, G(m, p->bqkv), R, 3 * C);
        op_matmul_nn(g, m->dqkv, W(m, p->wqkv), m->dxn, R, 3 * C, C, 0);
        op_matmul_tn(g, m->dqkv, a->xn, G(m, p->wqkv), R, 3 * C, C, 1);
        op_layernorm_backward(g, m->dxn, a->x, W(m, p->norm1), a->mean1, a->rstd1, m->dres, G(m, p->norm1),
                              G(m, p->norm1_b), R, C);
    }
}

int model_backward_stages(const struct model *m) { return (int)m->c.n_layers + 2; }

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
            op_layernorm_backward(g, m->dxn, m->x_final, W(m, m->norm_f), m->mean_f, m->rstd_f, m->dres,
                                  G(m, m->norm_f), G(m, m->norm_f_b), R, C);
        else
            op_rmsnorm_backward(g, m->dxn, m->x_final, W(m, m->norm_f), m->rstd_f, m->dres, G(m, m->norm_f), R, C);
    } else if (stage <= (int)c->n_layers) {
        layer_backward(m, c->n_layers - (uint32_t)stage);
    } else {
        op_embedding_backward(g, m->tokens, m->dres, G(m, m->embed), R, C, V);
        if (c->arch == MODEL_GPT2)
            op_embedding_backward(g, m->positions, m->dres, G(m, m->pos_embed), R, C, c->max_seq_len);
    }
}

void model_backward(struct model *m)
{
    for (int s = 0; s < model_backward_stages(m); s++)
        model_backward_stage(m, s);
}
