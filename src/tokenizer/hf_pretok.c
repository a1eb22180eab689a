/* hf_pretok: the pre-tokenizers, which cut a normalized text into the
 * pieces the model encodes one by one (never merging across them):
 *
 *   Split, behavior Isolated, with one of four regexes, each implemented
 *   by hand (hf_regex_end), alternatives tried in order as Oniguruma does:
 *     GPT-2   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *     Llama 3 (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *             ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *     Qwen2   the same with \p{N} for \p{N}{1,3}
 *     o200k   (Phi-4) letters by case, contractions after them, [\r\n/]*
 *             after punctuation (o200k_end says how)
 *   (ByteLevel with use_regex is a Split with the GPT-2 regex.) Every
 *   character starts a match of each, so there are no gaps between matches.
 *   (?i) folds ASCII letters and ſ (U+017F, which folds to s): the only
 *   other character that makes one of the contractions match.
 *   Digits: each \p{N} character alone (individual_digits) or runs of them.
 *   Metaspace: ' ' -> the replacement character, which is prepended
 *   (always, or only to the text's first piece, or never) unless the piece
 *   starts with it; with split, a piece starts at each replacement.
 *
 * The classes come from hf_unicode.c. Owns nothing but h->meta_buf. */
#include "tokenizer_hf.h"

#include "vktrain/util.h"

#include <string.h>

static int class_at(const unsigned char *s, size_t i, size_t n, size_t *len)
{
    return hf_class(hf_utf8_next(s + i, n - i, len));
}

/* The end of a run of class c starting at j. */
static size_t run_of(const unsigned char *s, size_t j, size_t n, int c)
{
    size_t len;
    while (j < n && class_at(s, j, n, &len) == c)
        j += len;
    return j;
}

/* 's|'t|'re|'ve|'m|'ll|'d at s[i] == '\'': its end, or 0. nocase: (?i). */
static size_t contraction_end(const unsigned char *s, size_t i, size_t n, bool nocase)
{
    if (i + 1 >= n)
        return 0;
    unsigned c = s[i + 1];
    size_t j = i + 2;
    if (nocase && c >= 'A' && c <= 'Z')
        c |= 0x20;
    else if (nocase && c == 0xc5 && j < n && s[j] == 0xbf) /* ſ */
        c = 's', j++;
    if (c == 's' || c == 't' || c == 'm' || c == 'd')
        return j;
    if (j >= n)
        return 0;
    unsigned c2 = nocase && s[j] >= 'A' && s[j] <= 'Z' ? s[j] | 0x20u : s[j];
    if ((c == 'r' && c2 == 'e') || (c == 'v' && c2 == 'e') || (c == 'l' && c2 == 'l'))
        return j + 1;
    return 0;
}

/* \s+(?!\S) then \s+, for a run of white space from i: the run, less its
 * last character when a non-space follows, unless that leaves nothing. */
static size_t space_end(const unsigned char *s, size_t i, size_t n)
{
    size_t len, j = i, last = i;
    while (j < n && class_at(s, j, n, &len) == C_SPACE) {
        last = j;
        j += len;
    }
    return j == n || last == i ? j : last;
}

static size_t gpt2_end(const unsigned char *s, size_t i, size_t n)
{
    if (s[i] == '\'') {
        size_t e = contraction_end(s, i, n, false);
        if (e)
            return e;
    }
    size_t len;
    int c = class_at(s, i, n, &len);
    size_t j = i + len;
    if (c == C_SPACE) {
        /* ` ?X+` with X a letter, number or other character */
        if (s[i] == ' ' && j < n) {
            int c2 = class_at(s, j, n, &len);
            if (c2 != C_SPACE)
                return run_of(s, j + len, n, c2);
        }
        return space_end(s, i, n);
    }
    return run_of(s, j, n, c);
}

/* What the Llama 3, Qwen2 and o200k regexes end with, at s[i] of class c
 * (length up to j): \p{N}{1,max_digits}| ?[^\s\p{L}\p{N}]+[\r\n]*
 * (o200k: [\r\n/]*)|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t tail_end(const unsigned char *s, size_t i, size_t n, int c, size_t j, int max_digits, bool slash)
{
    size_t len2;
    if (c == C_NUMBER) {
        for (int k = 1; k < max_digits && j < n && class_at(s, j, n, &len2) == C_NUMBER; k++)
            j += len2;
        return j;
    }
    size_t o = s[i] == ' ' && j < n && class_at(s, j, n, &len2) == C_OTHER ? j : c == C_OTHER ? i : n;
    if (o < n) {
        j = run_of(s, o, n, C_OTHER);
        while (j < n && (s[j] == '\r' || s[j] == '\n' || (slash && s[j] == '/')))
            j++;
        return j;
    }
    /* \s*[\r\n]+: up to the last \r or \n of the white space run */
    size_t e = i, nl = 0;
    while (e < n && class_at(s, e, n, &len2) == C_SPACE) {
        if (s[e] == '\r' || s[e] == '\n')
            nl = e + 1;
        e += len2;
    }
    if (nl)
        return nl;
    /* \s+(?!\S)|\s+ */
    return space_end(s, i, n);
}

/* Llama 3 (max_digits 3) and Qwen2 (1). */
static size_t llama3_end(const unsigned char *s, size_t i, size_t n, int max_digits)
{
    if (s[i] == '\'') {
        size_t e = contraction_end(s, i, n, true);
        if (e)
            return e;
    }
    size_t len, len2;
    int c = class_at(s, i, n, &len);
    size_t j = i + len;
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (c == C_LETTER)
        return run_of(s, j, n, C_LETTER);
    if (c != C_NUMBER && s[i] != '\r' && s[i] != '\n' && j < n && class_at(s, j, n, &len2) == C_LETTER)
        return run_of(s, j + len2, n, C_LETTER);
    return tail_end(s, i, n, c, j, max_digits, false);
}

/* o200k's letter classes: U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and
 * W = [\p{Ll}\p{Lm}\p{Lo}\p{M}]. */
static bool in_upper(int k)
{
    return k == K_UPPER || k == K_OTHER_LETTER || k == K_MARK;
}

static bool in_lower(int k)
{
    return k == K_LOWER || k == K_OTHER_LETTER || k == K_MARK;
}

static int case_at(const unsigned char *s, size_t i, size_t n, size_t *len)
{
    return hf_case(hf_utf8_next(s + i, n - i, len));
}

/* U*W+ (upper_first: U+W*) from p, then (?i:'s|'t|'re|'ve|'m|'ll|'d)?: the
 * end, or 0 when it does not match. U* is greedy and gives back what W+
 * needs: when no W follows the run of U, W+ is the run's last character
 * that is also W. */
static size_t cased_end(const unsigned char *s, size_t p, size_t n, bool upper_first)
{
    size_t len, q = p, last_w = 0, e;
    while (q < n) {
        int k = case_at(s, q, n, &len);
        if (!in_upper(k))
            break;
        q += len;
        if (in_lower(k))
            last_w = q;
    }
    if (upper_first && q == p)
        return 0;
    if (q < n && in_lower(case_at(s, q, n, &len))) {
        e = q;
        while (e < n && in_lower(case_at(s, e, n, &len)))
            e += len;
    } else {
        e = upper_first ? q : last_w;
    }
    if (e && e < n && s[e] == '\'') {
        size_t c = contraction_end(s, e, n, true);
        e = c ? c : e;
    }
    return e;
}

/* o200k (Phi-4, GPT-4o):
 *   [^\r\n\p{L}\p{N}]?U*W+(?i:'s|...)?|[^\r\n\p{L}\p{N}]?U+W*(?i:'s|...)?|
 *   \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * each optional first character taken if the rest then matches, else left
 * out. */
static size_t o200k_end(const unsigned char *s, size_t i, size_t n)
{
    size_t len, e;
    int c = class_at(s, i, n, &len);
    bool prefix = c != C_LETTER && c != C_NUMBER && s[i] != '\r' && s[i] != '\n';
    for (int alt = 0; alt < 2; alt++) {
        if (prefix && i + len < n && (e = cased_end(s, i + len, n, alt)))
            return e;
        if ((e = cased_end(s, i, n, alt)))
            return e;
    }
    return tail_end(s, i, n, c, i + len, 3, true);
}

size_t hf_regex_end(enum hf_regex r, const unsigned char *s, size_t i, size_t n)
{
    switch (r) {
    case HF_RE_GPT2:
        return gpt2_end(s, i, n);
    case HF_RE_LLAMA3:
        return llama3_end(s, i, n, 3);
    case HF_RE_QWEN2:
        return llama3_end(s, i, n, 1);
    case HF_RE_O200K:
        return o200k_end(s, i, n);
    }
    return n;
}

static void run(struct tokenizer_hf *h, int step, const char *text, size_t n, bool at_start, struct hf_out *out);

static void split_regex(struct tokenizer_hf *h, int step, const unsigned char *s, size_t n, bool at_start,
                        struct hf_out *out)
{
    enum hf_regex r = h->pretok[step].regex;
    for (size_t i = 0; i < n;) {
        size_t e = hf_regex_end(r, s, i, n);
        run(h, step + 1, (const char *)s + i, e - i, at_start && i == 0, out);
        i = e;
    }
}

static void split_digits(struct tokenizer_hf *h, int step, const unsigned char *s, size_t n, bool at_start,
                         struct hf_out *out)
{
    bool individual = h->pretok[step].individual;
    for (size_t i = 0; i < n;) {
        size_t len;
        bool digit = class_at(s, i, n, &len) == C_NUMBER;
        size_t e = i + len;
        if (!digit || !individual)
            while (e < n && (class_at(s, e, n, &len) == C_NUMBER) == digit)
                e += len;
        run(h, step + 1, (const char *)s + i, e - i, at_start && i == 0, out);
        i = e;
    }
}

static void metaspace(struct tokenizer_hf *h, int step, const char *s, size_t n, bool at_start, struct hf_out *out)
{
    const struct hf_pretok *p = &h->pretok[step];
    size_t spaces = 0;
    for (size_t i = 0; i < n; i++)
        spaces += s[i] == ' ';
    size_t need = n + (spaces + 1) * p->rep_len;
    if (h->meta_cap < need) {
        h->meta_cap = 2 * need;
        h->meta_buf = vkt_realloc(h->meta_buf, h->meta_cap, "tokenizer text");
    }
    char *o = h->meta_buf;
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(o + w, p->rep, p->rep_len);
            w += p->rep_len;
        } else {
            o[w++] = s[i];
        }
    }
    bool starts = w >= p->rep_len && !memcmp(o, p->rep, p->rep_len);
    if (!starts && (p->prepend == HF_PREPEND_ALWAYS || (p->prepend == HF_PREPEND_FIRST && at_start))) {
        memmove(o + p->rep_len, o, w);
        memcpy(o, p->rep, p->rep_len);
        w += p->rep_len;
    }
    if (!p->split) {
        run(h, step + 1, o, w, at_start, out);
        return;
    }
    /* a piece starts at each replacement character */
    for (size_t i = 0; i < w;) {
        size_t e = i + 1;
        while (e < w && !(e + p->rep_len <= w && !memcmp(o + e, p->rep, p->rep_len)))
            e++;
        run(h, step + 1, o + i, e - i, at_start && i == 0, out);
        i = e;
    }
}

static void run(struct tokenizer_hf *h, int step, const char *text, size_t n, bool at_start, struct hf_out *out)
{
    const unsigned char *s = (const unsigned char *)text;
    if (n == 0)
        return;
    if (step == h->n_pretok) {
        hf_model_piece(h, text, n, out);
        return;
    }
    switch (h->pretok[step].kind) {
    case HF_PT_SPLIT:
        split_regex(h, step, s, n, at_start, out);
        break;
    case HF_PT_DIGITS:
        split_digits(h, step, s, n, at_start, out);
        break;
    case HF_PT_METASPACE:
        metaspace(h, step, text, n, at_start, out);
        break;
    }
}

void hf_pretokenize(struct tokenizer_hf *h, const char *s, size_t n, bool at_start, struct hf_out *out)
{
    run(h, 0, s, n, at_start, out);
}
