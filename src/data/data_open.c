/* data_open: the dataset of a recipe, from its path to the train and
 * validation sequence lists. Owns the token store, the file listing and
 * reading, and the one summary the user sees (data_report). Never shuffles
 * and never builds batches. */
#include "data_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "vktrain/util.h"

void data_docs_push(struct data_docs *docs, int64_t start, int64_t len)
{
    if (docs->n == docs->cap) {
        docs->cap = docs->cap ? 2 * docs->cap : 1024;
        docs->start = vkt_realloc(docs->start, (size_t)docs->cap * sizeof(int64_t), "documents");
        docs->len = vkt_realloc(docs->len, (size_t)docs->cap * sizeof(int64_t), "documents");
    }
    docs->start[docs->n] = start;
    docs->len[docs->n++] = len;
}

void data_docs_free(struct data_docs *docs)
{
    free(docs->start);
    free(docs->len);
    memset(docs, 0, sizeof *docs);
}

void data_store_reserve(struct data *d, int64_t n)
{
    if (d->tok_ids && d->n_tok + n <= d->cap_tok)
        return;
    int64_t cap = d->cap_tok ? d->cap_tok : 1 << 16;
    while (cap < d->n_tok + n)
        cap *= 2;
    d->tok_ids = vkt_realloc(d->tok_ids, (size_t)cap * sizeof(vkt_token), "token store");
    if (d->trainable)
        d->trainable = vkt_realloc(d->trainable, (size_t)cap, "token store flags");
    d->cap_tok = cap;
}

int64_t data_store_encode(struct data *d, const char *text, size_t n)
{
    data_store_reserve(d, (int64_t)n + 1);
    size_t room = (size_t)(d->cap_tok - d->n_tok);
    size_t k = tokenizer_encode(&d->tok, text, n, d->tok_ids + d->n_tok, room);
    if (k > room) { /* a normalizer or a prepended character made it longer */
        data_store_reserve(d, (int64_t)k);
        tokenizer_encode(&d->tok, text, n, d->tok_ids + d->n_tok, k);
    }
    d->n_tok += (int64_t)k;
    return (int64_t)k;
}

void data_store_push(struct data *d, int id)
{
    data_store_reserve(d, 1);
    d->tok_ids[d->n_tok++] = (vkt_token)id;
}

int data_read_file(const char *path, char **buf, size_t *cap, size_t *n, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st)) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: is a directory, not a file", path);
        fclose(f);
        return -1;
    }
    size_t want = (size_t)st.st_size + 1;
    if (*cap < want) {
        *buf = vkt_realloc(*buf, want, "file buffer");
        *cap = want;
    }
    *n = fread(*buf, 1, (size_t)st.st_size, f);
    int bad = ferror(f) || *n != (size_t)st.st_size;
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s: read error", path);
        return -1;
    }
    (*buf)[*n] = 0;
    return 0;
}

int data_each_file(struct data *d, const char *path, struct data_docs *docs, data_file_fn fn, void *ctx, char *err,
                   size_t errlen)
{
    char **files, *buf = NULL;
    int n_files;
    size_t cap = 0, n;
    if (data_list_files(d, path, &files, &n_files, err, errlen))
        return -1;
    int rc = 0;
    for (int i = 0; i < n_files && rc == 0; i++) {
        rc = data_read_file(files[i], &buf, &cap, &n, err, errlen);
        if (rc)
            break;
        d->stats.n_files++;
        d->stats.n_bytes += (int64_t)n;
        rc = fn(d, docs, ctx, files[i], buf, n, err, errlen);
    }
    free(buf);
    data_free_files(files, n_files);
    return rc;
}

void data_free_files(char **files, int n)
{
    for (int i = 0; i < n; i++)
        free(files[i]);
    free(files);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool excluded(const struct config_dataset *c, const char *name)
{
    if (name[0] == '.')
        return true;
    for (int i = 0; i < c->n_exclude; i++)
        if (!fnmatch(c->exclude[i], name, 0))
            return true;
    return false;
}

static int list_dir(struct data *d, const char *path, char ***files, int *n, char *err, size_t errlen)
{
    DIR *dir = opendir(path);
    if (!dir) {
        snprintf(err, errlen, "%s: cannot open directory: %s", path, strerror(errno));
        return -1;
    }
    char **names = NULL;
    int count = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (excluded(&d->cfg->dataset, e->d_name))
            continue;
        if (count == cap)
            names = vkt_realloc(names, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *names, "files");
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        names[count] = vkt_malloc(len, "file name");
        snprintf(names[count++], len, "%s/%s", path, e->d_name);
    }
    closedir(dir);
    qsort(names, (size_t)count, sizeof *names, cmp_names);
    /* Keep regular files, each inode once (fortune's foo.u8 -> foo links). */
    struct stat *seen = vkt_malloc((size_t)(count + 1) * sizeof *seen, "file list");
    int kept = 0, n_seen = 0;
    for (int i = 0; i < count; i++) {
        struct stat st;
        bool dup = false;
        if (stat(names[i], &st) || !S_ISREG(st.st_mode)) {
            free(names[i]);
            continue;
        }
        for (int j = 0; j < n_seen && !dup; j++)
            dup = seen[j].st_dev == st.st_dev && seen[j].st_ino == st.st_ino;
        if (dup) {
            d->stats.n_dup_files++;
            free(names[i]);
            continue;
        }
        seen[n_seen++] = st;
        names[kept++] = names[i];
    }
    free(seen);
    if (!kept) {
        free(names);
        snprintf(err, errlen, "%s: no data files in the directory", path);
        return -1;
    }
    *files = names;
    *n = kept;
    return 0;
}

int data_list_files(struct data *d, const char *path, char ***files, int *n, char *err, size_t errlen)
{
    struct stat st;
    if (!stat(path, &st) && S_ISDIR(st.st_mode))
        return list_dir(d, path, files, n, err, errlen);
    if (strpbrk(path, "*?[")) {
        glob_t g;
        if (glob(path, 0, NULL, &g) || g.gl_pathc == 0) {
            snprintf(err, errlen, "%s: no files match", path);
            globfree(&g);
            return -1;
        }
        *files = vkt_malloc(g.gl_pathc * sizeof **files, "files");
        for (size_t i = 0; i < g.gl_pathc; i++)
            (*files)[i] = vkt_strdup(g.gl_pathv[i]);
        *n = (int)g.gl_pathc;
        globfree(&g);
        return 0;
    }
    if (stat(path, &st)) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    *files = vkt_malloc(sizeof **files, "files");
    (*files)[0] = vkt_strdup(path);
    *n = 1;
    return 0;
}

static int read_path(struct data *d, const char *path, struct data_docs *docs, char *err, size_t errlen)
{
    switch (d->cfg->dataset.type) {
    case DATASET_TEXT:
        return data_read_text(d, path, docs, err, errlen);
    case DATASET_SFT_JSONL:
        return data_read_sft(d, path, docs, err, errlen);
    case DATASET_TOKENS:
        return data_read_tokens(d, path, docs, err, errlen);
    }
    return -1;
}

/* A training set must hold a label to train on, and a validation set that
 * was asked for a label to evaluate (else val_loss would be 0/0). */
static int check_labels(const struct data *d, char *err, size_t errlen)
{
    const struct config_dataset *ds = &d->cfg->dataset;
    if (d->train.n_tokens == 0) {
        if (ds->type == DATASET_SFT_JSONL && !ds->train_on_input)
            return vkt_error(err, errlen,
                             "%s: every label of its %lld samples is masked: they hold only prompt or user text "
                             "(or their responses lie past max_seq_len %d), so there is nothing to train on; set "
                             "dataset.train_on_input: true to train on the prompts too",
                             ds->path, (long long)d->stats.n_docs, d->cfg->model.max_seq_len);
        return vkt_error(err, errlen, "%s: the training set holds no label to train on", ds->path);
    }
    if (ds->val_path && d->val.n_tokens == 0)
        return vkt_error(err, errlen,
                         "dataset.val_path: %s holds no label to evaluate (%s), so val_loss would be 0/0; give a "
                         "validation file with data, or leave dataset.val_path out",
                         ds->val_path, d->val.n_seq ? "every label is masked" : "it has no sequence");
    if (ds->val_fraction > 0 && d->val.n_tokens == 0)
        return vkt_error(err, errlen,
                         "dataset.val_fraction: %g of the %lld training sequences leaves no validation label; "
                         "give a larger fraction, a dataset.val_path, or no validation",
                         ds->val_fraction, (long long)(d->train.n_seq + d->val.n_seq));
    return 0;
}

int data_open(struct data *d, const struct config *cfg, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->cfg = cfg;
    double t0 = vkt_now();
    if (tokenizer_open(&d->tok, &cfg->tokenizer, err, errlen))
        return -1;
    d->split_at_bos = cfg->dataset.type == DATASET_TEXT;
    /* sft_jsonl marks per token whether it may be a label; the store grows
     * the flags along with the ids. */
    if (cfg->dataset.type == DATASET_SFT_JSONL)
        d->trainable = vkt_malloc(1, "token store flags");
    struct data_docs docs = {0}, val_docs = {0};
    struct data_split all = {0};
    int rc = read_path(d, cfg->dataset.path, &docs, err, errlen);
    if (rc == 0 && cfg->dataset.val_path)
        rc = read_path(d, cfg->dataset.val_path, &val_docs, err, errlen);
    if (rc == 0 && docs.n == 0) {
        snprintf(err, errlen, "%s: the dataset holds no documents", cfg->dataset.path);
        rc = -1;
    }
    if (rc == 0) {
        data_split_build(d, &docs, &all);
        if (cfg->dataset.val_path) {
            data_split_build(d, &val_docs, &d->val);
            d->train = all;
        } else {
            data_split_take(d, &all, cfg->dataset.val_fraction, &d->train, &d->val);
        }
    }
    if (rc == 0)
        rc = check_labels(d, err, errlen);
    data_docs_free(&docs);
    data_docs_free(&val_docs);
    d->load_seconds = vkt_now() - t0;
    if (rc)
        data_close(d);
    return rc;
}

void data_close(struct data *d)
{
    free(d->tok_ids);
    free(d->trainable);
    data_split_free(&d->train);
    data_split_free(&d->val);
    tokenizer_close(&d->tok);
    memset(d, 0, sizeof *d);
}

void data_report(const struct data *d, const struct sampler *s)
{
    const struct config *cfg = d->cfg;
    vkt_info("data: %s%s%s: %lld files, %.1f MB, %lld %s, %lld tokens, in %.2f s", cfg->dataset.path,
             cfg->dataset.val_path ? " + " : "", cfg->dataset.val_path ? cfg->dataset.val_path : "",
             (long long)d->stats.n_files, (double)d->stats.n_bytes / 1e6, (long long)d->stats.n_docs,
             cfg->dataset.type == DATASET_SFT_JSONL ? "samples" : "documents", (long long)d->n_tok, d->load_seconds);
    if (d->chat_template)
        vkt_info("data: chat messages written with the %s template%s", d->chat_template,
                 d->chat_template_from_file ? " (recognized in the tokenizer's chat_template)" : "");
    vkt_info("data: train %lld sequences of up to %d tokens, %lld label tokens; validation %lld "
             "sequences, %lld label tokens",
             (long long)d->train.n_seq, cfg->model.max_seq_len, (long long)d->train.n_tokens, (long long)d->val.n_seq,
             (long long)d->val.n_tokens);
    vkt_info("data: %lld steps per epoch of %lld sequences (W=%d A=%d B=%d); %lld steps in all",
             (long long)s->steps_per_epoch, (long long)s->world * s->accum * s->batch, s->world, s->accum, s->batch,
             (long long)sampler_total_steps(s, cfg));
    if (s->dropped)
        vkt_info("data: the last %lld sequences of each epoch's order are dropped (less than one "
                 "global batch)",
                 (long long)s->dropped);
    if (d->stats.n_dup_files)
        vkt_info("data: %lld directory entries name a file already read and were skipped",
                 (long long)d->stats.n_dup_files);
    if (d->stats.n_truncated)
        vkt_warn("data: %lld samples are longer than max_seq_len %d and were truncated",
                 (long long)d->stats.n_truncated, cfg->model.max_seq_len);
    if (d->stats.n_bad_lines)
        vkt_warn("data: %lld malformed lines were skipped (dataset.skip_bad_lines)", (long long)d->stats.n_bad_lines);
}
