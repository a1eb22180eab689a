/* hfconfig: config.json for LlamaForCausalLM and GPT2LMHeadModel (see the
 * header). One key table per architecture maps JSON keys to struct fields,
 * with the transformers default for optional keys, so reading and writing
 * walk the same list. Never prints and never exits. */
#include "vktrain/hfconfig.h"

#include "vktrain/safetensors.h"
#include "vktrain/util.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* K_IDS: an integer, or a non-empty list of them (Llama 3.x's
 * eos_token_id), of which the first is kept. */
enum kind { K_INT, K_REAL, K_BOOL, K_IDS };

/* A key: its field, whether it must be present, and the default otherwise. */
struct key {
    const char *name;
    enum kind kind;
    size_t off;
    int required;
    double def;
};

#define F(field) offsetof(struct hf_config, field)
/* n_kv_heads < 0 and hidden_dim < 0 mean "derive after reading". */
static const struct key llama_keys[] = {
    {"vocab_size", K_INT, F(vocab_size), 1, 0},
    {"hidden_size", K_INT, F(dim), 1, 0},
    {"intermediate_size", K_INT, F(hidden_dim), 1, 0},
    {"num_hidden_layers", K_INT, F(n_layers), 1, 0},
    {"num_attention_heads", K_INT, F(n_heads), 1, 0},
    {"num_key_value_heads", K_INT, F(n_kv_heads), 0, -1},
    {"max_position_embeddings", K_INT, F(max_seq_len), 0, 2048},
    {"rms_norm_eps", K_REAL, F(norm_eps), 0, 1e-6},
    {"rope_theta", K_REAL, F(rope_theta), 0, 10000.0},
    {"tie_word_embeddings", K_BOOL, F(tie_embeddings), 0, 0},
};
static const struct key gpt2_keys[] = {
    {"vocab_size", K_INT, F(vocab_size), 1, 0},
    {"n_embd", K_INT, F(dim), 1, 0},
    {"n_layer", K_INT, F(n_layers), 1, 0},
    {"n_head", K_INT, F(n_heads), 1, 0},
    {"n_positions", K_INT, F(max_seq_len), 0, 1024},
    {"n_inner", K_INT, F(hidden_dim), 0, -1},
    {"layer_norm_epsilon", K_REAL, F(norm_eps), 0, 1e-5},
    {"tie_word_embeddings", K_BOOL, F(tie_embeddings), 0, 1},
};
static const struct key token_keys[] = {
    {"bos_token_id", K_INT, F(bos_token_id), 0, -1},
    {"eos_token_id", K_IDS, F(eos_token_id), 0, -1},
    {"pad_token_id", K_INT, F(pad_token_id), 0, -1},
};
#undef F
#define NKEYS(a) (int)(sizeof a / sizeof a[0])


static const char *type_name(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a real";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* Token ids and derived keys may be null (absent); other keys may not. */
static int read_keys(const char *path, json_t *root, const struct key *keys, int n, int null_ok, struct hf_config *c,
                     char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        const struct key *k = &keys[i];
        void *p = (char *)c + k->off;
        json_t *j = json_object_get(root, k->name);
        int absent = !j || (json_is_null(j) && (null_ok || k->def < 0));
        if (absent && k->required)
            return vkt_error(err, errlen, "%s: missing required key '%s'", path, k->name);
        if (k->kind == K_REAL) {
            if (!absent && !json_is_number(j))
                return vkt_error(err, errlen, "%s: '%s' must be a number, not %s", path, k->name, type_name(j));
            *(double *)p = absent ? k->def : json_number_value(j);
            if (!(*(double *)p >= 0))
                return vkt_error(err, errlen, "%s: '%s' must be non-negative", path, k->name);
        } else if (k->kind == K_BOOL) {
            if (!absent && !json_is_boolean(j))
                return vkt_error(err, errlen, "%s: '%s' must be true or false, not %s", path, k->name, type_name(j));
            *(int *)p = absent ? (int)k->def : json_is_true(j);
        } else {
            size_t n_ids = !absent && k->kind == K_IDS && json_is_array(j) ? json_array_size(j) : 1;
            if (!absent && k->kind == K_IDS && json_is_array(j) && n_ids == 0)
                return vkt_error(err, errlen, "%s: '%s' is an empty list", path, k->name);
            for (size_t e = n_ids; e-- > 0;) {
                json_t *x = k->kind == K_IDS && json_is_array(j) ? json_array_get(j, e) : j;
                if (!absent && !json_is_integer(x))
                    return vkt_error(err, errlen, "%s: '%s' must be an integer%s, not %s", path, k->name,
                                     k->kind == K_IDS ? " or a list of integers" : "", type_name(x));
                json_int_t v = absent ? (json_int_t)k->def : json_integer_value(x);
                if (!absent && (v < (k->def < 0 ? 0 : 1) || v > INT_MAX))
                    return vkt_error(err, errlen, "%s: '%s' = %lld is out of range", path, k->name, (long long)v);
                *(int *)p = (int)v;
            }
        }
    }
    return 0;
}

/* A string key that, when present, must have one of the allowed values. */
static int check_string(const char *path, json_t *root, const char *key, const char *const *allowed, char *err,
                        size_t errlen)
{
    json_t *j = json_object_get(root, key);
    if (!j || json_is_null(j))
        return 0;
    if (!json_is_string(j))
        return vkt_error(err, errlen, "%s: '%s' must be a string, not %s", path, key, type_name(j));
    for (int i = 0; allowed[i]; i++)
        if (!strcmp(json_string_value(j), allowed[i]))
            return 0;
    return vkt_error(err, errlen, "%s: %s '%s' is not supported (want '%s')", path, key, json_string_value(j), allowed[0]);
}

/* A number inside rope_scaling; required. */
static int scaling_number(const char *path, json_t *rs, const char *key, double *out, char *err, size_t errlen)
{
    json_t *j = json_object_get(rs, key);
    if (!json_is_number(j) || !(json_number_value(j) > 0))
        return vkt_error(err, errlen, "%s: 'rope_scaling.%s' must be a positive number", path, key);
    *out = json_number_value(j);
    return 0;
}

/* A list of one positive number per rotated pair in rope_scaling. */
static int factor_list(const char *path, json_t *rs, const char *key, int pairs, double *out, char *err, size_t errlen)
{
    json_t *j = json_object_get(rs, key);
    if (!json_is_array(j) || json_array_size(j) != (size_t)pairs)
        return vkt_error(err, errlen, "%s: 'rope_scaling.%s' must be a list of %d numbers (one per rotated pair)", path,
                         key, pairs);
    for (int i = 0; i < pairs; i++) {
        json_t *x = json_array_get(j, (size_t)i);
        if (!json_is_number(x) || !(json_number_value(x) > 0))
            return vkt_error(err, errlen, "%s: 'rope_scaling.%s'[%d] must be a positive number", path, key, i);
        out[i] = json_number_value(x);
    }
    return 0;
}

/* longrope (Phi-3 128k, Phi-3.5, Phi-4-mini): short_factor and long_factor
 * per rotated pair, original_max_position_embeddings (in rope_scaling or
 * beside it), attention_factor or transformers' default
 * √(1 + ln(max / original) / ln(original)) when max > original, else 1. */
static int read_longrope(const char *path, json_t *root, json_t *rs, struct hf_config *c, char *err, size_t errlen)
{
    int rot = c->rotary_dim ? c->rotary_dim : c->head_dim, pairs = rot / 2;
    if (pairs > (int)(sizeof c->rope_short / sizeof c->rope_short[0]))
        return vkt_error(err, errlen, "%s: longrope over %d rotated dimensions: at most 256 are supported", path, rot);
    c->rope_scaling = 3;
    if (factor_list(path, rs, "short_factor", pairs, c->rope_short, err, errlen) ||
        factor_list(path, rs, "long_factor", pairs, c->rope_long, err, errlen))
        return -1;
    json_t *om = json_object_get(rs, "original_max_position_embeddings");
    if (!om)
        om = json_object_get(root, "original_max_position_embeddings");
    if (!json_is_integer(om) || json_integer_value(om) < 2 || json_integer_value(om) > INT_MAX)
        return vkt_error(err, errlen, "%s: longrope needs an integer original_max_position_embeddings above 1", path);
    c->rope_original_max = (int)json_integer_value(om);
    json_t *af = json_object_get(rs, "attention_factor");
    double factor = (double)c->max_seq_len / c->rope_original_max;
    if (af && !json_is_null(af)) {
        if (!json_is_number(af) || !(json_number_value(af) > 0))
            return vkt_error(err, errlen, "%s: 'rope_scaling.attention_factor' must be a positive number", path);
        c->rope_attention = json_number_value(af);
    } else {
        c->rope_attention = factor <= 1 ? 1 : sqrt(1 + log(factor) / log((double)c->rope_original_max));
    }
    return 0;
}

/* rope_scaling: null, or {"rope_type" (or "type"): default | linear | llama3 | longrope, ...}. */
static int read_rope_scaling(const char *path, json_t *root, struct hf_config *c, char *err, size_t errlen)
{
    json_t *rs = json_object_get(root, "rope_scaling");
    if (!rs || json_is_null(rs))
        return 0;
    if (!json_is_object(rs))
        return vkt_error(err, errlen, "%s: 'rope_scaling' must be an object or null, not %s", path, type_name(rs));
    json_t *t = json_object_get(rs, "rope_type");
    if (!t)
        t = json_object_get(rs, "type");
    const char *type = json_string_value(t);
    if (!type)
        return vkt_error(err, errlen, "%s: 'rope_scaling' has no string 'rope_type'", path);
    if (!strcmp(type, "default"))
        return 0;
    if (!strcmp(type, "linear")) {
        c->rope_scaling = 1;
        return scaling_number(path, rs, "factor", &c->rope_factor, err, errlen);
    }
    if (!strcmp(type, "longrope") || !strcmp(type, "su"))
        return read_longrope(path, root, rs, c, err, errlen);
    if (strcmp(type, "llama3"))
        return vkt_error(err, errlen,
                         "%s: 'rope_scaling' of type '%s' is not supported (llama3, linear, longrope and default are)",
                         path, type);
    double orig = 0;
    c->rope_scaling = 2;
    if (scaling_number(path, rs, "factor", &c->rope_factor, err, errlen) ||
        scaling_number(path, rs, "low_freq_factor", &c->rope_low_freq_factor, err, errlen) ||
        scaling_number(path, rs, "high_freq_factor", &c->rope_high_freq_factor, err, errlen) ||
        scaling_number(path, rs, "original_max_position_embeddings", &orig, err, errlen))
        return -1;
    if (orig > INT_MAX || c->rope_high_freq_factor <= c->rope_low_freq_factor)
        return vkt_error(err, errlen,
                         "%s: 'rope_scaling' needs high_freq_factor > low_freq_factor and an int "
                         "original_max_position_embeddings",
                         path);
    c->rope_original_max = (int)orig;
    return 0;
}

/* A boolean key that changes the math: must be absent, null or `want`. */
static int require_bool(const char *path, json_t *root, const char *key, int want, char *err, size_t errlen)
{
    json_t *j = json_object_get(root, key);
    if (!j || json_is_null(j) || (json_is_boolean(j) && json_is_true(j) == want))
        return 0;
    return vkt_error(err, errlen, "%s: '%s': %s is not supported", path, key,
                     json_is_boolean(j) ? (want ? "false" : "true") : "a non-boolean");
}

/* A per-layer list of config.json (layer_types, no_rope_layers): absent or
 * null leaves *out as it is (-> 0 with *given 0); else one entry per layer,
 * each the string or integer `member` (added to *out) or `other`. */
static int read_layer_list(const char *path, json_t *root, const char *key, const struct hf_config *c,
                           const char *member, const char *other, struct vkt_layers *out, int *given, char *err,
                           size_t errlen)
{
    json_t *list = json_object_get(root, key);
    *given = list && !json_is_null(list);
    if (!*given)
        return 0;
    if (!json_is_array(list) || json_array_size(list) != (size_t)c->n_layers)
        return vkt_error(err, errlen, "%s: '%s' must be a list of num_hidden_layers = %d entries", path, key,
                         c->n_layers);
    memset(out, 0, sizeof *out);
    for (int l = 0; l < c->n_layers; l++) {
        json_t *e = json_array_get(list, (size_t)l);
        char num[24] = "";
        if (json_is_integer(e))
            snprintf(num, sizeof num, "%lld", (long long)json_integer_value(e));
        const char *v = json_is_string(e) ? json_string_value(e) : num;
        if (!strcmp(v, member))
            vkt_layers_add(out, (uint32_t)l);
        else if (strcmp(v, other))
            return vkt_error(err, errlen, "%s: '%s'[%d] is %s%s%s, which is not supported (%s or %s are)", path, key,
                             l, *v ? "'" : "a ", *v ? v : type_name(e), *v ? "'" : "", member, other);
    }
    return 0;
}

/* The window of qwen2, qwen3 and smollm3: sliding_window with
 * use_sliding_window, on the layers layer_types names sliding_attention;
 * without layer_types, Qwen's first max_window_layers [28] attend globally
 * and SmolLM3's layers with RoPE (transformers' own derivations). */
static int read_layer_window(const char *path, json_t *root, struct hf_config *c, char *err, size_t errlen)
{
    json_t *use = json_object_get(root, "use_sliding_window"), *sw = json_object_get(root, "sliding_window");
    if (use && !json_is_null(use) && !json_is_boolean(use))
        return vkt_error(err, errlen, "%s: 'use_sliding_window' must be true or false", path);
    if (sw && !json_is_null(sw) && (!json_is_integer(sw) || json_integer_value(sw) < 1))
        return vkt_error(err, errlen, "%s: 'sliding_window' must be a positive integer or null", path);
    int given;
    if (read_layer_list(path, root, "layer_types", c, "full_attention", "sliding_attention", &c->full_layers, &given,
                        err, errlen))
        return -1;
    if (!given && strcmp(c->model_type, "smollm3")) {
        json_t *mw = json_object_get(root, "max_window_layers");
        if (mw && !json_is_null(mw) && (!json_is_integer(mw) || json_integer_value(mw) < 0))
            return vkt_error(err, errlen, "%s: 'max_window_layers' must be a non-negative integer", path);
        json_int_t first = mw && json_is_integer(mw) ? json_integer_value(mw) : 28;
        for (int l = 0; l < c->n_layers && l < first; l++)
            vkt_layers_add(&c->full_layers, (uint32_t)l);
    } else if (!given) {
        for (int l = 0; l < c->n_layers; l++)
            if (!vkt_layers_has(&c->nope_layers, (uint32_t)l))
                vkt_layers_add(&c->full_layers, (uint32_t)l);
    }
    json_int_t w = json_is_true(use) && json_is_integer(sw) ? json_integer_value(sw) : 0;
    /* a window that holds every position, or that no layer has, is none */
    if (w >= c->max_seq_len || vkt_layers_count(&c->full_layers, (uint32_t)c->n_layers) == (uint32_t)c->n_layers)
        w = 0;
    c->sliding_window = (int)w;
    if (!w)
        memset(&c->full_layers, 0, sizeof c->full_layers);
    return 0;
}

/* gemma, gemma2, gemma3_text: (1 + w) norms, GeGLU-tanh (hidden_activation,
 * else gelu_pytorch_tanh as transformers uses when it is absent), √hidden
 * embedding scale; gemma2/3: post norms, query_pre_attn_scalar, windows
 * (gemma2 on even layers; gemma3 from layer_types or every
 * sliding_window_pattern-th layer global), gemma3's q/k norms and local
 * RoPE base, gemma2/3's soft-capping. */
static int check_gemma(const char *path, json_t *root, struct hf_config *c, char *err, size_t errlen)
{
    static const char *const tanh_gelu[] = {"gelu_pytorch_tanh", NULL};
    int gemma2 = !strcmp(c->model_type, "gemma2"), gemma3 = !strcmp(c->model_type, "gemma3_text");
    /* soft-capping (Gemma 2 and 3; Gemma 1's config has none): absent is
     * transformers' default, 50 and 30 in Gemma 2, none in Gemma 3 */
    static const char *const softcaps[] = {"attn_logit_softcapping", "final_logit_softcapping"};
    double *caps[] = {&c->attn_softcap, &c->final_softcap}, gemma2_caps[] = {50.0, 30.0};
    for (int i = 0; i < 2 && (gemma2 || gemma3); i++) {
        json_t *v = json_object_get(root, softcaps[i]);
        if (v && !json_is_null(v) && !(json_is_number(v) && json_number_value(v) > 0))
            return vkt_error(err, errlen, "%s: '%s' must be a positive number or null", path, softcaps[i]);
        *caps[i] = !v ? (gemma2 ? gemma2_caps[i] : 0) : json_is_number(v) ? json_number_value(v) : 0;
    }
    if (check_string(path, root, "hidden_activation", tanh_gelu, err, errlen) ||
        require_bool(path, root, "use_bidirectional_attention", 0, err, errlen) ||
        require_bool(path, root, "attention_bias", 0, err, errlen))
        return -1;
    c->norm_offset = c->mlp_gelu = 1;
    c->embed_scale = sqrt((double)c->dim);
    c->post_norms = gemma2 || gemma3;
    c->qk_norm = gemma3;
    if (!c->post_norms)
        return 0;
    json_t *qs = json_object_get(root, "query_pre_attn_scalar");
    if (qs && !json_is_null(qs) && !(json_is_number(qs) && json_number_value(qs) > 0))
        return vkt_error(err, errlen, "%s: 'query_pre_attn_scalar' must be a positive number", path);
    c->attn_scalar = qs && json_is_number(qs) ? json_number_value(qs) : gemma2 ? 224 : 256;
    json_t *sw = json_object_get(root, "sliding_window");
    if (sw && !json_is_null(sw) && (!json_is_integer(sw) || json_integer_value(sw) < 1))
        return vkt_error(err, errlen, "%s: 'sliding_window' must be a positive integer or null", path);
    json_int_t w = !sw ? 4096 : json_is_integer(sw) ? json_integer_value(sw) : 0;
    int given;
    if (read_layer_list(path, root, "layer_types", c, "full_attention", "sliding_attention", &c->full_layers, &given,
                        err, errlen))
        return -1;
    json_t *pat = json_object_get(root, "sliding_window_pattern");
    if (pat && !json_is_null(pat) && (!json_is_integer(pat) || json_integer_value(pat) < 1))
        return vkt_error(err, errlen, "%s: 'sliding_window_pattern' must be a positive integer", path);
    json_int_t every = gemma2 ? 2 : pat && json_is_integer(pat) ? json_integer_value(pat) : 6;
    for (int l = 0; !given && l < c->n_layers; l++) /* gemma2: odd layers global; gemma3: every 6th */
        if ((l + 1) % every == 0)
            vkt_layers_add(&c->full_layers, (uint32_t)l);
    if (w >= c->max_seq_len || vkt_layers_count(&c->full_layers, (uint32_t)c->n_layers) == (uint32_t)c->n_layers)
        w = 0;
    c->sliding_window = (int)w;
    if (!w && !gemma3) /* gemma3 keeps its layer types: they choose the RoPE base too */
        memset(&c->full_layers, 0, sizeof c->full_layers);
    if (gemma3) {
        json_t *lb = json_object_get(root, "rope_local_base_freq");
        if (lb && !json_is_null(lb) && !(json_is_number(lb) && json_number_value(lb) > 0))
            return vkt_error(err, errlen, "%s: 'rope_local_base_freq' must be a positive number", path);
        c->rope_local_theta = lb && json_is_number(lb) ? json_number_value(lb) : 10000;
    }
    return 0;
}

/* The llama family's options: biases, rope scaling, head_dim, sliding window. */
static int check_llama(const char *path, json_t *root, struct hf_config *c, char *err, size_t errlen)
{
    static const char *const silu[] = {"silu", NULL};
    int gemma = !strncmp(c->model_type, "gemma", 5);
    if (gemma ? check_gemma(path, root, c, err, errlen) : check_string(path, root, "hidden_act", silu, err, errlen))
        return -1;
    int qwen2 = !strcmp(c->model_type, "qwen2"), qwen3 = !strcmp(c->model_type, "qwen3");
    int smollm3 = !strcmp(c->model_type, "smollm3"), phi3 = !strcmp(c->model_type, "phi3");
    c->fused_proj = phi3; /* Phi3Attention: qkv_proj and o_proj without biases; Phi3MLP: gate_up_proj */
    if (qwen2) {
        c->qkv_bias = 1; /* Qwen2Attention: q/k/v_proj with bias, o_proj without */
    } else if (!strcmp(c->model_type, "llama") || qwen3 || smollm3) {
        json_t *ab = json_object_get(root, "attention_bias"), *mb = json_object_get(root, "mlp_bias");
        if ((ab && !json_is_boolean(ab) && !json_is_null(ab)) || (mb && !json_is_boolean(mb) && !json_is_null(mb)))
            return vkt_error(err, errlen, "%s: 'attention_bias' and 'mlp_bias' must be true or false", path);
        c->qkv_bias = c->o_bias = json_is_true(ab);
        c->mlp_bias = !qwen3 && json_is_true(mb); /* Qwen3's MLP has no biases */
        c->qk_norm = qwen3;
    }
    if (smollm3) { /* no_rope_layers, else every no_rope_layer_interval-th [4] layer without RoPE */
        int given;
        if (read_layer_list(path, root, "no_rope_layers", c, "0", "1", &c->nope_layers, &given, err, errlen))
            return -1;
        json_t *iv = json_object_get(root, "no_rope_layer_interval");
        if (!given && iv && !json_is_null(iv) && (!json_is_integer(iv) || json_integer_value(iv) < 1))
            return vkt_error(err, errlen, "%s: 'no_rope_layer_interval' must be a positive integer", path);
        json_int_t every = !given && json_is_integer(iv) ? json_integer_value(iv) : 4;
        for (int l = 0; !given && l < c->n_layers; l++)
            if ((l + 1) % every == 0)
                vkt_layers_add(&c->nope_layers, (uint32_t)l);
    }
    if (qwen2 || qwen3 || smollm3) {
        if (read_layer_window(path, root, c, err, errlen))
            return -1;
    } else if (!strcmp(c->model_type, "mistral") || phi3) { /* mistral's default window is 4096, phi3's none */
        json_t *sw = json_object_get(root, "sliding_window");
        json_int_t w = !sw ? (phi3 ? 0 : 4096) : json_is_integer(sw) ? json_integer_value(sw) : 0;
        if (sw && !json_is_null(sw) && (!json_is_integer(sw) || w < 1))
            return vkt_error(err, errlen, "%s: 'sliding_window' must be a positive integer or null", path);
        /* a window that holds every position is no window */
        c->sliding_window = w < c->max_seq_len ? (int)w : 0;
    }
    /* head_dim: Qwen2 has none (the quotient), Qwen3's default is 128,
     * Gemma's 256, the others' the quotient. */
    json_t *hd = qwen2 ? NULL : json_object_get(root, "head_dim");
    if (hd && !json_is_null(hd)) {
        if (!json_is_integer(hd) || json_integer_value(hd) < 1 || json_integer_value(hd) > INT_MAX / c->n_heads)
            return vkt_error(err, errlen, "%s: 'head_dim' must be a positive integer with num_attention_heads x "
                             "head_dim below 2^31", path);
        c->head_dim = (int)json_integer_value(hd);
    } else if (qwen3 || gemma) {
        c->head_dim = gemma ? 256 : 128;
    } else {
        if (c->dim % c->n_heads)
            return vkt_error(err, errlen, "%s: num_attention_heads = %d does not divide hidden_size = %d (and there "
                             "is no head_dim)", path, c->n_heads, c->dim);
        c->head_dim = c->dim / c->n_heads;
    }
    /* partial_rotary_factor (phi3, transformers >= 4.45): RoPE on the first
     * int(head_dim x factor) dimensions of each head */
    json_t *pr = phi3 ? json_object_get(root, "partial_rotary_factor") : NULL;
    if (pr && !json_is_null(pr)) {
        double f = json_number_value(pr);
        int rot = (int)(c->head_dim * f);
        if (!json_is_number(pr) || !(f > 0 && f <= 1) || rot < 2 || rot % 2)
            return vkt_error(err, errlen, "%s: 'partial_rotary_factor' must be in (0, 1] and give an even number of "
                             "rotated dimensions (head_dim %d x %g)", path, c->head_dim, f);
        c->rotary_dim = rot == c->head_dim ? 0 : rot;
    }
    return read_rope_scaling(path, root, c, err, errlen);
}

/* GPT-2 attention options that change the math. */
static int check_gpt2(const char *path, json_t *root, char *err, size_t errlen)
{
    static const char *const gelu[] = {"gelu_new", "gelu_pytorch_tanh", NULL};
    return check_string(path, root, "activation_function", gelu, err, errlen) ||
           require_bool(path, root, "scale_attn_weights", 1, err, errlen) ||
           require_bool(path, root, "scale_attn_by_inverse_layer_idx", 0, err, errlen) ||
           require_bool(path, root, "add_cross_attention", 0, err, errlen);
}

/* model_type (or, in old configs, architectures[0]) and its defaults. */
static const struct family {
    const char *type, *architecture;
    enum hf_arch arch;
    /* transformers' defaults; kv -1: num_attention_heads */
    double kv_heads, max_positions, rope_theta, tied;
} families[] = {
    {"llama", "LlamaForCausalLM", HF_LLAMA, -1, 2048, 10000, 0},
    {"qwen2", "Qwen2ForCausalLM", HF_LLAMA, 32, 32768, 10000, 0},
    {"qwen3", "Qwen3ForCausalLM", HF_LLAMA, 32, 32768, 10000, 0},
    {"mistral", "MistralForCausalLM", HF_LLAMA, 8, 4096 * 32, 10000, 0},
    {"smollm3", "SmolLM3ForCausalLM", HF_LLAMA, 4, 32768, 2000000, 1},
    {"phi3", "Phi3ForCausalLM", HF_LLAMA, -1, 4096, 10000, 0},
    {"gemma", "GemmaForCausalLM", HF_LLAMA, 16, 8192, 10000, 1},
    {"gemma2", "Gemma2ForCausalLM", HF_LLAMA, 16, 8192, 10000, 1},
    {"gemma3_text", "Gemma3ForCausalLM", HF_LLAMA, 4, 131072, 1000000, 1},
    {"gpt2", "GPT2LMHeadModel", HF_GPT2, -1, 1024, 0, 1},
};
#define NFAMILIES (int)(sizeof families / sizeof families[0])

static const struct family *family_of(const char *path, json_t *root, char *err, size_t errlen)
{
    json_t *mt = json_object_get(root, "model_type");
    json_t *ar = json_array_get(json_object_get(root, "architectures"), 0);
    if (mt && !json_is_string(mt))
        return vkt_error(err, errlen, "%s: 'model_type' must be a string, not %s", path, type_name(mt)), NULL;
    const char *name = mt ? json_string_value(mt) : json_string_value(ar);
    if (!name)
        return vkt_error(err, errlen, "%s: missing required key 'model_type'", path), NULL;
    for (int i = 0; i < NFAMILIES; i++)
        if (!strcmp(name, mt ? families[i].type : families[i].architecture))
            return &families[i];
    vkt_error(err, errlen, "%s: unsupported %s '%s' (llama, qwen2, qwen3, mistral, smollm3, phi3, gemma, gemma2, gemma3_text, gemma3 and gpt2 are)", path,
              mt ? "model_type" : "architecture", name);
    return NULL;
}

/* quantization_config: bitsandbytes in 4 bits (transformers'
 * BitsAndBytesConfig with load_in_4bit), NF4 or FP4, with or without
 * double quantization, its packed weights in uint8; anything else is an
 * error naming it. */
static int bnb4_read(const char *path, json_t *qc, struct hf_config *c, char *err, size_t errlen)
{
    json_t *method = json_object_get(qc, "quant_method"), *four = json_object_get(qc, "load_in_4bit");
    const char *m = json_is_string(method) ? json_string_value(method) : "(no quant_method)";
    if (!json_is_object(qc) || strcmp(m, "bitsandbytes") || !json_is_true(four))
        return vkt_error(err, errlen,
                         "%s: quantization_config with quant_method '%s'%s is not supported (bitsandbytes in 4 bits "
                         "is; so is a full-precision folder, which model.base_dtype: nf4 quantizes)",
                         path, m,
                         strcmp(m, "bitsandbytes")                             ? ""
                         : json_is_true(json_object_get(qc, "load_in_8bit")) ? " in 8 bits"
                                                                              : " without load_in_4bit");
    json_t *type = json_object_get(qc, "bnb_4bit_quant_type"), *dq = json_object_get(qc, "bnb_4bit_use_double_quant"),
           *storage = json_object_get(qc, "bnb_4bit_quant_storage");
    const char *t = json_is_string(type) ? json_string_value(type) : type ? "(not a string)" : "fp4";
    if (strcmp(t, "nf4") && strcmp(t, "fp4"))
        return vkt_error(err, errlen, "%s: quantization_config.bnb_4bit_quant_type '%s' (nf4 and fp4 are read)", path,
                         t);
    if (dq && !json_is_boolean(dq))
        return vkt_error(err, errlen, "%s: quantization_config.bnb_4bit_use_double_quant is not true or false", path);
    if (storage && !json_is_null(storage) &&
        (!json_is_string(storage) || strcmp(json_string_value(storage), "uint8")))
        return vkt_error(err, errlen,
                         "%s: quantization_config.bnb_4bit_quant_storage '%s': only uint8 (the default) is read", path,
                         json_is_string(storage) ? json_string_value(storage) : "(not a string)");
    c->bnb4 = strcmp(t, "nf4") ? HF_BNB_FP4 : HF_BNB_NF4;
    c->bnb4_double = json_is_true(dq);
    return 0;
}

int hf_config_read(const char *path, struct hf_config *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root && jerr.line < 1) /* the file itself, not its text */
        return vkt_error(err, errlen, "cannot read %s: %s", path, jerr.text);
    if (!root)
        return vkt_error(err, errlen, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
    int rc = -1;
    const struct family *fam = NULL;
    if (!json_is_object(root)) {
        vkt_error(err, errlen, "%s: not a JSON object", path);
        goto done;
    }
    /* a quantized checkpoint: bitsandbytes' 4-bit (its layers' weights
     * stored as NF4 or FP4, model_io reads them); any other is refused */
    json_t *qc = json_object_get(root, "quantization_config");
    if (qc && !json_is_null(qc) && bnb4_read(path, qc, c, err, errlen))
        goto done;
    /* a multimodal Gemma 3: its text model, as the gemma3_text it holds */
    json_t *mt = json_object_get(root, "model_type"), *text = json_object_get(root, "text_config");
    if (json_is_string(mt) && !strcmp(json_string_value(mt), "gemma3")) {
        if (!json_is_object(text)) {
            vkt_error(err, errlen, "%s: a gemma3 config.json needs a 'text_config' object (its language model)", path);
            goto done;
        }
        json_t *t = json_deep_copy(text);
        json_object_set_new(t, "model_type", json_string("gemma3_text"));
        json_decref(root);
        root = t;
        c->multimodal = 1;
    }
    if (!(fam = family_of(path, root, err, errlen)) ||
        read_keys(path, root, token_keys, NKEYS(token_keys), 1, c, err, errlen))
        goto done;
    c->arch = fam->arch;
    snprintf(c->model_type, sizeof c->model_type, "%s", fam->type);
    if (c->arch == HF_LLAMA) {
        struct key keys[NKEYS(llama_keys)];
        memcpy(keys, llama_keys, sizeof keys);
        for (int i = 0; i < NKEYS(llama_keys); i++)
            if (!strcmp(keys[i].name, "num_key_value_heads"))
                keys[i].def = fam->kv_heads;
            else if (!strcmp(keys[i].name, "max_position_embeddings"))
                keys[i].def = fam->max_positions;
            else if (!strcmp(keys[i].name, "rope_theta"))
                keys[i].def = fam->rope_theta;
            else if (!strcmp(keys[i].name, "tie_word_embeddings"))
                keys[i].def = fam->tied;
        if (read_keys(path, root, keys, NKEYS(keys), 0, c, err, errlen))
            goto done;
        if (c->n_kv_heads < 0)
            c->n_kv_heads = c->n_heads;
        if (check_llama(path, root, c, err, errlen))
            goto done;
    } else {
        /* Older configs give the context as n_ctx only. */
        json_t *ctx = json_object_get(root, "n_ctx");
        if (!json_object_get(root, "n_positions") && json_is_integer(ctx))
            json_object_set(root, "n_positions", ctx);
        if (read_keys(path, root, gpt2_keys, NKEYS(gpt2_keys), 0, c, err, errlen) ||
            check_gpt2(path, root, err, errlen))
            goto done;
        c->n_kv_heads = c->n_heads;
        c->head_dim = c->n_heads && c->dim % c->n_heads == 0 ? c->dim / c->n_heads : 0;
        if (c->hidden_dim < 0 && c->dim > INT_MAX / 4) {
            vkt_error(err, errlen, "%s: 'n_inner' is absent and its default 4 x n_embd = 4 x %d is more than 2^31 - 1",
                      path, c->dim);
            goto done;
        }
        if (c->hidden_dim < 0)
            c->hidden_dim = 4 * c->dim;
    }
    rc = 0;
done:
    json_decref(root);
    return rc;
}

static void write_keys(json_t *root, const struct key *keys, int n, const struct hf_config *c)
{
    for (int i = 0; i < n; i++) {
        const void *p = (const char *)c + keys[i].off;
        json_t *v = keys[i].kind == K_REAL   ? json_real(*(const double *)p)
                    : keys[i].kind == K_BOOL ? json_boolean(*(const int *)p)
                                             : json_integer(*(const int *)p);
        if (keys[i].kind != K_INT || *(const int *)p >= 0)
            json_object_set_new(root, keys[i].name, v);
        else
            json_decref(v);
    }
}

/* The shortest of 15 or 17 digits that gives every real back exactly, so
 * 1e-05 reads as 1e-05 and any other value still round-trips. */
static int real_precision(const struct hf_config *c)
{
    const double v[] = {c->norm_eps, c->rope_theta};
    char buf[64];
    for (int i = 0; i < 2; i++) {
        snprintf(buf, sizeof buf, "%.15g", v[i]);
        if (strtod(buf, NULL) != v[i])
            return 17;
    }
    return 15;
}

static void put_tokens_and_dtype(json_t *root, const struct hf_config *c)
{
    const int ids[] = {c->bos_token_id, c->eos_token_id, c->pad_token_id};
    for (int i = 0; i < NKEYS(token_keys); i++) {
        /* A list of end ids (Llama 3.x) that holds the tokenizer's eos stays. */
        json_t *list = json_object_get(root, token_keys[i].name);
        int kept = 0;
        for (size_t e = 0; token_keys[i].kind == K_IDS && json_is_array(list) && e < json_array_size(list); e++)
            kept |= json_integer_value(json_array_get(list, e)) == ids[i];
        if (ids[i] >= 0 && !kept)
            json_object_set_new(root, token_keys[i].name, json_integer(ids[i]));
    }
    json_object_set_new(root, "torch_dtype", json_string(c->save_bf16 ? "bfloat16" : "float32"));
}

static int dump_atomic(const char *path, json_t *root, int precision, char *err, size_t errlen)
{
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(precision));
    if (!text)
        return vkt_error(err, errlen, "%s: cannot format the config", path);
    size_t len = strlen(text);
    const void *bufs[] = {text, "\n"};
    const size_t lens[] = {len, 1};
    int rc = ckpt_write_atomic(path, 2, bufs, lens, err, errlen);
    free(text);
    return rc;
}

/* A per-layer list: `member` for the layers in set, `other` for the rest
 * (as integers where they are digits). */
static json_t *layer_list_json(const struct hf_config *c, const struct vkt_layers *set, const char *member,
                               const char *other)
{
    json_t *list = json_array();
    for (int l = 0; l < c->n_layers; l++) {
        const char *v = vkt_layers_has(set, (uint32_t)l) ? member : other;
        json_array_append_new(list, *v >= '0' && *v <= '9' ? json_integer(atoi(v)) : json_string(v));
    }
    return list;
}

/* The window keys of qwen3 and smollm3 (transformers 4.57's layer_types;
 * Qwen's max_window_layers too where the full layers come first). */
static void put_layer_window(json_t *root, const struct hf_config *c, int qwen)
{
    json_object_set_new(root, "use_sliding_window", json_boolean(c->sliding_window));
    json_object_set_new(root, "sliding_window", c->sliding_window ? json_integer(c->sliding_window) : json_null());
    if (!c->sliding_window)
        return;
    json_object_set_new(root, "layer_types", layer_list_json(c, &c->full_layers, "full_attention", "sliding_attention"));
    uint32_t first = vkt_layers_count(&c->full_layers, (uint32_t)c->n_layers), prefix = 1;
    for (uint32_t l = 0; l < first; l++)
        prefix &= (uint32_t)vkt_layers_has(&c->full_layers, l);
    if (qwen && prefix)
        json_object_set_new(root, "max_window_layers", json_integer(first));
}

int hf_config_write(const char *path, const struct hf_config *c, char *err, size_t errlen)
{
    json_t *root = json_object();
    int llama = c->arch == HF_LLAMA;
    uint32_t L = (uint32_t)c->n_layers;
    /* q/k norms: qwen3; layers without RoPE, or some layers global under a
     * window: smollm3; a head size other than the quotient or a window on
     * every layer: mistral (LlamaConfig of transformers 4.44 has neither
     * head_dim nor sliding_window). */
    int per_layer = llama && (vkt_layers_count(&c->nope_layers, L) ||
                              (c->sliding_window && vkt_layers_count(&c->full_layers, L)));
    int apart = llama && ((c->head_dim && c->head_dim * c->n_heads != c->dim) || c->sliding_window);
    const char *type = !llama                           ? "gpt2"
                       : c->norm_offset && c->qk_norm   ? "gemma3_text"
                       : c->norm_offset && c->post_norms ? "gemma2"
                       : c->norm_offset                 ? "gemma"
                       : c->fused_proj                  ? "phi3"
                       : c->qk_norm    ? "qwen3"
                       : per_layer     ? "smollm3"
                       : apart         ? "mistral"
                                       : "llama";
    const struct family *f = families;
    while (strcmp(f->type, type))
        f++;
    json_object_set_new(root, "architectures", json_pack("[s]", f->architecture));
    json_object_set_new(root, "model_type", json_string(f->type));
    if (llama && c->norm_offset) { /* the Gemma family */
        write_keys(root, llama_keys, NKEYS(llama_keys), c);
        json_object_set_new(root, "head_dim", json_integer(c->head_dim ? c->head_dim : c->dim / c->n_heads));
        json_object_set_new(root, "hidden_activation", json_string("gelu_pytorch_tanh"));
        json_object_set_new(root, "attention_bias", json_false());
        if (c->post_norms) {
            json_object_set_new(root, "query_pre_attn_scalar",
                                json_real(c->attn_scalar ? c->attn_scalar
                                                         : (double)(c->head_dim ? c->head_dim : c->dim / c->n_heads)));
            json_object_set_new(root, "sliding_window",
                                c->sliding_window ? json_integer(c->sliding_window) : json_null());
            json_object_set_new(root, "attn_logit_softcapping",
                                c->attn_softcap ? json_real(c->attn_softcap) : json_null());
            json_object_set_new(root, "final_logit_softcapping",
                                c->final_softcap ? json_real(c->final_softcap) : json_null());
        }
        if (c->qk_norm) {
            json_object_set_new(root, "layer_types",
                                layer_list_json(c, &c->full_layers, "full_attention", "sliding_attention"));
            json_object_set_new(root, "rope_local_base_freq",
                                json_real(c->rope_local_theta ? c->rope_local_theta : c->rope_theta));
        }
    } else if (llama && c->fused_proj) { /* phi3: a window on every layer, partial rotary */
        write_keys(root, llama_keys, NKEYS(llama_keys), c);
        json_object_set_new(root, "hidden_act", json_string("silu"));
        json_object_set_new(root, "head_dim", json_integer(c->head_dim ? c->head_dim : c->dim / c->n_heads));
        json_object_set_new(root, "partial_rotary_factor",
                            json_real(c->rotary_dim ? (double)c->rotary_dim / (c->head_dim ? c->head_dim
                                                                                            : c->dim / c->n_heads)
                                                    : 1.0));
        json_object_set_new(root, "original_max_position_embeddings", json_integer(c->max_seq_len));
        json_object_set_new(root, "sliding_window", c->sliding_window ? json_integer(c->sliding_window) : json_null());
    } else if (llama) {
        write_keys(root, llama_keys, NKEYS(llama_keys), c);
        json_object_set_new(root, "hidden_act", json_string("silu"));
        json_object_set_new(root, "attention_bias", json_false());
        if (c->qk_norm || per_layer || apart)
            json_object_set_new(root, "head_dim", json_integer(c->head_dim ? c->head_dim : c->dim / c->n_heads));
        if (c->qk_norm || per_layer) {
            put_layer_window(root, c, c->qk_norm);
        } else if (apart) {
            json_object_set_new(root, "sliding_window",
                                c->sliding_window ? json_integer(c->sliding_window) : json_null());
        }
        if (!c->qk_norm && (per_layer || !apart)) /* llama and smollm3 */
            json_object_set_new(root, "mlp_bias", json_false());
        if (per_layer && !c->qk_norm)
            json_object_set_new(root, "no_rope_layers", layer_list_json(c, &c->nope_layers, "0", "1"));
    } else {
        write_keys(root, gpt2_keys, NKEYS(gpt2_keys), c);
        json_object_set_new(root, "n_ctx", json_integer(c->max_seq_len));
        json_object_set_new(root, "activation_function", json_string("gelu_new"));
    }
    put_tokens_and_dtype(root, c);
    int rc = dump_atomic(path, root, real_precision(c), err, errlen);
    json_decref(root);
    return rc;
}

int hf_config_write_from(const char *path, const char *source, const struct hf_config *c, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *root = json_load_file(source, 0, &jerr);
    if (!json_is_object(root)) {
        json_decref(root);
        return vkt_error(err, errlen, "cannot read %s to copy it: %s", source, root ? "not an object" : jerr.text);
    }
    json_t *mt = json_object_get(root, "model_type"), *text = json_object_get(root, "text_config");
    if (json_is_string(mt) && !strcmp(json_string_value(mt), "gemma3") && json_is_object(text)) {
        /* a multimodal Gemma 3: the text model that was trained, as a gemma3_text */
        json_t *t = json_deep_copy(text);
        json_decref(root);
        root = t;
        json_object_set_new(root, "architectures", json_pack("[s]", "Gemma3ForCausalLM"));
        json_object_set_new(root, "model_type", json_string("gemma3_text"));
    }
    /* what is written is full precision (a merged, dequantized base) */
    json_object_del(root, "quantization_config");
    put_tokens_and_dtype(root, c);
    int rc = dump_atomic(path, root, 17, err, errlen);
    json_decref(root);
    return rc;
}
