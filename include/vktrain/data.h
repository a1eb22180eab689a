/* data: from a recipe's dataset to the host batches of one step.
 *
 *   data_open      reads and tokenizes the dataset into one token store and
 *                  turns it into a fixed list of training sequences (and a
 *                  validation list), independent of world size, accumulation
 *                  and micro-batch size;
 *   sampler        each epoch a seeded permutation of that list; step s takes
 *                  positions [s*G, (s+1)*G), G = W*A*B, the one at s*G + k
 *                  going to rank (k / B) mod W, micro-batch k / (W*B);
 *   data_batch     B rows of T int32 inputs, labels (shifted once, here;
 *                  -100 = ignore), positions and document ids.
 *
 * Sequences are (start, length) views of the store; an epoch permutes
 * indices, never tokens. Nothing here prints except data_report, and nothing
 * exits: errors come back as -1 with a message naming the file and line or
 * offset. */
#ifndef VKTRAIN_DATA_H
#define VKTRAIN_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "vktrain/config.h"
#include "vktrain/tokenizer.h"

#define DATA_IGNORE (-100)

/* One list of sequences over the token store. Sequence i is the runs
 * seq_first[i] .. seq_first[i+1]-1; a run of n tokens gives n-1 (input,
 * label) pairs. A row starts a new segment (document id, position 0) at each
 * run and, in text data, at each BOS input. */
struct data_split {
    int64_t n_seq;
    int64_t *seq_first; /* n_seq + 1 */
    int64_t *run_start; /* offset in the store */
    int32_t *run_len;   /* tokens */
    int64_t n_tokens;   /* valid labels over all sequences */
};

struct data_stats {
    int64_t n_files;
    int64_t n_bytes;     /* read from disk */
    int64_t n_docs;      /* documents or samples */
    int64_t n_truncated; /* samples cut to max_seq_len */
    int64_t n_bad_lines; /* sft_jsonl lines skipped (skip_bad_lines) */
    int64_t n_dup_files; /* directory entries naming a file already read */
};

struct data {
    const struct config *cfg;
    struct tokenizer tok;
    vkt_token *tok_ids; /* the token store: train data, then val_path data */
    uint8_t *trainable; /* per token: may it be a label (NULL: all) */
    int64_t n_tok, cap_tok;
    bool split_at_bos; /* text: a BOS input starts a new document */
    /* sft_jsonl messages: the chat template they were written with
     * ("llama3", "chatml", "llama2", "plain"; NULL: no messages), and
     * whether it came from the tokenizer's files */
    const char *chat_template;
    bool chat_template_from_file;
    struct data_split train, val;
    struct data_stats stats;
    double load_seconds;
};

/* Reads cfg->dataset (and its validation part). 0, or -1 with err. */
int data_open(struct data *d, const struct config *cfg, char *err, size_t errlen);
void data_close(struct data *d);

/* Order of the training sequences for one (W, A, B). */
struct sampler {
    int64_t n_seq;
    int world, accum, batch;
    int64_t steps_per_epoch;
    int64_t dropped; /* sequences left over at each epoch's end */
    uint64_t seed;
    bool shuffle;
    int64_t perm_epoch; /* epoch whose permutation perm holds, or -1 */
    uint32_t *perm;
};

/* Where training stands, for checkpoints: the next step to run. */
struct data_pos {
    int64_t epoch;
    int64_t step; /* within the epoch */
};

/* -1 with err when the list holds less than one global batch. */
int sampler_init(struct sampler *s, int64_t n_seq, uint64_t seed, bool shuffle, int world, int accum, int batch,
                 char *err, size_t errlen);
void sampler_free(struct sampler *s);
/* Global step s (counted across epochs) <-> position. */
struct data_pos sampler_pos(const struct sampler *s, int64_t step);
int64_t sampler_step(const struct sampler *s, struct data_pos pos);
/* The B sequence indices of micro-batch `micro` of `rank` at global step s. */
void sampler_batch(struct sampler *s, int64_t step, int rank, int micro, int64_t *seq);
/* The index in the step's global batch (0 .. W·A·B − 1) of the first of
 * those sequences: the same sequence has the same index under any
 * (W, A, B). */
uint32_t sampler_first(const struct sampler *s, int rank, int micro);
/* Steps the recipe runs: max_steps, or epochs * steps_per_epoch. */
int64_t sampler_total_steps(const struct sampler *s, const struct config *cfg);

/* Host batch: rows x T, row-major; T is max_seq_len when packed, else the
 * longest row of this micro-batch. Pad positions: input <|pad|>, label
 * -100, a document id of their own. */
struct data_batch {
    int rows, T;
    int cap_rows, cap_T;
    int32_t *inputs, *labels, *positions, *doc_ids;
    int64_t *seq;    /* the sequence of each row (index in its split) */
    int64_t n_valid; /* labels != -100 */
};

void data_batch_init(struct data_batch *b, int rows, int max_seq_len);
void data_batch_free(struct data_batch *b);
/* Fills b with the given sequences of a split, one per row (seq may be
 * b->seq). */
void data_batch_fill(const struct data *d, const struct data_split *split, const int64_t *seq, int n,
                     struct data_batch *b);
/* Micro-batch `micro` of `rank` at global step s of the training split. */
void data_train_batch(const struct data *d, struct sampler *s, int64_t step, int rank, int micro, struct data_batch *b);
/* Validation in list order: batch i holds sequences [i*B, (i+1)*B), the
 * last one fewer. */
int64_t data_val_batches(const struct data *d, int batch);
void data_val_batch(const struct data *d, int64_t i, int batch, struct data_batch *b);

/* llm.c token shards, as the `tokens` dataset reads them: a header of 256
 * little-endian int32 (magic, version, count), then count tokens. */
#define SHARD_HEADER_BYTES (256 * 4)
#define SHARD_MAGIC_U16 20240520 /* uint16 tokens */
#define SHARD_VERSION_U16 1
#define SHARD_MAGIC_U32 20240801 /* uint32 tokens (llm.c's Llama 3 shards) */
#define SHARD_VERSION_U32 7

/* Writing one shard: tokens go to a temporary file beside path, renamed to
 * path by shard_finish, so a failed run never leaves a partial shard. */
struct shard_writer {
    FILE *f;
    char *path, *tmp;
    int width;     /* bytes per token: 2 or 4 */
    int64_t count; /* tokens written */
};
/* width 2 (every id < 65536) or 4. 0, or -1 with err. */
int shard_open(struct shard_writer *w, const char *path, int width, char *err, size_t errlen);
int shard_write(struct shard_writer *w, const vkt_token *ids, size_t n, char *err, size_t errlen);
/* Writes the header and renames; 0, or -1 with err (the shard is then
 * removed). */
int shard_finish(struct shard_writer *w, char *err, size_t errlen);
/* Removes what was written; w may already be finished. */
void shard_abort(struct shard_writer *w);

/* Whole file into *buf (reused across calls, grown as needed, NUL
 * terminated); 0, or -1 with err naming the file. */
int data_read_file(const char *path, char **buf, size_t *cap, size_t *n, char *err, size_t errlen);

/* The documents of a `text` dataset file (data_text.c): each piece of
 * buf[0..n) between lines holding only sep (or the whole buffer when sep
 * is NULL) that is not empty, without the line break ending its last line,
 * to fn in order. */
typedef void (*data_doc_fn)(void *ctx, const char *text, size_t n);
void data_text_documents(const char *buf, size_t n, const char *sep, data_doc_fn fn, void *ctx);

/* Prints the summary of the data for this sampler: sequences, tokens, steps,
 * the dropped tail, truncated samples and skipped lines (one warning each). */
void data_report(const struct data *d, const struct sampler *s);

#endif
