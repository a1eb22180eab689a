/* tokenizer: the byte tokenizer (see include/vktrain/tokenizer.h). Owns the
 * mapping between bytes and ids; never touches files or datasets. */
#include "vktrain/tokenizer.h"

#include <stdio.h>
#include <string.h>

int tokenizer_open(struct tokenizer *t, const struct config_tokenizer *cfg, char *err, size_t errlen)
{
    if (cfg->type != TOKENIZER_BYTE) {
        snprintf(err, errlen, "tokenizer.type: hf tokenizers are not supported yet (use byte)");
        return -1;
    }
    t->type = TOKENIZER_BYTE;
    t->size = TOKENIZER_BYTE_SIZE;
    t->bos = TOKEN_BOS;
    t->eos = TOKEN_EOS;
    t->pad = TOKEN_PAD;
    return 0;
}

size_t tokenizer_encode(const struct tokenizer *t, const void *text, size_t n, vkt_token *out)
{
    const unsigned char *s = text;
    for (size_t i = 0; i < n; i++)
        out[i] = s[i];
    return n;
}

size_t tokenizer_decode(const struct tokenizer *t, const vkt_token *ids, size_t n, char *out, size_t cap)
{
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
