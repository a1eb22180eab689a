/* tokenizer_hf: byte-level BPE from a Hugging Face tokenizer.json, behind
 * the tokenizer_* functions of include/vktrain/tokenizer.h. */
#ifndef VKTRAIN_TOKENIZER_HF_H
#define VKTRAIN_TOKENIZER_HF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vktrain/tokenizer.h"

/* Reads path into t->hf and fills t's type, size and special ids; 0, or -1
 * with a message naming the file. */
int tokenizer_hf_open(struct tokenizer *t, const char *path, char *err, size_t errlen);
void tokenizer_hf_free(struct tokenizer_hf *h);
size_t tokenizer_hf_encode(struct tokenizer_hf *h, const void *text, size_t n, vkt_token *out);
size_t tokenizer_hf_decode(const struct tokenizer_hf *h, const vkt_token *ids, size_t n, char *out, size_t cap);
/* The GPT-2 pre-tokenizer's class of a code point: 'L' (\p{L}), 'N'
 * (\p{N}), 'S' (\s) or 'O' (none); for tests. */
int tokenizer_hf_class(uint32_t cp);

/* ---- shared by tokenizer_hf.c (encoding) and tokenizer_hf_load.c ---- */

#define GPT2_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

enum { CACHE_MAX_PIECE = 64, CACHE_MAX_ENTRIES = 1 << 20, N_BYTE_CHARS = 256 + 68 };
enum { C_LETTER, C_NUMBER, C_SPACE, C_OTHER };
#define UTF8_INVALID 0xffffffffu

/* A hash map from byte strings to two uint32 values. */
struct smap_slot {
    uint64_t hash; /* 0: empty */
    uint32_t off, len, val, val2;
};
struct smap {
    struct smap_slot *slot;
    size_t cap, n; /* cap: a power of two, at most half full */
    char *pool;
    size_t pool_n, pool_cap;
};

/* The merges: (left id, right id) -> (rank, merged id). */
struct pmap_slot {
    uint64_t key; /* (left << 32 | right) + 1; 0: empty */
    int32_t rank, id;
};
struct heap_entry {
    int32_t rank, pos;
    uint32_t left, right; /* the ids of the pair when it was pushed */
};
struct tokenizer_hf {
    struct smap vocab; /* byte-level token string -> id */
    struct pmap_slot *merges;
    size_t merges_mask;
    uint32_t byte_id[256];
    char byte_str[256][2]; /* the byte-level character of each byte (UTF-8) */
    uint8_t byte_len[256];
    bool ignore_merges, split; /* split: the GPT-2 regex splits the text */
    int size;
    uint32_t *dec_off, *dec_len; /* id -> its bytes in dec_pool; len UINT32_MAX: no such id */
    char *dec_pool;
    /* piece bytes -> (offset in cache_ids, count) */
    struct smap cache;
    vkt_token *cache_ids;
    size_t cache_n, cache_cap;
    /* merge scratch */
    uint32_t *sym;
    int32_t *prev, *next;
    char *key;
    struct heap_entry *heap;
    size_t scratch_cap, heap_cap;
};

void hf_smap_init(struct smap *m, size_t cap);
void hf_smap_free(struct smap *m);
const struct smap_slot *hf_smap_get(const struct smap *m, const void *key, size_t len);
struct smap_slot *hf_smap_put(struct smap *m, const void *key, size_t len, uint32_t val, uint32_t val2);
size_t hf_pmap_index(uint64_t key, size_t mask);
/* GPT-2's bytes_to_unicode and its inverse. */
void hf_byte_chars(uint32_t cp[256], int16_t inv[N_BYTE_CHARS]);
size_t hf_put_utf8(char *out, uint32_t cp);
/* The code point at s (n bytes left) and its length, or UTF8_INVALID. */
uint32_t hf_utf8_next(const unsigned char *s, size_t n, size_t *len);

#endif
