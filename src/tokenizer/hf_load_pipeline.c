/* hf_load_pipeline: reads the normalizer, pre_tokenizer and decoder of a
 * tokenizer.json into struct tokenizer_hf and decides the model's kind:
 * byte-level when the pre-tokenizer ends with ByteLevel, else
 * SentencePiece-style. Every field that changes the ids is checked; a
 * component or setting vktrain does not implement is an error naming it
 * (docs/data.md lists what is read). Never reads the model. */
#include "tokenizer_hf.h"

#include "vktrain/util.h"

#include <stdio.h>
#include <string.h>

static const char *const regexes[] = {
    [HF_RE_GPT2] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
    [HF_RE_LLAMA3] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    [HF_RE_QWEN2] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    [HF_RE_O200K] = "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
                    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
                    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| "
                    "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

struct ctx {
    struct tokenizer_hf *h;
    const char *path;
    char *err;
    size_t errlen;
    bool byte_level; /* a ByteLevel pre-tokenizer was read (it must be last) */
    bool metaspace;
};

static const char *str(json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

/* A one-character string field: 0 and its UTF-8, or -1. */
static int one_char(struct ctx *c, json_t *obj, const char *key, const char *where, char out[4], size_t *len)
{
    const char *s = str(obj, key);
    size_t l = 0;
    if (s && *s)
        hf_utf8_next((const unsigned char *)s, strlen(s), &l);
    if (!s || !*s || s[l] || l > 4)
        return hf_fail(c->err, c->errlen, c->path, "%s.%s must be one character", where, key);
    memcpy(out, s, l);
    *len = l;
    return 0;
}

/* Metaspace's prepend_scheme as tokenizers reads it (add_prefix_space false
 * is "never"; no scheme is "always"). */
static int prepend_scheme(struct ctx *c, json_t *obj, const char *where, enum hf_prepend *out)
{
    const char *s = str(obj, "prepend_scheme");
    *out = !s || !strcmp(s, "always") ? HF_PREPEND_ALWAYS
           : !strcmp(s, "first")     ? HF_PREPEND_FIRST
           : !strcmp(s, "never")     ? HF_PREPEND_NEVER
                                     : (enum hf_prepend)-1;
    if ((int)*out < 0)
        return hf_fail(c->err, c->errlen, c->path, "%s.prepend_scheme '%s' is not always, first or never", where, s);
    if (json_is_false(json_object_get(obj, "add_prefix_space"))) {
        if (*out != HF_PREPEND_NEVER)
            return hf_fail(c->err, c->errlen, c->path, "%s: add_prefix_space false does not match prepend_scheme %s",
                           where, s ? s : "always");
    }
    return 0;
}

/* ---- normalizer ---- */

static int add_norm(struct ctx *c, json_t *n, const char *where)
{
    struct tokenizer_hf *h = c->h;
    const char *type = hf_type_of(n);
    char sub[160];
    if (!strcmp(type, "Sequence")) {
        json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list))
            return hf_fail(c->err, c->errlen, c->path, "%s.normalizers is not a list", where);
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e)
        {
            snprintf(sub, sizeof sub, "%s.normalizers[%zu]", where, i);
            if (add_norm(c, e, sub))
                return -1;
        }
        return 0;
    }
    struct hf_norm r = {0};
    if (!strcmp(type, "NFC")) {
        r.kind = HF_NORM_NFC;
    } else if (!strcmp(type, "Prepend")) {
        const char *p = str(n, "prepend");
        if (!p)
            return hf_fail(c->err, c->errlen, c->path, "%s: Prepend needs a string 'prepend'", where);
        r.kind = HF_NORM_PREPEND;
        r.to = vkt_strdup(p);
        r.to_len = strlen(p);
    } else if (!strcmp(type, "Replace")) {
        json_t *pat = json_object_get(n, "pattern");
        const char *from = str(pat, "String"), *to = str(n, "content");
        if (!from || !*from || !to)
            return hf_fail(c->err, c->errlen, c->path,
                           "%s: a Replace is supported with a non-empty pattern {\"String\": ...} and a string "
                           "content only%s",
                           where, str(pat, "Regex") ? " (not a Regex pattern)" : "");
        r.kind = HF_NORM_REPLACE;
        r.from = vkt_strdup(from);
        r.from_len = strlen(from);
        r.to = vkt_strdup(to);
        r.to_len = strlen(to);
    } else {
        return hf_fail(c->err, c->errlen, c->path,
                       "%s '%s' is not supported (vktrain reads NFC, Prepend, Replace of a string, and Sequences of "
                       "them)",
                       where, type);
    }
    h->norm = vkt_realloc(h->norm, (size_t)(h->n_norm + 1) * sizeof *h->norm, "tokenizer");
    h->norm[h->n_norm++] = r;
    return 0;
}

/* ---- pre_tokenizer ---- */

static void add_pretok(struct tokenizer_hf *h, struct hf_pretok p)
{
    h->pretok = vkt_realloc(h->pretok, (size_t)(h->n_pretok + 1) * sizeof *h->pretok, "tokenizer");
    h->pretok[h->n_pretok++] = p;
}

static int add_pre(struct ctx *c, json_t *p, const char *where)
{
    const char *type = hf_type_of(p);
    char sub[160];
    if (c->byte_level)
        return hf_fail(c->err, c->errlen, c->path, "%s: '%s' after ByteLevel is not supported (ByteLevel must be last)",
                       where, type);
    if (!strcmp(type, "Sequence")) {
        json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list))
            return hf_fail(c->err, c->errlen, c->path, "%s.pretokenizers is not a list", where);
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e)
        {
            snprintf(sub, sizeof sub, "%s.pretokenizers[%zu]", where, i);
            if (add_pre(c, e, sub))
                return -1;
        }
        return 0;
    }
    if (!strcmp(type, "ByteLevel")) {
        if (json_is_true(json_object_get(p, "add_prefix_space")))
            return hf_fail(c->err, c->errlen, c->path,
                           "%s: add_prefix_space true is not supported (it adds a space the text does not have)",
                           where);
        json_t *re = json_object_get(p, "use_regex");
        if (!re || json_is_true(re))
            add_pretok(c->h, (struct hf_pretok){.kind = HF_PT_SPLIT, .regex = HF_RE_GPT2});
        c->byte_level = true;
        return 0;
    }
    if (!strcmp(type, "Split")) {
        const char *re = str(json_object_get(p, "pattern"), "Regex"), *behavior = str(p, "behavior");
        int r = -1;
        for (int i = 0; re && i < (int)(sizeof regexes / sizeof *regexes); i++)
            if (!strcmp(re, regexes[i]))
                r = i;
        if (r < 0)
            return hf_fail(c->err, c->errlen, c->path,
                           "%s: a Split with pattern %s is not supported (only the regexes of GPT-2, Llama 3, "
                           "Qwen2 and o200k as in Phi-4)",
                           where, re ? re : "(not a Regex)");
        if (!behavior || strcmp(behavior, "Isolated") || json_is_true(json_object_get(p, "invert")))
            return hf_fail(c->err, c->errlen, c->path, "%s: a Split must have behavior Isolated and invert false",
                           where);
        add_pretok(c->h, (struct hf_pretok){.kind = HF_PT_SPLIT, .regex = (enum hf_regex)r});
        return 0;
    }
    if (!strcmp(type, "Digits")) {
        add_pretok(c->h, (struct hf_pretok){.kind = HF_PT_DIGITS,
                                            .individual = json_is_true(json_object_get(p, "individual_digits"))});
        return 0;
    }
    if (!strcmp(type, "Metaspace")) {
        struct hf_pretok m = {.kind = HF_PT_METASPACE};
        if (c->metaspace)
            return hf_fail(c->err, c->errlen, c->path, "%s: a second Metaspace is not supported", where);
        if (one_char(c, p, "replacement", where, m.rep, &m.rep_len) || prepend_scheme(c, p, where, &m.prepend))
            return -1;
        json_t *split = json_object_get(p, "split");
        m.split = !split || json_is_true(split);
        add_pretok(c->h, m);
        c->metaspace = true;
        return 0;
    }
    return hf_fail(c->err, c->errlen, c->path,
                   "%s '%s' is not supported (vktrain reads ByteLevel, Split with the GPT-2, Llama 3 or Qwen2 "
                   "regex, Digits, Metaspace, and Sequences of them)",
                   where, type);
}

/* ---- decoder ---- */

static int add_dec(struct ctx *c, json_t *d, const char *where, bool *fused)
{
    struct tokenizer_hf *h = c->h;
    const char *type = hf_type_of(d);
    char sub[160];
    if (!strcmp(type, "Sequence")) {
        json_t *list = json_object_get(d, "decoders");
        if (!json_is_array(list))
            return hf_fail(c->err, c->errlen, c->path, "%s.decoders is not a list", where);
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e)
        {
            snprintf(sub, sizeof sub, "%s.decoders[%zu]", where, i);
            if (add_dec(c, e, sub, fused))
                return -1;
        }
        return 0;
    }
    if (!strcmp(type, "ByteFallback")) {
        h->dec_byte_fallback = true;
    } else if (!strcmp(type, "Fuse")) {
        *fused = true;
    } else if (!strcmp(type, "Replace") && str(json_object_get(d, "pattern"), "String") &&
               !strcmp(str(json_object_get(d, "pattern"), "String"), "\xe2\x96\x81") && str(d, "content") &&
               !strcmp(str(d, "content"), " ")) {
        memcpy(h->dec_rep, "\xe2\x96\x81", 3);
        h->dec_rep_len = 3;
    } else if (!strcmp(type, "Metaspace")) {
        enum hf_prepend scheme;
        if (one_char(c, d, "replacement", where, h->dec_rep, &h->dec_rep_len) ||
            prepend_scheme(c, d, where, &scheme))
            return -1;
        h->dec_first_drop = scheme != HF_PREPEND_NEVER;
    } else if (!strcmp(type, "Strip") && str(d, "content") && !strcmp(str(d, "content"), " ") && *fused &&
               json_integer_value(json_object_get(d, "stop")) == 0 &&
               json_integer_value(json_object_get(d, "start")) >= 0) {
        h->dec_strip = (int)json_integer_value(json_object_get(d, "start"));
    } else {
        return hf_fail(c->err, c->errlen, c->path,
                       "%s '%s' is not supported here (a SentencePiece-style BPE decodes with Replace of \"\\u2581\" "
                       "by \" \", ByteFallback, Fuse, then Strip of \" \" at the start, or Metaspace)",
                       where, type);
    }
    return 0;
}

int hf_load_pipeline(struct tokenizer_hf *h, json_t *root, const char *path, char *err, size_t errlen)
{
    struct ctx c = {h, path, err, errlen, false, false};
    json_t *norm = json_object_get(root, "normalizer");
    if (norm && !json_is_null(norm) && add_norm(&c, norm, "normalizer"))
        return -1;
    json_t *pre = json_object_get(root, "pre_tokenizer");
    if (pre && !json_is_null(pre) && add_pre(&c, pre, "pre_tokenizer"))
        return -1;
    h->kind = c.byte_level ? HF_BYTE_LEVEL : HF_SENTENCEPIECE;
    json_t *dec = json_object_get(root, "decoder");
    if (h->kind == HF_BYTE_LEVEL) {
        if (!json_is_object(dec) || strcmp(hf_type_of(dec), "ByteLevel"))
            return hf_fail(err, errlen, path, "decoder '%s' is not supported (byte-level BPE decodes with ByteLevel)",
                           json_is_object(dec) ? hf_type_of(dec) : "none");
        h->dec_byte_level = true;
        return 0;
    }
    bool fused = false;
    h->dec_join_space = !dec || json_is_null(dec); /* tokenizers joins the tokens with spaces */
    return h->dec_join_space ? 0 : add_dec(&c, dec, "decoder", &fused);
}
