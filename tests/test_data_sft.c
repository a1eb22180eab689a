/* test_data_sft: the sft_jsonl dataset: both line forms, prompt masking and
 * train_on_input, malformed lines (error with file:line, or skipped and
 * counted), truncation, and greedy packing with per-sample segments. */
#include "data_testing.h"

static char err[2048];

static int open_sft(struct data *d, const char *path, int T, int n, char **ov)
{
    char recipe[1024];
    snprintf(recipe, sizeof recipe,
             "output_dir: o\nmodel: {dim: 8, n_layers: 1, n_heads: 2, max_seq_len: %d}\n"
             "dataset: {type: sft_jsonl, path: '%s'}\n",
             T, path);
    return test_data_open(d, recipe, "s.yaml", n, ov, err, sizeof err);
}

enum { I = -100 };

static const char *const good = "{\"prompt\": \"Q\", \"response\": \"A!\"}\n"
                                "\n"
                                "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"},"
                                " {\"role\": \"assistant\", \"content\": \"yo\"}]}\n";

static void test_masks(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s", test_write("good.jsonl", good, -1));
    struct data d;
    if (open_sft(&d, path, 32, 0, NULL))
        return;
    /* B Q A ! E: labels Q (masked), A, !, E. Then B "user: hi\n"
     * "assistant: " "yo\n" E: only "yo\n" and E are labels. */
    CHECK(d.stats.n_docs == 2 && d.train.n_seq == 2, "samples %lld", (long long)d.stats.n_docs);
    CHECK(d.train.n_tokens == 3 + 4, "label tokens %lld", (long long)d.train.n_tokens);
    struct data_batch b;
    data_batch_init(&b, 2, 32);
    int64_t seq[2] = {0, 1};
    data_batch_fill(&d, &d.train, seq, 2, &b);
    int len1 = 1 + 9 + 11 + 3 + 1 - 1;
    CHECK(b.T == len1 && b.n_valid == 7, "T %d (want %d) valid %lld", b.T, len1, (long long)b.n_valid);
    int want0[] = {I, 'A', '!', 257};
    for (int t = 0; t < 4; t++)
        CHECK(b.labels[t] == want0[t], "sample 0 label %d: %d", t, b.labels[t]);
    for (int t = 4; t < b.T; t++)
        CHECK(b.labels[t] == I && b.inputs[t] == 258 && b.doc_ids[t] == 1, "sample 0 padding at %d", t);
    const int32_t *lab = b.labels + b.T;
    for (int t = 0; t < b.T; t++) {
        bool trained = t >= b.T - 4; /* predicts y, o, \n, EOS */
        CHECK((lab[t] != I) == trained, "messages label %d: %d", t, lab[t]);
    }
    CHECK(lab[b.T - 4] == 'y' && lab[b.T - 1] == 257, "assistant labels");
    data_batch_free(&b);
    test_data_close(&d);

    char *on_input[] = {"dataset.train_on_input=true"};
    if (open_sft(&d, path, 32, 1, on_input))
        return;
    CHECK(d.train.n_tokens == 4 + len1, "train_on_input: %lld labels", (long long)d.train.n_tokens);
    test_data_close(&d);
}

static void test_bad_lines(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s",
             test_write("bad.jsonl",
                        "{\"prompt\": \"a\", \"response\": \"b\"}\n{bad\n{\"prompt\": 1}\n"
                        "{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}\n"
                        "{\"prompt\": \"c\", \"response\": \"d\"}\n",
                        -1));
    struct data d;
    CHECK(open_sft(&d, path, 16, 0, NULL) == -1, "malformed line accepted");
    CHECK_MSG(err, "bad.jsonl:2: invalid JSON: ");
    char *skip[] = {"dataset.skip_bad_lines=true"};
    if (open_sft(&d, path, 16, 1, skip))
        return;
    CHECK(d.stats.n_bad_lines == 3 && d.stats.n_docs == 2, "bad %lld samples %lld", (long long)d.stats.n_bad_lines,
          (long long)d.stats.n_docs);
    test_data_close(&d);

    snprintf(path, sizeof path, "%s", test_write("bad2.jsonl", "{\"prompt\": 1}\n", -1));
    CHECK(open_sft(&d, path, 16, 0, NULL) == -1, "wrong field type accepted");
    CHECK_MSG(err, "bad2.jsonl:1: expected {\"prompt\": str, \"response\": str} or {\"messages\"");
    snprintf(path, sizeof path, "%s",
             test_write("bad3.jsonl", "{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}", -1));
    CHECK(open_sft(&d, path, 16, 0, NULL) == -1, "unknown role accepted");
    CHECK_MSG(err, "bad3.jsonl:1: each message needs \"role\"");
}

static void test_truncate_and_pack(void)
{
    /* Three samples of 5 tokens (4 pairs), one of 11 (cut to T + 1 = 9). */
    char path[600];
    snprintf(path, sizeof path, "%s",
             test_write("pack.jsonl",
                        "{\"prompt\": \"a\", \"response\": \"bc\"}\n"
                        "{\"prompt\": \"d\", \"response\": \"ef\"}\n"
                        "{\"prompt\": \"g\", \"response\": \"hi\"}\n"
                        "{\"prompt\": \"jklm\", \"response\": \"nopqr\"}\n",
                        -1));
    char *packed[] = {"dataset.packed=true"};
    struct data d;
    if (open_sft(&d, path, 8, 1, packed))
        return;
    CHECK(d.stats.n_truncated == 1, "truncated %lld", (long long)d.stats.n_truncated);
    CHECK(d.train.n_seq == 3, "packed sequences %lld", (long long)d.train.n_seq);
    struct data_batch b;
    data_batch_init(&b, 3, 8);
    int64_t seq[3] = {0, 1, 2};
    data_batch_fill(&d, &d.train, seq, 3, &b);
    CHECK(b.T == 8, "packed T %d", b.T);
    int doc0[] = {0, 0, 0, 0, 1, 1, 1, 1}, pos0[] = {0, 1, 2, 3, 0, 1, 2, 3};
    int doc1[] = {0, 0, 0, 0, 1, 1, 1, 1}, pos1[] = {0, 1, 2, 3, 0, 1, 2, 3};
    for (int t = 0; t < 8; t++) {
        CHECK(b.doc_ids[t] == doc0[t] && b.positions[t] == pos0[t], "row 0 at %d", t);
        CHECK(b.doc_ids[8 + t] == doc1[t] && b.positions[8 + t] == pos1[t], "row 1 at %d", t);
        CHECK(b.inputs[16 + t] != 258 && b.doc_ids[16 + t] == 0, "row 2 (truncated) at %d", t);
    }
    CHECK(b.inputs[4] == 256 && b.labels[4] == I && b.labels[5] == 'e', "second sample of row 0");
    CHECK(b.inputs[12] == 258 && b.labels[12] == I, "row 1 pads its second half");
    CHECK(b.n_valid == 3 + 3 + 3 + 4, "valid %lld", (long long)b.n_valid);
    data_batch_free(&b);
    test_data_close(&d);
}

int main(void)
{
    test_tmpdir();
    test_masks();
    test_bad_lines();
    test_truncate_and_pack();
    return test_result("test_data_sft");
}
