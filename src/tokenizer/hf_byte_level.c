/* hf_byte_level: the byte-level BPE model (GPT-2, Llama 3, Qwen2, SmolLM).
 * Each byte of a piece is one first symbol, the vocab token of its GPT-2
 * bytes_to_unicode character, so every byte string has ids and decodes
 * back exactly. With ignore_merges (Llama 3) a piece that is a vocab token
 * is that token. Owns nothing; never splits text. */
#include "tokenizer_hf.h"

#include <string.h>

void hf_byte_chars(uint32_t cp[256])
{
    /* printable bytes stand for themselves, the others for 256, 257, ...
     * in byte order */
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        cp[b] = keep ? (uint32_t)b : (uint32_t)(256 + n++);
    }
}

size_t hf_byte_level_piece(struct tokenizer_hf *h, const unsigned char *s, size_t n)
{
    hf_bpe_reserve(h, n);
    if (n == 1) {
        h->sym[0] = h->byte_id[s[0]];
        return 1;
    }
    if (h->ignore_merges) {
        size_t kl = 0;
        for (size_t i = 0; i < n; i++) {
            memcpy(h->key + kl, h->byte_str[s[i]], h->byte_len[s[i]]);
            kl += h->byte_len[s[i]];
        }
        const struct smap_slot *v = hf_smap_get(&h->vocab, h->key, kl);
        if (v) {
            h->sym[0] = v->val;
            return 1;
        }
    }
    for (size_t i = 0; i < n; i++)
        h->sym[i] = h->byte_id[s[i]];
    return hf_bpe_merge(h, n);
}
