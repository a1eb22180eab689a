/* tokenizer: the byte tokenizer, and the dispatch to the hf one
 * (tokenizer_hf.c); see include/vktrain/tokenizer.h. Owns the mapping
 * between bytes and ids; never touches datasets. */
#include "vktrain/tokenizer.h"

#include "tokenizer_hf.h"
#include "vktrain/util.h"

#include <stdio.h>
#include <string.h>

int tokenizer_open(struct tokenizer *t, const struct config_tokenizer *cfg, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (cfg->type == TOKENIZER_HF) {
        if (!cfg->path) {
            snprintf(err, errlen, "tokenizer.path: an hf tokenizer needs the path of its tokenizer.json");
            return -1;
        }
        return tokenizer_hf_open(t, cfg->path, err, errlen);
    }
    t->type = TOKENIZER_BYTE;
    t->size = TOKENIZER_BYTE_SIZE;
    t->bos = TOKEN_BOS;
    t->eos = TOKEN_EOS;
    t->pad = TOKEN_PAD;
    return 0;
}

void tokenizer_close(struct tokenizer *t)
{
    if (t->hf)
        tokenizer_hf_free(t->hf);
    t->hf = NULL;
}

size_t tokenizer_encode(const struct tokenizer *t, const void *text, size_t n, vkt_token *out, size_t cap)
{
    if (t->hf)
        return tokenizer_hf_encode(t->hf, text, n, out, cap);
    const unsigned char *s = text;
    for (size_t i = 0; i < n && i < cap; i++)
        out[i] = s[i];
    return n;
}

size_t tokenizer_encode_all(const struct tokenizer *t, const void *text, size_t n, vkt_token **ids, size_t *cap)
{
    size_t k = tokenizer_encode(t, text, n, *ids, *cap);
    if (k > *cap) {
        *cap = k;
        *ids = vkt_realloc(*ids, k * sizeof **ids, "token ids");
        tokenizer_encode(t, text, n, *ids, *cap);
    }
    return k;
}

static size_t decode(const struct tokenizer *t, const vkt_token *ids, size_t n, bool at_start, char *out, size_t cap)
{
    if (t->hf)
        return tokenizer_hf_decode(t->hf, ids, n, at_start, out, cap);
    static const char *const special[] = {"<|bos|>", "<|eos|>", "<|pad|>"};
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        char buf[24];
        const char *piece = buf;
        size_t plen = 1;
        if (ids[i] < 256) {
            buf[0] = (char)ids[i];
        } else if (ids[i] < TOKENIZER_BYTE_SIZE) {
            piece = special[ids[i] - 256];
            plen = strlen(piece);
        } else {
            plen = (size_t)snprintf(buf, sizeof buf, "<|id:%u|>", (unsigned)ids[i]);
        }
        for (size_t j = 0; j < plen; j++, len++)
            if (len + 1 < cap)
                out[len] = piece[j];
    }
    if (cap)
        out[len < cap ? len : cap - 1] = 0;
    return len;
}

size_t tokenizer_decode(const struct tokenizer *t, const vkt_token *ids, size_t n, char *out, size_t cap)
{
    return decode(t, ids, n, true, out, cap);
}

size_t tokenizer_decode_next(const struct tokenizer *t, const vkt_token *ids, size_t n, char *out, size_t cap)
{
    return decode(t, ids, n, false, out, cap);
}
