/* tokenizer_hf: byte-level BPE read from a Hugging Face tokenizer.json (the
 * GPT-2 / RoBERTa family). What is accepted:
 *   model          type "BPE", vocab {token: id}, merges ["a b" | [a, b]],
 *                  ignore_merges honored; byte_fallback, a
 *                  continuing_subword_prefix, an end_of_word_suffix or a
 *                  dropout are refused (they are not byte-level BPE)
 *   added_tokens   [{id, content, ...}]: extra ids, decoded to their content;
 *                  never recognized in the text (text is always plain)
 *   normalizer     none
 *   pre_tokenizer  ByteLevel (add_prefix_space false; use_regex: the GPT-2
 *                  split), or a Sequence of a Split with the GPT-2 pattern
 *                  (behavior Isolated) followed by ByteLevel
 *   decoder        ByteLevel
 *   post_processor ignored: the data pipeline adds BOS and EOS itself
 * Anything else is an error naming the file and the component.
 *
 * The GPT-2 split regex
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * is implemented by hand (piece_end). \p{L}, \p{N} and \s come from the
 * generated unicode_tables.h (Python's Unicode data; \s as Oniguruma, which
 * tokenizers runs the regex with, defines it), so they are exact up to
 * differences between Unicode versions. A byte that is not part of valid
 * UTF-8 counts as one character of neither class (like punctuation); Hugging
 * Face cannot see such bytes, and here they round-trip like any other.
 *
 * Encoding: split the text into pieces; each piece's bytes map to the GPT-2
 * bytes_to_unicode characters, one symbol each, and the adjacent pair of
 * lowest merge rank (leftmost on a tie) is merged until none is left. The
 * ids of every piece of at most CACHE_MAX_PIECE bytes are cached. */
#include "tokenizer_hf.h"

#include "unicode_tables.h"
#include "vktrain/util.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a hash map from byte strings to two uint32 values ---- */



static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xbf58476d1ce4e5b9ull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return h | 1;
}

void hf_smap_init(struct smap *m, size_t cap)
{
    memset(m, 0, sizeof *m);
    m->cap = 16;
    while (m->cap < 2 * cap)
        m->cap *= 2;
    m->slot = vkt_calloc(m->cap, sizeof *m->slot, "tokenizer map");
}

void hf_smap_free(struct smap *m)
{
    free(m->slot);
    free(m->pool);
    memset(m, 0, sizeof *m);
}

static void smap_clear(struct smap *m)
{
    memset(m->slot, 0, m->cap * sizeof *m->slot);
    m->n = 0;
    m->pool_n = 0;
}

/* The slot holding key, or the empty slot where it would go. */
static struct smap_slot *smap_find(const struct smap *m, const void *key, size_t len, uint64_t h)
{
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        struct smap_slot *s = &m->slot[i];
        if (!s->hash || (s->hash == h && s->len == len && !memcmp(m->pool + s->off, key, len)))
            return s;
    }
}

const struct smap_slot *hf_smap_get(const struct smap *m, const void *key, size_t len)
{
    const struct smap_slot *s = smap_find(m, key, len, hash_bytes(key, len));
    return s->hash ? s : NULL;
}

/* Inserts key (the first value given for a key stays); returns its slot. */
struct smap_slot *hf_smap_put(struct smap *m, const void *key, size_t len, uint32_t val, uint32_t val2)
{
    if (2 * (m->n + 1) > m->cap) {
        struct smap_slot *old = m->slot;
        size_t old_cap = m->cap;
        m->cap *= 2;
        m->slot = vkt_calloc(m->cap, sizeof *m->slot, "tokenizer map");
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].hash) {
                size_t j = old[i].hash & (m->cap - 1);
                while (m->slot[j].hash)
                    j = (j + 1) & (m->cap - 1);
                m->slot[j] = old[i];
            }
        free(old);
    }
    uint64_t h = hash_bytes(key, len);
    struct smap_slot *s = smap_find(m, key, len, h);
    if (s->hash)
        return s;
    if (m->pool_n + len > m->pool_cap) {
        m->pool_cap = 2 * (m->pool_n + len) + 256;
        m->pool = vkt_realloc(m->pool, m->pool_cap, "tokenizer strings");
    }
    memcpy(m->pool + m->pool_n, key, len);
    *s = (struct smap_slot){h, (uint32_t)m->pool_n, (uint32_t)len, val, val2};
    m->pool_n += len;
    m->n++;
    return s;
}

/* ---- the merges: (left id, right id) -> (rank, merged id) ---- */


size_t hf_pmap_index(uint64_t key, size_t mask)
{
    key *= 0x9e3779b97f4a7c15ull;
    return (size_t)(key ^ key >> 31) & mask;
}

static const struct pmap_slot *pmap_get(const struct pmap_slot *slot, size_t mask, uint32_t a, uint32_t b)
{
    uint64_t key = ((uint64_t)a << 32 | b) + 1;
    for (size_t i = hf_pmap_index(key, mask);; i = (i + 1) & mask) {
        if (slot[i].key == key)
            return &slot[i];
        if (!slot[i].key)
            return NULL;
    }
}

/* ---- the tokenizer ---- */



/* GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others
 * for 256, 257, ... in byte order. */
void hf_byte_chars(uint32_t cp[256], int16_t inv[N_BYTE_CHARS])
{
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        cp[b] = keep ? (uint32_t)b : (uint32_t)(256 + n++);
    }
    for (int c = 0; c < N_BYTE_CHARS; c++)
        inv[c] = -1;
    for (int b = 0; b < 256; b++)
        inv[cp[b]] = (int16_t)b;
}

size_t hf_put_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}


/* The code point at s (n > 0 bytes left) and its length; a byte that does
 * not start valid UTF-8 (overlong, surrogate, truncated, > U+10FFFF) is
 * UTF8_INVALID of length 1. */
uint32_t hf_utf8_next(const unsigned char *s, size_t n, size_t *len)
{
    unsigned c = s[0];
    *len = 1;
    if (c < 0x80)
        return c;
    size_t k;
    uint32_t cp, min;
    if (c >= 0xc2 && c <= 0xdf)
        k = 1, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0)
        k = 2, cp = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        k = 3, cp = c & 0x07, min = 0x10000;
    else
        return UTF8_INVALID;
    if (k >= n)
        return UTF8_INVALID;
    for (size_t i = 1; i <= k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return UTF8_INVALID;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return UTF8_INVALID;
    *len = k + 1;
    return cp;
}

static bool in_table(const uint32_t (*t)[2], size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < t[mid][0])
            hi = mid;
        else if (cp > t[mid][1])
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

#define TABLE(t) t, sizeof t / sizeof t[0]

static int cp_class(uint32_t cp)
{
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z')
            return C_LETTER;
        if (cp >= '0' && cp <= '9')
            return C_NUMBER;
        if (cp == ' ' || (cp >= 9 && cp <= 13))
            return C_SPACE;
        return C_OTHER;
    }
    if (cp == UTF8_INVALID)
        return C_OTHER;
    if (in_table(TABLE(uni_letter), cp))
        return C_LETTER;
    if (in_table(TABLE(uni_number), cp))
        return C_NUMBER;
    if (in_table(TABLE(uni_space), cp))
        return C_SPACE;
    return C_OTHER;
}

int tokenizer_hf_class(uint32_t cp)
{
    return "LNSO"[cp_class(cp)];
}

static int class_at(const unsigned char *s, size_t i, size_t n, size_t *len)
{
    return cp_class(hf_utf8_next(s + i, n - i, len));
}

/* The end of the GPT-2 regex's match at s[i] (i < n): the alternatives in
 * order, leftmost first, as the regex engine tries them. */
static size_t piece_end(const unsigned char *s, size_t i, size_t n)
{
    if (s[i] == '\'' && i + 1 < n) { /* 's|'t|'re|'ve|'m|'ll|'d */
        unsigned char c = s[i + 1];
        if (c == 's' || c == 't' || c == 'm' || c == 'd')
            return i + 2;
        if (i + 2 < n &&
            ((c == 'r' && s[i + 2] == 'e') || (c == 'v' && s[i + 2] == 'e') || (c == 'l' && s[i + 2] == 'l')))
            return i + 3;
    }
    size_t len;
    int c = class_at(s, i, n, &len);
    size_t j = i + len;
    if (c == C_SPACE) {
        /* ` ?X+` with X a letter, number or other character */
        if (s[i] == ' ' && j < n) {
            int c2 = class_at(s, j, n, &len);
            if (c2 != C_SPACE) {
                c = c2;
                j += len;
                goto run;
            }
        }
        /* \s+(?!\S): the run, less its last character when a non-space
         * follows; \s+ when that leaves nothing. */
        size_t last = i;
        while (j < n && class_at(s, j, n, &len) == C_SPACE) {
            last = j;
            j += len;
        }
        return j == n || last == i ? j : last;
    }
run:
    while (j < n && class_at(s, j, n, &len) == c)
        j += len;
    return j;
}

/* ---- BPE on one piece ---- */

static void scratch_reserve(struct tokenizer_hf *h, size_t m)
{
    if (m <= h->scratch_cap)
        return;
    h->scratch_cap = 2 * m;
    h->sym = vkt_realloc(h->sym, h->scratch_cap * sizeof *h->sym, "bpe scratch");
    h->prev = vkt_realloc(h->prev, h->scratch_cap * sizeof *h->prev, "bpe scratch");
    h->next = vkt_realloc(h->next, h->scratch_cap * sizeof *h->next, "bpe scratch");
    h->key = vkt_realloc(h->key, 2 * h->scratch_cap, "bpe scratch");
}

static bool heap_less(const struct heap_entry *a, const struct heap_entry *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(struct tokenizer_hf *h, size_t *n, struct heap_entry e)
{
    if (*n == h->heap_cap) {
        h->heap_cap = h->heap_cap ? 2 * h->heap_cap : 64;
        h->heap = vkt_realloc(h->heap, h->heap_cap * sizeof *h->heap, "bpe heap");
    }
    size_t i = (*n)++;
    while (i && heap_less(&e, &h->heap[(i - 1) / 2])) {
        h->heap[i] = h->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->heap[i] = e;
}

static struct heap_entry heap_pop(struct tokenizer_hf *h, size_t *n)
{
    struct heap_entry top = h->heap[0], e = h->heap[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && heap_less(&h->heap[c + 1], &h->heap[c]))
            c++;
        if (!heap_less(&h->heap[c], &e))
            break;
        h->heap[i] = h->heap[c];
        i = c;
    }
    if (*n)
        h->heap[i] = e;
    return top;
}

static void push_pair(struct tokenizer_hf *h, size_t *hn, int32_t pos)
{
    if (pos < 0 || h->next[pos] < 0)
        return;
    int32_t r = h->next[pos];
    const struct pmap_slot *p = pmap_get(h->merges, h->merges_mask, h->sym[pos], h->sym[r]);
    if (p)
        heap_push(h, hn, (struct heap_entry){p->rank, pos, h->sym[pos], h->sym[r]});
}

/* The ids of the piece s[0..m) (m > 0) into out; returns the count. */
static size_t bpe(struct tokenizer_hf *h, const unsigned char *s, size_t m, vkt_token *out)
{
    if (m == 1) {
        out[0] = (vkt_token)h->byte_id[s[0]];
        return 1;
    }
    scratch_reserve(h, m);
    if (h->ignore_merges) { /* a piece in the vocab is one token */
        size_t kl = 0;
        for (size_t i = 0; i < m; i++)
            for (int j = 0; j < h->byte_len[s[i]]; j++)
                h->key[kl++] = h->byte_str[s[i]][j];
        const struct smap_slot *v = hf_smap_get(&h->vocab, h->key, kl);
        if (v) {
            out[0] = (vkt_token)v->val;
            return 1;
        }
    }
    for (size_t i = 0; i < m; i++) {
        h->sym[i] = h->byte_id[s[i]];
        h->prev[i] = (int32_t)i - 1;
        h->next[i] = i + 1 < m ? (int32_t)i + 1 : -1;
    }
    size_t hn = 0;
    for (size_t i = 0; i + 1 < m; i++)
        push_pair(h, &hn, (int32_t)i);
    while (hn) {
        struct heap_entry e = heap_pop(h, &hn);
        int32_t r = h->next[e.pos];
        /* stale: the left symbol was absorbed (next -2) or is last, or a
         * side changed since the push */
        if (r < 0 || h->sym[e.pos] != e.left || h->sym[r] != e.right)
            continue;
        const struct pmap_slot *p = pmap_get(h->merges, h->merges_mask, e.left, e.right);
        h->sym[e.pos] = (uint32_t)p->id;
        h->next[e.pos] = h->next[r];
        if (h->next[r] >= 0)
            h->prev[h->next[r]] = e.pos;
        h->next[r] = -2; /* absorbed */
        push_pair(h, &hn, h->prev[e.pos]);
        push_pair(h, &hn, e.pos);
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = h->next[i])
        out[k++] = (vkt_token)h->sym[i];
    return k;
}

/* ---- encode and decode ---- */

/* The ids of one piece, through the cache. */
static size_t encode_piece(struct tokenizer_hf *h, const unsigned char *s, size_t m, vkt_token *out)
{
    if (m > CACHE_MAX_PIECE)
        return bpe(h, s, m, out);
    const struct smap_slot *c = hf_smap_get(&h->cache, s, m);
    if (c) {
        memcpy(out, h->cache_ids + c->val, c->val2 * sizeof *out);
        return c->val2;
    }
    size_t k = bpe(h, s, m, out);
    if (h->cache.n >= CACHE_MAX_ENTRIES) {
        smap_clear(&h->cache);
        h->cache_n = 0;
    }
    if (h->cache_n + k > h->cache_cap) {
        h->cache_cap = 2 * (h->cache_n + k) + 1024;
        h->cache_ids = vkt_realloc(h->cache_ids, h->cache_cap * sizeof *h->cache_ids, "tokenizer cache");
    }
    memcpy(h->cache_ids + h->cache_n, out, k * sizeof *out);
    hf_smap_put(&h->cache, s, m, (uint32_t)h->cache_n, (uint32_t)k);
    h->cache_n += k;
    return k;
}

size_t tokenizer_hf_encode(struct tokenizer_hf *h, const void *text, size_t n, vkt_token *out)
{
    const unsigned char *s = text;
    if (!h->split)
        return n ? bpe(h, s, n, out) : 0;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t e = piece_end(s, i, n);
        k += encode_piece(h, s + i, e - i, out + k);
        i = e;
    }
    return k;
}

size_t tokenizer_hf_decode(const struct tokenizer_hf *h, const vkt_token *ids, size_t n, char *out, size_t cap)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        char buf[24];
        const char *piece = buf;
        size_t plen;
        if (ids[i] < h->size && h->dec_len[ids[i]] != UINT32_MAX) {
            piece = h->dec_pool + h->dec_off[ids[i]];
            plen = h->dec_len[ids[i]];
        } else {
            plen = (size_t)snprintf(buf, sizeof buf, "<|id:%u|>", (unsigned)ids[i]);
        }
        if (len < cap)
            memcpy(out + len, piece, plen < cap - len ? plen : cap - len);
        len += plen;
    }
    if (cap)
        out[len < cap ? len : cap - 1] = 0;
    return len;
}

void tokenizer_hf_free(struct tokenizer_hf *h)
{
    hf_smap_free(&h->vocab);
    hf_smap_free(&h->cache);
    free(h->merges);
    free(h->dec_off);
    free(h->dec_len);
    free(h->dec_pool);
    free(h->cache_ids);
    free(h->sym);
    free(h->prev);
    free(h->next);
    free(h->key);
    free(h->heap);
    free(h);
}
