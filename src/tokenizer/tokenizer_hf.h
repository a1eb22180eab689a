/* tokenizer_hf: a Hugging Face tokenizer.json behind the tokenizer_*
 * functions of include/vktrain/tokenizer.h, and what its files share.
 *
 * Encoding runs the steps of the `tokenizers` library, in its order:
 *
 *   text ─► added tokens (hf_added.c: those matched on the raw text)
 *        ─► normalizer   (hf_normalize.c: NFC, Prepend, Replace)
 *        ─► added tokens (those matched on the normalized text)
 *        ─► pre-tokenizer (hf_pretok.c: the GPT-2, Llama 3 and Qwen2 split
 *                          regexes, Digits, Metaspace)
 *        ─► model, one piece at a time, through a cache (tokenizer_hf.c):
 *             byte-level BPE        (hf_byte_level.c: GPT-2, Llama 3, Qwen2,
 *                                    SmolLM)
 *             SentencePiece-style   (hf_sentencepiece.c: Llama 2, Mistral,
 *             BPE                    TinyLlama: characters, byte fallback,
 *                                    unknown token)
 *           both over the same merge loop (hf_bpe.c)
 *
 * Shared pieces: hash maps (hf_map.c), UTF-8, character classes and NFC
 * (hf_unicode.c). Reading and checking tokenizer.json: tokenizer_hf_load.c
 * (the model, added tokens, special ids) and hf_load_pipeline.c (normalizer,
 * pre-tokenizer, decoder). What is accepted is listed in docs/data.md. */
#ifndef VKTRAIN_TOKENIZER_HF_H
#define VKTRAIN_TOKENIZER_HF_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vktrain/tokenizer.h"

/* ---- the interface of include/vktrain/tokenizer.h ---- */

/* Reads path (a tokenizer.json, or a folder holding one) into t->hf and
 * fills t's type, size and special ids; 0, or -1 with a message naming the
 * file and the component. */
int tokenizer_hf_open(struct tokenizer *t, const char *path, char *err, size_t errlen);
void tokenizer_hf_free(struct tokenizer_hf *h);
size_t tokenizer_hf_encode(struct tokenizer_hf *h, const void *text, size_t n, vkt_token *out, size_t cap);
/* at_start: the ids begin a text (SentencePiece decoders drop its leading
 * space). */
size_t tokenizer_hf_decode(const struct tokenizer_hf *h, const vkt_token *ids, size_t n, bool at_start, char *out,
                           size_t cap);
/* The split regexes' class of a code point: 'L' (\p{L}), 'N' (\p{N}), 'S'
 * (\s) or 'O' (none); for tests. */
int tokenizer_hf_class(uint32_t cp);
/* NFC of s[0..n) into out (room for 3n bytes); returns its length; for
 * tests. */
size_t tokenizer_hf_nfc(const char *s, size_t n, char *out);

/* ---- hash maps (hf_map.c) ---- */

/* Byte strings -> two uint32 values. */
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
void hf_smap_init(struct smap *m, size_t cap);
void hf_smap_free(struct smap *m);
void hf_smap_clear(struct smap *m);
const struct smap_slot *hf_smap_get(const struct smap *m, const void *key, size_t len);
/* Inserts key (the first value given for a key stays); returns its slot. */
struct smap_slot *hf_smap_put(struct smap *m, const void *key, size_t len, uint32_t val, uint32_t val2);

/* The merges: (left id, right id) -> (rank, merged id). */
struct pmap_slot {
    uint64_t key; /* (left << 32 | right) + 1; 0: empty */
    uint32_t rank, id;
};
struct pmap {
    struct pmap_slot *slot;
    size_t mask;
};
void hf_pmap_init(struct pmap *m, size_t n);
void hf_pmap_free(struct pmap *m);
const struct pmap_slot *hf_pmap_get(const struct pmap *m, uint32_t a, uint32_t b);
/* Sets (a, b) -> (rank, id), replacing an earlier value. */
void hf_pmap_set(struct pmap *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t id);

/* ---- UTF-8, character classes, NFC (hf_unicode.c) ---- */

#define UTF8_INVALID 0xffffffffu
enum { C_LETTER, C_NUMBER, C_SPACE, C_OTHER };

/* The code point at s (n > 0 bytes left) and its length; a byte that does
 * not start valid UTF-8 is UTF8_INVALID of length 1. */
uint32_t hf_utf8_next(const unsigned char *s, size_t n, size_t *len);
size_t hf_put_utf8(char *out, uint32_t cp);
/* C_LETTER (\p{L}), C_NUMBER (\p{N}), C_SPACE (\s) or C_OTHER; an invalid
 * byte is C_OTHER. */
int hf_class(uint32_t cp);
/* The case of a letter, for the o200k regex: K_UPPER (Lu, Lt), K_LOWER
 * (Ll), K_OTHER_LETTER (Lm, Lo), K_MARK (M) or K_NONE. */
enum { K_UPPER, K_LOWER, K_OTHER_LETTER, K_MARK, K_NONE };
int hf_case(uint32_t cp);
/* The regex crate's \w (Alphabetic, M, Nd, Pc, Join_Control). */
bool hf_is_word(uint32_t cp);
/* NFC of s[0..n); *out is s itself when NFC leaves it as it is, else buf
 * (grown as needed). Returns the length. Invalid bytes are kept. */
size_t hf_nfc(const char *s, size_t n, char **buf, size_t *cap, const char **out);

/* ---- the tokenizer ---- */

enum hf_model_kind { HF_BYTE_LEVEL, HF_SENTENCEPIECE };
enum hf_regex { HF_RE_GPT2, HF_RE_LLAMA3, HF_RE_QWEN2, HF_RE_O200K };
enum hf_norm_kind { HF_NORM_NFC, HF_NORM_PREPEND, HF_NORM_REPLACE };
enum hf_pretok_kind { HF_PT_SPLIT, HF_PT_DIGITS, HF_PT_METASPACE };
enum hf_prepend { HF_PREPEND_ALWAYS, HF_PREPEND_FIRST, HF_PREPEND_NEVER };

struct hf_norm {
    enum hf_norm_kind kind;
    char *from, *to; /* Prepend: to; Replace: from -> to */
    size_t from_len, to_len;
};

struct hf_pretok {
    enum hf_pretok_kind kind;
    enum hf_regex regex;      /* Split */
    bool individual;          /* Digits: each digit alone, else runs */
    enum hf_prepend prepend;  /* Metaspace */
    bool split;               /* Metaspace: a piece starts at each replacement */
    char rep[4];              /* Metaspace: the replacement character */
    size_t rep_len;
};

struct hf_added_token {
    uint32_t id;
    char *match; /* the text matched: content, or its normalized form */
    size_t len;
    bool single_word, lstrip, rstrip, normalized, special;
};

/* Added tokens as a byte trie: node 0 is the root; child (node, byte) in
 * a hash map; term[node] is 1 + the token's index, or 0. */
struct hf_trie {
    struct pmap child; /* (node, byte) -> (unused, child node) */
    uint32_t *term;
    size_t n_nodes;
    bool first[256]; /* bytes a token starts with */
};

/* Where the ids of an encode go: out[0..cap), and how many there are. */
struct hf_out {
    vkt_token *ids;
    size_t cap, n;
};

struct tokenizer_hf {
    enum hf_model_kind kind;
    /* the BPE model */
    struct smap vocab; /* token string -> id */
    struct pmap merges;
    bool ignore_merges;
    uint32_t byte_id[256];   /* byte-level: the id of each byte's character */
    char byte_str[256][2];   /* byte-level: each byte's character (UTF-8) */
    uint8_t byte_len[256];
    int16_t byte_of[256 + 68]; /* byte-level: a character's byte, or -1 */
    int64_t byte_fallback[256]; /* sentencepiece: <0xNN> ids, -1 absent */
    bool use_byte_fallback, fuse_unk;
    int64_t unk; /* sentencepiece: the unknown token's id, or -1 */
    char cut[4];     /* sentencepiece: pieces are cut before this character */
    size_t cut_len;  /* where no merge can join across (0: never) */
    /* the pipeline */
    struct hf_norm *norm;
    int n_norm;
    struct hf_pretok *pretok;
    int n_pretok;
    struct hf_added_token *added;
    size_t n_added;
    struct hf_trie raw_trie, norm_trie; /* added tokens matched before / after normalizing */
    /* decoding */
    int size;
    uint32_t *tok_off, *tok_len; /* id -> its string in tok_pool; len UINT32_MAX: no such id */
    char *tok_pool;
    bool dec_byte_level;         /* ByteLevel decoder */
    bool dec_join_space;         /* no decoder: tokens joined by ' ' */
    bool dec_byte_fallback;      /* <0xNN> -> the byte */
    bool dec_replace;            /* the Metaspace character -> ' ' */
    bool dec_first_drop;         /* Metaspace decoder: the first token loses it */
    int dec_strip;               /* spaces dropped at the start of a text */
    char dec_rep[4];             /* the Metaspace character */
    size_t dec_rep_len;
    /* the piece cache: piece bytes -> (offset in cache_ids, count) */
    struct smap cache;
    vkt_token *cache_ids;
    size_t cache_n, cache_cap;
    /* scratch: normalized text (two, for a sequence of normalizers),
     * Metaspace text, one piece's symbols */
    char *norm_buf[2], *meta_buf, *key;
    size_t norm_cap[2], meta_cap, key_cap;
    uint32_t *sym;
    int32_t *prev, *next;
    size_t sym_cap;
    struct hf_heap_entry *heap;
    size_t heap_cap;
};

/* ---- pieces of the pipeline ---- */

/* hf_added.c: the trie of the tokens with normalized == want. */
void hf_trie_build(struct hf_trie *t, const struct hf_added_token *tok, size_t n, bool want);
void hf_trie_free(struct hf_trie *t);
/* Splits s[0..n) at added tokens as tokenizers' find_matches does: each
 * text between them goes to gap (at_start: it starts the whole text), each
 * token's id to out. */
typedef void (*hf_gap_fn)(struct tokenizer_hf *h, const char *s, size_t n, bool at_start, struct hf_out *out);
void hf_added_split(struct tokenizer_hf *h, const struct hf_trie *t, const char *s, size_t n, bool at_start,
                    hf_gap_fn gap, struct hf_out *out);

/* hf_normalize.c: the normalizer on s[0..n); returns the text (s itself
 * or one of h->norm_buf) and its length in *len. */
const char *hf_normalize(struct tokenizer_hf *h, const char *s, size_t n, size_t *len);

/* hf_pretok.c: the pre-tokenizer on s[0..n): each piece to
 * hf_model_piece. */
void hf_pretokenize(struct tokenizer_hf *h, const char *s, size_t n, bool at_start, struct hf_out *out);
/* The end of the match of regex r at s[i] (i < n). */
size_t hf_regex_end(enum hf_regex r, const unsigned char *s, size_t i, size_t n);

/* tokenizer_hf.c: the ids of one piece to out, through the cache. */
void hf_model_piece(struct tokenizer_hf *h, const char *s, size_t n, struct hf_out *out);
void hf_out_push(struct hf_out *out, const vkt_token *ids, size_t k);

/* hf_bpe.c: room for m symbols in h->sym (and prev, next, key of 4m
 * bytes); merges h->sym[0..m) in place, returns the count left. */
void hf_bpe_reserve(struct tokenizer_hf *h, size_t m);
size_t hf_bpe_merge(struct tokenizer_hf *h, size_t m);

/* hf_byte_level.c, hf_sentencepiece.c: one piece's ids into h->sym;
 * returns the count. */
size_t hf_byte_level_piece(struct tokenizer_hf *h, const unsigned char *s, size_t n);
size_t hf_sentencepiece_piece(struct tokenizer_hf *h, const unsigned char *s, size_t n);
/* Decides h->cut: the word-start character (Metaspace's, or what a
 * Replace normalizer puts for ' '), when no vocab token has it after
 * another character, so that BPE never merges across a text cut before it
 * (and there is no ignore_merges, which looks the whole text up). */
void hf_sentencepiece_prepare(struct tokenizer_hf *h);
/* The first cut in s[0..n) after `from`, or n. */
size_t hf_sentencepiece_next_cut(const struct tokenizer_hf *h, const char *s, size_t n, size_t from);
/* GPT-2's bytes_to_unicode: the character (code point) of each byte. */
void hf_byte_chars(uint32_t cp[256]);

/* hf_load_pipeline.c: reads the normalizer, pre_tokenizer and decoder of
 * root into h and sets h->kind; 0, or -1 with err (which names path). */
int hf_load_pipeline(struct tokenizer_hf *h, json_t *root, const char *path, char *err, size_t errlen);
/* tokenizer_hf_load.c: "tokenizer.path: PATH: " + the message; returns -1. */
int hf_fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The "type" of a JSON object, or "(no type)". */
const char *hf_type_of(json_t *obj);

#endif
