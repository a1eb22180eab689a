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
static const char *const dataset_names[] = {"text", "sft_jsonl", "tokens", NULL};
static const char *const schedule_names[] = {"constant", "cosine", "linear", NULL};
static const char *const nan_policy_names[] = {"stop", "skip", NULL};

/* Sections are contiguous: config_print opens a section at its first key. */
const struct config_key config_keys[] = {
    {"seed", KT_I64, OFF(seed), 0, LMAX, 0, NULL},
    {"output_dir", KT_STR, OFF(output_dir), 0, 0, KF_NOHASH, NULL},
    {"model.arch", KT_ENUM, OFF(model.arch), 0, 0, 0, arch_names},
    {"model.vocab_size", KT_INT, OFF(model.vocab_size), 1, IMAX, 0, NULL},
    {"model.dim", KT_INT, OFF(model.dim), 1, IMAX, 0, NULL},
    {"model.n_layers", KT_INT, OFF(model.n_layers), 1, MODEL_MAX_LAYERS, 0, NULL},
    {"model.n_heads", KT_INT, OFF(model.n_heads), 1, IMAX, 0, NULL},
    {"model.n_kv_heads", KT_INT, OFF(model.n_kv_heads), 1, IMAX, 0, NULL},
    {"model.hidden_dim", KT_INT, OFF(model.hidden_dim), 1, IMAX, 0, NULL},
    {"model.max_seq_len", KT_INT, OFF(model.max_seq_len), 1, IMAX, 0, NULL},
    {"model.norm_eps", KT_FLOAT, OFF(model.norm_eps), 0, 1, KF_OPEN_MIN, NULL},
    {"model.rope_theta", KT_FLOAT, OFF(model.rope_theta), 0, DBL_MAX, KF_OPEN_MIN, NULL},
    {"model.tie_embeddings", KT_BOOL, OFF(model.tie_embeddings), 0, 0, 0, NULL},
    {"model.init_std", KT_FLOAT, OFF(model.init_std), 0, DBL_MAX, KF_OPEN_MIN, NULL},
    {"model.init_from", KT_STR, OFF(model.init_from), 0, 0, KF_NULL, NULL},
    /* Not hashed: the same gradients bit for bit, so a run may resume with it toggled. */
    {"model.activation_checkpointing", KT_BOOL, OFF(model.activation_checkpointing), 0, 0, KF_NOHASH, NULL},
    {"tokenizer.type", KT_ENUM, OFF(tokenizer.type), 0, 0, 0, tokenizer_names},
    {"tokenizer.path", KT_STR, OFF(tokenizer.path), 0, 0, KF_NULL, NULL},
    {"dataset.type", KT_ENUM, OFF(dataset.type), 0, 0, 0, dataset_names},
    {"dataset.path", KT_STR, OFF(dataset.path), 0, 0, 0, NULL},
    {"dataset.packed", KT_BOOL, OFF(dataset.packed), 0, 0, 0, NULL},
    {"dataset.train_on_input", KT_BOOL, OFF(dataset.train_on_input), 0, 0, 0, NULL},
    {"dataset.shuffle", KT_BOOL, OFF(dataset.shuffle), 0, 0, 0, NULL},
    {"dataset.separator", KT_STR, OFF(dataset.separator), 0, 0, KF_NULL, NULL},
    {"dataset.val_path", KT_STR, OFF(dataset.val_path), 0, 0, KF_NULL, NULL},
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
    /* Not hashed: a run stopped by a non-finite step may resume with skip. */
    {"nan_policy", KT_ENUM, OFF(nan_policy), 0, 0, KF_NOHASH, nan_policy_names},
    {"nan_max_skips", KT_INT, OFF(nan_max_skips), 1, IMAX, KF_NOHASH, NULL},
    {"profile", KT_BOOL, OFF(profile), 0, 0, KF_NOHASH, NULL},
    {"device.index", KT_INT, OFF(device_index), 0, IMAX, KF_AUTO | KF_NOHASH, NULL},
    {"dist.bucket_mb", KT_INT, OFF(dist.bucket_mb), 1, 4096, KF_NOHASH, NULL},
    {"dist.check_every", KT_I64, OFF(dist.check_every), 0, LMAX, KF_NOHASH, NULL},
    {"dist.overlap", KT_BOOL, OFF(dist.overlap), 0, 0, KF_NOHASH, NULL},
};
const int config_n_keys = (int)(sizeof config_keys / sizeof config_keys[0]);

static const char *const sections[] = {"model",        "tokenizer", "dataset", "optimizer",
                                       "lr_scheduler", "device",    "dist",    NULL};

/* Defaults that depend on other keys (vocab_size, n_kv_heads, hidden_dim,
 * tie_embeddings, packed) are filled in by config_resolve. */
void config_defaults(struct config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->seed = 1234;
    cfg->model.arch = ARCH_LLAMA;
    cfg->model.norm_eps = 1e-5;
    cfg->model.rope_theta = 10000.0;
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

static void format_string(const char *s, char *buf, size_t n)
{
    size_t o = 0;
    buf[o++] = '"';
    for (; *s && o + 6 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            o += (size_t)snprintf(buf + o, n - o, "\\%c", c);
        else if (c == '\n')
            o += (size_t)snprintf(buf + o, n - o, "\\n");
        else if (c == '\t')
            o += (size_t)snprintf(buf + o, n - o, "\\t");
        else if (c < 0x20 || c == 0x7f)
            o += (size_t)snprintf(buf + o, n - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    buf[o++] = '"';
    buf[o] = 0;
}

void config_key_format(const struct config *cfg, int k, char *buf, size_t n)
{
    const struct config_key *key = &config_keys[k];
    void *p = field(cfg, k);
    double v = config_key_get(cfg, k);
    if ((key->flags & KF_NULL) && key->type != KT_STR && v == 0) {
        snprintf(buf, n, "null");
        return;
    }
    if ((key->flags & KF_AUTO) && v == -1) {
        snprintf(buf, n, "auto");
        return;
    }
    switch (key->type) {
    case KT_INT:
        snprintf(buf, n, "%d", *(int *)p);
        break;
    case KT_I64:
        snprintf(buf, n, "%lld", (long long)*(int64_t *)p);
        break;
    case KT_FLOAT:
        format_double(v, buf, n);
        break;
    case KT_BOOL:
        snprintf(buf, n, "%s", *(bool *)p ? "true" : "false");
        break;
    case KT_ENUM:
        snprintf(buf, n, "%s", key->names[*(int *)p]);
        break;
    case KT_STR:
        if (*(char **)p)
            format_string(*(char **)p, buf, n);
        else
            snprintf(buf, n, "null");
        break;
    case KT_PAIR: {
        char a[32], b[32];
        format_double(((double *)p)[0], a, sizeof a);
        format_double(((double *)p)[1], b, sizeof b);
        snprintf(buf, n, "[%s, %s]", a, b);
        break;
    }
    case KT_STRLIST: {
        char **list = *(char ***)p;
        int count = *(int *)((char *)p + sizeof(char **));
        size_t o = (size_t)snprintf(buf, n, "[");
        for (int i = 0; i < count && o < n; i++) {
            if (i)
                o += (size_t)snprintf(buf + o, n - o, ", ");
            if (o < n)
                format_string(list[i], buf + o, n - o);
            o = strlen(buf);
        }
        if (o < n)
            snprintf(buf + o, n - o, "]");
        break;
    }
    }
}

void config_print(const struct config *cfg, FILE *f)
{
    char section[32] = "", value[1024];
    for (int k = 0; k < config_n_keys; k++) {
        const char *name = config_keys[k].name, *dot = strchr(name, '.');
        size_t slen = dot ? (size_t)(dot - name) : 0;
        if (slen && (strlen(section) != slen || strncmp(section, name, slen))) {
            snprintf(section, sizeof section, "%.*s", (int)slen, name);
            fprintf(f, "%s:\n", section);
        } else if (!slen) {
            section[0] = 0;
        }
        config_key_format(cfg, k, value, sizeof value);
        fprintf(f, "%s%s: %s\n", slen ? "  " : "", slen ? dot + 1 : name, value);
    }
}

/* The keys marked KF_NOHASH may differ between a run and its resumption:
 * where output goes, how long it runs (epochs, max_steps), how often it logs,
 * evaluates and saves, what a non-finite step does, which device and the
 * all-reduce tuning. */
uint64_t config_hash(const struct config *cfg)
{
    uint64_t h = 1469598103934665603ull;
    char value[1024];
    for (int k = 0; k < config_n_keys; k++) {
        if (config_keys[k].flags & KF_NOHASH)
            continue;
        config_key_format(cfg, k, value, sizeof value);
        const char *parts[4] = {config_keys[k].name, "=", value, "\n"};
        for (int i = 0; i < 4; i++)
            for (const char *c = parts[i]; *c; c++) {
                h ^= (unsigned char)*c;
                h *= 1099511628211ull;
            }
    }
    return h;
}

/* The value config_print gave key `name` in `saved`, copied into out; 0 if
 * the key is not there. */
static int saved_value(const char *saved, const char *name, char *out, size_t n)
{
    const char *dot = strchr(name, '.');
    size_t slen = dot ? (size_t)(dot - name) : 0;
    const char *want = dot ? dot + 1 : name;
    int in_section = !dot;
    for (const char *line = saved; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        int indented = line[0] == ' ';
        if (!indented)
            in_section = dot && len == slen + 1 && !strncmp(line, name, slen) && line[slen] == ':';
        const char *leaf = indented ? line + 2 : line;
        size_t wl = strlen(want);
        if (indented == (dot != NULL) && (in_section || !dot) && !strncmp(leaf, want, wl) && leaf[wl] == ':' &&
            leaf[wl + 1] == ' ') {
            const char *v = leaf + wl + 2;
            snprintf(out, n, "%.*s", (int)(line + len - v), v);
            return 1;
        }
        line += len + (end != NULL);
    }
    return 0;
}

int config_diff(const struct config *cfg, const char *saved, char *out, size_t n)
{
    char now[1024], then[1024];
    int count = 0;
    size_t o = 0;
    out[0] = 0;
    for (int k = 0; k < config_n_keys; k++) {
        if (config_keys[k].flags & KF_NOHASH)
            continue;
        config_key_format(cfg, k, now, sizeof now);
        int found = saved_value(saved, config_keys[k].name, then, sizeof then);
        if (found && !strcmp(now, then))
            continue;
        if (o < n)
            o += (size_t)snprintf(out + o, n - o, "%s%s: %s -> %s", count ? "; " : "", config_keys[k].name,
                                  found ? then : "(absent)", now);
        count++;
    }
    return count;
}
