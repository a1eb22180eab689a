/* tokenizer_hf: the encode pipeline of a Hugging Face tokenizer.json (the
 * steps in order: tokenizer_hf.h), the piece cache in front of the model,
 * and decoding. Encoding writes as many ids as the caller has room for and
 * counts them all. The ids of every piece of at most CACHE_MAX_PIECE bytes
 * are cached (a piece's ids depend on its bytes only). Owns struct
 * tokenizer_hf's lifetime; reading tokenizer.json is tokenizer_hf_load.c. */
#include "tokenizer_hf.h"

#include "vktrain/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CACHE_MAX_PIECE = 64, CACHE_MAX_ENTRIES = 1 << 20 };

void hf_out_push(struct hf_out *out, const vkt_token *ids, size_t k)
{
    if (out->n < out->cap)
        memcpy(out->ids + out->n, ids, (k < out->cap - out->n ? k : out->cap - out->n) * sizeof *ids);
    out->n += k;
}

static size_t model(struct tokenizer_hf *h, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    return h->kind == HF_BYTE_LEVEL ? hf_byte_level_piece(h, u, n) : hf_sentencepiece_piece(h, u, n);
}

static void cached_piece(struct tokenizer_hf *h, const char *s, size_t n, struct hf_out *out)
{
    if (n > CACHE_MAX_PIECE) {
        hf_out_push(out, h->sym, model(h, s, n));
        return;
    }
    const struct smap_slot *c = hf_smap_get(&h->cache, s, n);
    if (c) {
        hf_out_push(out, h->cache_ids + c->val, c->val2);
        return;
    }
    size_t k = model(h, s, n);
    if (h->cache.n >= CACHE_MAX_ENTRIES) {
        hf_smap_clear(&h->cache);
        h->cache_n = 0;
    }
    if (!h->cache_ids || h->cache_n + k > h->cache_cap) { /* a piece of no ids too: never NULL + 0 */
        h->cache_cap = 2 * (h->cache_n + k) + 1024;
        h->cache_ids = vkt_realloc(h->cache_ids, h->cache_cap * sizeof *h->cache_ids, "tokenizer cache");
    }
    memcpy(h->cache_ids + h->cache_n, h->sym, k * sizeof *h->cache_ids);
    hf_smap_put(&h->cache, s, n, (uint32_t)h->cache_n, (uint32_t)k);
    h->cache_n += k;
    hf_out_push(out, h->sym, k);
}

/* A SentencePiece-style text is one piece (no pre-tokenizer splits it);
 * where merges cannot join across a word start it is cut there, so that
 * the words are cached (hf_sentencepiece_prepare). */
void hf_model_piece(struct tokenizer_hf *h, const char *s, size_t n, struct hf_out *out)
{
    for (size_t start = 0, end; start < n; start = end) {
        end = hf_sentencepiece_next_cut(h, s, n, start);
        cached_piece(h, s + start, end - start, out);
    }
}

/* A text between added tokens matched on the normalized text. */
static void normalized_gap(struct tokenizer_hf *h, const char *s, size_t n, bool at_start, struct hf_out *out)
{
    hf_pretokenize(h, s, n, at_start, out);
}

/* A text between added tokens matched on the raw text. */
static void raw_gap(struct tokenizer_hf *h, const char *s, size_t n, bool at_start, struct hf_out *out)
{
    size_t m;
    const char *norm = hf_normalize(h, s, n, &m);
    hf_added_split(h, &h->norm_trie, norm, m, at_start, normalized_gap, out);
}

size_t tokenizer_hf_encode(struct tokenizer_hf *h, const void *text, size_t n, vkt_token *ids, size_t cap)
{
    struct hf_out out = {ids, cap, 0};
    hf_added_split(h, &h->raw_trie, text, n, true, raw_gap, &out);
    return out.n;
}

/* ---- decoding ---- */

struct sink {
    char *out;
    size_t cap, len;
    int strip; /* leading spaces still to drop */
};

static void put(struct sink *k, const char *p, size_t n)
{
    for (; k->strip > 0 && n && *p == ' '; p++, n--)
        k->strip--;
    if (n)
        k->strip = 0;
    if (k->len < k->cap)
        memcpy(k->out + k->len, p, n < k->cap - k->len ? n : k->cap - k->len);
    k->len += n;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
}

/* A token's text through the decoder. first: the first token of a text. */
static void decode_token(const struct tokenizer_hf *h, const char *tok, size_t len, bool first, struct sink *k)
{
    if (h->dec_byte_level) {
        /* each character back to its byte, unless one is not a byte's
         * character: then the token's own UTF-8 */
        size_t l;
        for (size_t i = 0; i < len; i += l) {
            uint32_t cp = hf_utf8_next((const unsigned char *)tok + i, len - i, &l);
            if (cp >= 256 + 68 || h->byte_of[cp] < 0) {
                put(k, tok, len);
                return;
            }
        }
        for (size_t i = 0; i < len; i += l) {
            char b = (char)h->byte_of[hf_utf8_next((const unsigned char *)tok + i, len - i, &l)];
            put(k, &b, 1);
        }
        return;
    }
    if (h->dec_byte_fallback && len == 6 && !memcmp(tok, "<0x", 3) && tok[5] == '>' && hex_digit(tok[3]) >= 0 &&
        hex_digit(tok[4]) >= 0) {
        char b = (char)(hex_digit(tok[3]) << 4 | hex_digit(tok[4]));
        put(k, &b, 1);
        return;
    }
    size_t done = 0;
    for (size_t i = 0; h->dec_rep_len && i + h->dec_rep_len <= len; i++) {
        if (memcmp(tok + i, h->dec_rep, h->dec_rep_len))
            continue;
        put(k, tok + done, i - done);
        if (!(first && h->dec_first_drop))
            put(k, " ", 1);
        done = i + h->dec_rep_len;
        i = done - 1;
    }
    put(k, tok + done, len - done);
}

size_t tokenizer_hf_decode(const struct tokenizer_hf *h, const vkt_token *ids, size_t n, bool at_start, char *out,
                           size_t cap)
{
    struct sink k = {out, cap, 0, at_start ? h->dec_strip : 0};
    for (size_t i = 0; i < n; i++) {
        if (h->dec_join_space && !(at_start && i == 0))
            put(&k, " ", 1);
        if (ids[i] < (vkt_token)h->size && h->tok_len[ids[i]] != UINT32_MAX) {
            decode_token(h, h->tok_pool + h->tok_off[ids[i]], h->tok_len[ids[i]], at_start && i == 0, &k);
        } else {
            char buf[32];
            put(&k, buf, (size_t)snprintf(buf, sizeof buf, "<|id:%u|>", (unsigned)ids[i]));
        }
    }
    if (cap)
        out[k.len < cap ? k.len : cap - 1] = 0;
    return k.len;
}

void tokenizer_hf_free(struct tokenizer_hf *h)
{
    hf_smap_free(&h->vocab);
    hf_smap_free(&h->cache);
    hf_pmap_free(&h->merges);
    hf_trie_free(&h->raw_trie);
    hf_trie_free(&h->norm_trie);
    for (int i = 0; i < h->n_norm; i++) {
        free(h->norm[i].from);
        free(h->norm[i].to);
    }
    free(h->norm);
    free(h->pretok);
    for (size_t i = 0; i < h->n_added; i++)
        free(h->added[i].match);
    free(h->added);
    free(h->tok_off);
    free(h->tok_len);
    free(h->tok_pool);
    free(h->cache_ids);
    free(h->norm_buf[0]);
    free(h->norm_buf[1]);
    free(h->meta_buf);
    free(h->key);
    free(h->sym);
    free(h->prev);
    free(h->next);
    free(h->heap);
    free(h);
}
