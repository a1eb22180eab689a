/* data_internal: what the readers (text, sft_jsonl, tokens) and the
 * sequence builder share inside src/data. Readers append documents to the
 * token store of struct data and record each as a (start, length) doc. */
#ifndef VKTRAIN_DATA_INTERNAL_H
#define VKTRAIN_DATA_INTERNAL_H

#include "vktrain/data.h"

/* Documents (or samples, or shards) as ranges of the token store, in order. */
struct data_docs {
    int64_t n, cap;
    int64_t *start, *len;
};

void data_docs_push(struct data_docs *docs, int64_t start, int64_t len);
void data_docs_free(struct data_docs *docs);

/* Room for n more tokens in the store (and their trainable flags). */
void data_store_reserve(struct data *d, int64_t n);
/* Appends the ids of n bytes of text to the store; returns their count
 * (their trainable flags are the caller's to set). */
int64_t data_store_encode(struct data *d, const char *text, size_t n);
/* Appends one id. */
void data_store_push(struct data *d, int id);

/* The files a dataset path names: a file, a directory (regular files in
 * name order, hidden ones and those matching dataset.exclude skipped, each
 * file read once even when links name it twice) or a glob pattern. */
int data_list_files(struct data *d, const char *path, char ***files, int *n, char *err, size_t errlen);
void data_free_files(char **files, int n);
/* Reads every file `path` names, in order, counting them in d->stats, and
 * hands each one's bytes to fn (with the reader's ctx); stops at the first error (-1 with err). */
typedef int (*data_file_fn)(struct data *d, struct data_docs *docs, void *ctx, const char *file, const char *buf,
                            size_t n, char *err, size_t errlen);
int data_each_file(struct data *d, const char *path, struct data_docs *docs, data_file_fn fn, void *ctx, char *err,
                   size_t errlen);

int data_read_text(struct data *d, const char *path, struct data_docs *docs, char *err, size_t errlen);
int data_read_sft(struct data *d, const char *path, struct data_docs *docs, char *err, size_t errlen);
int data_read_tokens(struct data *d, const char *path, struct data_docs *docs, char *err, size_t errlen);

/* Turns documents into the sequence list of a split (see data_split.c). */
void data_split_build(struct data *d, const struct data_docs *docs, struct data_split *out);
/* Moves an evenly spaced fraction of `all` into val, the rest into train. */
void data_split_take(const struct data *d, struct data_split *all, double fraction, struct data_split *train,
                     struct data_split *val);
void data_split_free(struct data_split *s);

#endif
