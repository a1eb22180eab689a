/* tokenizer: text <-> token ids. Two kinds:
 *  - byte (TOKENIZER_BYTE): ids 0-255 are the bytes of the text (any bytes,
 *    valid UTF-8 or not), 256 <|bos|>, 257 <|eos|>, 258 <|pad|>; size 259.
 *  - hf (TOKENIZER_HF): a BPE read from a Hugging Face tokenizer.json, the
 *    byte-level kind (GPT-2, Llama 3, Qwen2, SmolLM) or the SentencePiece
 *    kind (Llama 2, Mistral, TinyLlama); it encodes as the `tokenizers`
 *    library does, added and special tokens written in the text included
 *    (src/tokenizer/tokenizer_hf.h, docs/data.md say what is accepted).
 *    BOS/EOS/PAD come from tokenizer_config.json beside it, else from the
 *    usual names (docs/data.md).
 * A model may have a larger vocab_size; the extra ids are never produced. */
#ifndef VKTRAIN_TOKENIZER_H
#define VKTRAIN_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "vktrain/config.h"

/* A token id: 32 bits in the data store, batches and shards. */
typedef uint32_t vkt_token;

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
    struct tokenizer_hf *hf; /* the loaded tokenizer.json (hf only) */
};

/* 0, or -1 with a message (for hf: the file and what in it is wrong or
 * unsupported). A tokenizer that was opened must be closed. */
int tokenizer_open(struct tokenizer *t, const struct config_tokenizer *cfg, char *err, size_t errlen);
/* The tokenizer.json that an hf tokenizer.path names: path itself, or
 * path/tokenizer.json when path is a folder (whether or not it exists). */
void tokenizer_json_path(const char *path, char *out, size_t cap);
/* The file `name` (e.g. tokenizer_config.json) in the folder of the
 * tokenizer.json that an hf tokenizer.path names. */
void tokenizer_file_beside(const char *path, const char *name, char *out, size_t cap);
/* Frees what tokenizer_open allocated (nothing for byte); t may be zeroed. */
void tokenizer_close(struct tokenizer *t);
/* Returns the number of ids of n bytes of text and writes the first
 * min(that, cap) of them to out: when it returns more than cap, encode
 * again with room for all. No BOS or EOS is added. The byte tokenizer
 * gives exactly n ids; a byte-level hf one at most n unless its normalizer
 * (NFC) lengthens the text; a SentencePiece one usually at most n + 1. Not
 * thread-safe for one hf tokenizer (it caches the ids of the pieces it has
 * seen). */
size_t tokenizer_encode(const struct tokenizer *t, const void *text, size_t n, vkt_token *out, size_t cap);
/* The same into *ids, grown (realloc) to hold all of them; *cap is its
 * room in ids. */
size_t tokenizer_encode_all(const struct tokenizer *t, const void *text, size_t n, vkt_token **ids, size_t *cap);
/* Writes the text of n ids, a whole text, to out like snprintf: at most cap
 * bytes with a terminating NUL, returns the full length. Special ids are
 * written as their names (<|bos|>, <|eos|>, <|pad|>; hf: the token's
 * content, e.g. <|endoftext|>); ids the tokenizer lacks as <|id:N|>. */
size_t tokenizer_decode(const struct tokenizer *t, const vkt_token *ids, size_t n, char *out, size_t cap);
/* The same for ids that continue a text (one token at a time while
 * generating): a SentencePiece decoder keeps their leading space. */
size_t tokenizer_decode_next(const struct tokenizer *t, const vkt_token *ids, size_t n, char *out, size_t cap);

#endif
