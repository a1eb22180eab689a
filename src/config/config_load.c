/* config_load: YAML text and `key.sub=value` overrides into struct config.
 * Walks the libyaml document against the key table, types each scalar the
 * YAML way (plain `1e-3` is a number, quoted "1e-3" is a string), records
 * where every key was set, then hands over to config_resolve. Owns the error
 * text of the recipe; never prints and never exits. */
#include "config_keys.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

int config_fail(struct config_ctx *ctx, int where_key, const char *fmt, ...)
{
    const char *where = ctx->name;
    if (where_key >= 0 && ctx->set[where_key])
        where = ctx->where[where_key];
    int o = snprintf(ctx->err, ctx->errlen, "%s: ", where);
    if (o >= 0 && (size_t)o < ctx->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->err + o, ctx->errlen - (size_t)o, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void mark_where(struct config_ctx *ctx, char *buf, size_t n, yaml_mark_t m)
{
    snprintf(buf, n, "%s:%zu:%zu", ctx->name, m.line + 1, m.column + 1);
}

static const char *scalar(const yaml_node_t *node)
{
    return (const char *)node->data.scalar.value;
}

static bool is_plain(const yaml_node_t *node)
{
    return node->type == YAML_SCALAR_NODE && node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static bool is_null(const yaml_node_t *node)
{
    if (!is_plain(node))
        return false;
    const char *s = scalar(node);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

/* YAML 1.2 core booleans; yes/no/on/off are not booleans there. */
static bool parse_bool(const yaml_node_t *node, bool *out)
{
    static const char *const names[] = {"true", "True", "TRUE", "false", "False", "FALSE"};
    for (int i = 0; is_plain(node) && i < 6; i++) {
        if (!strcmp(scalar(node), names[i])) {
            *out = i < 3;
            return true;
        }
    }
    return false;
}

static bool parse_number(const yaml_node_t *node, bool integer, double *out)
{
    if (!is_plain(node) || !*scalar(node))
        return false;
    char *end;
    errno = 0;
    if (integer) {
        long long v = strtoll(scalar(node), &end, 10);
        *out = (double)v;
    } else {
        *out = strtod(scalar(node), &end);
    }
    return !*end && errno == 0 && *out == *out && *out - *out == 0;
}

static const char *describe(const yaml_node_t *node, char *buf, size_t n)
{
    if (node->type == YAML_MAPPING_NODE)
        return "a mapping";
    if (node->type == YAML_SEQUENCE_NODE)
        return "a list";
    snprintf(buf, n, is_plain(node) ? "'%.60s'" : "the string \"%.60s\"", scalar(node));
    return buf;
}

static int type_error(struct config_ctx *ctx, int k, const yaml_node_t *node, const char *want)
{
    char buf[96];
    return config_fail(ctx, k, "%s: expected %s, got %s", config_keys[k].name, want, describe(node, buf, sizeof buf));
}

static int check_range(struct config_ctx *ctx, int k, double v)
{
    char msg[128];
    if (config_key_range(k, v, msg, sizeof msg))
        return config_fail(ctx, k, "%s: %.17g is out of range (%s)", config_keys[k].name, v, msg);
    return 0;
}

static int set_number(struct config_ctx *ctx, int k, const yaml_node_t *node)
{
    const struct config_key *key = &config_keys[k];
    bool integer = key->type != KT_FLOAT;
    double v;
    if ((key->flags & KF_NULL) && is_null(node))
        v = 0;
    else if ((key->flags & KF_AUTO) && is_plain(node) && !strcmp(scalar(node), "auto"))
        v = -1;
    else if (node->type == YAML_SCALAR_NODE && parse_number(node, integer, &v)) {
        if (check_range(ctx, k, v))
            return -1;
    } else {
        const char *want = integer ? "an integer" : "a number";
        if (key->flags & KF_AUTO)
            want = "an integer or auto";
        return type_error(ctx, k, node, want);
    }
    config_key_put(ctx->cfg, k, v);
    return 0;
}

static int set_enum(struct config_ctx *ctx, int k, const yaml_node_t *node)
{
    const struct config_key *key = &config_keys[k];
    char want[128] = "one of";
    for (int i = 0; key->names[i]; i++) {
        if (node->type == YAML_SCALAR_NODE && !strcmp(scalar(node), key->names[i])) {
            config_key_put(ctx->cfg, k, i);
            return 0;
        }
        strncat(want, i ? ", " : " ", sizeof want - strlen(want) - 1);
        strncat(want, key->names[i], sizeof want - strlen(want) - 1);
    }
    return type_error(ctx, k, node, want);
}

static int set_string(struct config_ctx *ctx, int k, const yaml_node_t *node)
{
    char **p = (char **)((char *)ctx->cfg + config_keys[k].offset);
    bool null_ok = config_keys[k].flags & KF_NULL;
    if (node->type != YAML_SCALAR_NODE || (is_null(node) && !null_ok))
        return type_error(ctx, k, node, "a string");
    size_t len = strlen(scalar(node));
    if ((config_keys[k].flags & KF_PATH) && len > CONFIG_PATH_MAX)
        return config_fail(ctx, k, "%s: a path of %zu bytes; at most %d are accepted", config_keys[k].name, len,
                           CONFIG_PATH_MAX);
    free(*p);
    *p = is_null(node) ? NULL : vkt_strdup(scalar(node));
    return 0;
}

static int set_pair(struct config_ctx *ctx, int k, yaml_document_t *doc, const yaml_node_t *node)
{
    double v[2];
    if (node->type != YAML_SEQUENCE_NODE || node->data.sequence.items.top - node->data.sequence.items.start != 2)
        return type_error(ctx, k, node, "a list of two numbers");
    for (int i = 0; i < 2; i++) {
        yaml_node_t *item = yaml_document_get_node(doc, node->data.sequence.items.start[i]);
        if (item->type != YAML_SCALAR_NODE || !parse_number(item, false, &v[i]))
            return type_error(ctx, k, item, "a number in the list");
        if (check_range(ctx, k, v[i]))
            return -1;
    }
    memcpy((char *)ctx->cfg + config_keys[k].offset, v, sizeof v);
    return 0;
}

static void free_list(char **list, int n)
{
    for (int i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

static int set_list(struct config_ctx *ctx, int k, yaml_document_t *doc, const yaml_node_t *node)
{
    char ***list = (char ***)((char *)ctx->cfg + config_keys[k].offset);
    int *count = (int *)((char *)list + sizeof(char **));
    if (node->type != YAML_SEQUENCE_NODE)
        return type_error(ctx, k, node, "a list of strings");
    int n = (int)(node->data.sequence.items.top - node->data.sequence.items.start);
    char **items = vkt_calloc((size_t)n + 1, sizeof *items, "config list");
    for (int i = 0; i < n; i++) {
        yaml_node_t *item = yaml_document_get_node(doc, node->data.sequence.items.start[i]);
        if (item->type != YAML_SCALAR_NODE || is_null(item)) {
            free_list(items, i);
            return type_error(ctx, k, item, "a string in the list");
        }
        items[i] = vkt_strdup(scalar(item));
    }
    free_list(*list, *count);
    *list = items;
    *count = n;
    return 0;
}

/* Sets key k from a YAML node; `where` says where the value came from. */
static int set_key(struct config_ctx *ctx, int k, yaml_document_t *doc, const yaml_node_t *node, const char *where)
{
    ctx->set[k] = true;
    snprintf(ctx->where[k], sizeof ctx->where[k], "%s", where);
    switch (config_keys[k].type) {
    case KT_INT:
    case KT_I64:
    case KT_FLOAT:
        return set_number(ctx, k, node);
    case KT_BOOL: {
        bool b;
        if (!parse_bool(node, &b))
            return type_error(ctx, k, node, "true or false");
        config_key_put(ctx->cfg, k, b);
        return 0;
    }
    case KT_ENUM:
        return set_enum(ctx, k, node);
    case KT_STR:
        return set_string(ctx, k, node);
    case KT_PAIR:
        return set_pair(ctx, k, doc, node);
    case KT_STRLIST:
        return set_list(ctx, k, doc, node);
    }
    return 0;
}

static int unknown_key(struct config_ctx *ctx, const char *where, const char *name)
{
    const char *near = config_key_suggest(name);
    snprintf(ctx->err, ctx->errlen, "%s: unknown key '%s'%s%s%s", where, name, near ? " (did you mean '" : "",
             near ? near : "", near ? "'?)" : "");
    return -1;
}

static int walk_mapping(struct config_ctx *ctx, yaml_document_t *doc, yaml_node_t *map, const char *section)
{
    for (yaml_node_pair_t *pair = map->data.mapping.pairs.start; pair < map->data.mapping.pairs.top; pair++) {
        yaml_node_t *kn = yaml_document_get_node(doc, pair->key);
        yaml_node_t *vn = yaml_document_get_node(doc, pair->value);
        char where[160], name[160];
        mark_where(ctx, where, sizeof where, kn->start_mark);
        if (kn->type != YAML_SCALAR_NODE) {
            snprintf(ctx->err, ctx->errlen, "%s: keys must be plain names", where);
            return -1;
        }
        snprintf(name, sizeof name, "%s%s%s", section, *section ? "." : "", scalar(kn));
        int k = config_key_find(name);
        if (k >= 0) {
            if (ctx->in_file[k]) {
                snprintf(ctx->err, ctx->errlen, "%s: duplicate key '%s' (first set at %s)", where, name, ctx->where[k]);
                return -1;
            }
            ctx->in_file[k] = true;
            mark_where(ctx, where, sizeof where, vn->start_mark);
            if (set_key(ctx, k, doc, vn, where))
                return -1;
        } else if (!*section && config_is_section(name)) {
            if (vn->type == YAML_MAPPING_NODE) {
                if (walk_mapping(ctx, doc, vn, name))
                    return -1;
            } else if (!is_null(vn)) {
                snprintf(ctx->err, ctx->errlen, "%s: '%s' must be a mapping of %s.* keys", where, name, name);
                return -1;
            }
        } else {
            return unknown_key(ctx, where, name);
        }
    }
    return 0;
}

static int yaml_error(struct config_ctx *ctx, const char *name, yaml_parser_t *p)
{
    snprintf(ctx->err, ctx->errlen, "%s:%zu:%zu: YAML syntax error: %s%s%s", name, p->problem_mark.line + 1,
             p->problem_mark.column + 1, p->problem ? p->problem : "unreadable", p->context ? " " : "",
             p->context ? p->context : "");
    return -1;
}

static int apply_override(struct config_ctx *ctx, const char *ov)
{
    char where[192], name[160];
    snprintf(where, sizeof where, "override '%s'", ov);
    const char *eq = strchr(ov, '=');
    if (!eq || eq == ov || (size_t)(eq - ov) >= sizeof name) {
        snprintf(ctx->err, ctx->errlen, "%s: expected key.sub=value", where);
        return -1;
    }
    snprintf(name, sizeof name, "%.*s", (int)(eq - ov), ov);
    int k = config_key_find(name);
    if (k < 0) {
        if (config_is_section(name)) {
            snprintf(ctx->err, ctx->errlen, "%s: '%s' is a section; set its keys as %s.KEY=VALUE", where, name, name);
            return -1;
        }
        return unknown_key(ctx, where, name);
    }
    yaml_parser_t p;
    yaml_document_t doc;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_string(&p, (const unsigned char *)eq + 1, strlen(eq + 1));
    if (!yaml_parser_load(&p, &doc)) {
        snprintf(ctx->err, ctx->errlen, "%s: %s: the value is not valid YAML: %s", where, name,
                 p.problem ? p.problem : "unreadable");
        yaml_parser_delete(&p);
        return -1;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    yaml_node_t empty = {.type = YAML_SCALAR_NODE};
    empty.data.scalar.value = (yaml_char_t *)"";
    empty.data.scalar.style = YAML_PLAIN_SCALAR_STYLE;
    int rc = set_key(ctx, k, &doc, root ? root : &empty, where);
    yaml_document_delete(&doc);
    yaml_parser_delete(&p);
    return rc;
}

static int parse_text(struct config_ctx *ctx, const char *text)
{
    yaml_parser_t p;
    yaml_document_t doc;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
    if (!yaml_parser_load(&p, &doc)) {
        yaml_error(ctx, ctx->name, &p);
        yaml_parser_delete(&p);
        return -1;
    }
    int rc = 0;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && root->type == YAML_MAPPING_NODE)
        rc = walk_mapping(ctx, &doc, root, "");
    else if (root && !is_null(root))
        rc = config_fail(ctx, -1, "a recipe must be a mapping of keys");
    yaml_document_delete(&doc);
    if (rc == 0 && root) {
        if (!yaml_parser_load(&p, &doc)) {
            rc = yaml_error(ctx, ctx->name, &p);
        } else {
            if (yaml_document_get_root_node(&doc))
                rc = config_fail(ctx, -1, "a recipe must hold one YAML document");
            yaml_document_delete(&doc);
        }
    }
    yaml_parser_delete(&p);
    return rc;
}

int config_load_string(struct config *cfg, const char *text, const char *name, int n_overrides, char *const *overrides,
                       char *err, size_t errlen)
{
    struct config_ctx *ctx = vkt_calloc(1, sizeof *ctx, "config context");
    ctx->cfg = cfg;
    ctx->name = name;
    ctx->err = err;
    ctx->errlen = errlen;
    config_defaults(cfg);
    int rc = parse_text(ctx, text);
    for (int i = 0; rc == 0 && i < n_overrides; i++)
        rc = apply_override(ctx, overrides[i]);
    if (rc == 0)
        rc = config_resolve(ctx);
    if (rc)
        config_free(cfg);
    free(ctx);
    return rc;
}

int config_load(struct config *cfg, const char *path, int n_overrides, char *const *overrides, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        config_defaults(cfg);
        snprintf(err, errlen, "cannot open recipe '%s': %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    char *text = vkt_malloc(cap, "recipe text");
    size_t got;
    while ((got = fread(text + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0)
            text = vkt_realloc(text, cap *= 2, "recipe text");
    }
    fclose(f);
    text[n] = 0;
    if (strlen(text) != n) {
        config_defaults(cfg);
        snprintf(err, errlen, "%s: not a text file (holds a NUL byte)", path);
        free(text);
        return -1;
    }
    int rc = config_load_string(cfg, text, path, n_overrides, overrides, err, errlen);
    free(text);
    return rc;
}

void config_free(struct config *cfg)
{
    free(cfg->output_dir);
    free(cfg->model.init_from);
    free(cfg->tokenizer.path);
    free(cfg->dataset.path);
    free(cfg->dataset.separator);
    free(cfg->dataset.val_path);
    free_list(cfg->dataset.exclude, cfg->dataset.n_exclude);
    free(cfg->lora.init_from);
    free_list(cfg->lora.targets, cfg->lora.n_targets);
    free_list(cfg->model.layer_types, cfg->model.n_layer_types);
    free_list(cfg->model.no_rope_layers, cfg->model.n_no_rope_layers);
    config_defaults(cfg);
}
