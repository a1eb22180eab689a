/* test_data_tokens: llm.c token shards: reading one file and a glob, uint16
 * (magic 20240520) and uint32 (20240801) tokens, every validation error
 * (size, magic, version, count, token range) with its file and byte offset;
 * and writing shards (shard_open/write/finish) read back by the reader. */
#include "data_testing.h"

#include <unistd.h>

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

/* The same with uint32 tokens. */
static const char *write_shard32(const char *name, int magic, int version, int count, const uint32_t *tokens, int n)
{
    unsigned char buf[1024 + 4 * 64] = {0};
    int32_t h[3] = {magic, version, count};
    memcpy(buf, h, sizeof h);
    memcpy(buf + 1024, tokens, 4 * (size_t)n);
    return test_write(name, buf, 1024 + 4 * n);
}

static int open_tokens_vocab(struct data *d, const char *path, int vocab)
{
    char recipe[1024];
    snprintf(recipe, sizeof recipe,
             "output_dir: o\nmodel: {dim: 8, n_layers: 1, n_heads: 2, max_seq_len: 4, "
             "vocab_size: %d}\ndataset: {type: tokens, path: '%s'}\n",
             vocab, path);
    return test_data_open(d, recipe, "k.yaml", 0, NULL, err, sizeof err);
}

static int open_tokens(struct data *d, const char *path)
{
    return open_tokens_vocab(d, path, 1000);
}

static void expect_error(const char *path, const char *want)
{
    struct data d;
    CHECK(open_tokens(&d, path) == -1, "accepted a bad shard, wanted '%s'", want);
    CHECK_MSG(err, want);
}

/* uint32 shards: ids past 16 bits, written by shard_* and read back. */
static void test_uint32(void)
{
    uint32_t a[5] = {1, 70000, 3, 131071, 5};
    struct data d;
    const char *p32 = write_shard32("w_000.bin", 20240801, 7, 5, a, 5);
    if (open_tokens_vocab(&d, p32, 131072) == 0) {
        CHECK(d.n_tok == 5, "uint32 shard: %lld tokens", (long long)d.n_tok);
        for (int i = 0; i < 5 && i < d.n_tok; i++)
            CHECK(d.tok_ids[i] == a[i], "uint32 token %d: %u", i, d.tok_ids[i]);
        test_data_close(&d);
    } else {
        CHECK(0, "uint32 shard refused: %s", err);
    }
    expect_error(p32, "w_000.bin: offset 1028: token 70000 (index 1) is not below model.vocab_size 1000");
    char path[600];
    snprintf(path, sizeof path, "%s", write_shard32("v32.bin", 20240801, 1, 5, a, 5));
    expect_error(path, "v32.bin: offset 4: version 1, expected 7 for magic 20240801 (uint32 tokens)");
    snprintf(path, sizeof path, "%s", write_shard32("c32.bin", 20240801, 7, 6, a, 5));
    expect_error(path, "c32.bin: offset 8: the header says 6 tokens (1048 bytes) but the file has 1044 bytes");
    /* the largest count a header holds: its byte size is computed without overflow */
    snprintf(path, sizeof path, "%s", write_shard32("huge32.bin", 20240801, 7, -1, a, 5));
    expect_error(path,
                 "huge32.bin: offset 8: the header says 4294967295 tokens (17179870204 bytes) but the file has 1044 "
                 "bytes");

    /* the writer: both widths, read back; nothing is left on failure */
    for (int width = 2; width <= 4; width += 2) {
        snprintf(path, sizeof path, "%s/written%d.bin", test_dir, width);
        struct shard_writer w;
        vkt_token ids[4] = {7, 65535, 0, 42};
        CHECK(shard_open(&w, path, width, err, sizeof err) == 0, "%s", err);
        CHECK(shard_write(&w, ids, 2, err, sizeof err) == 0 && shard_write(&w, ids + 2, 2, err, sizeof err) == 0,
              "%s", err);
        CHECK(access(path, F_OK) != 0, "the shard appears before it is finished");
        CHECK(shard_finish(&w, err, sizeof err) == 0, "%s", err);
        FILE *f = fopen(path, "rb");
        unsigned char head[12];
        CHECK(f && fread(head, 1, 12, f) == 12, "read back %s", path);
        if (f)
            fclose(f);
        int32_t h[3];
        memcpy(h, head, sizeof h);
        CHECK(h[0] == (width == 2 ? 20240520 : 20240801) && h[1] == (width == 2 ? 1 : 7) && h[2] == 4,
              "header %d %d %d", h[0], h[1], h[2]);
        if (open_tokens_vocab(&d, path, 65536) == 0) {
            CHECK(d.n_tok == 4 && !memcmp(d.tok_ids, ids, sizeof ids), "written shard reads back");
            test_data_close(&d);
        } else {
            CHECK(0, "written shard refused: %s", err);
        }
    }
    struct shard_writer w;
    snprintf(path, sizeof path, "%s/aborted.bin", test_dir);
    CHECK(shard_open(&w, path, 4, err, sizeof err) == 0, "%s", err);
    shard_abort(&w);
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CHECK(access(path, F_OK) != 0 && access(tmp, F_OK) != 0, "an aborted shard leaves nothing");
    snprintf(path, sizeof path, "%s/no/such/dir/x.bin", test_dir);
    CHECK(shard_open(&w, path, 2, err, sizeof err) == -1, "opened a shard in a missing folder");
    CHECK_MSG(err, "x.bin.tmp.");
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
    expect_error(path, "magic.bin: offset 0: magic 1234, expected 20240520 (uint16 tokens) or 20240801 (uint32)");
    snprintf(path, sizeof path, "%s", write_shard("version.bin", 20240520, 2, 6, a, 6));
    expect_error(path, "version.bin: offset 4: version 2, expected 1 for magic 20240520 (uint16 tokens)");
    snprintf(path, sizeof path, "%s", write_shard("count.bin", 20240520, 1, 7, a, 6));
    expect_error(path, "count.bin: offset 8: the header says 7 tokens (1038 bytes) but the file has 1036 bytes");
    uint16_t big[3] = {1, 1000, 2};
    snprintf(path, sizeof path, "%s", write_shard("range.bin", 20240520, 1, 3, big, 3));
    expect_error(path, "range.bin: offset 1026: token 1000 (index 1) is not below model.vocab_size 1000");
    snprintf(path, sizeof path, "%s/none_*.bin", test_dir);
    expect_error(path, "none_*.bin: no files match");
    test_uint32();
    return test_result("test_data_tokens");
}
