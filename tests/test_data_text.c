/* test_data_text: the text dataset: directory listing, separators, the
 * packed windows with their document ids and positions, unpacked samples
 * padded per micro-batch, label counts and the validation split. */
#include <unistd.h>

#include "data_testing.h"

static char err[2048];

static int open_data(struct data *d, const char *path, int n, char **ov)
{
    char recipe[1024];
    snprintf(recipe, sizeof recipe,
             "output_dir: o\nmodel: {dim: 8, n_layers: 1, n_heads: 2, max_seq_len: 4}\n"
             "dataset: {type: text, path: '%s', separator: '%%', exclude: ['*.dat']}\n",
             path);
    return test_data_open(d, recipe, "t.yaml", n, ov, err, sizeof err);
}

/* Row r of b as arrays to compare against. */
static void check_row(const struct data_batch *b, int r, const int *in, const int *lab, const int *pos, const int *doc,
                      const char *what)
{
    for (int t = 0; t < b->T; t++) {
        size_t o = (size_t)r * b->T + t;
        CHECK(b->inputs[o] == in[t] && b->labels[o] == lab[t] && b->positions[o] == pos[t] && b->doc_ids[o] == doc[t],
              "%s: t=%d got in %d lab %d pos %d doc %d, want %d %d %d %d", what, t, b->inputs[o], b->labels[o],
              b->positions[o], b->doc_ids[o], in[t], lab[t], pos[t], doc[t]);
    }
}

enum { B = 256, E = 257, P = 258, I = -100 };

static void test_packed(void)
{
    /* a.txt: "ab", "cde"; b.txt: "f"; an empty piece and .dat, hidden and
     * linked files are skipped. Stream: B a b E B c d e E B f E (12). */
    test_write("a.txt", "ab\n%\ncde\n%\n\n%\n", -1);
    test_write("b.txt", "f", -1);
    test_write("b.dat", "binary", -1);
    test_write(".hidden", "hidden", -1);
    char link[600], target[600];
    snprintf(link, sizeof link, "%s/c.u8", test_dir);
    snprintf(target, sizeof target, "%s/a.txt", test_dir);
    CHECK(symlink(target, link) == 0, "symlink");

    struct data d;
    if (open_data(&d, test_dir, 0, NULL))
        return;
    CHECK(d.stats.n_files == 2 && d.stats.n_docs == 3 && d.stats.n_dup_files == 1, "files %lld docs %lld dups %lld",
          (long long)d.stats.n_files, (long long)d.stats.n_docs, (long long)d.stats.n_dup_files);
    CHECK(d.n_tok == 12, "tokens %lld", (long long)d.n_tok);
    /* Windows of 5 every 4: [0,5) [4,9) [8,12). */
    CHECK(d.train.n_seq == 3 && d.train.n_tokens == 11, "seqs %lld labels %lld", (long long)d.train.n_seq,
          (long long)d.train.n_tokens);
    struct data_batch b;
    data_batch_init(&b, 3, 4);
    int64_t seq[3] = {0, 1, 2};
    data_batch_fill(&d, &d.train, seq, 3, &b);
    CHECK(b.rows == 3 && b.T == 4 && b.n_valid == 11, "rows %d T %d valid %lld", b.rows, b.T, (long long)b.n_valid);
    check_row(&b, 0, (int[]){B, 'a', 'b', E}, (int[]){'a', 'b', E, B}, (int[]){0, 1, 2, 3}, (int[]){0, 0, 0, 0},
              "window 0");
    /* The first document continues as a segment at position 0. */
    check_row(&b, 1, (int[]){B, 'c', 'd', 'e'}, (int[]){'c', 'd', 'e', E}, (int[]){0, 1, 2, 3}, (int[]){0, 0, 0, 0},
              "window 1");
    check_row(&b, 2, (int[]){E, B, 'f', P}, (int[]){B, 'f', E, I}, (int[]){0, 0, 1, 0}, (int[]){0, 1, 1, 2},
              "window 2, padded");
    data_batch_free(&b);
    test_data_close(&d);
}

static void test_unpacked(void)
{
    char *ov[] = {"dataset.packed=false"};
    struct data d;
    if (open_data(&d, test_dir, 1, ov))
        return;
    /* Documents B a b E (4), B c d e E (5 -> windows of 5 every 4: one, as
     * the rest is a single token), B f E (3). */
    CHECK(d.train.n_seq == 3 && d.train.n_tokens == 3 + 4 + 2, "seqs %lld labels %lld", (long long)d.train.n_seq,
          (long long)d.train.n_tokens);
    struct data_batch b;
    data_batch_init(&b, 2, 4);
    int64_t seq[2] = {0, 2};
    data_batch_fill(&d, &d.train, seq, 2, &b);
    CHECK(b.T == 3 && b.n_valid == 5, "padded to the longest row: T %d valid %lld", b.T, (long long)b.n_valid);
    check_row(&b, 0, (int[]){B, 'a', 'b'}, (int[]){'a', 'b', E}, (int[]){0, 1, 2}, (int[]){0, 0, 0}, "doc 0");
    check_row(&b, 1, (int[]){B, 'f', P}, (int[]){'f', E, I}, (int[]){0, 1, 0}, (int[]){0, 0, 1}, "doc 2, padded");
    data_batch_free(&b);
    test_data_close(&d);
}

static void test_long_and_val(void)
{
    /* One document of 12 tokens, not packed: windows [0,5) [4,9) [8,12). */
    char path[600];
    snprintf(path, sizeof path, "%s", test_write("long.txt", "0123456789", -1));
    char *ov[] = {"dataset.packed=false"};
    struct data d;
    if (open_data(&d, path, 1, ov))
        return;
    CHECK(d.train.n_seq == 3 && d.train.n_tokens == 11 && d.stats.n_truncated == 0,
          "long document: seqs %lld labels %lld", (long long)d.train.n_seq, (long long)d.train.n_tokens);
    struct data_batch b;
    data_batch_init(&b, 4, 4);
    int64_t seq[1] = {1};
    data_batch_fill(&d, &d.train, seq, 1, &b);
    check_row(&b, 0, (int[]){'3', '4', '5', '6'}, (int[]){'4', '5', '6', '7'}, (int[]){0, 1, 2, 3}, (int[]){0, 0, 0, 0},
              "middle window");
    test_data_close(&d);

    /* 20 documents of 5 tokens: 100 tokens, 25 windows; a fifth of them,
     * evenly spaced (2, 7, 12, 17, 22), is the validation split. */
    char text[400] = "";
    for (int i = 0; i < 20; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "d%02d\n%%\n", i);
    snprintf(path, sizeof path, "%s", test_write("docs.txt", text, -1));
    char *val[] = {"dataset.val_fraction=0.2"};
    if (open_data(&d, path, 1, val))
        goto out;
    CHECK(d.train.n_seq == 20 && d.val.n_seq == 5, "train %lld val %lld", (long long)d.train.n_seq,
          (long long)d.val.n_seq);
    CHECK(d.train.n_tokens + d.val.n_tokens == 99, "labels %lld + %lld", (long long)d.train.n_tokens,
          (long long)d.val.n_tokens);
    CHECK(data_val_batches(&d, 2) == 3, "val batches %lld", (long long)data_val_batches(&d, 2));
    data_val_batch(&d, 0, 2, &b);
    CHECK(b.rows == 2 && b.inputs[0] == (int32_t)d.tok_ids[8] && b.inputs[4] == (int32_t)d.tok_ids[28],
          "val rows start at windows 2 and 7");
    data_val_batch(&d, 2, 2, &b);
    CHECK(b.rows == 1 && b.inputs[0] == (int32_t)d.tok_ids[88], "last val batch: %d rows", b.rows);
    test_data_close(&d);
out:
    data_batch_free(&b);
}

int main(void)
{
    test_tmpdir();
    test_packed();
    test_unpacked();
    test_long_and_val();
    return test_result("test_data_text");
}
