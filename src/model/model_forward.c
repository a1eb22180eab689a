/* model_forward: records the forward pass of one micro-batch, ending in
 * the masked cross-entropy fused with its backward, for both
 * architectures. Pre-norm blocks; the residual stream of each layer is
 * kept (la[l].x) for the backward. The LM head, the cross-entropy and the
 * head's backward (dxf into m->dxn, the head's weight gradient) run over
 * chunks of head_rows rows, reusing one logits buffer. */
#include <string.h>

#include "model_internal.h"
#include "vktrain/ops.h"
#include "vktrain/util.h"

static void upload_batch(struct model *m, const struct model_batch *b)
{
    size_t rows = (size_t)b->B * b->T, bytes = rows * sizeof(int32_t);
    if (!m->max_rows)
        vkt_fatal("model: model_forward needs a model created with batch > 0 (this one holds weights only)");
    if (rows > m->max_rows || b->T > m->c.max_seq_len)
        vkt_fatal("model: a batch of %u x %u tokens exceeds the %u x %u the model was sized for", b->B, b->T,
                  m->max_rows / m->c.max_seq_len, m->c.max_seq_len);
    uint32_t last = 0;
    for (size_t i = 0; i < rows; i++) {
        if (b->positions[i] > 0 && (uint32_t)b->positions[i] > last)
            last = (uint32_t)b->positions[i];
        if (b->tokens[i] < 0 || (uint32_t)b->tokens[i] >= m->c.vocab_size)
            vkt_fatal("model: token %d at row %zu is outside the vocabulary [0, %u)", b->tokens[i], i, m->c.vocab_size);
        if (b->positions[i] < 0 || (uint32_t)b->positions[i] >= m->c.max_seq_len)
            vkt_fatal("model: position %d at row %zu is outside [0, %u)", b->positions[i], i, m->c.max_seq_len);
    }
    struct gpu_copy arrays[4] = {
        {m->tokens, 0, b->tokens, bytes},
        {m->labels, 0, b->labels, bytes},
        {m->positions, 0, b->positions, bytes},
        {m->doc_ids, 0, b->doc_ids, bytes},
    };
    m->rope_use_long = model_rope_long(m, last);
    m->has_doc = b->doc_ids != NULL;
    gpu_upload_batch(m->g, arrays, m->has_doc ? 4 : 3); /* one staged copy on a discrete GPU */
    m->last = *b;
}

/* The adapter of slot s, where the run records adapters. */
static void lora(struct model *m, const struct layer_run *run, uint32_t l, enum lora_slot s, struct gpu_buffer *x,
                 struct gpu_buffer *y, uint32_t out, uint32_t in)
{
    if (run->adapters)
        model_lora_forward(m, l, s, x, y, out, in);
}

/* y (+)= x·Wᵀ (W the parameter w), slot s's adapter where the run
 * records one, then the bias b (< 0: none). Without an adapter between,
 * the bias joins the product (op_matmul_nt_bias: the bits of the pass
 * after it). */
static void linear(struct model *m, const struct layer_run *run, uint32_t l, enum lora_slot s, struct gpu_buffer *x,
                   int w, int b, struct gpu_buffer *y, uint32_t out, uint32_t in, int accumulate)
{
    struct gpu_buffer *bias = b >= 0 ? weight(m, b) : NULL;
    int adapted = run->adapters && m->lp[l].lora_a[s] >= 0;
    op_matmul_nt_bias(m->g, x, weight(m, w), adapted ? NULL : bias, y, run->rows, out, in, accumulate);
    lora(m, run, l, s, x, y, out, in);
    if (adapted && bias)
        op_bias_add(m->g, bias, y, run->rows, out);
}

/* The residual stream into dst before a sublayer adds to it: a copy of
 * src, or nothing where the sublayer adds in place (dst == src). */
static void residual(struct gpu *g, struct gpu_buffer *src, struct gpu_buffer *dst, size_t n)
{
    if (dst != src)
        op_copy(g, src, dst, n);
}

void model_layer_record(struct model *m, uint32_t l, const struct layer_run *run, struct gpu_buffer *out)
{
    const struct model_config *c = &m->c;
    struct layer_params *p = &m->lp[l];
    struct layer_acts *a = run->a;
    struct gpu *g = m->g;
    uint32_t R = run->rows, C = c->dim, F = c->hidden_dim, hd = model_head_dim(c);
    uint32_t qd = c->n_heads * hd, kv = c->n_kv_heads * hd;

    if (c->arch == MODEL_LLAMA) {
        op_rmsnorm(g, a->x, norm_w(m, p->norm1), a->xn, a->rstd1, R, C, c->norm_eps);
        /* qk_norm: the projections into q_pre and k_pre, then each head's
         * RMSNorm (rows of hd) into q and k */
        linear(m, run, l, LS_Q, a->xn, p->wq, p->bq, c->qk_norm ? a->q_pre : a->q, qd, C, 0);
        linear(m, run, l, LS_K, a->xn, p->wk, p->bk, c->qk_norm ? a->k_pre : a->k, kv, C, 0);
        linear(m, run, l, LS_V, a->xn, p->wv, p->bv, a->v, kv, C, 0);
        if (c->qk_norm) {
            op_rmsnorm(g, a->q_pre, norm_w(m, p->q_norm), a->q, a->rstd_q, R * c->n_heads, hd, c->norm_eps);
            op_rmsnorm(g, a->k_pre, norm_w(m, p->k_norm), a->k, a->rstd_k, R * c->n_kv_heads, hd, c->norm_eps);
        }
        if (model_layer_rope(c, l)) {
            uint32_t rot = model_rotary_dim(c);
            op_rope(g, a->q, run->positions, model_rope(m, l), R, c->n_heads, hd, rot, c->max_seq_len, 0);
            op_rope(g, a->k, run->positions, model_rope(m, l), R, c->n_kv_heads, hd, rot, c->max_seq_len, 0);
        }
        /* query_pre_attn_scalar: the attention scales by head_dim^-1/2 */
        float qs = model_query_scale(c);
        if (qs != 1.0f)
            op_scale(g, a->q, qs, (size_t)R * qd);
    } else {
        op_layernorm(g, a->x, weight(m, p->norm1), weight(m, p->norm1_b), a->xn, a->mean1, a->rstd1, R, C, c->norm_eps);
        linear(m, run, l, LS_QKV, a->xn, p->wqkv, p->bqkv, a->qkv, 3 * C, C, 0);
    }
    run->attend(m, l, a, run->ctx);
    struct gpu_buffer *normed = a->post ? a->post : m->post_tmp;
    if (c->post_norms) { /* x2 = x + norm(att·Woᵀ) */
        linear(m, run, l, LS_O, a->att, p->wo, p->bo, a->attn_o, C, qd, 0);
        op_rmsnorm(g, a->attn_o, norm_w(m, p->post1), normed, a->rstd_p1, R, C, c->norm_eps);
        op_add(g, a->x, normed, a->x2, (size_t)R * C);
    } else { /* x2 = x + att·Woᵀ (+ b) */
        residual(g, a->x, a->x2, (size_t)R * C);
        linear(m, run, l, LS_O, a->att, p->wo, p->bo, a->x2, C, qd, 1);
    }

    if (c->arch == MODEL_LLAMA) {
        op_rmsnorm(g, a->x2, norm_w(m, p->norm2), a->xn2, a->rstd2, R, C, c->norm_eps);
        linear(m, run, l, LS_GATE, a->xn2, p->gate, p->bgate, a->gate, F, C, 0);
        linear(m, run, l, LS_UP, a->xn2, p->up, p->bup, a->up, F, C, 0);
        if (c->mlp_gelu)
            op_geglu(g, a->gate, a->up, a->h, (size_t)R * F);
        else
            op_swiglu(g, a->gate, a->up, a->h, (size_t)R * F);
    } else {
        op_layernorm(g, a->x2, weight(m, p->norm2), weight(m, p->norm2_b), a->xn2, a->mean2, a->rstd2, R, C,
                     c->norm_eps);
        linear(m, run, l, LS_UP, a->xn2, p->up, p->bup, a->up, F, C, 0);
        op_gelu(g, a->up, a->h, (size_t)R * F);
    }
    if (c->post_norms) { /* out = x2 + norm(h·Wdownᵀ); the recompute needs the norm's input and rstd too */
        linear(m, run, l, LS_DOWN, a->h, p->down, p->bdown, a->mlp_o, C, F, 0);
        op_rmsnorm(g, a->mlp_o, norm_w(m, p->post2), normed, a->rstd_p2, R, C, c->norm_eps);
        if (out)
            op_add(g, a->x2, normed, out, (size_t)R * C);
        return;
    }
    if (!out) { /* the recompute: the backward reads the adapter's u too */
        lora(m, run, l, LS_DOWN, a->h, NULL, C, F);
        return;
    }
    /* out = x2 + h·Wdownᵀ (+ b) */
    residual(g, a->x2, out, (size_t)R * C);
    linear(m, run, l, LS_DOWN, a->h, p->down, p->bdown, out, C, F, 1);
}

/* The training forward's attention: flash attention over the batch. */
static void attend_batch(struct model *m, uint32_t l, struct layer_acts *a, void *ctx)
{
    struct op_attention_shape s = model_attention_shape(m, l);
    struct gpu_buffer *doc = m->has_doc ? m->doc_ids : NULL;
    if (m->c.arch == MODEL_LLAMA)
        op_flash_attention(m->g, &s, a->q, a->k, a->v, doc, a->lse, a->att);
    else /* views into the fused (rows, 3C) c_attn output */
        op_flash_attention(m->g, &s, a->qkv, a->qkv, a->qkv, doc, a->lse, a->att);
}

void model_layer_forward(struct model *m, uint32_t l, struct gpu_buffer *out)
{
    struct layer_run run = {.a = model_layer_acts(m, l),
                            .rows = m->last.B * m->last.T,
                            .positions = m->positions,
                            .adapters = 1,
                            .attend = attend_batch};
    model_layer_record(m, l, &run, out);
}

void model_forward(struct model *m, const struct model_batch *b, float scale)
{
    upload_batch(m, b);
    m->lora_drop = m->c.lora_dropout > 0 && scale != 0.0f; /* training only */
    const struct model_config *c = &m->c;
    struct gpu *g = m->g;
    uint32_t R = b->B * b->T, C = c->dim, V = c->vocab_size;
    struct gpu_buffer *x0 = c->n_layers ? m->la[0].x : m->x_final;
    int gpt2 = c->arch == MODEL_GPT2;
    model_norm_weights(m);
    op_embedding(g, m->tokens, gpt2 ? m->positions : NULL, weight(m, m->embed), gpt2 ? weight(m, m->pos_embed) : NULL,
                 x0, R, C, V, c->max_seq_len);
    if (c->embed_scale) /* Gemma: the embeddings times √dim */
        op_scale(g, x0, c->embed_scale, (size_t)R * C);
    for (uint32_t l = 0; l < c->n_layers; l++)
        model_layer_forward(m, l, l + 1 < c->n_layers ? m->la[l + 1].x : m->x_final);
    if (gpt2)
        op_layernorm(g, m->x_final, weight(m, m->norm_f), weight(m, m->norm_f_b), m->xf, m->mean_f, m->rstd_f, R, C,
                     c->norm_eps);
    else
        op_rmsnorm(g, m->x_final, norm_w(m, m->norm_f), m->xf, m->rstd_f, R, C, c->norm_eps);
    m->last_scale = scale;
    uint32_t ld = m->logits_ld; /* floats between rows of the logits */
    for (uint32_t r0 = 0; r0 < R; r0 += m->head_rows) {
        uint32_t n = R - r0 < m->head_rows ? R - r0 : m->head_rows;
        size_t at = (size_t)r0 * C; /* xf / dxf rows r0 .. r0 + n − 1 */
        op_matmul_nt_at(g, m->xf, weight(m, m->lm_head), m->logits, n, V, C, 0, (size_t[3]){at, 0, 0},
                        (uint32_t[3]){0, 0, ld});
        if (m->keep_logits)
            op_copy_to(g, m->logits, m->logits_kept, (size_t)r0 * ld, (size_t)n * ld);
        op_cross_entropy_capped(g, m->logits, m->labels, m->row_loss, m->row_count, r0, n, V, ld, scale,
                                m->c.final_softcap);
        if (scale == 0.0f)
            continue;
        /* m->logits holds dlogits: dxf = dlogits·Wlm, dWlm += dlogitsᵀ·xf */
        op_matmul_nn_at(g, m->logits, weight(m, m->lm_head), m->dxn, n, V, C, 0, (size_t[3]){0, 0, at},
                        (uint32_t[3]){ld, 0, 0});
        struct gpu_buffer *dw = m->head_grad ? m->head_grad : grad(m, m->lm_head);
        if (dw) /* else frozen (LoRA) */
            op_matmul_tn_at(g, m->logits, m->xf, dw, n, V, C, 1, (size_t[3]){0, at, 0}, (uint32_t[3]){ld, 0, 0});
    }
    /* (loss sum, valid count) of this micro-batch, added to the step's total
     * on the device in micro-batch order: deterministic, one read per step. */
    op_sum(g, m->row_loss, R, m->scratch, m->stats, 0);
    op_sum(g, m->row_count, R, m->scratch, m->stats, 1);
    op_axpy(g, 1.0f, m->stats, m->loss_acc, 2);
}
