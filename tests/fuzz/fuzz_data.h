/* fuzz_data: what the dataset targets (fuzz_sft_jsonl, fuzz_tokens) share:
 * a recipe around the input file, and the invariants of a dataset that
 * data_open accepted. Include after fuzz.h. */
#ifndef VKTRAIN_FUZZ_DATA_H
#define VKTRAIN_FUZZ_DATA_H

#include "vktrain/config.h"
#include "vktrain/data.h"

/* The recipe of option set `slot` (below 128): reading `file` (in the
 * scratch folder) as `type`, with the extra YAML lines `extra` (indented
 * under dataset: when they start with two spaces); made on first use, then
 * kept. Loading it must work: it is the harness's own. */
static inline const struct config *fuzz_data_config(unsigned slot, const char *type, const char *file, int max_seq_len,
                                                    int vocab_size, const char *extra)
{
    static struct config cfgs[128];
    static bool made[128];
    char text[2048], path[512], err[2048];
    if (slot >= 128)
        fuzz_fail("recipe slot %u", slot);
    if (made[slot])
        return &cfgs[slot];
    snprintf(text, sizeof text,
             "output_dir: out\n"
             "model: {dim: 8, n_layers: 1, n_heads: 2, max_seq_len: %d, vocab_size: %d}\n"
             "dataset:\n  type: %s\n  path: \"%s\"\n%s",
             max_seq_len, vocab_size, type, fuzz_path(path, sizeof path, file), extra);
    if (config_load_string(&cfgs[slot], text, "fuzz.yaml", 0, NULL, err, sizeof err))
        fuzz_fail("the harness's recipe does not load: %s\n%s", err, text);
    made[slot] = true;
    return &cfgs[slot];
}

/* The sequence lists hold together: runs inside the token store, at most
 * max_seq_len pairs a sequence; every row data_batch_fill makes of them
 * holds ids below vocab_size (labels may be -100), positions below
 * max_seq_len; and the valid labels of the rows add up to the split's
 * n_tokens, which data_split counted on its own. */
static inline void fuzz_data_check_split(const struct data *d, const struct data_split *s, const char *name)
{
    const struct config *cfg = d->cfg;
    int T = cfg->model.max_seq_len, V = cfg->model.vocab_size;
    if (s->n_seq < 0 || (s->n_seq && s->seq_first[0] != 0))
        fuzz_fail("%s: %lld sequences, the first at run %lld", name, (long long)s->n_seq,
                  s->n_seq ? (long long)s->seq_first[0] : 0);
    struct data_batch b;
    data_batch_init(&b, 1, T);
    int64_t valid = 0;
    for (int64_t i = 0; i < s->n_seq; i++) {
        int64_t pairs = 0;
        if (s->seq_first[i + 1] <= s->seq_first[i])
            fuzz_fail("%s: sequence %lld has no run", name, (long long)i);
        for (int64_t r = s->seq_first[i]; r < s->seq_first[i + 1]; r++) {
            if (s->run_len[r] < 2 || s->run_start[r] < 0 || s->run_start[r] + s->run_len[r] > d->n_tok)
                fuzz_fail("%s: run %lld [%lld, +%d) is outside the %lld tokens or shorter than a pair", name,
                          (long long)r, (long long)s->run_start[r], s->run_len[r], (long long)d->n_tok);
            pairs += s->run_len[r] - 1;
        }
        if (pairs > T)
            fuzz_fail("%s: sequence %lld holds %lld pairs, more than max_seq_len %d", name, (long long)i,
                      (long long)pairs, T);
        data_batch_fill(d, s, &i, 1, &b);
        if (b.rows != 1 || b.T < 1 || b.T > T)
            fuzz_fail("%s: sequence %lld filled %d rows of %d", name, (long long)i, b.rows, b.T);
        for (int t = 0; t < b.T; t++) {
            int32_t in = b.inputs[t], lab = b.labels[t], pos = b.positions[t];
            if (in < 0 || in >= V || (lab != DATA_IGNORE && (lab < 0 || lab >= V)) || pos < 0 || pos >= T)
                fuzz_fail("%s: sequence %lld, column %d: input %d, label %d, position %d out of range", name,
                          (long long)i, t, in, lab, pos);
        }
        valid += b.n_valid;
    }
    if (valid != s->n_tokens)
        fuzz_fail("%s: the rows hold %lld valid labels, the split counted %lld", name, (long long)valid,
                  (long long)s->n_tokens);
    data_batch_free(&b);
}

/* Opens the dataset of cfg: an error must come with a message; what opens
 * must hold together, and hold at least one training label (data_open
 * refuses a set without). */
static inline void fuzz_data_open(const struct config *cfg)
{
    struct data d;
    char err[2048] = "";
    if (data_open(&d, cfg, err, sizeof err)) {
        fuzz_refused("data_open", err);
        return;
    }
    if (d.train.n_tokens <= 0)
        fuzz_fail("data_open accepted a training set without labels");
    fuzz_data_check_split(&d, &d.train, "train");
    fuzz_data_check_split(&d, &d.val, "validation");
    data_close(&d);
}

#endif
