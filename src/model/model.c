/* model: the parameter table, buffers and deterministic initialization
 * for the llama and gpt2 architectures (see include/vktrain/model.h).
 * The forward and backward recordings are in model_forward.c and
 * model_backward.c, the activation buffers in model_activations.c. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "vktrain/ops.h"
#include "vktrain/quant4.h"
#include "vktrain/repro.h"
#include "vktrain/util.h"

static int add_param(struct model *m, int transposed, enum model_init init, uint32_t d0, uint32_t d1, const char *fmt,
                     ...) VKT_PRINTF(6, 7);

/* d1 == 0: a vector of d0. Returns the index. */
static int add_param(struct model *m, int transposed, enum model_init init, uint32_t d0, uint32_t d1, const char *fmt,
                     ...)
{
    if (m->n_params == MODEL_MAX_PARAMS)
        vkt_fatal("model: more than %d parameter tensors", MODEL_MAX_PARAMS);
    struct model_param *p = &m->params[m->n_params];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->name, sizeof p->name, fmt, ap);
    va_end(ap);
    memcpy(p->hf, p->name, sizeof p->hf);
    p->hf_row0 = 0, p->hf_rows = d0;
    p->ndim = d1 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1;
    p->numel = (size_t)d0 * (d1 ? d1 : 1);
    p->decay = p->ndim >= 2;
    p->hf_transposed = transposed;
    p->init = init;
    p->stage = m->building_stage;
    p->adapter = m->adding_adapter;
    int trained = !m->c.lora_rank || p->adapter;
    /* base_dtype bf16: the frozen matrices, those the matmuls read and the
     * embedding tables (which a tied LM head shares); whole uints, as the
     * tiled matmul and the storage embedding kernel read them. */
    /* base_dtype nf4: the frozen matrices of the layers (stages 1 ..
     * n_layers) in NF4, the embeddings and an untied head in bf16. */
    /* A bitsandbytes folder's: frozen, LoRA or not (generate reads it). */
    p->q4 = m->c.base_nf4 && (!trained || (m->c.base_bnb4 && !p->adapter)) && p->ndim == 2 && p->stage >= 1 &&
            p->stage <= (int)m->c.n_layers;
    trained = trained && !p->q4;
    p->bf16 = m->c.base_bf16 && !trained && p->ndim == 2 && !p->q4;
    enum gpu_mem_category was = gpu_memory_category(m->g, GPU_MEM_PARAMETERS);
    size_t bytes = p->q4     ? q4_bytes(p->numel, NF4_BLOCK, m->c.base_nf4_double)
                   : p->bf16 ? (p->numel * 2 + 3) / 4 * 4
                             : p->numel * sizeof(float);
    p->w = gpu_buffer_create(m->g, bytes, p->name);
    if (p->bf16 || p->q4)
        gpu_buffer_set_dtype(p->w, p->q4 ? GPU_DTYPE_Q4 : GPU_DTYPE_BF16);
    if (p->q4)
        gpu_buffer_set_q4_flags(p->w, m->c.base_nf4_double ? Q4_FLAG_NESTED : 0);
    gpu_memory_category(m->g, GPU_MEM_GRADIENTS);
    p->grad = m->max_rows && trained ? gpu_buffer_create(m->g, p->numel * sizeof(float), p->name) : NULL;
    gpu_memory_category(m->g, was);
    if (trained)
        m->trained[m->n_trained++] = m->n_params;
    return m->n_params++;
}

/* Parameters first .. first + n - 1 (consecutive, of one width) as the
 * rows of one tensor hf of the files, in order (phi3's fused projections). */
static void fuse(struct model *m, int first, int n, const char *hf)
{
    uint32_t rows = 0;
    for (int i = first; i < first + n; i++)
        rows += m->params[i].shape[0];
    for (int i = first, row0 = 0; i < first + n; row0 += (int)m->params[i].shape[0], i++) {
        struct model_param *p = &m->params[i];
        snprintf(p->hf, sizeof p->hf, "%s", hf);
        p->hf_row0 = (uint32_t)row0, p->hf_rows = rows;
    }
}

/* "model.layers.0.self_attn.qkv_proj" of "model.layers.0.self_attn.qkv_proj.weight" */
static void module_of(char *out, size_t n, const struct model *m, const char *tensor)
{
    snprintf(out, n, "%s%.*s", m->c.arch == MODEL_GPT2 ? "transformer." : "", (int)(strlen(tensor) - strlen(".weight")),
             tensor);
}

/* PEFT's rule: a target names the module, or a suffix of its name after a dot. */
static int lora_matches(const char *module, const char *target)
{
    size_t n = strlen(module), k = strlen(target);
    return !strcmp(module, target) || (n > k && module[n - k - 1] == '.' && !strcmp(module + n - k, target));
}

/* LoRA's A (rank, in) and B (out, rank) for the linear weight `base` of
 * layer l when a target names its module (the fused tensor's, for a part of
 * one); matched[t] counts target t's. The parts of a fused weight share one
 * adapter, as PEFT adapts the fused module: the first part adds A (shared,
 * its gradient summed over the parts) and each part its rows of B. */
static void add_lora(struct model *m, uint32_t l, enum lora_slot slot, int base, int *matched)
{
    const struct model_config *c = &m->c;
    char module[128], split[128];
    struct model_param *w = &m->params[base];
    module_of(module, sizeof module, m, w->hf);
    module_of(split, sizeof split, m, w->name);
    int hit = 0;
    for (int t = 0; t < c->lora_n_targets; t++)
        if (lora_matches(module, c->lora_targets[t]))
            matched[t]++, hit = 1;
    if (!hit)
        return;
    uint32_t out = w->shape[0], in = w->shape[1], row0 = w->hf_row0, rows = w->hf_rows;
    struct layer_params *p = &m->lp[l];
    m->adding_adapter = 1;
    if (row0 == 0)
        p->lora_a[slot] = add_param(m, 0, INIT_LORA_A, c->lora_rank, in, "base_model.model.%s.lora_A.weight", module);
    else
        p->lora_a[slot] = p->lora_a[slot - 1]; /* the fused weight's parts are consecutive slots */
    p->lora_b[slot] = add_param(m, 0, INIT_ZEROS, out, c->lora_rank, "base_model.model.%s.lora_B.weight", split);
    if (rows != out) {
        struct model_param *b = &m->params[p->lora_b[slot]];
        snprintf(b->hf, sizeof b->hf, "base_model.model.%s.lora_B.weight", module);
        b->hf_row0 = row0, b->hf_rows = rows;
    }
    m->adding_adapter = 0;
}

static void add_layer_lora(struct model *m, uint32_t l, int *matched)
{
    struct layer_params *p = &m->lp[l];
    int base[LS_N];
    model_linear_slots(p, base);
    for (int s = 0; s < LS_N; s++)
        if (base[s] >= 0)
            add_lora(m, l, (enum lora_slot)s, base[s], matched);
}

static void check_lora_targets(const struct model *m, const int *matched)
{
    const struct model_config *c = &m->c;
    for (int t = 0; t < c->lora_n_targets; t++)
        if (!matched[t])
            vkt_fatal("lora.targets: '%s' names no linear layer of this %s model (%s)", c->lora_targets[t],
                      c->arch == MODEL_GPT2 ? "gpt2" : c->fused_proj ? "phi3" : "llama",
                      c->arch == MODEL_GPT2 ? "c_attn, c_proj (attn.c_proj, mlp.c_proj), c_fc"
                      : c->fused_proj       ? "qkv_proj, o_proj, gate_up_proj, down_proj"
                                            : "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj");
    if (c->lora_rank && !c->lora_n_targets)
        vkt_fatal("lora: rank %u with no targets", c->lora_rank);
}

static void build_table(struct model *m)
{
    const struct model_config *c = &m->c;
    uint32_t C = c->dim, V = c->vocab_size, F = c->hidden_dim, hd = model_head_dim(c);
    uint32_t qd = c->n_heads * hd, kv = c->n_kv_heads * hd;
    m->lp = vkt_calloc(c->n_layers, sizeof *m->lp, "layer table");
    int *matched = vkt_calloc((size_t)c->lora_n_targets + 1, sizeof *matched, "lora targets");
    m->pos_embed = m->norm_f_b = m->lm_head = -1;
    enum model_init norm_init = c->norm_offset ? INIT_ZEROS : INIT_ONES; /* 1 + w = 1 at the start */
    if (c->arch == MODEL_LLAMA) {
        m->building_stage = (int)c->n_layers + 1;
        m->embed = add_param(m, 0, INIT_NORMAL, V, C, "model.embed_tokens.weight");
        for (uint32_t l = 0; l < c->n_layers; l++) {
            struct layer_params *p = &m->lp[l];
            m->building_stage = (int)(c->n_layers - l);
            memset(p, -1, sizeof *p);
            p->norm1 = add_param(m, 0, norm_init, C, 0, "model.layers.%u.input_layernorm.weight", l);
            p->wq = add_param(m, 0, INIT_NORMAL, qd, C, "model.layers.%u.self_attn.q_proj.weight", l);
            p->wk = add_param(m, 0, INIT_NORMAL, kv, C, "model.layers.%u.self_attn.k_proj.weight", l);
            p->wv = add_param(m, 0, INIT_NORMAL, kv, C, "model.layers.%u.self_attn.v_proj.weight", l);
            char hf[96];
            if (c->fused_proj) {
                snprintf(hf, sizeof hf, "model.layers.%u.self_attn.qkv_proj.weight", l);
                fuse(m, p->wq, 3, hf);
            }
            if (c->qkv_bias) {
                p->bq = add_param(m, 0, INIT_ZEROS, qd, 0, "model.layers.%u.self_attn.q_proj.bias", l);
                p->bk = add_param(m, 0, INIT_ZEROS, kv, 0, "model.layers.%u.self_attn.k_proj.bias", l);
                p->bv = add_param(m, 0, INIT_ZEROS, kv, 0, "model.layers.%u.self_attn.v_proj.bias", l);
            }
            p->wo = add_param(m, 0, INIT_NORMAL, C, qd, "model.layers.%u.self_attn.o_proj.weight", l);
            if (c->o_bias)
                p->bo = add_param(m, 0, INIT_ZEROS, C, 0, "model.layers.%u.self_attn.o_proj.bias", l);
            if (c->qk_norm) {
                p->q_norm = add_param(m, 0, norm_init, hd, 0, "model.layers.%u.self_attn.q_norm.weight", l);
                p->k_norm = add_param(m, 0, norm_init, hd, 0, "model.layers.%u.self_attn.k_norm.weight", l);
            }
            /* post_norms (Gemma 2/3): post_attention_layernorm is the
             * attention output's, pre_feedforward_layernorm the MLP input's */
            if (c->post_norms) {
                p->post1 = add_param(m, 0, norm_init, C, 0, "model.layers.%u.post_attention_layernorm.weight", l);
                p->norm2 = add_param(m, 0, norm_init, C, 0, "model.layers.%u.pre_feedforward_layernorm.weight", l);
            } else {
                p->norm2 = add_param(m, 0, norm_init, C, 0, "model.layers.%u.post_attention_layernorm.weight", l);
            }
            p->gate = add_param(m, 0, INIT_NORMAL, F, C, "model.layers.%u.mlp.gate_proj.weight", l);
            p->up = add_param(m, 0, INIT_NORMAL, F, C, "model.layers.%u.mlp.up_proj.weight", l);
            if (c->fused_proj) {
                snprintf(hf, sizeof hf, "model.layers.%u.mlp.gate_up_proj.weight", l);
                fuse(m, p->gate, 2, hf);
            }
            p->down = add_param(m, 0, INIT_NORMAL, C, F, "model.layers.%u.mlp.down_proj.weight", l);
            if (c->post_norms)
                p->post2 = add_param(m, 0, norm_init, C, 0, "model.layers.%u.post_feedforward_layernorm.weight", l);
            if (c->mlp_bias) {
                p->bgate = add_param(m, 0, INIT_ZEROS, F, 0, "model.layers.%u.mlp.gate_proj.bias", l);
                p->bup = add_param(m, 0, INIT_ZEROS, F, 0, "model.layers.%u.mlp.up_proj.bias", l);
                p->bdown = add_param(m, 0, INIT_ZEROS, C, 0, "model.layers.%u.mlp.down_proj.bias", l);
            }
            if (c->lora_rank)
                add_layer_lora(m, l, matched);
        }
        m->building_stage = 0;
        m->norm_f = add_param(m, 0, norm_init, C, 0, "model.norm.weight");
        m->lm_head = c->tie_embeddings ? m->embed : add_param(m, 0, INIT_NORMAL, V, C, "lm_head.weight");
    } else {
        m->building_stage = (int)c->n_layers + 1;
        m->embed = add_param(m, 0, INIT_NORMAL, V, C, "wte.weight");
        m->pos_embed = add_param(m, 0, INIT_NORMAL, c->pos_rows, C, "wpe.weight");
        for (uint32_t l = 0; l < c->n_layers; l++) {
            struct layer_params *p = &m->lp[l];
            m->building_stage = (int)(c->n_layers - l);
            memset(p, -1, sizeof *p);
            p->norm1 = add_param(m, 0, INIT_ONES, C, 0, "h.%u.ln_1.weight", l);
            p->norm1_b = add_param(m, 0, INIT_ZEROS, C, 0, "h.%u.ln_1.bias", l);
            p->wqkv = add_param(m, 1, INIT_NORMAL, 3 * C, C, "h.%u.attn.c_attn.weight", l);
            p->bqkv = add_param(m, 0, INIT_ZEROS, 3 * C, 0, "h.%u.attn.c_attn.bias", l);
            p->wo = add_param(m, 1, INIT_NORMAL, C, C, "h.%u.attn.c_proj.weight", l);
            p->bo = add_param(m, 0, INIT_ZEROS, C, 0, "h.%u.attn.c_proj.bias", l);
            p->norm2 = add_param(m, 0, INIT_ONES, C, 0, "h.%u.ln_2.weight", l);
            p->norm2_b = add_param(m, 0, INIT_ZEROS, C, 0, "h.%u.ln_2.bias", l);
            p->up = add_param(m, 1, INIT_NORMAL, F, C, "h.%u.mlp.c_fc.weight", l);
            p->bup = add_param(m, 0, INIT_ZEROS, F, 0, "h.%u.mlp.c_fc.bias", l);
            p->down = add_param(m, 1, INIT_NORMAL, C, F, "h.%u.mlp.c_proj.weight", l);
            p->bdown = add_param(m, 0, INIT_ZEROS, C, 0, "h.%u.mlp.c_proj.bias", l);
            if (c->lora_rank)
                add_layer_lora(m, l, matched);
        }
        m->building_stage = 0;
        m->norm_f = add_param(m, 0, INIT_ONES, C, 0, "ln_f.weight");
        m->norm_f_b = add_param(m, 0, INIT_ZEROS, C, 0, "ln_f.bias");
        m->lm_head = m->embed;
    }
    check_lora_targets(m, matched);
    free(matched);
}

/* The numbers the host computes for the device: the RoPE table and the
 * initialization's normal deviates. With precision: reproducible the
 * repro layer's (IEEE operations only, no libm: the same bits on every
 * host), else libm's in double. */
struct host_math {
    void (*rope_table)(float *table, uint32_t max_pos, uint32_t hd, double theta, const struct op_rope_scaling *s);
    float (*normal)(uint64_t *state, double std); /* N(0, std²) from two splitmix64 draws */
};

/* Box–Muller in double from two 53-bit uniforms in (0, 1]. */
static float normal_libm(uint64_t *state, double std)
{
    double u1 = ((double)(vkt_splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;
    double u2 = (double)(vkt_splitmix64(state) >> 11) * 0x1.0p-53;
    return (float)(std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static float normal_repro(uint64_t *state, double std)
{
    uint64_t r1 = vkt_splitmix64(state), r2 = vkt_splitmix64(state);
    return (float)std * repro_normal(r1, r2);
}

static const struct host_math *host_math(const struct model *m)
{
    static const struct host_math libm = {op_rope_table, normal_libm}, repro = {repro_rope_table, normal_repro};
    return gpu_reproducible(m->g) ? &repro : &libm;
}

/* llama: cos/sin of every position, computed once in double. */
static void build_rope_table(struct model *m)
{
    const struct model_config *c = &m->c;
    if (c->arch != MODEL_LLAMA)
        return;
    size_t T = c->max_seq_len, rot = model_rotary_dim(c);
    float *table = vkt_malloc(sizeof(float) * T * rot, "rope table");
    enum gpu_mem_category was = gpu_memory_category(m->g, GPU_MEM_WORKSPACE);
    /* longrope: a second table of its long factors, used only where a
     * forward reaches original_max (so not at all below it) */
    int tables = c->rope_scaling.type == OP_ROPE_LONGROPE && T > c->rope_scaling.original_max ? 2 : 1;
    for (int t = 0; t < tables; t++) {
        struct op_rope_scaling s = c->rope_scaling;
        s.long_table = t;
        host_math(m)->rope_table(table, (uint32_t)T, (uint32_t)rot, c->rope_theta, &s);
        struct gpu_buffer *b = model_act(m, T * rot, t ? "rope table (long factors)" : "rope table");
        gpu_upload(m->g, b, 0, table, sizeof(float) * T * rot);
        *(t ? &m->rope_long : &m->rope_table) = b;
    }
    if (c->rope_local_theta) { /* Gemma 3's sliding layers: their own base, no scaling */
        host_math(m)->rope_table(table, (uint32_t)T, (uint32_t)rot, c->rope_local_theta, NULL);
        m->rope_local = model_act(m, T * rot, "rope table (sliding layers)");
        gpu_upload(m->g, m->rope_local, 0, table, sizeof(float) * T * rot);
    }
    gpu_memory_category(m->g, was);
    free(table);
}

int model_config_from(const struct config_model *c, struct model_config *mc, char *err, size_t errlen)
{
    memset(mc, 0, sizeof *mc);
    if (c->init_from && model_config_read(c->init_from, mc, err, errlen))
        return -1;
    if (c->init_from && c->arch == ARCH_GPT2)
        mc->pos_rows = mc->max_seq_len;
    mc->arch = c->arch == ARCH_LLAMA ? MODEL_LLAMA : MODEL_GPT2, mc->vocab_size = (uint32_t)c->vocab_size;
    mc->dim = (uint32_t)c->dim, mc->n_layers = (uint32_t)c->n_layers, mc->n_heads = (uint32_t)c->n_heads;
    mc->n_kv_heads = (uint32_t)c->n_kv_heads, mc->hidden_dim = (uint32_t)c->hidden_dim;
    mc->head_dim = (uint32_t)c->head_dim, mc->qk_norm = c->qk_norm, mc->sliding_window = (uint32_t)c->sliding_window;
    mc->max_seq_len = (uint32_t)c->max_seq_len, mc->norm_eps = (float)c->norm_eps, mc->rope_theta = c->rope_theta;
    mc->tie_embeddings = c->tie_embeddings, mc->init_std = (float)c->init_std;
    mc->activation_checkpointing = c->activation_checkpointing;
    /* partial rotary: int(head size x factor) as transformers truncates it */
    if (c->partial_rotary_factor < 1)
        mc->rotary_dim = (uint32_t)(model_head_dim(mc) * c->partial_rotary_factor + 1e-9);
    mc->fused_proj = c->fused_proj;
    mc->mlp_gelu = c->mlp_activation == MLP_GELU_TANH, mc->norm_offset = c->norm_offset;
    mc->post_norms = c->post_norms, mc->attn_scalar = (float)c->query_pre_attn_scalar;
    mc->embed_scale = c->scale_embeddings ? (float)sqrt((double)c->dim) : 0.0f; /* transformers: √dim in float */
    mc->rope_local_theta = c->rope_local_base_freq;
    mc->attn_softcap = (float)c->attn_logit_softcapping, mc->final_softcap = (float)c->final_logit_softcapping;
    /* the per-layer lists (config_check has checked their lengths and names) */
    memset(&mc->full_layers, 0, sizeof mc->full_layers);
    memset(&mc->nope_layers, 0, sizeof mc->nope_layers);
    for (int l = 0; l < c->n_layer_types; l++)
        if (!strcmp(c->layer_types[l], "full_attention"))
            vkt_layers_add(&mc->full_layers, (uint32_t)l);
    for (int l = 0; l < c->n_no_rope_layers; l++)
        if (!strcmp(c->no_rope_layers[l], "0"))
            vkt_layers_add(&mc->nope_layers, (uint32_t)l);
    return 0;
}

/* One product of sizes that sizes a tensor: -1 with the message when it
 * exceeds MODEL_MAX_TENSOR elements (or 64 bits). */
static int check_product(uint64_t a, uint64_t b, const char *names, const char *what, char *err, size_t errlen)
{
    uint64_t n;
    if (!__builtin_mul_overflow(a, b, &n) && n <= MODEL_MAX_TENSOR)
        return 0;
    return vkt_error(err, errlen,
                     "%s = %llu x %llu elements for %s: more than the 2^38 one tensor may hold (1 TiB of fp32)", names,
                     (unsigned long long)a, (unsigned long long)b, what);
}

/* Every product below sizes a buffer build_table or build_activations
 * allocates, or bounds one that does: the attention statistics (batch x
 * n_heads x max_seq_len) are at most rows x dim, a key/value weight or
 * activation at most its query's, the RoPE table max_seq_len x head size. */
int model_config_check(const struct model_config *c, uint32_t batch, char *err, size_t errlen)
{
    if (!c->dim || !c->n_layers || !c->n_heads || !c->vocab_size || !c->max_seq_len || !c->hidden_dim)
        return vkt_error(err, errlen,
                         "dim, n_layers, n_heads, vocab_size, max_seq_len and hidden_dim must be positive");
    if (!c->head_dim && c->dim % c->n_heads)
        return vkt_error(err, errlen, "n_heads %u does not divide dim %u (and no head_dim is given)", c->n_heads,
                         c->dim);
    if (!c->n_kv_heads || c->n_heads % c->n_kv_heads)
        return vkt_error(err, errlen, "n_kv_heads %u does not divide n_heads %u", c->n_kv_heads, c->n_heads);
    if ((uint64_t)c->n_heads * model_head_dim(c) > INT32_MAX)
        return vkt_error(err, errlen, "n_heads x head_dim = %u x %u is more than 2^31 - 1", c->n_heads,
                         model_head_dim(c));
    if (c->arch == MODEL_LLAMA && model_head_dim(c) % 2)
        return vkt_error(err, errlen, "llama needs an even head size for RoPE, got %u", model_head_dim(c));
    if (c->rotary_dim && (c->arch == MODEL_GPT2 || c->rotary_dim % 2 || c->rotary_dim > model_head_dim(c)))
        return vkt_error(err, errlen, "%u rotary dimensions of heads of %u: llama only, even and at most the head",
                         c->rotary_dim, model_head_dim(c));
    if (c->rope_scaling.type == OP_ROPE_LONGROPE && model_rotary_dim(c) / 2 > OP_ROPE_MAX_FREQS)
        return vkt_error(err, errlen, "longrope with %u rotary dimensions: at most %d", model_rotary_dim(c),
                         2 * OP_ROPE_MAX_FREQS);
    if (c->arch == MODEL_GPT2 && (!c->tie_embeddings || c->n_kv_heads != c->n_heads))
        return vkt_error(err, errlen, "gpt2 has tied embeddings and n_kv_heads == n_heads");
    if (c->arch == MODEL_GPT2 && (c->qk_norm || model_head_dim(c) * c->n_heads != c->dim))
        return vkt_error(err, errlen, "gpt2 has heads of dim / n_heads and no q/k norms");
    if (c->arch == MODEL_GPT2 && (c->sliding_window || vkt_layers_count(&c->nope_layers, c->n_layers)))
        return vkt_error(err, errlen, "gpt2 has no sliding window and no RoPE to leave out");
    if (c->arch == MODEL_GPT2 &&
        (c->norm_offset || c->post_norms || c->mlp_gelu || c->embed_scale || c->attn_scalar || c->attn_softcap ||
         c->final_softcap))
        return vkt_error(err, errlen, "gpt2 has none of Gemma's norms, GeGLU, embedding or attention scales");
    if (c->qk_norm && vkt_layers_count(&c->nope_layers, c->n_layers))
        return vkt_error(err, errlen,
                         "q/k norms with layers without RoPE: no Hugging Face family has both (Qwen3 has the norms, "
                         "SmolLM3 the layers)");
    if (c->arch == MODEL_GPT2 && (c->qkv_bias || c->o_bias || c->mlp_bias || c->rope_scaling.type))
        return vkt_error(err, errlen, "gpt2 has its own biases and no rope_scaling");
    if (c->pos_rows && c->pos_rows < c->max_seq_len)
        return vkt_error(err, errlen, "%u position rows are fewer than max_seq_len %u", c->pos_rows, c->max_seq_len);
    if (!(c->lora_dropout >= 0 && c->lora_dropout < 1))
        return vkt_error(err, errlen, "LoRA dropout %g is outside [0, 1)", (double)c->lora_dropout);
    if (c->lora_rank && !(c->lora_alpha > 0))
        return vkt_error(err, errlen, "LoRA needs lora_alpha > 0");
    if (c->base_bf16 && !c->lora_rank)
        return vkt_error(err, errlen, "a bf16 base needs LoRA: only frozen weights may be stored in bf16");
    if (c->n_layers > MODEL_MAX_LAYERS)
        return vkt_error(err, errlen, "n_layers %u is more than %d", c->n_layers, MODEL_MAX_LAYERS);
    uint64_t rows = (uint64_t)batch * c->max_seq_len;
    if (rows > INT32_MAX)
        return vkt_error(err, errlen,
                         "batch_size x max_seq_len = %u x %u = %llu rows in a micro-batch: more than 2^31 - 1", batch,
                         c->max_seq_len, (unsigned long long)rows);
    int gpt2 = c->arch == MODEL_GPT2;
    uint64_t C = c->dim, qd = (uint64_t)c->n_heads * model_head_dim(c);
    uint64_t qkv = gpt2 ? 3 * C : qd > C ? qd : C, wide = c->hidden_dim > qkv ? c->hidden_dim : qkv;
    uint64_t pos = c->pos_rows > c->max_seq_len ? c->pos_rows : c->max_seq_len;
    const char *wide_name = c->hidden_dim > qkv ? "hidden_dim" : gpt2 ? "3 x dim" : qd > C ? "n_heads x head_dim" : "dim";
    char names[96];
    snprintf(names, sizeof names, "batch_size x max_seq_len x %s", wide_name);
    if (check_product(c->vocab_size, C, "vocab_size x dim", "the token embedding", err, errlen) ||
        check_product(qkv, C, gpt2 ? "3 x dim x dim" : qd > C ? "n_heads x head_dim x dim" : "dim x dim",
                      "an attention weight", err, errlen) ||
        check_product(c->hidden_dim, C, "hidden_dim x dim", "an MLP weight", err, errlen) ||
        check_product(pos, C, c->pos_rows > c->max_seq_len ? "position rows x dim" : "max_seq_len x dim",
                      "the position table", err, errlen) ||
        check_product(rows, wide, names, "an activation", err, errlen))
        return -1;
    return 0;
}

float model_query_scale(const struct model_config *c)
{
    if (!c->attn_scalar || c->attn_scalar == (float)model_head_dim(c))
        return 1.0f;
    return (float)sqrt((double)model_head_dim(c) / (double)c->attn_scalar);
}

/* The norm parameters of the table: every layer's and the final one. */
static int norm_params(const struct model *m, int *out)
{
    int n = 0;
    for (uint32_t l = 0; l < m->c.n_layers; l++) {
        const struct layer_params *p = &m->lp[l];
        const int each[] = {p->norm1, p->norm2, p->q_norm, p->k_norm, p->post1, p->post2};
        for (size_t i = 0; i < sizeof each / sizeof each[0]; i++)
            if (each[i] >= 0)
                out[n++] = each[i];
    }
    out[n++] = m->norm_f;
    return n;
}

/* norm_offset: a buffer for 1 + w of each norm, and the ones added. */
static void build_norm_weights(struct model *m)
{
    if (!m->c.norm_offset)
        return;
    int *idx = vkt_malloc(sizeof *idx * (size_t)m->n_params, "norms"), n = norm_params(m, idx);
    size_t most = 0;
    m->norm1p = vkt_calloc((size_t)m->n_params, sizeof *m->norm1p, "norm weights");
    enum gpu_mem_category was = gpu_memory_category(m->g, GPU_MEM_WORKSPACE);
    for (int i = 0; i < n; i++) {
        size_t numel = m->params[idx[i]].numel;
        m->norm1p[idx[i]] = gpu_buffer_create(m->g, numel * sizeof(float), "1 + norm weight");
        most = numel > most ? numel : most;
    }
    float *ones = vkt_malloc(most * sizeof(float), "ones");
    for (size_t i = 0; i < most; i++)
        ones[i] = 1.0f;
    m->ones = gpu_buffer_create(m->g, most * sizeof(float), "ones");
    gpu_upload(m->g, m->ones, 0, ones, most * sizeof(float));
    gpu_memory_category(m->g, was);
    free(ones);
    free(idx);
}

void model_norm_weights(struct model *m)
{
    if (!m->norm1p)
        return;
    for (int i = 0; i < m->n_params; i++)
        if (m->norm1p[i]) /* 1 + w in float, as transformers' (1.0 + weight.float()) */
            op_add(m->g, m->ones, m->params[i].w, m->norm1p[i], m->params[i].numel);
}

struct model *model_create(struct gpu *g, const struct model_config *c, uint32_t batch)
{
    char err[512];
    if (model_config_check(c, batch, err, sizeof err))
        vkt_fatal("model: %s", err);
    struct model *m = vkt_calloc(1, sizeof *m, "the model");
    m->trained = vkt_malloc(sizeof *m->trained * MODEL_MAX_PARAMS, "trained parameters");
    m->lora_scale = c->lora_rank ? c->lora_alpha / (float)c->lora_rank : 0.0f;
    m->g = g;
    m->c = *c;
    if (!m->c.pos_rows)
        m->c.pos_rows = c->max_seq_len;
    m->max_rows = batch * c->max_seq_len;
    build_table(m);
    build_rope_table(m);
    build_norm_weights(m);
    if (batch) {
        model_build_activations(m, batch);
        model_zero_grad(m);
        model_loss_reset(m);
    }
    return m;
}

void model_destroy(struct model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_params; i++) {
        gpu_buffer_destroy(m->g, m->params[i].w);
        gpu_buffer_destroy(m->g, m->params[i].grad);
    }
    model_destroy_activations(m);
    for (int i = 0; m->norm1p && i < m->n_params; i++)
        gpu_buffer_destroy(m->g, m->norm1p[i]);
    free(m->norm1p);
    gpu_buffer_destroy(m->g, m->ones);
    free(m->lp);
    free(m->la);
    free(m->trained);
    free(m);
}

const struct model_config *model_config(const struct model *m)
{
    return &m->c;
}
int model_param_count(const struct model *m)
{
    return m->n_trained;
}
struct model_param *model_param(struct model *m, int i)
{
    return &m->params[m->trained[i]];
}
int model_tensor_count(const struct model *m)
{
    return m->n_params;
}
struct model_param *model_tensor(struct model *m, int i)
{
    return &m->params[i];
}

struct model_param *model_param_find(struct model *m, const char *hf_name)
{
    for (int i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].name, hf_name))
            return &m->params[i];
    return NULL;
}

struct model_param *model_param_find_hf(struct model *m, const char *hf_name)
{
    for (int i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].hf, hf_name))
            return &m->params[i];
    return NULL;
}

size_t model_numel(const struct model *m)
{
    size_t n = 0;
    for (int i = 0; i < m->n_params; i++)
        n += m->params[i].numel;
    return n;
}

size_t model_trained_numel(const struct model *m)
{
    size_t n = 0;
    for (int i = 0; i < m->n_trained; i++)
        n += m->params[m->trained[i]].numel;
    return n;
}

static uint64_t hash_name(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* The normal deviates from host_math: the same bits on every host with
 * precision: reproducible. */
static void init_random(struct model *m, uint64_t seed, int adapters_only)
{
    float (*normal)(uint64_t *, double) = host_math(m)->normal;
    for (int i = 0; i < m->n_params; i++) {
        struct model_param *p = &m->params[i];
        if (adapters_only && !p->adapter)
            continue;
        float *host = vkt_malloc(p->numel * sizeof(float), p->name);
        uint64_t s = seed ^ hash_name(p->name);
        for (size_t j = 0; j < p->numel; j++) {
            if (p->init == INIT_ONES || p->init == INIT_ZEROS) {
                host[j] = p->init == INIT_ONES ? 1.0f : 0.0f;
                continue;
            }
            if (p->init == INIT_LORA_A) { /* kaiming_uniform_(a=√5): bound = 1/sqrt(fan_in) */
                double u = (double)(vkt_splitmix64(&s) >> 11) * 0x1.0p-53;
                host[j] = (float)((2.0 * u - 1.0) / sqrt((double)p->shape[1]));
                continue;
            }
            host[j] = normal(&s, m->c.init_std);
        }
        model_param_upload(m, p, host);
        free(host);
    }
}

void model_param_upload(struct model *m, struct model_param *p, const float *host)
{
    if (p->q4) {
        /* a NaN would take a code value silently (it compares false) */
        for (size_t i = 0; i < p->numel; i++)
            if (!isfinite(host[i]))
                vkt_fatal("%s: element %zu is %g; model.base_dtype nf4 quantizes finite weights only", p->hf, i,
                          (double)host[i]);
        size_t bytes = gpu_buffer_size(p->w);
        uint32_t *w = vkt_malloc(bytes, p->name);
        q4_quantize(w, host, p->numel, NF4_BLOCK, m->c.base_nf4_double);
        gpu_upload(m->g, p->w, 0, w, bytes);
        free(w);
        return;
    }
    if (!p->bf16) {
        gpu_upload(m->g, p->w, 0, host, p->numel * sizeof(float));
        return;
    }
    uint16_t *h = vkt_malloc(p->numel * sizeof *h, p->name);
    vkt_bf16_round(h, host, p->numel);
    gpu_upload(m->g, p->w, 0, h, p->numel * sizeof *h);
    free(h);
}

void model_param_download(struct model *m, const struct model_param *p, float *host)
{
    if (p->q4) {
        size_t bytes = gpu_buffer_size(p->w);
        uint32_t *w = vkt_malloc(bytes, p->name);
        gpu_download(m->g, p->w, 0, w, bytes);
        q4_dequantize(host, w);
        free(w);
        return;
    }
    if (!p->bf16) {
        gpu_download(m->g, p->w, 0, host, p->numel * sizeof(float));
        return;
    }
    uint16_t *h = vkt_malloc(p->numel * sizeof *h, p->name);
    gpu_download(m->g, p->w, 0, h, p->numel * sizeof *h);
    vkt_bf16_widen(host, h, p->numel);
    free(h);
}

void model_init_random(struct model *m, uint64_t seed)
{
    init_random(m, seed, 0);
}
void model_init_adapters(struct model *m, uint64_t seed)
{
    init_random(m, seed, 1);
}

/* Training calls on a weights-only model (batch 0) are programming errors. */
static void require_training(const struct model *m, const char *what)
{
    if (!m->max_rows)
        vkt_fatal("model: %s needs a model created with batch > 0 (this one holds weights only)", what);
}

void model_zero_grad(struct model *m)
{
    require_training(m, "model_zero_grad");
    for (int i = 0; i < m->n_trained; i++)
        gpu_zero(m->g, m->params[m->trained[i]].grad);
    for (int k = 0; k < 2 && m->frozen_sink[k]; k++)
        gpu_zero(m->g, m->frozen_sink[k]);
}

void model_keep_logits(struct model *m, int keep)
{
    require_training(m, "model_keep_logits");
    m->keep_logits = keep;
    if (keep && !m->logits_kept) {
        char err[256];
        if (check_product(m->max_rows, m->logits_ld, "rows x vocab_size", "the kept logits", err, sizeof err))
            vkt_fatal("model_keep_logits: %s", err);
        enum gpu_mem_category was = gpu_memory_category(m->g, GPU_MEM_ACTIVATIONS);
        m->logits_kept = model_act(m, (size_t)m->max_rows * m->logits_ld, "kept logits");
        gpu_memory_category(m->g, was);
    }
}

void model_read_logits(struct model *m, float *out)
{
    if (!m->logits_kept)
        vkt_fatal("model_read_logits: model_keep_logits was not set");
    /* rows logits_ld floats apart on the device, V apart in out */
    size_t rows = (size_t)m->last.B * m->last.T, V = m->c.vocab_size, ld = m->logits_ld;
    if (ld == V) {
        gpu_download(m->g, m->logits_kept, 0, out, sizeof(float) * rows * V);
        return;
    }
    float *padded = vkt_malloc(sizeof(float) * rows * ld, "kept logits");
    gpu_download(m->g, m->logits_kept, 0, padded, sizeof(float) * rows * ld);
    for (size_t r = 0; r < rows; r++)
        memcpy(out + r * V, padded + r * ld, sizeof(float) * V);
    free(padded);
}

void model_loss_reset(struct model *m)
{
    require_training(m, "model_loss_reset");
    gpu_zero(m->g, m->loss_acc);
}

void model_sample_losses(struct model *m, struct gpu_buffer *loss, struct gpu_buffer *count)
{
    require_training(m, "model_sample_losses");
    repro_rowsum(m->g, m->row_loss, loss, m->last.B, m->last.T, 0, 0);
    repro_rowsum(m->g, m->row_count, count, m->last.B, m->last.T, 0, 0);
}

int model_tied_table(const struct model *m)
{
    return m->lm_head >= 0 && m->lm_head == m->embed ? m->embed : -1;
}

void model_set_head_grad(struct model *m, struct gpu_buffer *g)
{
    require_training(m, "model_set_head_grad");
    m->head_grad = g;
}

void model_read_loss(struct model *m, double *loss_sum, double *count)
{
    require_training(m, "model_read_loss");
    float s[2];
    gpu_download(m->g, m->loss_acc, 0, s, sizeof s);
    *loss_sum = s[0];
    *count = s[1];
}
