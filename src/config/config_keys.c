/* config_keys: the table of recipe keys with their defaults, and what walks
 * it without parsing: formatting values as YAML, printing the resolved
 * recipe, hashing it, suggesting the nearest key for a misspelling.
 * Owns the key table; never reads files and never prints errors. */
#include "config_keys.h"
#include "vktrain/model.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define OFF(field) offsetof(struct config, field)
#define IMAX ((double)INT_MAX)
#define LMAX 9.0e18

static const char *const arch_names[] = {"llama", "gpt2", NULL};
static const char *const tokenizer_names[] = {"byte", "hf", NULL};
static const char *const chat_template_names[] = {"auto",  "llama3", "chatml", "llama2", "plain",
                                                  "gemma", "qwen3",  "phi3",   NULL};
static const char *const dataset_names[] = {"text", "sft_jsonl", "tokens", NULL};
static const char *const schedule_names[] = {"constant", "cosine", "linear", NULL};
static const char *const nan_policy_names[] = {"stop", "skip", NULL};
static const char *const dtype_names[] = {"fp32", "bf16", NULL}; /* save_dtype */
static const char *const base_dtype_names[] = {"fp32", "bf16", "nf4", NULL};
static const char *const precision_names[] = {"fp32", "reproducible", "bf16", NULL};
static const char *const mlp_names[] = {"silu", "gelu_pytorch_tanh", NULL};

/* Sections are contiguous: config_print opens a section at its first key. */
const struct config_key config_keys[] = {
    {"seed", KT_I64, OFF(seed), 0, LMAX, 0, NULL},
    {"output_dir", KT_STR, OFF(output_dir), 0, 0, KF_NOHASH | KF_PATH, NULL},
    {"model.arch", KT_ENUM, OFF(model.arch), 0, 0, 0, arch_names},
    {"model.vocab_size", KT_INT, OFF(model.vocab_size), 1, IMAX, 0, NULL},
    {"model.dim", KT_INT, OFF(model.dim), 1, IMAX, 0, NULL},
    {"model.n_layers", KT_INT, OFF(model.n_layers), 1, MODEL_MAX_LAYERS, 0, NULL},
    {"model.n_heads", KT_INT, OFF(model.n_heads), 1, IMAX, 0, NULL},
    {"model.n_kv_heads", KT_INT, OFF(model.n_kv_heads), 1, IMAX, 0, NULL},
    /* Hashed only when set apart from dim / n_heads, qk_norm only when on,
     * sliding_window only when set. */
    {"model.head_dim", KT_INT, OFF(model.head_dim), 0, IMAX, 0, NULL},
    {"model.qk_norm", KT_BOOL, OFF(model.qk_norm), 0, 0, 0, NULL},
    {"model.sliding_window", KT_INT, OFF(model.sliding_window), 0, IMAX, 0, NULL},
    /* Hashed only when given (one entry per layer). */
    {"model.layer_types", KT_STRLIST, OFF(model.layer_types), 0, 0, 0, NULL},
    {"model.no_rope_layers", KT_STRLIST, OFF(model.no_rope_layers), 0, 0, 0, NULL},
    /* Hashed only below 1. */
    {"model.partial_rotary_factor", KT_FLOAT, OFF(model.partial_rotary_factor), 0, 1, KF_OPEN_MIN, NULL},
    /* The Gemma family's; each hashed only off its default. */
    {"model.mlp_activation", KT_ENUM, OFF(model.mlp_activation), 0, 0, 0, mlp_names},
    {"model.norm_offset", KT_BOOL, OFF(model.norm_offset), 0, 0, 0, NULL},
    {"model.post_norms", KT_BOOL, OFF(model.post_norms), 0, 0, 0, NULL},
    {"model.scale_embeddings", KT_BOOL, OFF(model.scale_embeddings), 0, 0, 0, NULL},
    {"model.query_pre_attn_scalar", KT_FLOAT, OFF(model.query_pre_attn_scalar), 0, DBL_MAX, 0, NULL},
    {"model.rope_local_base_freq", KT_FLOAT, OFF(model.rope_local_base_freq), 0, DBL_MAX, 0, NULL},
    {"model.attn_logit_softcapping", KT_FLOAT, OFF(model.attn_logit_softcapping), 0, DBL_MAX, 0, NULL},
    {"model.final_logit_softcapping", KT_FLOAT, OFF(model.final_logit_softcapping), 0, DBL_MAX, 0, NULL},
    {"model.hidden_dim", KT_INT, OFF(model.hidden_dim), 1, IMAX, 0, NULL},
    {"model.max_seq_len", KT_INT, OFF(model.max_seq_len), 1, IMAX, 0, NULL},
    {"model.norm_eps", KT_FLOAT, OFF(model.norm_eps), 0, 1, KF_OPEN_MIN, NULL},
    {"model.rope_theta", KT_FLOAT, OFF(model.rope_theta), 0, DBL_MAX, KF_OPEN_MIN, NULL},
    {"model.tie_embeddings", KT_BOOL, OFF(model.tie_embeddings), 0, 0, 0, NULL},
    {"model.init_std", KT_FLOAT, OFF(model.init_std), 0, DBL_MAX, KF_OPEN_MIN, NULL},
    {"model.init_from", KT_STR, OFF(model.init_from), 0, 0, KF_NULL | KF_PATH, NULL},
    /* Not hashed: the same gradients bit for bit, so a run may resume with it toggled. */
    {"model.activation_checkpointing", KT_BOOL, OFF(model.activation_checkpointing), 0, 0, KF_NOHASH, NULL},
    /* Hashed only at bf16 (it rounds the base), so earlier recipes keep their hash. */
    {"model.base_dtype", KT_ENUM, OFF(model.base_dtype), 0, 0, 0, base_dtype_names},
    {"model.nf4_double_quant", KT_BOOL, OFF(model.nf4_double_quant), 0, 0, 0, NULL},
    {"tokenizer.type", KT_ENUM, OFF(tokenizer.type), 0, 0, 0, tokenizer_names},
    {"tokenizer.path", KT_STR, OFF(tokenizer.path), 0, 0, KF_NULL | KF_PATH, NULL},
    {"tokenizer.chat_template", KT_ENUM, OFF(tokenizer.chat_template), 0, 0, 0, chat_template_names},
    {"dataset.type", KT_ENUM, OFF(dataset.type), 0, 0, 0, dataset_names},
    {"dataset.path", KT_STR, OFF(dataset.path), 0, 0, KF_PATH, NULL},
    {"dataset.packed", KT_BOOL, OFF(dataset.packed), 0, 0, 0, NULL},
    {"dataset.train_on_input", KT_BOOL, OFF(dataset.train_on_input), 0, 0, 0, NULL},
    {"dataset.shuffle", KT_BOOL, OFF(dataset.shuffle), 0, 0, 0, NULL},
    {"dataset.separator", KT_STR, OFF(dataset.separator), 0, 0, KF_NULL, NULL},
    {"dataset.val_path", KT_STR, OFF(dataset.val_path), 0, 0, KF_NULL | KF_PATH, NULL},
    {"dataset.val_fraction", KT_FLOAT, OFF(dataset.val_fraction), 0, 1, KF_OPEN_MAX, NULL},
    {"dataset.skip_bad_lines", KT_BOOL, OFF(dataset.skip_bad_lines), 0, 0, 0, NULL},
    {"dataset.exclude", KT_STRLIST, OFF(dataset.exclude), 0, 0, 0, NULL},
    /* Not hashed: a run may resume with another split of the same global
     * batch W·A·B (train_state.json records it and resume checks it). */
    {"batch_size", KT_INT, OFF(batch_size), 1, IMAX, KF_NOHASH, NULL},
    {"gradient_accumulation_steps", KT_INT, OFF(gradient_accumulation_steps), 1, IMAX, KF_NOHASH, NULL},
    {"epochs", KT_I64, OFF(epochs), 1, LMAX, KF_NOHASH, NULL},
    {"max_steps", KT_I64, OFF(max_steps), 1, LMAX, KF_NULL | KF_NOHASH, NULL},
    {"optimizer.lr", KT_FLOAT, OFF(optimizer.lr), 0, DBL_MAX, KF_OPEN_MIN, NULL},
    {"optimizer.betas", KT_PAIR, OFF(optimizer.betas), 0, 1, KF_OPEN_MAX, NULL},
    {"optimizer.eps", KT_FLOAT, OFF(optimizer.eps), 0, 1, KF_OPEN_MIN, NULL},
    {"optimizer.weight_decay", KT_FLOAT, OFF(optimizer.weight_decay), 0, DBL_MAX, 0, NULL},
    {"lr_scheduler.type", KT_ENUM, OFF(lr_scheduler.type), 0, 0, 0, schedule_names},
    {"lr_scheduler.warmup_steps", KT_I64, OFF(lr_scheduler.warmup_steps), 0, LMAX, 0, NULL},
    {"lr_scheduler.min_lr_ratio", KT_FLOAT, OFF(lr_scheduler.min_lr_ratio), 0, 1, 0, NULL},
    {"clip_grad_norm", KT_FLOAT, OFF(clip_grad_norm), 0, DBL_MAX, KF_NULL | KF_OPEN_MIN, NULL},
    {"log_every_n_steps", KT_I64, OFF(log_every_n_steps), 1, LMAX, KF_NOHASH, NULL},
    {"eval_every_n_steps", KT_I64, OFF(eval_every_n_steps), 0, LMAX, KF_NOHASH, NULL},
    {"save_every_n_steps", KT_I64, OFF(save_every_n_steps), 0, LMAX, KF_NOHASH, NULL},
    {"resume", KT_BOOL, OFF(resume), 0, 0, KF_NOHASH, NULL},
    {"overwrite", KT_BOOL, OFF(overwrite), 0, 0, KF_NOHASH, NULL},
    /* Not hashed: how the final model is written, not what is trained. */
    {"save_dtype", KT_ENUM, OFF(save_dtype), 0, 0, KF_NOHASH, dtype_names},
    {"save_shard_mb", KT_INT, OFF(save_shard_mb), 1, IMAX, KF_NOHASH, NULL},
    /* Hashed only when not fp32, so earlier recipes keep their hash. */
    {"precision", KT_ENUM, OFF(precision), 0, 0, 0, precision_names},
    /* Not hashed: a run stopped by a non-finite step may resume with skip. */
    {"nan_policy", KT_ENUM, OFF(nan_policy), 0, 0, KF_NOHASH, nan_policy_names},
    {"nan_max_skips", KT_INT, OFF(nan_max_skips), 1, IMAX, KF_NOHASH, NULL},
    {"profile", KT_BOOL, OFF(profile), 0, 0, KF_NOHASH, NULL},
    {"device.index", KT_INT, OFF(device_index), 0, IMAX, KF_AUTO | KF_NOHASH, NULL},
    {"dist.bucket_mb", KT_INT, OFF(dist.bucket_mb), 1, 4096, KF_NOHASH, NULL},
    {"dist.check_every", KT_I64, OFF(dist.check_every), 0, LMAX, KF_NOHASH, NULL},
    {"dist.overlap", KT_BOOL, OFF(dist.overlap), 0, 0, KF_NOHASH, NULL},
    /* Not hashed: the same update bit for bit on 2 ranks, and checkpoints
     * hold the whole optimizer state, so a run may resume with it toggled. */
    {"dist.zero", KT_INT, OFF(dist.zero), 0, 1, KF_NOHASH, NULL},
    {"lora.rank", KT_INT, OFF(lora.rank), 0, IMAX, 0, NULL},
    {"lora.alpha", KT_FLOAT, OFF(lora.alpha), 0, DBL_MAX, KF_NULL | KF_OPEN_MIN, NULL},
    {"lora.dropout", KT_FLOAT, OFF(lora.dropout), 0, 1, KF_OPEN_MAX, NULL},
    {"lora.targets", KT_STRLIST, OFF(lora.targets), 0, 0, 0, NULL},
    {"lora.init_from", KT_STR, OFF(lora.init_from), 0, 0, KF_NULL, NULL},
    /* Not hashed: what the output folder holds besides the adapter. */
    {"lora.merge_on_save", KT_BOOL, OFF(lora.merge_on_save), 0, 0, KF_NOHASH, NULL},
};
const int config_n_keys = (int)(sizeof config_keys / sizeof config_keys[0]);

static const char *const sections[] = {"model",  "tokenizer", "dataset", "optimizer", "lr_scheduler",
                                       "device", "dist",      "lora",    NULL};

/* Defaults that depend on other keys (vocab_size, n_kv_heads, hidden_dim,
 * tie_embeddings, packed) are filled in by config_resolve. */
void config_defaults(struct config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->seed = 1234;
    cfg->model.arch = ARCH_LLAMA;
    cfg->model.norm_eps = 1e-5;
    cfg->model.rope_theta = 10000.0;
    cfg->model.partial_rotary_factor = 1.0;
    cfg->model.init_std = 0.02;
    cfg->tokenizer.type = TOKENIZER_BYTE;
    cfg->dataset.shuffle = true;
    cfg->batch_size = 8;
    cfg->gradient_accumulation_steps = 1;
    cfg->epochs = 1;
    cfg->optimizer.lr = 3e-4;
    cfg->optimizer.betas[0] = 0.9;
    cfg->optimizer.betas[1] = 0.95;
    cfg->optimizer.eps = 1e-8;
    cfg->lr_scheduler.type = LR_COSINE;
    cfg->log_every_n_steps = 1;
    cfg->nan_policy = NAN_STOP;
    cfg->nan_max_skips = 10;
    cfg->save_dtype = SAVE_FP32;
    cfg->precision = PRECISION_FP32;
    cfg->save_shard_mb = 2000;
    cfg->device_index = -1;
    cfg->dist.bucket_mb = 25;
    cfg->dist.check_every = 100;
    cfg->dist.overlap = true;
}

int config_key_find(const char *name)
{
    for (int k = 0; k < config_n_keys; k++)
        if (!strcmp(config_keys[k].name, name))
            return k;
    return -1;
}

int config_is_section(const char *name)
{
    for (int i = 0; sections[i]; i++)
        if (!strcmp(sections[i], name))
            return 1;
    return 0;
}

static int levenshtein(const char *a, const char *b)
{
    int row[65], n = (int)strlen(b);
    if (n > 64)
        n = 64;
    for (int j = 0; j <= n; j++)
        row[j] = j;
    for (int i = 1; a[i - 1] && i <= 64; i++) {
        int diag = row[0];
        row[0] = i;
        for (int j = 1; j <= n; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[n];
}

static const char *leaf(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot ? dot + 1 : name;
}

/* Distance to the full name, or to the last component plus one (so `lr` at
 * the top level finds optimizer.lr). Close means within a third of the
 * length, and at least 2 edits. */
const char *config_key_suggest(const char *name)
{
    const char *best = NULL;
    int best_d = INT_MAX;
    int n_cand = config_n_keys + (int)(sizeof sections / sizeof sections[0]) - 1;
    for (int i = 0; i < n_cand; i++) {
        const char *cand = i < config_n_keys ? config_keys[i].name : sections[i - config_n_keys];
        int d = levenshtein(name, cand);
        int dl = levenshtein(leaf(name), leaf(cand)) + 1;
        if (dl < d)
            d = dl;
        if (d < best_d) {
            best_d = d;
            best = cand;
        }
    }
    int limit = (int)strlen(name) / 3;
    return best_d <= (limit > 2 ? limit : 2) ? best : NULL;
}

static void *field(const struct config *cfg, int k)
{
    return (char *)cfg + config_keys[k].offset;
}

double config_key_get(const struct config *cfg, int k)
{
    void *p = field(cfg, k);
    switch (config_keys[k].type) {
    case KT_INT:
        return *(int *)p;
    case KT_I64:
        return (double)*(int64_t *)p;
    case KT_FLOAT:
        return *(double *)p;
    case KT_BOOL:
        return *(bool *)p;
    case KT_ENUM:
        return *(int *)p;
    default:
        return 0;
    }
}

void config_key_put(struct config *cfg, int k, double v)
{
    void *p = field(cfg, k);
    switch (config_keys[k].type) {
    case KT_INT:
        *(int *)p = (int)v;
        break;
    case KT_I64:
        *(int64_t *)p = (int64_t)v;
        break;
    case KT_FLOAT:
        *(double *)p = v;
        break;
    case KT_BOOL:
        *(bool *)p = v != 0;
        break;
    case KT_ENUM:
        *(int *)p = (int)v;
        break;
    default:
        break;
    }
}

int config_key_range(int k, double v, char *msg, size_t n)
{
    const struct config_key *key = &config_keys[k];
    if (key->type != KT_INT && key->type != KT_I64 && key->type != KT_FLOAT && key->type != KT_PAIR)
        return 0;
    bool lo_ok = (key->flags & KF_OPEN_MIN) ? v > key->min : v >= key->min;
    bool hi_ok = (key->flags & KF_OPEN_MAX) ? v < key->max : v <= key->max;
    if (lo_ok && hi_ok)
        return 0;
    const char *lo = (key->flags & KF_OPEN_MIN) ? ">" : ">=";
    const char *hi = (key->flags & KF_OPEN_MAX) ? "<" : "<=";
    if (key->max >= IMAX && hi_ok)
        snprintf(msg, n, "must be %s %.17g", lo, key->min);
    else
        snprintf(msg, n, "must be %s %.17g and %s %.17g", lo, key->min, hi, key->max);
    return -1;
}

/* Shortest text that reads back as the same double, in plain decimals
 * between 1e-4 and 1e16, always with a '.' or an exponent so that it stays
 * a float in YAML. */
static void format_double(double v, char *buf, size_t n)
{
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    double a = fabs(v);
    if (a >= 1e-4 && a < 1e16) {
        int decimals = prec - 1 - (int)floor(log10(a));
        snprintf(buf, n, "%.*f", decimals > 0 ? decimals : 0, v);
    }
    if (!strpbrk(buf, ".eEn"))
        strncat(buf, ".0", n - strlen(buf) - 1);
}

/* The code point of the UTF-8 sequence at p and its length, or 0 when the
 * bytes are not one (recipe strings come decoded from libyaml, so they
 * always are). */
static int utf8_next(const unsigned char *p, uint32_t *cp)
{
    int n = p[0] < 0x80 ? 1 : (p[0] >> 5) == 6 ? 2 : (p[0] >> 4) == 14 ? 3 : (p[0] >> 3) == 30 ? 4 : 0;
    uint32_t v = n == 1 ? p[0] : p[0] & (0x7fu >> n);
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (p[i] & 0x3f);
    }
    *cp = v;
    return n;
}

/* May c stand unescaped in a double-quoted YAML string? Not the characters
 * YAML refuses in a stream (C0 and C1 controls, DEL, surrogates, U+FFFE,
 * U+FFFF) nor those it folds as line breaks (U+0085, U+2028, U+2029), nor a
 * byte order mark. */
static bool yaml_plain_char(uint32_t c)
{
    return (c >= 0x20 && c <= 0x7e && c != '"' && c != '\\') ||
           (c >= 0xa0 && c <= 0xd7ff && c != 0x2028 && c != 0x2029) || (c >= 0xe000 && c <= 0xfffd && c != 0xfeff) ||
           (c >= 0x10000 && c <= 0x10ffff);
}

/* s as a double-quoted YAML string that reads back as s. */
static void write_string(const char *s, FILE *f)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        uint32_t c;
        int n = utf8_next(p, &c);
        if (!n) /* not UTF-8: cannot come from a recipe; kept as the byte's code point */
            c = *p, n = 1;
        if (yaml_plain_char(c))
            fwrite(p, 1, (size_t)n, f);
        else if (c == '"' || c == '\\')
            fprintf(f, "\\%c", (int)c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x100)
            fprintf(f, "\\x%02x", (unsigned)c);
        else if (c < 0x10000)
            fprintf(f, "\\u%04x", (unsigned)c);
        else
            fprintf(f, "\\U%08x", (unsigned)c);
        p += n;
    }
    fputc('"', f);
}

void config_key_write(const struct config *cfg, int k, FILE *f)
{
    const struct config_key *key = &config_keys[k];
    void *p = field(cfg, k);
    double v = config_key_get(cfg, k);
    char a[32], b[32];
    if ((key->flags & KF_NULL) && key->type != KT_STR && v == 0) {
        fputs("null", f);
        return;
    }
    if ((key->flags & KF_AUTO) && v == -1) {
        fputs("auto", f);
        return;
    }
    switch (key->type) {
    case KT_INT:
        fprintf(f, "%d", *(int *)p);
        break;
    case KT_I64:
        fprintf(f, "%lld", (long long)*(int64_t *)p);
        break;
    case KT_FLOAT:
        format_double(v, a, sizeof a);
        fputs(a, f);
        break;
    case KT_BOOL:
        fputs(*(bool *)p ? "true" : "false", f);
        break;
    case KT_ENUM:
        fputs(key->names[*(int *)p], f);
        break;
    case KT_STR:
        if (*(char **)p)
            write_string(*(char **)p, f);
        else
            fputs("null", f);
        break;
    case KT_PAIR:
        format_double(((double *)p)[0], a, sizeof a);
        format_double(((double *)p)[1], b, sizeof b);
        fprintf(f, "[%s, %s]", a, b);
        break;
    case KT_STRLIST: {
        char **list = *(char ***)p;
        int count = *(int *)((char *)p + sizeof(char **));
        fputc('[', f);
        for (int i = 0; i < count; i++) {
            if (i)
                fputs(", ", f);
            write_string(list[i], f);
        }
        fputc(']', f);
        break;
    }
    }
}

char *config_key_text(const struct config *cfg, int k)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f)
        vkt_fatal("out of host memory formatting recipe key %s", config_keys[k].name);
    config_key_write(cfg, k, f);
    if (fclose(f))
        vkt_fatal("out of host memory formatting recipe key %s", config_keys[k].name);
    return text;
}

void config_print(const struct config *cfg, FILE *f)
{
    char section[32] = "";
    for (int k = 0; k < config_n_keys; k++) {
        const char *name = config_keys[k].name, *dot = strchr(name, '.');
        size_t slen = dot ? (size_t)(dot - name) : 0;
        if (slen && (strlen(section) != slen || strncmp(section, name, slen))) {
            snprintf(section, sizeof section, "%.*s", (int)slen, name);
            fprintf(f, "%s:\n", section);
        } else if (!slen) {
            section[0] = 0;
        }
        fprintf(f, "%s%s: ", slen ? "  " : "", slen ? dot + 1 : name);
        config_key_write(cfg, k, f);
        fputc('\n', f);
    }
}

/* Whether key k enters the hash: not KF_NOHASH, the lora keys only with
 * LoRA on (off, they are all at their defaults), model.nf4_double_quant
 * only when on, model.base_dtype and
 * precision only when not fp32, model.head_dim only when it is not
 * dim / n_heads, model.qk_norm only when on, model.sliding_window only
 * when set, the per-layer lists only when given,
 * model.partial_rotary_factor only below 1 and the Gemma keys only off
 * their defaults, so the recipes of
 * earlier versions keep their hash. */
static int hashed(const struct config *cfg, int k)
{
    const char *name = config_keys[k].name;
    const struct config_model *m = &cfg->model;
    if (!strcmp(name, "model.head_dim"))
        return m->head_dim && (m->dim % m->n_heads || m->head_dim != m->dim / m->n_heads);
    if (!strcmp(name, "model.qk_norm"))
        return m->qk_norm;
    if (!strcmp(name, "model.sliding_window"))
        return m->sliding_window != 0;
    if (!strcmp(name, "model.layer_types"))
        return m->n_layer_types != 0;
    if (!strcmp(name, "model.no_rope_layers"))
        return m->n_no_rope_layers != 0;
    if (!strcmp(name, "model.partial_rotary_factor"))
        return m->partial_rotary_factor != 1.0;
    if (!strcmp(name, "model.mlp_activation"))
        return m->mlp_activation != MLP_SILU;
    if (!strcmp(name, "model.norm_offset"))
        return m->norm_offset;
    if (!strcmp(name, "model.post_norms"))
        return m->post_norms;
    if (!strcmp(name, "model.scale_embeddings"))
        return m->scale_embeddings;
    if (!strcmp(name, "model.query_pre_attn_scalar"))
        return m->query_pre_attn_scalar != 0;
    if (!strcmp(name, "model.rope_local_base_freq"))
        return m->rope_local_base_freq != 0;
    if (!strcmp(name, "model.attn_logit_softcapping"))
        return m->attn_logit_softcapping != 0;
    if (!strcmp(name, "model.final_logit_softcapping"))
        return m->final_logit_softcapping != 0;
    if (!strcmp(name, "model.base_dtype"))
        return cfg->model.base_dtype != BASE_FP32;
    if (!strcmp(name, "model.nf4_double_quant"))
        return cfg->model.nf4_double_quant;
    if (!strcmp(name, "precision"))
        return cfg->precision != PRECISION_FP32;
    return !(config_keys[k].flags & KF_NOHASH) && (cfg->lora.rank || strncmp(name, "lora.", 5));
}

/* The keys marked KF_NOHASH may differ between a run and its resumption:
 * where output goes, how long it runs (epochs, max_steps), how often it logs,
 * evaluates and saves, what a non-finite step does, which device and the
 * all-reduce tuning. */
uint64_t config_hash(const struct config *cfg)
{
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < config_n_keys; k++) {
        if (!hashed(cfg, k))
            continue;
        char *value = config_key_text(cfg, k);
        const char *parts[4] = {config_keys[k].name, "=", value, "\n"};
        for (int i = 0; i < 4; i++)
            for (const char *c = parts[i]; *c; c++) {
                h ^= (unsigned char)*c;
                h *= 1099511628211ull;
            }
        free(value);
    }
    return h;
}

/* The value config_print gave key `name` in `saved`: where it starts, its
 * length in *len; NULL if the key is not there. */
static const char *saved_value(const char *saved, const char *name, size_t *len)
{
    const char *dot = strchr(name, '.');
    size_t slen = dot ? (size_t)(dot - name) : 0;
    const char *want = dot ? dot + 1 : name;
    int in_section = !dot;
    for (const char *line = saved; *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        int indented = line[0] == ' ';
        if (!indented)
            in_section = dot && n == slen + 1 && !strncmp(line, name, slen) && line[slen] == ':';
        const char *leaf = indented ? line + 2 : line;
        size_t wl = strlen(want);
        if (indented == (dot != NULL) && (in_section || !dot) && !strncmp(leaf, want, wl) && leaf[wl] == ':' &&
            leaf[wl + 1] == ' ') {
            const char *v = leaf + wl + 2;
            *len = (size_t)(line + n - v);
            return v;
        }
        line += n + (end != NULL);
    }
    return NULL;
}

int config_diff(const struct config *cfg, const char *saved, char *out, size_t n)
{
    int count = 0;
    size_t o = 0;
    out[0] = 0;
    for (int k = 0; k < config_n_keys; k++) {
        if (!hashed(cfg, k))
            continue;
        char *now = config_key_text(cfg, k);
        size_t len = 0;
        const char *then = saved_value(saved, config_keys[k].name, &len);
        if (!then || len != strlen(now) || memcmp(now, then, len)) {
            if (o < n)
                o += (size_t)snprintf(out + o, n - o, "%s%s: %.*s -> %s", count ? "; " : "", config_keys[k].name,
                                      then ? (int)len : 8, then ? then : "(absent)", now);
            count++;
        }
        free(now);
    }
    return count;
}
