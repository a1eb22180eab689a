/* data_split: documents into the fixed list of training sequences.
 *
 *   text/tokens, packed:  the documents are one stream; sequence i is the
 *       window [i*T, i*T + T + 1) of it (the last one shorter), so every
 *       token but the first is a label exactly once.
 *   text, not packed:     the same windows, within each document.
 *   sft_jsonl:            each sample is one run, cut to T + 1 tokens
 *                         (counted in stats.n_truncated); packed: runs are
 *                         packed greedily, in order, while their T pairs fit.
 *
 * The list depends only on the data and the recipe, never on W, A or B.
 * Owns the split arrays; never touches token values except to count labels. */
#include "data_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vktrain/util.h"

struct builder {
    struct data_split *s;
    int64_t cap_seq, cap_run, n_run;
};

static void add_run(struct builder *b, int64_t start, int64_t len)
{
    if (b->n_run == b->cap_run) {
        b->cap_run = b->cap_run ? 2 * b->cap_run : 1024;
        b->s->run_start = vkt_realloc(b->s->run_start, (size_t)b->cap_run * sizeof(int64_t), "runs");
        b->s->run_len = vkt_realloc(b->s->run_len, (size_t)b->cap_run * sizeof(int32_t), "runs");
    }
    b->s->run_start[b->n_run] = start;
    b->s->run_len[b->n_run++] = (int32_t)len;
}

static void builder_init(struct builder *b, struct data_split *s)
{
    memset(b, 0, sizeof *b);
    memset(s, 0, sizeof *s);
    b->s = s;
    b->cap_seq = 1024;
    s->seq_first = vkt_calloc((size_t)b->cap_seq, sizeof(int64_t), "sequences");
}

/* Closes the current sequence: it holds the runs added since the last one. */
static void end_seq(struct builder *b)
{
    struct data_split *s = b->s;
    if (s->n_seq + 2 > b->cap_seq) {
        b->cap_seq *= 2;
        s->seq_first = vkt_realloc(s->seq_first, (size_t)b->cap_seq * sizeof(int64_t), "sequences");
    }
    s->seq_first[++s->n_seq] = b->n_run;
}

static int64_t count_labels(const struct data *d, int64_t start, int64_t len)
{
    if (!d->trainable)
        return len - 1;
    int64_t n = 0;
    for (int64_t j = start + 1; j < start + len; j++)
        n += d->trainable[j];
    return n;
}

static void windows(struct builder *b, int64_t begin, int64_t end, int T)
{
    for (int64_t off = begin; end - off >= 2; off += T) {
        add_run(b, off, end - off < T + 1 ? end - off : T + 1);
        end_seq(b);
    }
}

void data_split_build(struct data *d, const struct data_docs *docs, struct data_split *out)
{
    const struct config *cfg = d->cfg;
    int T = cfg->model.max_seq_len;
    struct builder b;
    builder_init(&b, out);
    if (cfg->dataset.type != DATASET_SFT_JSONL && cfg->dataset.packed) {
        if (docs->n)
            windows(&b, docs->start[0], docs->start[docs->n - 1] + docs->len[docs->n - 1], T);
    } else if (cfg->dataset.type != DATASET_SFT_JSONL) {
        for (int64_t i = 0; i < docs->n; i++)
            windows(&b, docs->start[i], docs->start[i] + docs->len[i], T);
    } else {
        int64_t used = 0; /* pairs in the open packed sequence */
        for (int64_t i = 0; i < docs->n; i++) {
            int64_t len = docs->len[i];
            if (len > T + 1) {
                len = T + 1;
                d->stats.n_truncated++;
            }
            if (cfg->dataset.packed && used && used + len - 1 > T) {
                end_seq(&b);
                used = 0;
            }
            add_run(&b, docs->start[i], len);
            used += len - 1;
            if (!cfg->dataset.packed) {
                end_seq(&b);
                used = 0;
            }
        }
        if (used)
            end_seq(&b);
    }
    for (int64_t r = 0; r < b.n_run; r++)
        out->n_tokens += count_labels(d, out->run_start[r], out->run_len[r]);
}

/* Sequence i of `from` appended to `to`. */
static void copy_seq(const struct data *d, const struct data_split *from, int64_t i, struct builder *to)
{
    for (int64_t r = from->seq_first[i]; r < from->seq_first[i + 1]; r++) {
        add_run(to, from->run_start[r], from->run_len[r]);
        to->s->n_tokens += count_labels(d, from->run_start[r], from->run_len[r]);
    }
    end_seq(to);
}

/* n_val = round(fraction * n) sequences, at least one when fraction > 0 and
 * at most n - 1, picked at floor((j + 1/2) * n / n_val): spread over the
 * whole list (all files), the same for every seed and (W, A, B). */
void data_split_take(const struct data *d, struct data_split *all, double fraction, struct data_split *train,
                     struct data_split *val)
{
    int64_t n = all->n_seq, n_val = (int64_t)llround(fraction * (double)n);
    if (fraction > 0 && n_val == 0)
        n_val = 1;
    if (n_val >= n)
        n_val = n - 1;
    if (n_val <= 0) {
        *train = *all;
        memset(val, 0, sizeof *val);
        return;
    }
    struct builder bt, bv;
    builder_init(&bt, train);
    builder_init(&bv, val);
    int64_t j = 0;
    for (int64_t i = 0; i < n; i++) {
        bool pick = j < n_val && i == (int64_t)(((double)j + 0.5) * (double)n / (double)n_val);
        copy_seq(d, all, i, pick ? &bv : &bt);
        j += pick;
    }
    data_split_free(all);
}

void data_split_free(struct data_split *s)
{
    free(s->seq_first);
    free(s->run_start);
    free(s->run_len);
    memset(s, 0, sizeof *s);
}
