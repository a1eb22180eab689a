/* tokenizer: text <-> token ids. Two kinds:
 *  - byte (TOKENIZER_BYTE): ids 0-255 are the bytes of the text (any bytes,
 *    valid UTF-8 or not), 256 <|bos|>, 257 <|eos|>, 258 <|pad|>; size 259.
 *  - hf (TOKENIZER_HF): a byte-level BPE read from a Hugging Face
 *    tokenizer.json (the GPT-2 / RoBERTa family; src/tokenizer/tokenizer_hf.c
 *    says what is accepted). Every byte string round-trips exactly. Text is
 *    always plain: special or added tokens written in it are not recognized.
 *    BOS/EOS/PAD are taken from the file by name (docs/data.md).
 * A model may have a larger vocab_size; the extra ids are never produced. */
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

/* The largest tokenizer a vkt_token can index. */
#define TOKENIZER_MAX_SIZE 65536

struct tokenizer {
    enum tokenizer_type type;
    int size; /* ids are < size */
    int bos, eos, pad;
    struct tokenizer_hf *hf; /* the loaded tokenizer.json (hf only) */
};

/* 0, or -1 with a message (for hf: the file and what in it is wrong or
 * unsupported). A tokenizer that was opened must be closed. */
int tokenizer_open(struct tokenizer *t, const struct config_tokenizer *cfg, char *err, size_t errlen);
/* Frees what tokenizer_open allocated (nothing for byte); t may be zeroed. */
void tokenizer_close(struct tokenizer *t);
/* Writes the ids of n bytes of text to out (room for n ids); returns the
 * count, which is n for byte and at most n for hf (every id covers at least
 * one byte). No BOS or EOS is added. Not thread-safe for one hf tokenizer
 * (it caches the ids of the pieces it has seen). */
size_t tokenizer_encode(const struct tokenizer *t, const void *text, size_t n, vkt_token *out);
/* Writes the text of n ids to out like snprintf: at most cap bytes with a
 * terminating NUL, returns the full length. Special ids are written as their
 * names (<|bos|>, <|eos|>, <|pad|>; hf: the token's content, e.g.
 * <|endoftext|>); ids the tokenizer lacks as <|id:N|>. */
size_t tokenizer_decode(const struct tokenizer *t, const vkt_token *ids, size_t n, char *out, size_t cap);

#endif
