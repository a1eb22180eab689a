/* data_batch: sequences into the host arrays a micro-batch uploads.
 * Labels are shifted here, once: a run of tokens t gives inputs t[:-1] and
 * labels t[1:], a label being -100 where its token may not be trained on
 * (prompt tokens of sft_jsonl) and on padding. n_valid counts the other
 * labels: exactly the positions that enter the loss.
 * Owns the batch arrays; never decides which sequences go where. */
#include "vktrain/data.h"

#include <stdlib.h>
#include <string.h>

#include "vktrain/util.h"

void data_batch_init(struct data_batch *b, int rows, int max_seq_len)
{
    size_t n = (size_t)rows * (size_t)max_seq_len;
    memset(b, 0, sizeof *b);
    b->cap_rows = rows;
    b->cap_T = max_seq_len;
    b->inputs = vkt_malloc(n * sizeof(int32_t), "batch inputs");
    b->labels = vkt_malloc(n * sizeof(int32_t), "batch labels");
    b->positions = vkt_malloc(n * sizeof(int32_t), "batch positions");
    b->doc_ids = vkt_malloc(n * sizeof(int32_t), "batch document ids");
    b->seq = vkt_malloc((size_t)rows * sizeof(int64_t), "batch sequences");
}

void data_batch_free(struct data_batch *b)
{
    free(b->inputs);
    free(b->labels);
    free(b->positions);
    free(b->doc_ids);
    free(b->seq);
    memset(b, 0, sizeof *b);
}

static int seq_pairs(const struct data_split *split, int64_t i)
{
    int n = 0;
    for (int64_t r = split->seq_first[i]; r < split->seq_first[i + 1]; r++)
        n += split->run_len[r] - 1;
    return n;
}

/* Row of T: the runs of sequence i, then padding as one more segment. */
static int64_t fill_row(const struct data *d, const struct data_split *split, int64_t i, int T, int32_t *in,
                        int32_t *lab, int32_t *pos, int32_t *doc)
{
    const vkt_token *tok = d->tok_ids;
    int64_t valid = 0;
    int t = 0, seg = -1, p = 0;
    for (int64_t r = split->seq_first[i]; r < split->seq_first[i + 1]; r++) {
        int64_t start = split->run_start[r];
        for (int64_t j = start; j < start + split->run_len[r] - 1; j++, t++) {
            if (j == start || (d->split_at_bos && tok[j] == (vkt_token)d->tok.bos)) {
                seg++;
                p = 0;
            }
            /* ids are below model.vocab_size (an int), so int32 holds them */
            in[t] = (int32_t)tok[j];
            lab[t] = !d->trainable || d->trainable[j + 1] ? (int32_t)tok[j + 1] : DATA_IGNORE;
            valid += lab[t] != DATA_IGNORE;
            pos[t] = p++;
            doc[t] = seg;
        }
    }
    for (p = 0, seg++; t < T; t++, p++) {
        in[t] = d->tok.pad;
        lab[t] = DATA_IGNORE;
        pos[t] = p;
        doc[t] = seg;
    }
    return valid;
}

void data_batch_fill(const struct data *d, const struct data_split *split, const int64_t *seq, int n,
                     struct data_batch *b)
{
    int T = d->cfg->model.max_seq_len;
    if (!d->cfg->dataset.packed) {
        T = 1;
        for (int r = 0; r < n; r++) {
            int len = seq_pairs(split, seq[r]);
            if (len > T)
                T = len;
        }
    }
    if (n > b->cap_rows || T > b->cap_T)
        vkt_fatal("data: a batch of %d x %d does not fit the %d x %d it was made for", n, T, b->cap_rows, b->cap_T);
    b->rows = n;
    b->T = T;
    b->n_valid = 0;
    for (int r = 0; r < n; r++) {
        size_t o = (size_t)r * (size_t)T;
        b->seq[r] = seq[r];
        b->n_valid += fill_row(d, split, seq[r], T, b->inputs + o, b->labels + o, b->positions + o, b->doc_ids + o);
    }
}

void data_train_batch(const struct data *d, struct sampler *s, int64_t step, int rank, int micro, struct data_batch *b)
{
    if (s->batch > b->cap_rows)
        vkt_fatal("data: a batch of %d rows does not fit the %d it was made for", s->batch, b->cap_rows);
    sampler_batch(s, step, rank, micro, b->seq);
    data_batch_fill(d, &d->train, b->seq, s->batch, b);
}

int64_t data_val_batches(const struct data *d, int batch)
{
    return (d->val.n_seq + batch - 1) / batch;
}

void data_val_batch(const struct data *d, int64_t i, int batch, struct data_batch *b)
{
    if (batch > b->cap_rows)
        vkt_fatal("data: a batch of %d rows does not fit the %d it was made for", batch, b->cap_rows);
    int n = 0;
    for (int64_t k = i * batch; k < d->val.n_seq && n < batch; k++)
        b->seq[n++] = k;
    data_batch_fill(d, &d->val, b->seq, n, b);
}
