/* tokenizer: text <-> token ids. Only the byte tokenizer exists: ids 0-255
 * are the bytes of the text (any bytes, valid UTF-8 or not), 256 <|bos|>,
 * 257 <|eos|>, 258 <|pad|>; its size is 259. A model may have a larger
 * vocab_size; the extra ids are never produced. */
#ifndef VKTRAIN_TOKENIZER_H
#define VKTRAIN_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "vktrain/config.h"

/* 16 bits hold the byte vocab and llm.c shards; widen here for a larger
 * vocab. */
typedef uint16_t vkt_token;

enum {
    TOKEN_BOS = 256,
    TOKEN_EOS = 257,
    TOKEN_PAD = 258,
    TOKENIZER_BYTE_SIZE = 259,
};

struct tokenizer {
    enum tokenizer_type type;
    int size; /* ids are < size */
    int bos, eos, pad;
};

/* 0, or -1 with a message (an hf tokenizer is not supported yet). */
int tokenizer_open(struct tokenizer *t, const struct config_tokenizer *cfg, char *err, size_t errlen);
/* Writes the ids of n bytes of text to out (room for n ids); returns the
 * count. No BOS or EOS is added. */
size_t tokenizer_encode(const struct tokenizer *t, const void *text, size_t n, vkt_token *out);
/* Writes the text of n ids to out like snprintf: at most cap bytes with a
 * terminating NUL, returns the full length. Special ids are written as their
 * names (<|bos|>, <|eos|>, <|pad|>); ids the tokenizer lacks as <|id:N|>. */
size_t tokenizer_decode(const struct tokenizer *t, const vkt_token *ids, size_t n, char *out, size_t cap);

#endif
