/* tokenizer_hf_load: reads a Hugging Face tokenizer.json (a file, or a
 * model folder's) into struct tokenizer_hf: the BPE model (vocab, merges,
 * ignore_merges, byte_fallback, unk_token, fuse_unk), the added tokens and
 * the special ids; the normalizer, pre-tokenizer and decoder are
 * hf_load_pipeline.c's. Every part it relies on is checked; errors name
 * the file and the component. Never encodes. */
#include "tokenizer_hf.h"

#include "vktrain/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int hf_fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
    int o = snprintf(err, errlen, "tokenizer.path: %s: ", path);
    if (o >= 0 && (size_t)o < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + o, errlen - (size_t)o, fmt, ap);
        va_end(ap);
    }
    return -1;
}

const char *hf_type_of(json_t *obj)
{
    const char *t = json_string_value(json_object_get(obj, "type"));
    return t ? t : "(no type)";
}

/* Ids are below 2^24 (16,777,216, far above any published vocabulary):
 * the id -> string table holds 8 bytes an id up to the highest, so a few
 * bytes of JSON naming a larger id cannot demand gigabytes. */
#define HF_MAX_ID (1 << 24)

/* An id: a JSON integer in [0, HF_MAX_ID). */
static int json_id(json_t *v, uint32_t *id)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= HF_MAX_ID)
        return -1;
    *id = (uint32_t)json_integer_value(v);
    return 0;
}

static int check_model(struct tokenizer_hf *h, json_t *model, const char *path, char *err, size_t errlen)
{
    if (!json_is_object(model))
        return hf_fail(err, errlen, path, "no model object (is this a Hugging Face tokenizer.json?)");
    if (strcmp(hf_type_of(model), "BPE"))
        return hf_fail(err, errlen, path, "model.type '%s' is not supported (vktrain reads BPE models only)",
                       hf_type_of(model));
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const char *a = json_string_value(json_object_get(model, affixes[i]));
        if (a && *a)
            return hf_fail(err, errlen, path, "model.%s '%s' is not supported", affixes[i], a);
    }
    json_t *dropout = json_object_get(model, "dropout");
    if (json_is_number(dropout) && json_number_value(dropout) > 0)
        return hf_fail(err, errlen, path, "model.dropout %g is not supported", json_number_value(dropout));
    h->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    h->use_byte_fallback = json_is_true(json_object_get(model, "byte_fallback"));
    h->fuse_unk = json_is_true(json_object_get(model, "fuse_unk"));
    if (h->kind == HF_BYTE_LEVEL && h->use_byte_fallback)
        return hf_fail(err, errlen, path, "model.byte_fallback true with a ByteLevel pre-tokenizer is not supported");
    if (!json_is_object(json_object_get(model, "vocab")))
        return hf_fail(err, errlen, path, "model.vocab is not an object");
    json_t *merges = json_object_get(model, "merges");
    if (merges && !json_is_array(merges))
        return hf_fail(err, errlen, path, "model.merges is not an array");
    return 0;
}

/* Grows the id -> string table to n ids. */
static void reserve_ids(struct tokenizer_hf *h, size_t n)
{
    if ((size_t)h->size >= n)
        return;
    h->tok_off = vkt_realloc(h->tok_off, n * sizeof *h->tok_off, "tokenizer ids");
    h->tok_len = vkt_realloc(h->tok_len, n * sizeof *h->tok_len, "tokenizer ids");
    memset(h->tok_len + h->size, 0xff, (n - (size_t)h->size) * sizeof *h->tok_len);
    h->size = (int)n;
}

/* Records the string of an id (for decoding); a later one replaces it. */
static void set_token(struct tokenizer_hf *h, uint32_t id, const char *s, size_t len, size_t *pool_n,
                      size_t *pool_cap)
{
    reserve_ids(h, (size_t)id + 1);
    if (*pool_n + len > *pool_cap) {
        *pool_cap = 2 * (*pool_n + len) + 4096;
        h->tok_pool = vkt_realloc(h->tok_pool, *pool_cap, "tokenizer ids");
    }
    memcpy(h->tok_pool + *pool_n, s, len);
    h->tok_off[id] = (uint32_t)*pool_n;
    h->tok_len[id] = (uint32_t)len;
    *pool_n += len;
}

static int load_vocab(struct tokenizer_hf *h, json_t *model, const char *path, char *err, size_t errlen,
                      size_t *pool_n, size_t *pool_cap)
{
    json_t *vocab = json_object_get(model, "vocab"), *v;
    const char *key;
    hf_smap_init(&h->vocab, json_object_size(vocab));
    json_object_foreach(vocab, key, v)
    {
        uint32_t id;
        if (json_id(v, &id))
            return hf_fail(err, errlen, path, "model.vocab: the id of '%s' is not an integer in [0, 2^24)", key);
        size_t len = strlen(key);
        hf_smap_put(&h->vocab, key, len, id, 0);
        set_token(h, id, key, len, pool_n, pool_cap);
    }
    if (h->kind == HF_BYTE_LEVEL) {
        uint32_t cp[256];
        hf_byte_chars(cp);
        memset(h->byte_of, 0xff, sizeof h->byte_of);
        for (int b = 0; b < 256; b++) {
            h->byte_len[b] = (uint8_t)hf_put_utf8(h->byte_str[b], cp[b]);
            h->byte_of[cp[b]] = (int16_t)b;
            const struct smap_slot *s = hf_smap_get(&h->vocab, h->byte_str[b], h->byte_len[b]);
            if (!s)
                return hf_fail(err, errlen, path,
                               "model.vocab lacks the token '%.*s' of byte 0x%02x; byte-level BPE needs all 256 "
                               "(train with initial_alphabet=ByteLevel.alphabet())",
                               (int)h->byte_len[b], h->byte_str[b], b);
            h->byte_id[b] = s->val;
        }
        return 0;
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        const struct smap_slot *s = hf_smap_get(&h->vocab, name, 6);
        h->byte_fallback[b] = s ? (int64_t)s->val : -1;
    }
    h->unk = -1;
    const char *unk = json_string_value(json_object_get(model, "unk_token"));
    if (unk) {
        const struct smap_slot *s = hf_smap_get(&h->vocab, unk, strlen(unk));
        if (!s)
            return hf_fail(err, errlen, path, "model.unk_token '%s' is not in model.vocab", unk);
        h->unk = s->val;
    }
    return 0;
}

static int load_merges(struct tokenizer_hf *h, json_t *merges, const char *path, char *err, size_t errlen)
{
    hf_pmap_init(&h->merges, json_array_size(merges));
    char *joined = NULL;
    size_t joined_cap = 0, i;
    json_t *v;
    int rc = 0;
    json_array_foreach(merges, i, v)
    {
        const char *a, *b;
        size_t la, lb;
        if (json_is_string(v)) {
            a = json_string_value(v);
            const char *sp = strchr(a, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                rc = hf_fail(err, errlen, path, "model.merges[%zu] '%s' is not two tokens", i, a);
                break;
            }
            la = (size_t)(sp - a);
            b = sp + 1;
            lb = strlen(b);
        } else if (json_array_size(v) == 2 && json_is_string(json_array_get(v, 0)) &&
                   json_is_string(json_array_get(v, 1))) {
            a = json_string_value(json_array_get(v, 0));
            b = json_string_value(json_array_get(v, 1));
            la = strlen(a);
            lb = strlen(b);
        } else {
            rc = hf_fail(err, errlen, path, "model.merges[%zu] is neither \"a b\" nor [a, b]", i);
            break;
        }
        if (la + lb > joined_cap) {
            joined_cap = 2 * (la + lb) + 64;
            joined = vkt_realloc(joined, joined_cap, "tokenizer merges");
        }
        memcpy(joined, a, la);
        memcpy(joined + la, b, lb);
        const struct smap_slot *ia = hf_smap_get(&h->vocab, a, la), *ib = hf_smap_get(&h->vocab, b, lb),
                               *ij = hf_smap_get(&h->vocab, joined, la + lb);
        if (!ia || !ib || !ij) {
            const char *miss = !ia ? a : !ib ? b : joined;
            size_t ml = !ia ? la : !ib ? lb : la + lb;
            rc = hf_fail(err, errlen, path, "model.merges[%zu] '%.*s %.*s': '%.*s' is not in the vocab", i, (int)la,
                         a, (int)lb, b, (int)ml, miss);
            break;
        }
        /* a pair listed twice keeps its last rank, as in tokenizers */
        hf_pmap_set(&h->merges, ia->val, ib->val, (uint32_t)i, ij->val);
    }
    free(joined);
    return rc;
}

/* The added tokens, with the ids tokenizers gives them: a content the
 * vocab has keeps the vocab's id. Normalized ones are matched in their
 * normalized form, which is also what they decode to. */
static int load_added(struct tokenizer_hf *h, json_t *added, const char *path, char *err, size_t errlen,
                      size_t *pool_n, size_t *pool_cap)
{
    if (added && !json_is_null(added) && !json_is_array(added))
        return hf_fail(err, errlen, path, "added_tokens is not an array");
    h->added = vkt_calloc(json_array_size(added) + 1, sizeof *h->added, "added tokens");
    size_t i;
    json_t *v;
    json_array_foreach(added, i, v)
    {
        json_t *content = json_object_get(v, "content");
        struct hf_added_token a = {0};
        if (json_id(json_object_get(v, "id"), &a.id) || !json_is_string(content))
            return hf_fail(err, errlen, path, "added_tokens[%zu]: needs an integer id in [0, 2^24) and a string content",
                           i);
        const char *c = json_string_value(content);
        size_t len = json_string_length(content);
        if (!len)
            continue;
        const struct smap_slot *in_vocab = hf_smap_get(&h->vocab, c, len);
        if (in_vocab)
            a.id = in_vocab->val;
        a.single_word = json_is_true(json_object_get(v, "single_word"));
        a.lstrip = json_is_true(json_object_get(v, "lstrip"));
        a.rstrip = json_is_true(json_object_get(v, "rstrip"));
        json_t *norm = json_object_get(v, "normalized");
        a.special = json_is_true(json_object_get(v, "special"));
        a.normalized = norm ? json_is_true(norm) : !a.special;
        if (a.normalized)
            c = hf_normalize(h, c, len, &len);
        a.match = vkt_malloc(len + 1, "added tokens");
        memcpy(a.match, c, len);
        a.match[len] = 0;
        a.len = len;
        set_token(h, a.id, a.match, len, pool_n, pool_cap);
        h->added[h->n_added++] = a;
    }
    hf_trie_build(&h->raw_trie, h->added, h->n_added, false);
    hf_trie_build(&h->norm_trie, h->added, h->n_added, true);
    return 0;
}

/* ---- special ids ---- */

static int64_t token_id(const struct tokenizer_hf *h, const char *name)
{
    for (size_t i = h->n_added; i-- > 0;)
        if (!strcmp(h->added[i].match, name))
            return h->added[i].id;
    const struct smap_slot *v = hf_smap_get(&h->vocab, name, strlen(name));
    return v ? (int64_t)v->val : -1;
}

static int64_t first_of(const struct tokenizer_hf *h, const char *const *names)
{
    for (; *names; names++) {
        int64_t id = token_id(h, *names);
        if (id >= 0)
            return id;
    }
    return -1;
}

/* tokenizer_config.json's KEY: a string or {"content": string}; NULL when
 * absent or null. */
static const char *config_token(json_t *cfg, const char *key)
{
    json_t *v = json_object_get(cfg, key);
    return json_is_object(v) ? json_string_value(json_object_get(v, "content")) : json_string_value(v);
}

/* BOS, EOS and PAD: tokenizer_config.json's bos_token, eos_token and
 * pad_token when a file of that name lies beside tokenizer.json, else the
 * first of the usual names the tokenizer has; BOS and PAD default to EOS. */
static int special_ids(struct tokenizer *t, const struct tokenizer_hf *h, const char *path, char *err,
                       size_t errlen)
{
    static const char *const eos[] = {"<|endoftext|>", "<|end_of_text|>", "</s>", "<|eos|>", "<eos>", NULL};
    static const char *const bos[] = {"<|begin_of_text|>", "<s>", "<|bos|>", "<bos>", "<|startoftext|>", NULL};
    static const char *const pad[] = {"<pad>", "<|pad|>", "[PAD]", "<|padding|>", NULL};
    int64_t ids[3] = {first_of(h, bos), first_of(h, eos), first_of(h, pad)};
    char cfg_path[4096];
    tokenizer_file_beside(path, "tokenizer_config.json", cfg_path, sizeof cfg_path);
    json_error_t je;
    json_t *cfg = NULL;
    struct stat st;
    if (!stat(cfg_path, &st)) {
        /* Only strings are read from it; as reals, integers such as
         * transformers' model_max_length of 1e30 do not overflow. */
        cfg = json_load_file(cfg_path, JSON_DECODE_INT_AS_REAL, &je);
        if (!json_is_object(cfg)) {
            json_decref(cfg);
            return hf_fail(err, errlen, cfg_path, "line %d: %s", je.line, cfg ? "not a JSON object" : je.text);
        }
    }
    static const char *const keys[] = {"bos_token", "eos_token", "pad_token"};
    for (int k = 0; cfg && k < 3; k++) {
        const char *name = config_token(cfg, keys[k]);
        if (!name)
            continue;
        ids[k] = token_id(h, name);
        if (ids[k] < 0) {
            hf_fail(err, errlen, cfg_path, "%s '%s' is not a token of %s", keys[k], name, path);
            json_decref(cfg);
            return -1;
        }
    }
    json_decref(cfg);
    if (ids[1] < 0)
        return hf_fail(err, errlen, path,
                       "no end-of-text token: the data pipeline needs one of <|endoftext|>, <|end_of_text|>, </s>, "
                       "<|eos|>, <eos> (as an added token or in the vocab), or eos_token in tokenizer_config.json");
    t->bos = (int)(ids[0] >= 0 ? ids[0] : ids[1]);
    t->eos = (int)ids[1];
    t->pad = (int)(ids[2] >= 0 ? ids[2] : ids[1]);
    return 0;
}

static int load(struct tokenizer *t, struct tokenizer_hf *h, json_t *root, const char *path, char *err, size_t errlen)
{
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model))
        return hf_fail(err, errlen, path, "no model object (is this a Hugging Face tokenizer.json?)");
    size_t pool_n = 0, pool_cap = 0;
    if (hf_load_pipeline(h, root, path, err, errlen) || check_model(h, model, path, err, errlen) ||
        load_vocab(h, model, path, err, errlen, &pool_n, &pool_cap) ||
        load_merges(h, json_object_get(model, "merges"), path, err, errlen) ||
        load_added(h, json_object_get(root, "added_tokens"), path, err, errlen, &pool_n, &pool_cap))
        return -1;
    if (h->size == 0)
        return hf_fail(err, errlen, path, "the tokenizer has no tokens");
    if (special_ids(t, h, path, err, errlen))
        return -1;
    if (h->kind == HF_SENTENCEPIECE)
        hf_sentencepiece_prepare(h);
    t->size = h->size;
    t->type = TOKENIZER_HF;
    hf_smap_init(&h->cache, 1024);
    return 0;
}

void tokenizer_json_path(const char *path, char *out, size_t cap)
{
    struct stat st;
    if (!stat(path, &st) && S_ISDIR(st.st_mode))
        snprintf(out, cap, "%s/tokenizer.json", path);
    else
        snprintf(out, cap, "%s", path);
}

void tokenizer_file_beside(const char *path, const char *name, char *out, size_t cap)
{
    char file[4096];
    tokenizer_json_path(path, file, sizeof file);
    const char *slash = strrchr(file, '/');
    snprintf(out, cap, "%.*s%s", slash ? (int)(slash - file + 1) : 0, file, name);
}

int tokenizer_hf_open(struct tokenizer *t, const char *path, char *err, size_t errlen)
{
    char file[4096];
    struct stat st;
    tokenizer_json_path(path, file, sizeof file);
    if (strcmp(file, path) && stat(file, &st)) {
        snprintf(err, errlen, "tokenizer.path: the folder '%s' has no tokenizer.json", path);
        return -1;
    }
    FILE *f = fopen(file, "rb");
    if (!f) {
        snprintf(err, errlen, "tokenizer.path: cannot open '%s': %s", file, strerror(errno));
        return -1;
    }
    json_error_t je;
    json_t *root = json_loadf(f, JSON_ALLOW_NUL, &je);
    fclose(f);
    if (!root)
        return hf_fail(err, errlen, file, "line %d: %s", je.line, je.text);
    struct tokenizer_hf *h = vkt_calloc(1, sizeof *h, "tokenizer");
    int rc = json_is_object(root) ? load(t, h, root, file, err, errlen)
                                  : hf_fail(err, errlen, file, "not a JSON object (is this a tokenizer.json?)");
    json_decref(root);
    if (rc) {
        tokenizer_hf_free(h);
        return -1;
    }
    t->hf = h;
    return 0;
}
