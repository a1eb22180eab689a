/* hf_sentencepiece: the SentencePiece-style BPE model as tokenizer.json
 * stores it (Llama 2, Mistral, TinyLlama). Each character of a piece is
 * one first symbol, its vocab token; a character the vocab lacks becomes
 * the <0xNN> tokens of its UTF-8 bytes (byte_fallback, when the vocab has
 * all of them), else the unknown token (runs of them fused into one with
 * fuse_unk), else nothing, as the `tokenizers` library does. A byte that
 * is not valid UTF-8 is a character of its own. Owns nothing; never
 * splits text, except to cut a long one where no merge can join (below). */
#include "tokenizer_hf.h"

#include <string.h>

size_t hf_sentencepiece_piece(struct tokenizer_hf *h, const unsigned char *s, size_t n)
{
    /* a character gives at most 4 byte tokens, and has at least 1 byte */
    hf_bpe_reserve(h, 4 * n);
    if (h->ignore_merges) {
        const struct smap_slot *v = hf_smap_get(&h->vocab, s, n);
        if (v) {
            h->sym[0] = v->val;
            return 1;
        }
    }
    /* An unknown character is held back until a vocab character or the
     * end comes (byte tokens do not end it), as tokenizers' merge_word
     * does; with fuse_unk the next unknown joins it. */
    size_t m = 0;
    bool unk_held = false;
    for (size_t i = 0; i < n;) {
        size_t len;
        hf_utf8_next(s + i, n - i, &len);
        const struct smap_slot *v = hf_smap_get(&h->vocab, s + i, len);
        bool bytes = !v && h->use_byte_fallback;
        for (size_t j = 0; bytes && j < len; j++)
            bytes = h->byte_fallback[s[i + j]] >= 0;
        if (v) {
            if (unk_held)
                h->sym[m++] = (uint32_t)h->unk;
            unk_held = false;
            h->sym[m++] = v->val;
        } else if (bytes) {
            for (size_t j = 0; j < len; j++)
                h->sym[m++] = (uint32_t)h->byte_fallback[s[i + j]];
        } else if (h->unk >= 0) {
            if (unk_held && !h->fuse_unk)
                h->sym[m++] = (uint32_t)h->unk;
            unk_held = true;
        }
        i += len;
    }
    if (unk_held)
        h->sym[m++] = (uint32_t)h->unk;
    return hf_bpe_merge(h, m);
}

/* Whether s[i] starts c (len bytes) after a character that is not c. */
static bool word_start(const char *s, size_t i, size_t n, const char *c, size_t len)
{
    return i >= 1 && i + len <= n && !memcmp(s + i, c, len) && !(i >= len && !memcmp(s + i - len, c, len));
}

void hf_sentencepiece_prepare(struct tokenizer_hf *h)
{
    h->cut_len = 0;
    const char *c = NULL;
    size_t len = 0;
    for (int i = 0; i < h->n_pretok; i++)
        if (h->pretok[i].kind == HF_PT_METASPACE)
            c = h->pretok[i].rep, len = h->pretok[i].rep_len;
    for (int i = 0; !c && i < h->n_norm; i++)
        if (h->norm[i].kind == HF_NORM_REPLACE && h->norm[i].from_len == 1 && h->norm[i].from[0] == ' ' &&
            h->norm[i].to_len >= 1 && h->norm[i].to_len <= 4)
            c = h->norm[i].to, len = h->norm[i].to_len;
    if (!c || h->ignore_merges || !hf_smap_get(&h->vocab, c, len))
        return;
    for (size_t i = 0; i < h->vocab.cap; i++) {
        const struct smap_slot *v = &h->vocab.slot[i];
        for (size_t j = 1; v->hash && j < v->len; j++)
            if (word_start(h->vocab.pool + v->off, j, v->len, c, len))
                return;
    }
    memcpy(h->cut, c, len);
    h->cut_len = len;
}

size_t hf_sentencepiece_next_cut(const struct tokenizer_hf *h, const char *s, size_t n, size_t from)
{
    if (!h->cut_len)
        return n;
    for (size_t i = from + 1; i + h->cut_len <= n; i++) {
        const char *p = memchr(s + i, h->cut[0], n - i);
        if (!p)
            break;
        i = (size_t)(p - s);
        if (word_start(s, i, n, h->cut, h->cut_len))
            return i;
    }
    return n;
}
