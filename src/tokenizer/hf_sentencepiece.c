/* hf_sentencepiece: the SentencePiece-style BPE model as tokenizer.json
 * stores it (Llama 2, Mistral, TinyLlama). Each character of a piece is
 * one first symbol, its vocab token; a character the vocab lacks becomes
 * the <0xNN> tokens of its UTF-8 bytes (byte_fallback, when the vocab has
 * all of them), else the unknown token (runs of them fused into one with
 * fuse_unk), else nothing, as the `tokenizers` library does. A byte that
 * is not valid UTF-8 is a character of its own. Owns nothing; never
 * splits text. */
#include "tokenizer_hf.h"

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
