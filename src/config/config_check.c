/* config_check: what a recipe means once all keys are read. Fills the
 * defaults that depend on other keys, reads model.init_from's config.json
 * (which then defines the model), requires the keys without a default and
 * rejects values that contradict each other or size buffers too large to
 * compute with (model_config_check). Never reads the dataset. */
#include "config_keys.h"
#include "vktrain/hfconfig.h"
#include "vktrain/model.h"
#include "vktrain/tokenizer.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vktrain/util.h"

#define K(name) config_key_find(name)

static bool is_set(struct config_ctx *ctx, const char *name)
{
    return ctx->set[K(name)];
}

/* Applies one config.json value: fills the key when the recipe left it
 * unset, else requires agreement (max_seq_len may be shorter). */
static int apply_hf(struct config_ctx *ctx, const char *key, const char *json, double v, const char *file)
{
    int k = K(key);
    char msg[128];
    if (config_key_range(k, v, msg, sizeof msg))
        return config_fail(ctx, K("model.init_from"), "%s: %s = %.17g is out of range for %s (%s)", file, json, v, key,
                           msg);
    if (!ctx->set[k]) {
        config_key_put(ctx->cfg, k, v);
        return 0;
    }
    double mine = config_key_get(ctx->cfg, k);
    if (!strcmp(key, "model.max_seq_len")) {
        if (mine > v)
            return config_fail(ctx, k, "%s: %.17g exceeds %s = %.17g in %s", key, mine, json, v, file);
        return 0;
    }
    if (fabs(mine - v) > 1e-12 * fabs(v))
        return config_fail(ctx, k,
                           "%s: %.17g disagrees with %s = %.17g in %s (model.init_from defines "
                           "the model: drop the key or make it match)",
                           key, mine, json, v, file);
    return 0;
}

/* A per-layer list of the recipe (model.layer_types, model.no_rope_layers)
 * as the set of layers whose entry is `member`; every other entry must be
 * `other`, and a list has one entry per layer or none. */
static int layer_list(struct config_ctx *ctx, const char *key, char *const *list, int n, const char *member,
                      const char *other, struct vkt_layers *out)
{
    memset(out, 0, sizeof *out);
    int layers = ctx->cfg->model.n_layers;
    if (n && n != layers)
        return config_fail(ctx, K(key), "%s: %d entries for %d layers (give one per layer, or none)", key, n,
                           layers);
    for (int l = 0; l < n; l++)
        if (!strcmp(list[l], member))
            vkt_layers_add(out, (uint32_t)l);
        else if (strcmp(list[l], other))
            return config_fail(ctx, K(key), "%s: entry %d is '%s' (each is %s or %s)", key, l, list[l], member,
                               other);
    return 0;
}

/* config.json's set of layers for a per-layer list: fills the list when the
 * recipe left it unset (and the set is not empty: the empty list means
 * every layer alike), else requires the same set. */
static int apply_layers(struct config_ctx *ctx, const char *key, char ***list, int *n, const struct vkt_layers *hf,
                        const char *member, const char *other, const char *file)
{
    uint32_t layers = (uint32_t)ctx->cfg->model.n_layers;
    if (!ctx->set[K(key)]) {
        if (!vkt_layers_count(hf, layers))
            return 0;
        *list = vkt_calloc(layers + 1, sizeof **list, "config list");
        for (uint32_t l = 0; l < layers; l++)
            (*list)[l] = vkt_strdup(vkt_layers_has(hf, l) ? member : other);
        *n = (int)layers;
        return 0;
    }
    struct vkt_layers mine;
    if (layer_list(ctx, key, *list, *n, member, other, &mine))
        return -1;
    for (uint32_t l = 0; l < layers; l++)
        if (vkt_layers_has(&mine, l) != vkt_layers_has(hf, l))
            return config_fail(ctx, K(key),
                               "%s: layer %u is %s here and %s in %s (model.init_from defines the model: drop the key "
                               "or make it match)",
                               key, l, vkt_layers_has(&mine, l) ? member : other,
                               vkt_layers_has(hf, l) ? member : other, file);
    return 0;
}

/* The model keys from init_from's config.json (src/formats/hfconfig.c
 * reads it, with Hugging Face's defaults). */
static int read_init_from(struct config_ctx *ctx)
{
    struct config *cfg = ctx->cfg;
    int ki = K("model.init_from");
    char file[4096], err[1024];
    snprintf(file, sizeof file, "%s/config.json", cfg->model.init_from);
    struct hf_config h;
    if (hf_config_read(file, &h, err, sizeof err))
        return config_fail(ctx, ki, "model.init_from: %s", err);
    enum config_arch arch = h.arch == HF_GPT2 ? ARCH_GPT2 : ARCH_LLAMA;
    if (is_set(ctx, "model.arch") && cfg->model.arch != arch)
        return config_fail(ctx, K("model.arch"), "model.arch: %s disagrees with model_type '%s' in %s",
                           cfg->model.arch == ARCH_LLAMA ? "llama" : "gpt2", arch == ARCH_GPT2 ? "gpt2" : "llama",
                           file);
    cfg->model.arch = arch;
    int gpt2 = arch == ARCH_GPT2;
    const struct {
        const char *key, *json;
        double v;
    } keys[] = {
        {"model.dim", gpt2 ? "n_embd" : "hidden_size", h.dim},
        {"model.n_layers", gpt2 ? "n_layer" : "num_hidden_layers", h.n_layers},
        {"model.n_heads", gpt2 ? "n_head" : "num_attention_heads", h.n_heads},
        {"model.n_kv_heads", gpt2 ? "n_head" : "num_key_value_heads", h.n_kv_heads},
        {"model.head_dim", "head_dim", h.head_dim},
        {"model.qk_norm", "model_type", h.qk_norm},
        {"model.sliding_window", "sliding_window", h.sliding_window},
        {"model.hidden_dim", gpt2 ? "n_inner" : "intermediate_size", h.hidden_dim},
        {"model.vocab_size", "vocab_size", h.vocab_size},
        {"model.max_seq_len", gpt2 ? "n_positions" : "max_position_embeddings", h.max_seq_len},
        {"model.norm_eps", gpt2 ? "layer_norm_epsilon" : "rms_norm_eps", h.norm_eps},
        {"model.rope_theta", "rope_theta", gpt2 ? cfg->model.rope_theta : h.rope_theta},
        {"model.partial_rotary_factor", "partial_rotary_factor",
         h.rotary_dim ? (double)h.rotary_dim / h.head_dim : cfg->model.partial_rotary_factor},
        {"model.mlp_activation", "hidden_activation", h.mlp_gelu ? MLP_GELU_TANH : MLP_SILU},
        {"model.norm_offset", "model_type", h.norm_offset},
        {"model.post_norms", "model_type", h.post_norms},
        {"model.scale_embeddings", "model_type", h.embed_scale != 0},
        {"model.query_pre_attn_scalar", "query_pre_attn_scalar", h.attn_scalar},
        {"model.rope_local_base_freq", "rope_local_base_freq", h.rope_local_theta},
        {"model.attn_logit_softcapping", "attn_logit_softcapping", h.attn_softcap},
        {"model.final_logit_softcapping", "final_logit_softcapping", h.final_softcap},
        {"model.tie_embeddings", "tie_word_embeddings", h.tie_embeddings},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (apply_hf(ctx, keys[i].key, keys[i].json, keys[i].v, file))
            return -1;
    struct config_model *m = &cfg->model;
    m->fused_proj = h.fused_proj;
    return apply_layers(ctx, "model.layer_types", &m->layer_types, &m->n_layer_types, &h.full_layers, "full_attention",
                        "sliding_attention", file) ||
           apply_layers(ctx, "model.no_rope_layers", &m->no_rope_layers, &m->n_no_rope_layers, &h.nope_layers, "0",
                        "1", file);
}

static int require(struct config_ctx *ctx, const char *name, const char *why)
{
    if (is_set(ctx, name))
        return 0;
    return config_fail(ctx, -1, "required key '%s' is missing%s", name, why);
}

static int check_model(struct config_ctx *ctx, int tokenizer_size)
{
    struct config_model *m = &ctx->cfg->model;
    if (m->init_from) {
        if (read_init_from(ctx))
            return -1;
    } else {
        static const char *const shape[] = {"model.dim", "model.n_layers", "model.n_heads", "model.max_seq_len"};
        for (int i = 0; i < 4; i++)
            if (require(ctx, shape[i], " (or give model.init_from)"))
                return -1;
    }
    /* llama's MLP width: 8/3 of dim (SwiGLU keeps the parameter count of a
     * 4*dim MLP), rounded up to a multiple of 32; gpt2: 4*dim. */
    if (!is_set(ctx, "model.n_kv_heads") && !m->init_from)
        m->n_kv_heads = m->n_heads;
    if (!is_set(ctx, "model.hidden_dim") && !m->init_from) {
        int64_t dim = m->dim, hidden = m->arch == ARCH_GPT2 ? 4 * dim : (8 * dim + 3 * 32 - 1) / (3 * 32) * 32;
        if (hidden > INT_MAX)
            return config_fail(ctx, K("model.dim"),
                               "model.dim: %d makes the default model.hidden_dim (%s) %lld, more than 2^31 - 1", m->dim,
                               m->arch == ARCH_GPT2 ? "4 x dim" : "8/3 x dim", (long long)hidden);
        m->hidden_dim = (int)hidden;
    }
    if (!is_set(ctx, "model.vocab_size") && !m->init_from)
        m->vocab_size = tokenizer_size;
    if (!is_set(ctx, "model.tie_embeddings") && !m->init_from)
        m->tie_embeddings = m->arch == ARCH_GPT2;
    if (m->vocab_size < tokenizer_size)
        return config_fail(ctx, K("model.vocab_size"), "model.vocab_size: %d is smaller than the tokenizer's %d ids",
                           m->vocab_size, tokenizer_size);
    if (!m->head_dim && m->dim % m->n_heads)
        return config_fail(ctx, K("model.n_heads"),
                           "model.n_heads: %d does not divide model.dim %d (or set model.head_dim)", m->n_heads,
                           m->dim);
    if (m->n_heads % m->n_kv_heads)
        return config_fail(ctx, K("model.n_kv_heads"), "model.n_kv_heads: %d does not divide model.n_heads %d",
                           m->n_kv_heads, m->n_heads);
    int hd = m->head_dim ? m->head_dim : m->dim / m->n_heads;
    if ((int64_t)m->n_heads * hd > INT_MAX)
        return config_fail(ctx, K("model.head_dim"), "model.head_dim: n_heads x head_dim = %d x %d is more than 2^31 - 1",
                           m->n_heads, hd);
    if (m->arch == ARCH_LLAMA && hd % 2)
        return config_fail(ctx, K(m->head_dim ? "model.head_dim" : "model.n_heads"),
                           "%s: the head size %s = %d must be even for RoPE",
                           m->head_dim ? "model.head_dim" : "model.n_heads",
                           m->head_dim ? "model.head_dim" : "model.dim/model.n_heads", hd);
    if (m->arch == ARCH_GPT2 && (m->qk_norm || (m->head_dim && m->head_dim * m->n_heads != m->dim)))
        return config_fail(ctx, K(m->qk_norm ? "model.qk_norm" : "model.head_dim"),
                           "%s: gpt2 has heads of model.dim / model.n_heads and no q/k norms",
                           m->qk_norm ? "model.qk_norm" : "model.head_dim");
    if (m->arch == ARCH_GPT2 && (m->sliding_window || m->n_layer_types || m->n_no_rope_layers)) {
        const char *key = m->sliding_window  ? "model.sliding_window"
                          : m->n_layer_types ? "model.layer_types"
                                             : "model.no_rope_layers";
        return config_fail(ctx, K(key), "%s: gpt2 has no sliding window and no RoPE to leave out (llama-family keys)",
                           key);
    }
    if (m->partial_rotary_factor < 1) {
        int rot = (int)(hd * m->partial_rotary_factor + 1e-9);
        const char *why = m->arch == ARCH_GPT2 ? "gpt2 has no RoPE"
                          : rot < 2 || rot % 2 ? "it must give an even number of rotated dimensions"
                          : m->qk_norm          ? "not with model.qk_norm (no family has both)"
                          : m->n_no_rope_layers ? "not with model.no_rope_layers (no family has both)"
                          : m->n_layer_types    ? "not with model.layer_types (Phi-3's window is on every layer)"
                                                : NULL;
        if (why)
            return config_fail(ctx, K("model.partial_rotary_factor"), "model.partial_rotary_factor: %g of heads of %d: %s",
                               m->partial_rotary_factor, hd, why);
        if (!m->init_from) /* written back as phi3, whose config.json has the factor */
            m->fused_proj = true;
    }
    /* The Gemma family comes whole: its norms, GeGLU and embedding scale
     * together (a model of some of them has no config.json to be written
     * as); post norms (Gemma 2/3) and query_pre_attn_scalar with them, the
     * local RoPE base with Gemma 3's q/k norms. */
    int gemma = m->norm_offset || m->mlp_activation != MLP_SILU || m->scale_embeddings;
    const char *gemma_key = !gemma && m->post_norms                ? "model.post_norms"
                            : !m->post_norms && m->query_pre_attn_scalar ? "model.query_pre_attn_scalar"
                            : m->rope_local_base_freq && !(m->post_norms && m->qk_norm)
                                ? "model.rope_local_base_freq"
                            : m->attn_logit_softcapping && !m->post_norms  ? "model.attn_logit_softcapping"
                            : m->final_logit_softcapping && !m->post_norms ? "model.final_logit_softcapping"
                                                                           : NULL;
    if (gemma && (!m->norm_offset || m->mlp_activation == MLP_SILU || !m->scale_embeddings))
        return config_fail(ctx, K(!m->norm_offset ? "model.norm_offset" : !m->scale_embeddings
                                                                              ? "model.scale_embeddings"
                                                                              : "model.mlp_activation"),
                           "model: the Gemma family has model.norm_offset, model.scale_embeddings and "
                           "model.mlp_activation: gelu_pytorch_tanh together (no family has some of them)");
    if (gemma_key)
        return config_fail(ctx, K(gemma_key),
                           "%s: needs %s (Gemma 2/3's post norms; the local RoPE base is Gemma 3's, with "
                           "model.qk_norm)",
                           gemma_key, !strcmp(gemma_key, "model.post_norms") ? "the Gemma family's other keys"
                                                                              : "model.post_norms");
    if (gemma && (m->arch == ARCH_GPT2 || m->fused_proj || m->n_no_rope_layers))
        return config_fail(ctx, K("model.norm_offset"),
                           "model.norm_offset: the Gemma family is llama-shaped, without fused projections or "
                           "layers without RoPE");
    struct vkt_layers full, nope;
    if (layer_list(ctx, "model.layer_types", m->layer_types, m->n_layer_types, "full_attention", "sliding_attention",
                   &full) ||
        layer_list(ctx, "model.no_rope_layers", m->no_rope_layers, m->n_no_rope_layers, "0", "1", &nope))
        return -1;
    if (!m->sliding_window && !m->rope_local_base_freq &&
        vkt_layers_count(&full, (uint32_t)m->n_layers) < (uint32_t)m->n_layer_types)
        return config_fail(ctx, K("model.layer_types"),
                           "model.layer_types: names sliding_attention layers but model.sliding_window is not set");
    if (m->arch == ARCH_GPT2 && m->n_kv_heads != m->n_heads)
        return config_fail(ctx, K("model.n_kv_heads"),
                           "model.n_kv_heads: gpt2 has no grouped-query attention (must equal "
                           "model.n_heads %d)",
                           m->n_heads);
    if (m->arch == ARCH_GPT2 && !m->tie_embeddings)
        return config_fail(ctx, K("model.tie_embeddings"), "model.tie_embeddings: gpt2 always ties its embeddings");
    return 0;
}

static int check_data(struct config_ctx *ctx)
{
    struct config *cfg = ctx->cfg;
    struct config_dataset *d = &cfg->dataset;
    if (require(ctx, "dataset.type", "") || require(ctx, "dataset.path", ""))
        return -1;
    if (!is_set(ctx, "dataset.packed"))
        d->packed = d->type != DATASET_SFT_JSONL;
    if (d->type == DATASET_TOKENS && !d->packed)
        return config_fail(ctx, K("dataset.packed"),
                           "dataset.packed: a tokens dataset is one token stream and is always "
                           "packed");
    if (d->separator && d->type != DATASET_TEXT)
        return config_fail(ctx, K("dataset.separator"), "dataset.separator: only text datasets have separators");
    if (d->separator && (!*d->separator || strchr(d->separator, '\n')))
        return config_fail(ctx, K("dataset.separator"), "dataset.separator: must be a non-empty single line");
    if (d->val_path && d->val_fraction > 0)
        return config_fail(ctx, K("dataset.val_fraction"),
                           "dataset.val_fraction: give either dataset.val_path or "
                           "dataset.val_fraction, not both");
    if (cfg->eval_every_n_steps > 0 && !d->val_path && d->val_fraction == 0)
        return config_fail(ctx, K("eval_every_n_steps"),
                           "eval_every_n_steps: %lld needs a validation set (dataset.val_path or "
                           "dataset.val_fraction)",
                           (long long)cfg->eval_every_n_steps);
    return 0;
}

/* The sizes the model allocates (model_config_check names the product
 * that is too large), and the tokens of one rank's step, which bound the
 * sampler's global batch and the run's token counts. */
static int check_sizes(struct config_ctx *ctx)
{
    const struct config *cfg = ctx->cfg;
    struct model_config mc;
    char msg[2048];
    if (model_config_from(&cfg->model, &mc, msg, sizeof msg))
        return config_fail(ctx, K("model.init_from"), "model.init_from: %s", msg);
    if (model_config_check(&mc, (uint32_t)cfg->batch_size, msg, sizeof msg))
        return config_fail(ctx, cfg->model.init_from ? K("model.init_from") : -1, "model: %s", msg);
    if (mc.base_bnb4 && !cfg->lora.rank)
        return config_fail(ctx, K("model.init_from"),
                           "model.init_from: %s is a bitsandbytes 4-bit checkpoint (quantization_config): its base "
                           "is quantized and frozen, so only LoRA trains over it: add a lora section (or start from "
                           "the full-precision folder)",
                           cfg->model.init_from);
    int64_t seqs = (int64_t)cfg->gradient_accumulation_steps * cfg->batch_size, tokens;
    if (__builtin_mul_overflow(seqs, (int64_t)cfg->model.max_seq_len, &tokens) || tokens > (int64_t)1 << 40)
        return config_fail(ctx, K("gradient_accumulation_steps"),
                           "gradient_accumulation_steps x batch_size x model.max_seq_len = %d x %d x %d tokens per "
                           "rank and step: more than 2^40",
                           cfg->gradient_accumulation_steps, cfg->batch_size, cfg->model.max_seq_len);
    return 0;
}

/* Whether two files hold the same bytes (0 when either cannot be read). */
static int same_file_content(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = getc(fa), cb = getc(fb);
        same = ca == cb;
        if (ca == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* A model folder that holds a tokenizer.json was trained with it: a recipe
 * without tokenizer.type and tokenizer.path uses it, and one that names
 * another tokenizer is refused. */
static int tokenizer_of_model(struct config_ctx *ctx)
{
    struct config *cfg = ctx->cfg;
    char mine[4096], model[4096];
    if (!cfg->model.init_from)
        return 0;
    vkt_path(model, sizeof model, "%s/tokenizer.json", cfg->model.init_from);
    if (access(model, F_OK))
        return 0;
    if (!is_set(ctx, "tokenizer.type") && !is_set(ctx, "tokenizer.path")) {
        cfg->tokenizer.type = TOKENIZER_HF;
        free(cfg->tokenizer.path);
        cfg->tokenizer.path = vkt_strdup(cfg->model.init_from);
        return 0;
    }
    if (cfg->tokenizer.type == TOKENIZER_BYTE)
        return config_fail(ctx, K("tokenizer.type"),
                           "tokenizer.type: byte, but model.init_from holds %s, the tokenizer the model was "
                           "trained with (drop the tokenizer section to use it)",
                           model);
    if (!cfg->tokenizer.path)
        return 0; /* reported below: hf needs a path */
    tokenizer_json_path(cfg->tokenizer.path, mine, sizeof mine);
    if (!same_file_content(mine, model))
        return config_fail(ctx, K("tokenizer.path"),
                           "tokenizer.path: %s differs from %s, the tokenizer model.init_from was trained with "
                           "(drop the tokenizer section to use it)",
                           mine, model);
    return 0;
}

/* The targets as a set: whether a and b name the same modules' suffixes. */
static int same_targets(char **a, int na, json_t *b)
{
    if ((size_t)na != json_array_size(b))
        return 0;
    for (int i = 0; i < na; i++) {
        int found = 0;
        for (size_t k = 0; k < json_array_size(b) && !found; k++)
            found = !strcmp(a[i], json_string_value(json_array_get(b, k)));
        if (!found)
            return 0;
    }
    return 1;
}

/* lora.init_from's adapter_config.json gives rank, alpha and targets; keys
 * the recipe sets must agree with it. Its lora_dropout, a training
 * setting, is taken unless the recipe sets lora.dropout. Only plain LoRA
 * is read. */
static int read_lora_init(struct config_ctx *ctx)
{
    struct config_lora *l = &ctx->cfg->lora;
    int ki = K("lora.init_from");
    char file[4096];
    vkt_path(file, sizeof file, "%s/adapter_config.json", l->init_from);
    json_error_t je;
    json_t *j = json_load_file(file, 0, &je);
    if (!j)
        return config_fail(ctx, ki, "lora.init_from: %s: %s", file, je.text);
    const char *type = json_string_value(json_object_get(j, "peft_type"));
    json_t *r = json_object_get(j, "r"), *alpha = json_object_get(j, "lora_alpha");
    json_t *targets = json_object_get(j, "target_modules"), *dropout = json_object_get(j, "lora_dropout");
    int rc = 0;
    size_t i;
    json_t *v;
    if (!type || strcmp(type, "LORA"))
        rc = config_fail(ctx, ki, "lora.init_from: %s: peft_type is %s, not \"LORA\"", file, type ? type : "missing");
    else if (!json_is_integer(r) || json_integer_value(r) < 1 || !json_is_number(alpha) ||
             json_number_value(alpha) <= 0)
        rc = config_fail(ctx, ki, "lora.init_from: %s: needs a positive integer \"r\" and a positive \"lora_alpha\"",
                         file);
    else if (json_is_true(json_object_get(j, "use_dora")) || json_is_true(json_object_get(j, "use_rslora")) ||
             json_object_size(json_object_get(j, "rank_pattern")) ||
             json_object_size(json_object_get(j, "alpha_pattern")))
        rc = config_fail(ctx, ki,
                         "lora.init_from: %s: DoRA, rsLoRA and per-module rank or alpha patterns are not "
                         "supported (plain LoRA only)",
                         file);
    else if (dropout && !json_is_null(dropout) &&
             !(json_is_number(dropout) && json_number_value(dropout) >= 0 && json_number_value(dropout) < 1))
        rc = config_fail(ctx, ki, "lora.init_from: %s: lora_dropout must be a number in [0, 1)", file);
    else if (!json_is_array(targets) || !json_array_size(targets))
        rc = config_fail(ctx, ki,
                         "lora.init_from: %s: target_modules must be a list of module names (a regular "
                         "expression is not supported)",
                         file);
    json_array_foreach(targets, i, v) if (!rc && !json_is_string(v)) rc =
        config_fail(ctx, ki, "lora.init_from: %s: target_modules[%zu] is not a string", file, i);
    if (!rc && is_set(ctx, "lora.rank") && l->rank != json_integer_value(r))
        rc = config_fail(ctx, K("lora.rank"), "lora.rank: %d disagrees with r = %lld in %s (drop the key)", l->rank,
                         (long long)json_integer_value(r), file);
    if (!rc && is_set(ctx, "lora.alpha") && fabs(l->alpha - json_number_value(alpha)) > 1e-9 * l->alpha)
        rc = config_fail(ctx, K("lora.alpha"), "lora.alpha: %g disagrees with lora_alpha = %g in %s (drop the key)",
                         l->alpha, json_number_value(alpha), file);
    if (!rc && is_set(ctx, "lora.targets") && !same_targets(l->targets, l->n_targets, targets))
        rc =
            config_fail(ctx, K("lora.targets"), "lora.targets: differs from target_modules in %s (drop the key)", file);
    if (!rc) {
        l->rank = (int)json_integer_value(r);
        l->alpha = json_number_value(alpha);
        if (!is_set(ctx, "lora.dropout") && json_is_number(dropout))
            l->dropout = json_number_value(dropout);
        if (!is_set(ctx, "lora.targets")) {
            l->targets = vkt_calloc(json_array_size(targets) + 1, sizeof *l->targets, "lora targets");
            json_array_foreach(targets, i, v) l->targets[l->n_targets++] = vkt_strdup(json_string_value(v));
        }
    }
    json_decref(j);
    return rc;
}

static int check_lora(struct config_ctx *ctx)
{
    struct config_lora *l = &ctx->cfg->lora;
    if (l->init_from && read_lora_init(ctx))
        return -1;
    if (!l->rank) { /* off: the other keys at their defaults (as a printed recipe has them) */
        const char *bad = l->alpha != 0      ? "lora.alpha"
                          : l->dropout != 0  ? "lora.dropout"
                          : l->n_targets     ? "lora.targets"
                          : l->merge_on_save ? "lora.merge_on_save"
                                             : NULL;
        if (bad)
            return config_fail(ctx, K(bad), "%s: LoRA is off (lora.rank is 0); set lora.rank or lora.init_from", bad);
        return 0;
    }
    if (!is_set(ctx, "lora.alpha") && !l->init_from)
        l->alpha = 2.0 * l->rank;
    if (!l->n_targets) {
        /* PEFT's defaults for these architectures */
        static const char *const llama[] = {"q_proj", "v_proj", NULL}, *const gpt2[] = {"c_attn", NULL},
                                 *const phi3[] = {"qkv_proj", NULL};
        const char *const *def = ctx->cfg->model.arch == ARCH_GPT2 ? gpt2 : ctx->cfg->model.fused_proj ? phi3 : llama;
        free(l->targets);
        l->targets = vkt_calloc(3, sizeof *l->targets, "lora targets");
        for (int i = 0; def[i]; i++)
            l->targets[l->n_targets++] = vkt_strdup(def[i]);
    }
    return 0;
}

/* What precision: reproducible does not support yet (docs/reproducible.md);
 * the world size is checked at start-up (train.c). */
static int check_reproducible(struct config_ctx *ctx)
{
    const struct config *c = ctx->cfg;
    const char *why = " is not supported with precision: reproducible (docs/reproducible.md); use precision: fp32";
    if (c->model.base_dtype != BASE_FP32)
        return config_fail(ctx, K("model.base_dtype"), "model.base_dtype: %s%s",
                           c->model.base_dtype == BASE_BF16 ? "bf16" : "nf4", why);
    if (c->lora.rank)
        return config_fail(ctx, K(is_set(ctx, "lora.rank") ? "lora.rank" : "lora.init_from"), "lora: LoRA%s", why);
    if (c->dist.zero)
        return config_fail(ctx, K("dist.zero"), "dist.zero: ZeRO-1%s", why);
    if (c->model.qk_norm) /* its weight gradients sum rows of heads, not the tree over samples */
        return config_fail(ctx, K(is_set(ctx, "model.qk_norm") ? "model.qk_norm" : "model.init_from"),
                           "model.qk_norm: a model with per-head q/k norms (Qwen3)%s", why);
    if (c->model.mlp_activation != MLP_SILU) /* GeGLU has no reproducible kernel yet */
        return config_fail(ctx, K(is_set(ctx, "model.mlp_activation") ? "model.mlp_activation" : "model.init_from"),
                           "model.mlp_activation: the Gemma family's GeGLU%s", why);
    if (c->batch_size <= 0 || (c->batch_size & (c->batch_size - 1)))
        return config_fail(ctx, K("batch_size"),
                           "batch_size: %d is not a power of two: precision: reproducible sums a micro-batch's "
                           "samples in an aligned subtree of its tree over samples (docs/reproducible.md); use "
                           "1, 2, 4, 8, ... (gradient_accumulation_steps may be any count)",
                           c->batch_size);
    return 0;
}

int config_resolve(struct config_ctx *ctx)
{
    struct tokenizer tok;
    char msg[2048];
    const struct config_tokenizer *tc = &ctx->cfg->tokenizer;
    if (tokenizer_of_model(ctx))
        return -1;
    if (tc->type == TOKENIZER_BYTE && tc->path)
        return config_fail(ctx, K("tokenizer.path"), "tokenizer.path: only tokenizer.type hf reads a file");
    if (tc->type == TOKENIZER_HF && !tc->path &&
        require(ctx, "tokenizer.path", " (tokenizer.type hf reads a tokenizer.json)"))
        return -1;
    if (tokenizer_open(&tok, tc, msg, sizeof msg))
        return config_fail(ctx, K(tc->type == TOKENIZER_HF ? "tokenizer.path" : "tokenizer.type"), "%s", msg);
    int tokenizer_size = tok.size;
    tokenizer_close(&tok);
    if (require(ctx, "output_dir", ""))
        return -1;
    if (check_model(ctx, tokenizer_size) || check_data(ctx) || check_lora(ctx) || check_sizes(ctx))
        return -1;
    if (ctx->cfg->model.base_dtype != BASE_FP32 && !ctx->cfg->lora.rank)
        return config_fail(ctx, K("model.base_dtype"),
                           "model.base_dtype: %s stores frozen weights, and only LoRA freezes them: add a lora "
                           "section (lora.rank or lora.init_from), or use fp32",
                           ctx->cfg->model.base_dtype == BASE_BF16 ? "bf16" : "nf4");
    if (ctx->cfg->model.nf4_double_quant && ctx->cfg->model.base_dtype != BASE_NF4)
        return config_fail(ctx, K("model.nf4_double_quant"),
                           "model.nf4_double_quant: quantizes the scales of an NF4 base; set model.base_dtype: nf4 "
                           "(with a lora section), or leave it false");
    if (ctx->cfg->precision == PRECISION_REPRODUCIBLE && check_reproducible(ctx))
        return -1;
    if (ctx->cfg->resume && ctx->cfg->overwrite)
        return config_fail(ctx, K(ctx->set[K("overwrite")] ? "overwrite" : "resume"),
                           "resume and overwrite: resume: true continues the run in output_dir, overwrite: "
                           "true replaces it; set only one");
    return 0;
}
