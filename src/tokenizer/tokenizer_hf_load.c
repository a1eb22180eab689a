/* tokenizer_hf_load: reads a Hugging Face tokenizer.json into struct
 * tokenizer_hf (what is accepted and refused: tokenizer_hf.c), checking
 * every part it relies on; errors name the file and the component. */
#include "tokenizer_hf.h"

#include "vktrain/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading tokenizer.json ---- */

static int fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
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

static const char *type_of(json_t *obj)
{
    const char *t = json_string_value(json_object_get(obj, "type"));
    return t ? t : "(no type)";
}

/* A ByteLevel pre-tokenizer: 0 and whether it splits, or -1. */
static int check_byte_level(json_t *pt, const char *where, bool *use_regex, const char *path, char *err, size_t errlen)
{
    json_t *aps = json_object_get(pt, "add_prefix_space");
    if (json_is_true(aps))
        return fail(err, errlen, path,
                    "%s: add_prefix_space true is not supported (it adds a space the text does not have)", where);
    json_t *re = json_object_get(pt, "use_regex");
    *use_regex = !re || json_is_true(re);
    return 0;
}

static int check_pre_tokenizer(struct tokenizer_hf *h, json_t *pt, const char *path, char *err, size_t errlen)
{
    const char *hint = " (vktrain reads byte-level BPE: ByteLevel, optionally after a Split with the GPT-2 "
                       "pattern)";
    if (!json_is_object(pt))
        return fail(err, errlen, path, "pre_tokenizer: none is not supported%s", hint);
    bool use_regex = true;
    if (!strcmp(type_of(pt), "ByteLevel")) {
        if (check_byte_level(pt, "pre_tokenizer", &use_regex, path, err, errlen))
            return -1;
        h->split = use_regex;
        return 0;
    }
    if (strcmp(type_of(pt), "Sequence"))
        return fail(err, errlen, path, "pre_tokenizer '%s' is not supported%s", type_of(pt), hint);
    json_t *list = json_object_get(pt, "pretokenizers");
    size_t n = json_array_size(list);
    bool byte_level = false;
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_array_get(list, i);
        char where[64];
        snprintf(where, sizeof where, "pre_tokenizer.pretokenizers[%zu]", i);
        if (!strcmp(type_of(p), "ByteLevel") && !byte_level) {
            if (check_byte_level(p, where, &use_regex, path, err, errlen))
                return -1;
            h->split |= use_regex;
            byte_level = true;
        } else if (!strcmp(type_of(p), "Split") && !byte_level) {
            json_t *pat = json_object_get(p, "pattern");
            const char *re = json_string_value(json_object_get(pat, "Regex"));
            const char *behavior = json_string_value(json_object_get(p, "behavior"));
            if (!re || strcmp(re, GPT2_PATTERN))
                return fail(err, errlen, path, "%s: a Split with pattern %s is not supported (only the GPT-2 regex %s)",
                            where, re ? re : "(not a Regex)", GPT2_PATTERN);
            if (!behavior || strcmp(behavior, "Isolated") || json_is_true(json_object_get(p, "invert")))
                return fail(err, errlen, path, "%s: a Split must have behavior Isolated and invert false", where);
            h->split = true;
        } else {
            return fail(err, errlen, path, "%s: '%s' is not supported here%s", where, type_of(p), hint);
        }
    }
    if (!byte_level)
        return fail(err, errlen, path, "pre_tokenizer: a Sequence without ByteLevel is not supported%s", hint);
    return 0;
}

/* A token's bytes: its byte-level characters mapped back (a character
 * outside the table stands for its own UTF-8). */
static size_t token_bytes(const char *tok, size_t len, const int16_t inv[N_BYTE_CHARS], char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < len;) {
        size_t l;
        uint32_t cp = hf_utf8_next((const unsigned char *)tok + i, len - i, &l);
        if (cp < N_BYTE_CHARS && inv[cp] >= 0)
            out[k++] = (char)inv[cp];
        else
            for (size_t j = 0; j < l; j++)
                out[k++] = tok[i + j];
        i += l;
    }
    return k;
}

static int json_id(json_t *v, int *id)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= (1 << 30))
        return -1;
    *id = (int)json_integer_value(v);
    return 0;
}

/* The id of the first name the tokenizer has: added tokens, then the vocab;
 * -1 if none. */
static int find_special(const struct tokenizer_hf *h, json_t *added, const char *const *names)
{
    for (; *names; names++) {
        size_t i;
        json_t *a;
        json_array_foreach(added, i, a)
        {
            const char *c = json_string_value(json_object_get(a, "content"));
            int id;
            if (c && !strcmp(c, *names) && !json_id(json_object_get(a, "id"), &id))
                return id;
        }
        const struct smap_slot *v = hf_smap_get(&h->vocab, *names, strlen(*names));
        if (v)
            return (int)v->val;
    }
    return -1;
}

static int load(struct tokenizer *t, struct tokenizer_hf *h, json_t *root, const char *path, char *err, size_t errlen)
{
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model))
        return fail(err, errlen, path, "no model object (is this a Hugging Face tokenizer.json?)");
    if (strcmp(type_of(model), "BPE"))
        return fail(err, errlen, path, "model.type '%s' is not supported (vktrain reads byte-level BPE only)",
                    type_of(model));
    if (json_is_true(json_object_get(model, "byte_fallback")))
        return fail(err, errlen, path,
                    "model.byte_fallback: a sentencepiece-style BPE with byte fallback is not supported (vktrain "
                    "reads byte-level BPE only)");
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const char *a = json_string_value(json_object_get(model, affixes[i]));
        if (a && *a)
            return fail(err, errlen, path, "model.%s '%s' is not supported", affixes[i], a);
    }
    json_t *dropout = json_object_get(model, "dropout");
    if (json_is_number(dropout) && json_number_value(dropout) > 0)
        return fail(err, errlen, path, "model.dropout %g is not supported", json_number_value(dropout));
    h->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));

    json_t *norm = json_object_get(root, "normalizer");
    if (norm && !json_is_null(norm))
        return fail(err, errlen, path, "normalizer '%s' is not supported (byte-level BPE has none)", type_of(norm));
    if (check_pre_tokenizer(h, json_object_get(root, "pre_tokenizer"), path, err, errlen))
        return -1;
    json_t *dec = json_object_get(root, "decoder");
    if (!json_is_object(dec) || strcmp(type_of(dec), "ByteLevel"))
        return fail(err, errlen, path, "decoder '%s' is not supported (byte-level BPE decodes with ByteLevel)",
                    json_is_object(dec) ? type_of(dec) : "none");

    /* the ids: the vocab and the added tokens */
    json_t *vocab = json_object_get(model, "vocab"), *added = json_object_get(root, "added_tokens");
    if (!json_is_object(vocab))
        return fail(err, errlen, path, "model.vocab is not an object");
    if (added && !json_is_null(added) && !json_is_array(added))
        return fail(err, errlen, path, "added_tokens is not an array");
    int max_id = -1, id = 0;
    const char *key;
    json_t *v;
    json_object_foreach(vocab, key, v)
    {
        if (json_id(v, &id))
            return fail(err, errlen, path, "model.vocab: the id of '%s' is not a non-negative integer", key);
        max_id = id > max_id ? id : max_id;
    }
    size_t i;
    json_array_foreach(added, i, v)
    {
        if (json_id(json_object_get(v, "id"), &id) || !json_is_string(json_object_get(v, "content")))
            return fail(err, errlen, path, "added_tokens[%zu]: needs an integer id and a string content", i);
        max_id = id > max_id ? id : max_id;
    }
    if (max_id < 0)
        return fail(err, errlen, path, "the tokenizer has no tokens");
    if (max_id >= TOKENIZER_MAX_SIZE)
        return fail(err, errlen, path,
                    "the tokenizer has %d ids; vktrain stores token ids in 16 bits (at most %d ids), so tokenizers "
                    "this large (like Llama-3's 128256) are not supported yet",
                    max_id + 1, TOKENIZER_MAX_SIZE);
    h->size = max_id + 1;

    uint32_t cp[256];
    int16_t inv[N_BYTE_CHARS];
    hf_byte_chars(cp, inv);
    for (int b = 0; b < 256; b++)
        h->byte_len[b] = (uint8_t)hf_put_utf8(h->byte_str[b], cp[b]);

    /* vocab map and the bytes of every id */
    hf_smap_init(&h->vocab, json_object_size(vocab));
    h->dec_off = vkt_calloc((size_t)h->size, sizeof *h->dec_off, "tokenizer ids");
    h->dec_len = vkt_malloc((size_t)h->size * sizeof *h->dec_len, "tokenizer ids");
    memset(h->dec_len, 0xff, (size_t)h->size * sizeof *h->dec_len);
    size_t pool_n = 0, pool_cap = 0;
    json_object_foreach(vocab, key, v)
    {
        size_t len = strlen(key);
        json_id(v, &id);
        hf_smap_put(&h->vocab, key, len, (uint32_t)id, 0);
        if (pool_n + len > pool_cap) {
            pool_cap = 2 * (pool_n + len) + 4096;
            h->dec_pool = vkt_realloc(h->dec_pool, pool_cap, "tokenizer ids");
        }
        h->dec_off[id] = (uint32_t)pool_n;
        h->dec_len[id] = (uint32_t)token_bytes(key, len, inv, h->dec_pool + pool_n);
        pool_n += h->dec_len[id];
    }
    json_array_foreach(added, i, v)
    {
        const char *content = json_string_value(json_object_get(v, "content"));
        size_t len = json_string_length(json_object_get(v, "content"));
        json_id(json_object_get(v, "id"), &id);
        if (pool_n + len > pool_cap) {
            pool_cap = 2 * (pool_n + len) + 4096;
            h->dec_pool = vkt_realloc(h->dec_pool, pool_cap, "tokenizer ids");
        }
        memcpy(h->dec_pool + pool_n, content, len);
        h->dec_off[id] = (uint32_t)pool_n;
        h->dec_len[id] = (uint32_t)len;
        pool_n += len;
    }

    for (int b = 0; b < 256; b++) {
        const struct smap_slot *s = hf_smap_get(&h->vocab, h->byte_str[b], h->byte_len[b]);
        if (!s)
            return fail(err, errlen, path,
                        "model.vocab lacks the token '%.*s' of byte 0x%02x; byte-level BPE needs all 256 (train "
                        "with initial_alphabet=ByteLevel.alphabet())",
                        (int)h->byte_len[b], h->byte_str[b], b);
        h->byte_id[b] = s->val;
    }

    /* merges: pair -> (rank, merged id) */
    json_t *merges = json_object_get(model, "merges");
    if (merges && !json_is_array(merges))
        return fail(err, errlen, path, "model.merges is not an array");
    size_t n_merges = json_array_size(merges), cap = 16;
    while (cap < 2 * n_merges)
        cap *= 2;
    h->merges = vkt_calloc(cap, sizeof *h->merges, "tokenizer merges");
    h->merges_mask = cap - 1;
    char *joined = NULL;
    size_t joined_cap = 0;
    int rc = 0;
    json_array_foreach(merges, i, v)
    {
        const char *a, *b;
        size_t la, lb;
        if (json_is_string(v)) {
            a = json_string_value(v);
            const char *sp = strchr(a, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                rc = fail(err, errlen, path, "model.merges[%zu] '%s' is not two tokens", i, a);
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
            rc = fail(err, errlen, path, "model.merges[%zu] is neither \"a b\" nor [a, b]", i);
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
            rc = fail(err, errlen, path, "model.merges[%zu] '%.*s %.*s': '%.*s' is not in the vocab", i, (int)la, a,
                      (int)lb, b, (int)ml, miss);
            break;
        }
        uint64_t k = ((uint64_t)ia->val << 32 | ib->val) + 1;
        size_t j = hf_pmap_index(k, h->merges_mask);
        while (h->merges[j].key && h->merges[j].key != k)
            j = (j + 1) & h->merges_mask;
        if (!h->merges[j].key) /* the first rank of a repeated pair stays */
            h->merges[j] = (struct pmap_slot){k, (int32_t)i, (int32_t)ij->val};
    }
    free(joined);
    if (rc)
        return rc;

    /* special ids by name */
    static const char *const eos[] = {"<|endoftext|>", "<|end_of_text|>", "</s>", "<|eos|>", "<eos>", NULL};
    static const char *const bos[] = {"<|begin_of_text|>", "<s>", "<|bos|>", "<bos>", "<|startoftext|>", NULL};
    static const char *const pad[] = {"<pad>", "<|pad|>", "[PAD]", "<|padding|>", NULL};
    t->eos = find_special(h, added, eos);
    if (t->eos < 0)
        return fail(err, errlen, path,
                    "no end-of-text token: the data pipeline needs one of <|endoftext|>, <|end_of_text|>, </s>, "
                    "<|eos|>, <eos> (as an added token or in the vocab)");
    t->bos = find_special(h, added, bos);
    if (t->bos < 0)
        t->bos = t->eos;
    t->pad = find_special(h, added, pad);
    if (t->pad < 0)
        t->pad = t->eos;
    t->size = h->size;
    t->type = TOKENIZER_HF;
    hf_smap_init(&h->cache, 1024);
    return 0;
}

int tokenizer_hf_open(struct tokenizer *t, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "tokenizer.path: cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    json_error_t je;
    json_t *root = json_loadf(f, JSON_ALLOW_NUL, &je);
    fclose(f);
    if (!root)
        return fail(err, errlen, path, "line %d: %s", je.line, je.text);
    struct tokenizer_hf *h = vkt_calloc(1, sizeof *h, "tokenizer");
    int rc = json_is_object(root) ? load(t, h, root, path, err, errlen)
                                  : fail(err, errlen, path, "not a JSON object (is this a tokenizer.json?)");
    json_decref(root);
    if (rc) {
        tokenizer_hf_free(h);
        return -1;
    }
    t->hf = h;
    return 0;
}
