/*
 * ref_model.c — the reference model's parameter table and memory (declared in
 * ref_model.h): one function walks the architecture's tensors in Hugging Face
 * order and both sizes and points them, like llm.c's fill_in_parameter_sizes /
 * malloc_and_point_parameters; another does the same for the activations of a
 * batch. Then the forward and backward passes, one function per layer kind
 * and architecture, reading top to bottom like the Hugging Face modules.
 */
#include "ref_model.h"

#include "ref_ops.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the parameter table ------------------------------------------------ */

/* Adds one tensor. On the sizing pass (m->params_memory == NULL) it only
 * counts; on the pointing pass it fills the table entry and points *wslot
 * and *gslot into the parameter and gradient blocks. */
static void param_add(struct ref_model *m, double **wslot, double **gslot, enum ref_param_init init, int d0, int d1,
                      const char *fmt, ...)
{
    size_t numel = (size_t)d0 * (d1 > 0 ? (size_t)d1 : 1);
    if (m->params_memory) {
        struct ref_param *p = &m->params[m->n_params];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->hf_name, sizeof p->hf_name, fmt, ap);
        va_end(ap);
        p->ndim = d1 > 0 ? 2 : 1;
        p->shape[0] = d0;
        p->shape[1] = d1 > 0 ? d1 : 0;
        p->numel = numel;
        p->init = init;
        p->data = m->params_memory + m->num_parameters;
        p->grad = m->grads_memory + m->num_parameters;
        *wslot = p->data;
        *gslot = p->grad;
    }
    m->n_params++;
    m->num_parameters += numel;
}

static void llama_params(struct ref_model *m)
{
    const struct ref_model_config *c = &m->cfg;
    int C = c->dim, F = c->hidden_dim, V = c->vocab;
    int qdim = c->n_heads * m->head_dim, kvdim = c->n_kv_heads * m->head_dim;
    param_add(m, &m->w.wte, &m->g.wte, REF_INIT_NORMAL, V, C, "model.embed_tokens.weight");
    for (int l = 0; l < c->n_layers; l++) {
        struct ref_layer_weights *lw = &m->w.layers[l], *lg = &m->g.layers[l];
        const char *pre = "model.layers";
        param_add(m, &lw->norm1_w, &lg->norm1_w, REF_INIT_ONES, C, 0, "%s.%d.input_layernorm.weight", pre, l);
        param_add(m, &lw->wq, &lg->wq, REF_INIT_NORMAL, qdim, C, "%s.%d.self_attn.q_proj.weight", pre, l);
        param_add(m, &lw->wk, &lg->wk, REF_INIT_NORMAL, kvdim, C, "%s.%d.self_attn.k_proj.weight", pre, l);
        param_add(m, &lw->wv, &lg->wv, REF_INIT_NORMAL, kvdim, C, "%s.%d.self_attn.v_proj.weight", pre, l);
        param_add(m, &lw->wo, &lg->wo, REF_INIT_NORMAL, C, qdim, "%s.%d.self_attn.o_proj.weight", pre, l);
        param_add(m, &lw->norm2_w, &lg->norm2_w, REF_INIT_ONES, C, 0, "%s.%d.post_attention_layernorm.weight", pre, l);
        param_add(m, &lw->w_gate, &lg->w_gate, REF_INIT_NORMAL, F, C, "%s.%d.mlp.gate_proj.weight", pre, l);
        param_add(m, &lw->w_up, &lg->w_up, REF_INIT_NORMAL, F, C, "%s.%d.mlp.up_proj.weight", pre, l);
        param_add(m, &lw->w_down, &lg->w_down, REF_INIT_NORMAL, C, F, "%s.%d.mlp.down_proj.weight", pre, l);
    }
    param_add(m, &m->w.normf_w, &m->g.normf_w, REF_INIT_ONES, C, 0, "model.norm.weight");
    if (!c->tied) {
        param_add(m, &m->w.lm_head, &m->g.lm_head, REF_INIT_NORMAL, V, C, "lm_head.weight");
    }
}

static void gpt2_params(struct ref_model *m)
{
    const struct ref_model_config *c = &m->cfg;
    int C = c->dim, F = c->hidden_dim, V = c->vocab;
    param_add(m, &m->w.wte, &m->g.wte, REF_INIT_NORMAL, V, C, "wte.weight");
    param_add(m, &m->w.wpe, &m->g.wpe, REF_INIT_NORMAL, c->max_seq_len, C, "wpe.weight");
    for (int l = 0; l < c->n_layers; l++) {
        struct ref_layer_weights *lw = &m->w.layers[l], *lg = &m->g.layers[l];
        param_add(m, &lw->norm1_w, &lg->norm1_w, REF_INIT_ONES, C, 0, "h.%d.ln_1.weight", l);
        param_add(m, &lw->norm1_b, &lg->norm1_b, REF_INIT_ZEROS, C, 0, "h.%d.ln_1.bias", l);
        param_add(m, &lw->wqkv, &lg->wqkv, REF_INIT_NORMAL, C, 3 * C, "h.%d.attn.c_attn.weight", l);
        param_add(m, &lw->bqkv, &lg->bqkv, REF_INIT_ZEROS, 3 * C, 0, "h.%d.attn.c_attn.bias", l);
        param_add(m, &lw->wo, &lg->wo, REF_INIT_NORMAL, C, C, "h.%d.attn.c_proj.weight", l);
        param_add(m, &lw->bo, &lg->bo, REF_INIT_ZEROS, C, 0, "h.%d.attn.c_proj.bias", l);
        param_add(m, &lw->norm2_w, &lg->norm2_w, REF_INIT_ONES, C, 0, "h.%d.ln_2.weight", l);
        param_add(m, &lw->norm2_b, &lg->norm2_b, REF_INIT_ZEROS, C, 0, "h.%d.ln_2.bias", l);
        param_add(m, &lw->w_fc, &lg->w_fc, REF_INIT_NORMAL, C, F, "h.%d.mlp.c_fc.weight", l);
        param_add(m, &lw->b_fc, &lg->b_fc, REF_INIT_ZEROS, F, 0, "h.%d.mlp.c_fc.bias", l);
        param_add(m, &lw->w_proj, &lg->w_proj, REF_INIT_NORMAL, F, C, "h.%d.mlp.c_proj.weight", l);
        param_add(m, &lw->b_proj, &lg->b_proj, REF_INIT_ZEROS, C, 0, "h.%d.mlp.c_proj.bias", l);
    }
    param_add(m, &m->w.normf_w, &m->g.normf_w, REF_INIT_ONES, C, 0, "ln_f.weight");
    param_add(m, &m->w.normf_b, &m->g.normf_b, REF_INIT_ZEROS, C, 0, "ln_f.bias");
}

/* One walk over the architecture's tensors (sizing or pointing pass). */
static void model_params(struct ref_model *m)
{
    m->n_params = 0;
    m->num_parameters = 0;
    if (m->cfg.arch == REF_ARCH_LLAMA) {
        llama_params(m);
    } else {
        gpt2_params(m);
    }
}

static int config_error(const char *what)
{
    fprintf(stderr, "ref_model_init: %s\n", what);
    return -1;
}

static int config_check(const struct ref_model_config *c)
{
    if (c->arch != REF_ARCH_LLAMA && c->arch != REF_ARCH_GPT2)
        return config_error("unknown arch");
    if (c->vocab <= 0 || c->dim <= 0 || c->n_layers < 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
        c->hidden_dim <= 0 || c->max_seq_len <= 0) {
        return config_error("sizes must be positive");
    }
    if (c->dim % c->n_heads != 0)
        return config_error("n_heads must divide dim");
    if (c->n_heads % c->n_kv_heads != 0)
        return config_error("n_kv_heads must divide n_heads");
    if (c->norm_eps < 0)
        return config_error("norm_eps must be >= 0");
    if (c->arch == REF_ARCH_LLAMA && (c->dim / c->n_heads) % 2 != 0) {
        return config_error("llama head_dim must be even (RoPE)");
    }
    if (c->arch == REF_ARCH_LLAMA && c->rope_theta <= 0)
        return config_error("rope_theta must be > 0");
    if (c->arch == REF_ARCH_GPT2 && c->n_kv_heads != c->n_heads) {
        return config_error("gpt2 needs n_kv_heads == n_heads");
    }
    if (c->arch == REF_ARCH_GPT2 && !c->tied)
        return config_error("gpt2 lm head is always tied");
    return 0;
}

int ref_model_init(struct ref_model *m, const struct ref_model_config *cfg)
{
    memset(m, 0, sizeof *m);
    if (config_check(cfg) != 0)
        return -1;
    m->cfg = *cfg;
    m->head_dim = cfg->dim / cfg->n_heads;
    int L = cfg->n_layers;
    m->w.layers = calloc((size_t)(L > 0 ? L : 1), sizeof *m->w.layers);
    m->g.layers = calloc((size_t)(L > 0 ? L : 1), sizeof *m->g.layers);

    model_params(m); // sizing pass
    m->params = calloc((size_t)m->n_params, sizeof *m->params);
    m->params_memory = calloc(m->num_parameters, sizeof(double));
    m->grads_memory = calloc(m->num_parameters, sizeof(double));
    if (!m->w.layers || !m->g.layers || !m->params || !m->params_memory || !m->grads_memory) {
        ref_model_free(m);
        return config_error("out of memory");
    }
    model_params(m); // pointing pass
    if (cfg->tied) {
        m->w.lm_head = m->w.wte;
        m->g.lm_head = m->g.wte;
    }
    return 0;
}

struct ref_param *ref_model_param(struct ref_model *m, const char *hf_name)
{
    for (int i = 0; i < m->n_params; i++) {
        if (strcmp(m->params[i].hf_name, hf_name) == 0)
            return &m->params[i];
    }
    return NULL;
}

void ref_model_randomize(struct ref_model *m, uint64_t seed, double std)
{
    struct ref_rng rng;
    ref_rng_seed(&rng, seed);
    for (int i = 0; i < m->n_params; i++) {
        struct ref_param *p = &m->params[i];
        double base = p->init == REF_INIT_ONES ? 1.0 : 0.0;
        for (size_t j = 0; j < p->numel; j++) {
            p->data[j] = base + std * ref_rng_normal(&rng);
        }
    }
}

void ref_model_zero_grad(struct ref_model *m)
{
    memset(m->grads_memory, 0, m->num_parameters * sizeof(double));
}

/* ---- activations -------------------------------------------------------- */

/* Adds one activation of n elements at *off; points *slot when mem is set. */
static void act_add(double **slot, size_t n, double *mem, size_t *off)
{
    if (n == 0)
        return;
    if (mem)
        *slot = mem + *off;
    *off += n;
}

/* Sizes (mem == NULL) or points the activations of a B×T batch; returns the
 * total number of elements. Tensors the architecture lacks stay NULL. */
static size_t acts_walk(const struct ref_model *m, struct ref_acts *a, double *mem, int B, int T)
{
    const struct ref_model_config *c = &m->cfg;
    size_t N = (size_t)B * T, C = (size_t)c->dim, F = (size_t)c->hidden_dim;
    size_t qdim = (size_t)c->n_heads * m->head_dim, kvdim = (size_t)c->n_kv_heads * m->head_dim;
    int llama = c->arch == REF_ARCH_LLAMA;
    size_t off = 0;
    act_add(&a->encoded, N * C, mem, &off);
    for (int l = 0; l < c->n_layers; l++) {
        struct ref_layer_acts *la = &a->layers[l];
        act_add(&la->norm1, N * C, mem, &off);
        act_add(&la->mean1, llama ? 0 : N, mem, &off);
        act_add(&la->rstd1, N, mem, &off);
        act_add(&la->qkv, llama ? 0 : N * 3 * C, mem, &off);
        act_add(&la->q_pre, llama ? N * qdim : 0, mem, &off);
        act_add(&la->k_pre, llama ? N * kvdim : 0, mem, &off);
        act_add(&la->q, N * qdim, mem, &off);
        act_add(&la->k, N * kvdim, mem, &off);
        act_add(&la->v, N * kvdim, mem, &off);
        act_add(&la->probs, (size_t)B * c->n_heads * T * T, mem, &off);
        act_add(&la->att, N * qdim, mem, &off);
        act_add(&la->attproj, N * C, mem, &off);
        act_add(&la->res1, N * C, mem, &off);
        act_add(&la->norm2, N * C, mem, &off);
        act_add(&la->mean2, llama ? 0 : N, mem, &off);
        act_add(&la->rstd2, N, mem, &off);
        act_add(&la->fc, N * F, mem, &off);
        act_add(&la->up, llama ? N * F : 0, mem, &off);
        act_add(&la->hid, N * F, mem, &off);
        act_add(&la->mlp, N * C, mem, &off);
        act_add(&la->res2, N * C, mem, &off);
    }
    act_add(&a->normf, N * C, mem, &off);
    act_add(&a->meanf, llama ? 0 : N, mem, &off);
    act_add(&a->rstdf, N, mem, &off);
    act_add(&a->logits, N * (size_t)c->vocab, mem, &off);
    return off;
}

static void acts_free(struct ref_model *m)
{
    free(m->acts.layers);
    free(m->dacts.layers);
    free(m->acts_memory);
    free(m->dacts_memory);
    free(m->dlogits);
    free(m->tokens);
    free(m->positions);
    free(m->doc_ids);
    memset(&m->acts, 0, sizeof m->acts);
    memset(&m->dacts, 0, sizeof m->dacts);
    m->acts_memory = m->dacts_memory = m->dlogits = NULL;
    m->tokens = m->positions = m->doc_ids = NULL;
    m->B = m->T = 0;
    m->acts_size = 0;
    m->have_dlogits = 0;
}

/* (Re)allocates the activations, their gradients, dlogits and the batch
 * copies for a B×T batch. Returns 0 or −1. */
static int acts_ensure(struct ref_model *m, int B, int T)
{
    if (m->acts_memory && m->B == B && m->T == T)
        return 0;
    acts_free(m);
    size_t N = (size_t)B * T;
    int L = m->cfg.n_layers > 0 ? m->cfg.n_layers : 1;
    m->acts.layers = calloc((size_t)L, sizeof *m->acts.layers);
    m->dacts.layers = calloc((size_t)L, sizeof *m->dacts.layers);
    size_t total = acts_walk(m, &m->acts, NULL, B, T);
    m->acts_memory = calloc(total, sizeof(double));
    m->dacts_memory = calloc(total, sizeof(double));
    m->dlogits = calloc(N * (size_t)m->cfg.vocab, sizeof(double));
    m->tokens = calloc(N, sizeof(int32_t));
    m->positions = calloc(N, sizeof(int32_t));
    m->doc_ids = calloc(N, sizeof(int32_t));
    if (!m->acts.layers || !m->dacts.layers || !m->acts_memory || !m->dacts_memory || !m->dlogits || !m->tokens ||
        !m->positions || !m->doc_ids) {
        acts_free(m);
        fprintf(stderr, "ref_model: out of memory for a %d x %d batch\n", B, T);
        return -1;
    }
    acts_walk(m, &m->acts, m->acts_memory, B, T);
    acts_walk(m, &m->dacts, m->dacts_memory, B, T);
    m->acts_size = total;
    m->B = B;
    m->T = T;
    return 0;
}

void ref_model_free(struct ref_model *m)
{
    acts_free(m);
    free(m->params);
    free(m->params_memory);
    free(m->grads_memory);
    free(m->w.layers);
    free(m->g.layers);
    memset(m, 0, sizeof *m);
}

/* ---- forward and backward of one layer ---------------------------------- */

/* GPT-2's c_attn output (N,3C) holds [q | k | v] in each row; q, k, v are
 * (N,C) each, i.e. (N,H,hd) with head h at columns h*hd .. h*hd+hd−1. */
static void split_qkv_forward(double *q, double *k, double *v, const double *qkv, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const double *row = qkv + (size_t)n * 3 * C;
        for (int c = 0; c < C; c++) {
            q[(size_t)n * C + c] = row[c];
            k[(size_t)n * C + c] = row[C + c];
            v[(size_t)n * C + c] = row[2 * C + c];
        }
    }
}

static void split_qkv_backward(double *dqkv, const double *dq, const double *dk, const double *dv, int N, int C)
{
    for (int n = 0; n < N; n++) {
        double *row = dqkv + (size_t)n * 3 * C;
        for (int c = 0; c < C; c++) {
            row[c] += dq[(size_t)n * C + c];
            row[C + c] += dk[(size_t)n * C + c];
            row[2 * C + c] += dv[(size_t)n * C + c];
        }
    }
}

/* Shapes used by the layer functions. */
struct dims {
    int B, T, N, C, F, H, KVH, hd;
};

static struct dims model_dims(const struct ref_model *m)
{
    struct dims d = {m->B,       m->T, m->B * m->T, m->cfg.dim, m->cfg.hidden_dim, m->cfg.n_heads, m->cfg.n_kv_heads,
                     m->head_dim};
    return d;
}

/* x is the layer's input (N,C); its output is la->res2. */
static void llama_layer_forward(struct ref_model *m, int l, const double *x)
{
    struct dims d = model_dims(m);
    const struct ref_model_config *c = &m->cfg;
    const struct ref_layer_weights *lw = &m->w.layers[l];
    struct ref_layer_acts *la = &m->acts.layers[l];
    const int32_t *doc = m->has_doc_ids ? m->doc_ids : NULL;
    // x + o_proj(attention(rope(q), rope(k), v)) of rmsnorm(x)
    ref_rmsnorm_forward(la->norm1, la->rstd1, x, lw->norm1_w, d.N, d.C, c->norm_eps);
    ref_matmul_forward(la->q_pre, la->norm1, lw->wq, NULL, d.N, d.C, d.H * d.hd);
    ref_matmul_forward(la->k_pre, la->norm1, lw->wk, NULL, d.N, d.C, d.KVH * d.hd);
    ref_matmul_forward(la->v, la->norm1, lw->wv, NULL, d.N, d.C, d.KVH * d.hd);
    if (c->nope_layers >> l & 1) { // no RoPE: q and k as projected
        memcpy(la->q, la->q_pre, sizeof(double) * (size_t)d.N * d.H * d.hd);
        memcpy(la->k, la->k_pre, sizeof(double) * (size_t)d.N * d.KVH * d.hd);
    } else {
        ref_rope_forward(la->q, la->q_pre, m->positions, d.N, d.H, d.hd, c->rope_theta);
        ref_rope_forward(la->k, la->k_pre, m->positions, d.N, d.KVH, d.hd, c->rope_theta);
    }
    ref_attention_forward_window(la->att, la->probs, la->q, la->k, la->v, doc, d.B, d.T, d.H, d.KVH, d.hd,
                                 c->full_layers >> l & 1 ? 0 : c->sliding_window);
    ref_matmul_forward(la->attproj, la->att, lw->wo, NULL, d.N, d.H * d.hd, d.C);
    ref_residual_forward(la->res1, x, la->attproj, (size_t)d.N * d.C);
    // res1 + down_proj(silu(gate_proj(·)) ⊙ up_proj(·)) of rmsnorm(res1)
    ref_rmsnorm_forward(la->norm2, la->rstd2, la->res1, lw->norm2_w, d.N, d.C, c->norm_eps);
    ref_matmul_forward(la->fc, la->norm2, lw->w_gate, NULL, d.N, d.C, d.F);
    ref_matmul_forward(la->up, la->norm2, lw->w_up, NULL, d.N, d.C, d.F);
    ref_swiglu_forward(la->hid, la->fc, la->up, (size_t)d.N * d.F);
    ref_matmul_forward(la->mlp, la->hid, lw->w_down, NULL, d.N, d.F, d.C);
    ref_residual_forward(la->res2, la->res1, la->mlp, (size_t)d.N * d.C);
}

/* The gradient of the layer's output is in dacts.layers[l].res2; adds the
 * gradient of its input x into dx, and its weight gradients into m->g. */
static void llama_layer_backward(struct ref_model *m, int l, const double *x, double *dx)
{
    struct dims d = model_dims(m);
    const struct ref_model_config *c = &m->cfg;
    const struct ref_layer_weights *lw = &m->w.layers[l];
    struct ref_layer_weights *lg = &m->g.layers[l];
    const struct ref_layer_acts *la = &m->acts.layers[l];
    struct ref_layer_acts *da = &m->dacts.layers[l];
    // MLP block
    ref_residual_backward(da->res1, da->mlp, da->res2, (size_t)d.N * d.C);
    ref_matmul_backward(da->hid, lg->w_down, NULL, da->mlp, la->hid, lw->w_down, d.N, d.F, d.C);
    ref_swiglu_backward(da->fc, da->up, da->hid, la->fc, la->up, (size_t)d.N * d.F);
    ref_matmul_backward(da->norm2, lg->w_gate, NULL, da->fc, la->norm2, lw->w_gate, d.N, d.C, d.F);
    ref_matmul_backward(da->norm2, lg->w_up, NULL, da->up, la->norm2, lw->w_up, d.N, d.C, d.F);
    ref_rmsnorm_backward(da->res1, lg->norm2_w, da->norm2, la->res1, lw->norm2_w, la->rstd2, d.N, d.C);
    // attention block
    ref_residual_backward(dx, da->attproj, da->res1, (size_t)d.N * d.C);
    ref_matmul_backward(da->att, lg->wo, NULL, da->attproj, la->att, lw->wo, d.N, d.H * d.hd, d.C);
    ref_attention_backward(da->q, da->k, da->v, da->att, la->probs, la->q, la->k, la->v, d.B, d.T, d.H, d.KVH, d.hd);
    if (c->nope_layers >> l & 1) { // accumulated, as ref_rope_backward does
        for (size_t i = 0; i < (size_t)d.N * d.H * d.hd; i++)
            da->q_pre[i] += da->q[i];
        for (size_t i = 0; i < (size_t)d.N * d.KVH * d.hd; i++)
            da->k_pre[i] += da->k[i];
    } else {
        ref_rope_backward(da->q_pre, da->q, m->positions, d.N, d.H, d.hd, c->rope_theta);
        ref_rope_backward(da->k_pre, da->k, m->positions, d.N, d.KVH, d.hd, c->rope_theta);
    }
    ref_matmul_backward(da->norm1, lg->wq, NULL, da->q_pre, la->norm1, lw->wq, d.N, d.C, d.H * d.hd);
    ref_matmul_backward(da->norm1, lg->wk, NULL, da->k_pre, la->norm1, lw->wk, d.N, d.C, d.KVH * d.hd);
    ref_matmul_backward(da->norm1, lg->wv, NULL, da->v, la->norm1, lw->wv, d.N, d.C, d.KVH * d.hd);
    ref_rmsnorm_backward(dx, lg->norm1_w, da->norm1, x, lw->norm1_w, la->rstd1, d.N, d.C);
}

static void gpt2_layer_forward(struct ref_model *m, int l, const double *x)
{
    struct dims d = model_dims(m);
    const struct ref_model_config *c = &m->cfg;
    const struct ref_layer_weights *lw = &m->w.layers[l];
    struct ref_layer_acts *la = &m->acts.layers[l];
    const int32_t *doc = m->has_doc_ids ? m->doc_ids : NULL;
    // x + attn.c_proj(attention(split(attn.c_attn(ln_1(x)))))
    ref_layernorm_forward(la->norm1, la->mean1, la->rstd1, x, lw->norm1_w, lw->norm1_b, d.N, d.C, c->norm_eps);
    ref_conv1d_forward(la->qkv, la->norm1, lw->wqkv, lw->bqkv, d.N, d.C, 3 * d.C);
    split_qkv_forward(la->q, la->k, la->v, la->qkv, d.N, d.C);
    ref_attention_forward_window(la->att, la->probs, la->q, la->k, la->v, doc, d.B, d.T, d.H, d.KVH, d.hd,
                                 m->cfg.sliding_window);
    ref_conv1d_forward(la->attproj, la->att, lw->wo, lw->bo, d.N, d.C, d.C);
    ref_residual_forward(la->res1, x, la->attproj, (size_t)d.N * d.C);
    // res1 + mlp.c_proj(gelu(mlp.c_fc(ln_2(res1))))
    ref_layernorm_forward(la->norm2, la->mean2, la->rstd2, la->res1, lw->norm2_w, lw->norm2_b, d.N, d.C, c->norm_eps);
    ref_conv1d_forward(la->fc, la->norm2, lw->w_fc, lw->b_fc, d.N, d.C, d.F);
    ref_gelu_forward(la->hid, la->fc, (size_t)d.N * d.F);
    ref_conv1d_forward(la->mlp, la->hid, lw->w_proj, lw->b_proj, d.N, d.F, d.C);
    ref_residual_forward(la->res2, la->res1, la->mlp, (size_t)d.N * d.C);
}

static void gpt2_layer_backward(struct ref_model *m, int l, const double *x, double *dx)
{
    struct dims d = model_dims(m);
    const struct ref_layer_weights *lw = &m->w.layers[l];
    struct ref_layer_weights *lg = &m->g.layers[l];
    const struct ref_layer_acts *la = &m->acts.layers[l];
    struct ref_layer_acts *da = &m->dacts.layers[l];
    // MLP block
    ref_residual_backward(da->res1, da->mlp, da->res2, (size_t)d.N * d.C);
    ref_conv1d_backward(da->hid, lg->w_proj, lg->b_proj, da->mlp, la->hid, lw->w_proj, d.N, d.F, d.C);
    ref_gelu_backward(da->fc, da->hid, la->fc, (size_t)d.N * d.F);
    ref_conv1d_backward(da->norm2, lg->w_fc, lg->b_fc, da->fc, la->norm2, lw->w_fc, d.N, d.C, d.F);
    ref_layernorm_backward(da->res1, lg->norm2_w, lg->norm2_b, da->norm2, la->res1, lw->norm2_w, la->mean2, la->rstd2,
                           d.N, d.C);
    // attention block
    ref_residual_backward(dx, da->attproj, da->res1, (size_t)d.N * d.C);
    ref_conv1d_backward(da->att, lg->wo, lg->bo, da->attproj, la->att, lw->wo, d.N, d.C, d.C);
    ref_attention_backward(da->q, da->k, da->v, da->att, la->probs, la->q, la->k, la->v, d.B, d.T, d.H, d.KVH, d.hd);
    split_qkv_backward(da->qkv, da->q, da->k, da->v, d.N, d.C);
    ref_conv1d_backward(da->norm1, lg->wqkv, lg->bqkv, da->qkv, la->norm1, lw->wqkv, d.N, d.C, 3 * d.C);
    ref_layernorm_backward(dx, lg->norm1_w, lg->norm1_b, da->norm1, x, lw->norm1_w, la->mean1, la->rstd1, d.N, d.C);
}

/* ---- the whole model ---------------------------------------------------- */

static int input_error(const char *what, int n, int32_t value)
{
    fprintf(stderr, "ref_model_forward: %s %d at index %d is out of range\n", what, (int)value, n);
    return -1;
}

int ref_model_forward(struct ref_model *m, int B, int T, const int32_t *tokens, const int32_t *labels,
                      const int32_t *positions, const int32_t *doc_ids, double scale, double *loss_sum, int *count)
{
    const struct ref_model_config *c = &m->cfg;
    if (B <= 0 || T <= 0) {
        fprintf(stderr, "ref_model_forward: bad batch shape %d x %d\n", B, T);
        return -1;
    }
    int N = B * T;
    for (int n = 0; n < N; n++) {
        int32_t pos = positions ? positions[n] : n % T;
        if (tokens[n] < 0 || tokens[n] >= c->vocab)
            return input_error("token id", n, tokens[n]);
        if (pos < 0 || pos >= c->max_seq_len)
            return input_error("position", n, pos);
    }
    if (acts_ensure(m, B, T) != 0)
        return -1;
    for (int n = 0; n < N; n++) {
        m->tokens[n] = tokens[n];
        m->positions[n] = positions ? positions[n] : n % T;
        m->doc_ids[n] = doc_ids ? doc_ids[n] : 0;
    }
    m->has_doc_ids = doc_ids != NULL;

    // embeddings (gpt2 adds learned positions; llama's wpe is NULL)
    ref_embedding_forward(m->acts.encoded, m->tokens, m->positions, m->w.wte, m->w.wpe, N, c->dim);
    const double *x = m->acts.encoded;
    for (int l = 0; l < c->n_layers; l++) {
        if (c->arch == REF_ARCH_LLAMA) {
            llama_layer_forward(m, l, x);
        } else {
            gpt2_layer_forward(m, l, x);
        }
        x = m->acts.layers[l].res2;
    }

    // final norm and lm head: logits = normf·lm_headᵀ, (N,V)
    if (c->arch == REF_ARCH_LLAMA) {
        ref_rmsnorm_forward(m->acts.normf, m->acts.rstdf, x, m->w.normf_w, N, c->dim, c->norm_eps);
    } else {
        ref_layernorm_forward(m->acts.normf, m->acts.meanf, m->acts.rstdf, x, m->w.normf_w, m->w.normf_b, N, c->dim,
                              c->norm_eps);
    }
    ref_matmul_forward(m->acts.logits, m->acts.normf, m->w.lm_head, NULL, N, c->dim, c->vocab);

    // masked cross-entropy: loss sum and count, and dlogits for the backward
    *loss_sum = 0.0;
    *count = 0;
    m->have_dlogits = labels != NULL;
    m->n_bad_labels = 0;
    if (labels) {
        m->n_bad_labels =
            ref_crossentropy_forward_backward(m->dlogits, loss_sum, count, m->acts.logits, labels, N, c->vocab, scale);
    }
    return 0;
}

int ref_model_backward(struct ref_model *m)
{
    if (!m->have_dlogits) {
        fprintf(stderr, "ref_model_backward: no forward with labels to differentiate\n");
        return -1;
    }
    const struct ref_model_config *c = &m->cfg;
    int N = m->B * m->T, L = c->n_layers;
    memset(m->dacts_memory, 0, m->acts_size * sizeof(double));

    // lm head and final norm; x is the last layer's output
    const double *x = L > 0 ? m->acts.layers[L - 1].res2 : m->acts.encoded;
    double *dx = L > 0 ? m->dacts.layers[L - 1].res2 : m->dacts.encoded;
    ref_matmul_backward(m->dacts.normf, m->g.lm_head, NULL, m->dlogits, m->acts.normf, m->w.lm_head, N, c->dim,
                        c->vocab);
    if (c->arch == REF_ARCH_LLAMA) {
        ref_rmsnorm_backward(dx, m->g.normf_w, m->dacts.normf, x, m->w.normf_w, m->acts.rstdf, N, c->dim);
    } else {
        ref_layernorm_backward(dx, m->g.normf_w, m->g.normf_b, m->dacts.normf, x, m->w.normf_w, m->acts.meanf,
                               m->acts.rstdf, N, c->dim);
    }

    for (int l = L - 1; l >= 0; l--) {
        const double *lx = l > 0 ? m->acts.layers[l - 1].res2 : m->acts.encoded;
        double *ldx = l > 0 ? m->dacts.layers[l - 1].res2 : m->dacts.encoded;
        if (c->arch == REF_ARCH_LLAMA) {
            llama_layer_backward(m, l, lx, ldx);
        } else {
            gpt2_layer_backward(m, l, lx, ldx);
        }
    }

    // embeddings: scatter-add (with tied weights, into the same dwte as the lm head)
    ref_embedding_backward(m->g.wte, m->g.wpe, m->dacts.encoded, m->tokens, m->positions, N, c->dim);
    return 0;
}
