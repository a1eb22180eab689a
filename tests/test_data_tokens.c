/* test_data_tokens: llm.c token shards: reading one file and a glob, and
 * every validation error (size, magic, version, count, token range) with
 * its file and byte offset. */
#include "data_testing.h"

static char err[2048];

/* A shard holding tokens[0..n); header fields overridable for bad shards. */
static const char *write_shard(const char *name, int magic, int version, int count, const uint16_t *tokens, int n)
{
    unsigned char buf[1024 + 2 * 64] = {0};
    int32_t h[3] = {magic, version, count};
    memcpy(buf, h, sizeof h);
    memcpy(buf + 1024, tokens, 2 * (size_t)n);
    return test_write(name, buf, 1024 + 2 * n);
}

static int open_tokens(struct data *d, const char *path)
{
    char recipe[1024];
    snprintf(recipe, sizeof recipe,
             "output_dir: o\nmodel: {dim: 8, n_layers: 1, n_heads: 2, max_seq_len: 4, "
             "vocab_size: 1000}\ndataset: {type: tokens, path: '%s'}\n",
             path);
    return test_data_open(d, recipe, "k.yaml", 0, NULL, err, sizeof err);
}

static void expect_error(const char *path, const char *want)
{
    struct data d;
    CHECK(open_tokens(&d, path) == -1, "accepted a bad shard, wanted '%s'", want);
    CHECK_MSG(err, want);
}

int main(void)
{
    test_tmpdir();
    uint16_t a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {7, 8, 999};
    write_shard("s_000.bin", 20240520, 1, 6, a, 6);
    write_shard("s_001.bin", 20240520, 1, 3, b, 3);
    char glob[600];
    snprintf(glob, sizeof glob, "%s/s_*.bin", test_dir);
    struct data d;
    if (open_tokens(&d, glob) == 0) {
        /* One stream 1..8 999: windows [0,5) [4,9). */
        CHECK(d.stats.n_files == 2 && d.n_tok == 9 && d.train.n_seq == 2 && d.train.n_tokens == 8,
              "files %lld tokens %lld seqs %lld", (long long)d.stats.n_files, (long long)d.n_tok,
              (long long)d.train.n_seq);
        struct data_batch bt;
        data_batch_init(&bt, 2, 4);
        int64_t seq[2] = {0, 1};
        data_batch_fill(&d, &d.train, seq, 2, &bt);
        int in1[] = {5, 6, 7, 8}, lab1[] = {6, 7, 8, 999};
        for (int t = 0; t < 4; t++)
            CHECK(bt.inputs[4 + t] == in1[t] && bt.labels[4 + t] == lab1[t] && bt.doc_ids[4 + t] == 0 &&
                      bt.positions[4 + t] == t,
                  "window 1 at %d", t);
        data_batch_free(&bt);
        test_data_close(&d);
    }

    char path[600];
    snprintf(path, sizeof path, "%s", test_write("short.bin", "tiny", 4));
    expect_error(path, "short.bin: 4 bytes, too short for the 1024-byte shard header");
    snprintf(path, sizeof path, "%s", write_shard("magic.bin", 1234, 1, 6, a, 6));
    expect_error(path, "magic.bin: offset 0: magic 1234, expected 20240520");
    snprintf(path, sizeof path, "%s", write_shard("version.bin", 20240520, 2, 6, a, 6));
    expect_error(path, "version.bin: offset 4: version 2, expected 1");
    snprintf(path, sizeof path, "%s", write_shard("count.bin", 20240520, 1, 7, a, 6));
    expect_error(path, "count.bin: offset 8: the header says 7 tokens (1038 bytes) but the file has 1036 bytes");
    uint16_t big[3] = {1, 1000, 2};
    snprintf(path, sizeof path, "%s", write_shard("range.bin", 20240520, 1, 3, big, 3));
    expect_error(path, "range.bin: offset 1026: token 1000 (index 1) is not below model.vocab_size 1000");
    snprintf(path, sizeof path, "%s/none_*.bin", test_dir);
    expect_error(path, "none_*.bin: no files match");
    return test_result("test_data_tokens");
}
