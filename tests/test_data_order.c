/* test_data_order: the data order does not depend on how the global batch
 * is split. For G = 8 and (W, A, B) in (1,1,8) (2,2,2) (4,1,2) (1,8,1)
 * (8,1,1), the multiset of sequences (and of their token rows) of every
 * step is the same; each epoch is a seeded permutation; the tail is
 * dropped; positions round-trip for resume. */
#include "test_util.h"

#include "vktrain/data.h"

static const int splits[5][3] = {{1, 1, 8}, {2, 2, 2}, {4, 1, 2}, {1, 8, 1}, {8, 1, 1}};

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Sorted sequence indices of global step `step` for one (W, A, B). */
static void step_set(struct sampler *s, int64_t step, int64_t *out)
{
    int n = 0;
    for (int r = 0; r < s->world; r++)
        for (int m = 0; m < s->accum; m++) {
            sampler_batch(s, step, r, m, out + n);
            n += s->batch;
        }
    qsort(out, (size_t)n, sizeof *out, cmp_i64);
}

static void test_sampler(void)
{
    char err[512];
    const int64_t n_seq = 203, steps = 3 * (203 / 8) + 2; /* crosses two epoch ends */
    struct sampler ref, s;
    CHECK(sampler_init(&ref, n_seq, 42, true, 1, 1, 8, err, sizeof err) == 0, "%s", err);
    CHECK(ref.steps_per_epoch == 25 && ref.dropped == 3, "spe %lld dropped %lld", (long long)ref.steps_per_epoch,
          (long long)ref.dropped);
    for (int f = 1; f < 5; f++) {
        CHECK(sampler_init(&s, n_seq, 42, true, splits[f][0], splits[f][1], splits[f][2], err, sizeof err) == 0, "%s",
              err);
        for (int64_t step = 0; step < steps; step++) {
            int64_t a[8], b[8];
            step_set(&ref, step, a);
            step_set(&s, step, b);
            CHECK(!memcmp(a, b, sizeof a), "(W,A,B)=(%d,%d,%d) step %lld differs", splits[f][0], splits[f][1],
                  splits[f][2], (long long)step);
        }
        sampler_free(&s);
    }

    /* The assignment rule: position k of a step -> rank (k/B) mod W,
     * micro-batch k/(W*B). With (2,2,2): rank 1, micro 1 holds k = 6, 7. */
    int64_t all[8], mine[2];
    CHECK(sampler_init(&s, n_seq, 42, false, 2, 2, 2, err, sizeof err) == 0, "%s", err);
    sampler_batch(&s, 3, 1, 1, mine);
    CHECK(mine[0] == 3 * 8 + 6 && mine[1] == 3 * 8 + 7, "unshuffled rank 1 micro 1: %lld %lld", (long long)mine[0],
          (long long)mine[1]);
    sampler_free(&s);

    /* Each epoch visits G * steps_per_epoch distinct sequences; epochs and
     * seeds give different orders, the same seed the same. */
    bool seen[203];
    int64_t first[2][8];
    for (int e = 0; e < 2; e++) {
        memset(seen, 0, sizeof seen);
        for (int64_t st = 0; st < ref.steps_per_epoch; st++) {
            sampler_batch(&ref, e * ref.steps_per_epoch + st, 0, 0, all);
            for (int k = 0; k < 8; k++) {
                CHECK(!seen[all[k]], "epoch %d repeats sequence %lld", e, (long long)all[k]);
                seen[all[k]] = true;
            }
            if (st == 0)
                memcpy(first[e], all, sizeof all);
        }
    }
    CHECK(memcmp(first[0], first[1], sizeof first[0]), "epochs 0 and 1 start alike");
    struct sampler again, other;
    sampler_init(&again, n_seq, 42, true, 1, 1, 8, err, sizeof err);
    sampler_init(&other, n_seq, 43, true, 1, 1, 8, err, sizeof err);
    sampler_batch(&again, 0, 0, 0, all);
    CHECK(!memcmp(all, first[0], sizeof all), "same seed, same order");
    sampler_batch(&other, 0, 0, 0, all);
    CHECK(memcmp(all, first[0], sizeof all), "another seed, another order");
    sampler_free(&again);
    sampler_free(&other);

    struct data_pos p = sampler_pos(&ref, 57);
    CHECK(p.epoch == 2 && p.step == 7 && sampler_step(&ref, p) == 57, "position of step 57");
    struct config cfg = {.epochs = 3};
    CHECK(sampler_total_steps(&ref, &cfg) == 75, "epochs * steps per epoch");
    cfg.max_steps = 100;
    CHECK(sampler_total_steps(&ref, &cfg) == 100, "max_steps runs across epochs");
    sampler_free(&ref);

    CHECK(sampler_init(&s, 7, 1, true, 2, 2, 2, err, sizeof err) == -1 &&
              strstr(err, "7 training sequences are fewer than one global batch of 8"),
          "too few: %s", err);
}

/* The same with real rows: the token rows of each step, as a multiset. */
static int cmp_row(const void *a, const void *b)
{
    return memcmp(a, b, 2 * 8 * sizeof(int32_t));
}

static void test_rows(void)
{
    char text[20000] = "", err[1024], recipe[1024];
    for (int i = 0; i < 300; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "doc %d %.*s\n%%\n", i, i % 17, "abcdefghijklmnopq");
    const char *path = test_write("order.txt", text, -1);
    snprintf(recipe, sizeof recipe,
             "output_dir: o\nmodel: {dim: 8, n_layers: 1, n_heads: 2, max_seq_len: 8}\n"
             "dataset: {type: text, path: '%s', separator: '%%'}\nseed: 5\n",
             path);
    struct config cfg;
    struct data d;
    if (config_load_string(&cfg, recipe, "o.yaml", 0, NULL, err, sizeof err) || data_open(&d, &cfg, err, sizeof err)) {
        CHECK(0, "%s", err);
        return;
    }
    int32_t ref[4][8][16], rows[8][16];
    struct data_batch b;
    data_batch_init(&b, 8, 8);
    for (int f = 0; f < 5; f++) {
        struct sampler s;
        CHECK(sampler_init(&s, d.train.n_seq, 5, true, splits[f][0], splits[f][1], splits[f][2], err, sizeof err) == 0,
              "%s", err);
        for (int64_t step = s.steps_per_epoch - 2; step < s.steps_per_epoch + 2; step++) {
            int n = 0;
            int64_t valid = 0;
            for (int r = 0; r < s.world; r++)
                for (int m = 0; m < s.accum; m++) {
                    data_train_batch(&d, &s, step, r, m, &b);
                    valid += b.n_valid;
                    for (int i = 0; i < b.rows; i++, n++) {
                        memcpy(rows[n], b.inputs + i * 8, 8 * sizeof(int32_t));
                        memcpy(rows[n] + 8, b.labels + i * 8, 8 * sizeof(int32_t));
                    }
                }
            qsort(rows, 8, sizeof rows[0], cmp_row);
            int64_t i = step - (s.steps_per_epoch - 2);
            if (f == 0)
                memcpy(ref[i], rows, sizeof rows);
            else
                CHECK(!memcmp(ref[i], rows, sizeof rows), "(W,A,B)=(%d,%d,%d): rows of step %lld differ", splits[f][0],
                      splits[f][1], splits[f][2], (long long)step);
            CHECK(valid > 0, "no labels");
        }
        sampler_free(&s);
    }
    data_batch_free(&b);
    data_close(&d);
    config_free(&cfg);
}

int main(void)
{
    test_tmpdir();
    test_sampler();
    test_rows();
    return test_result("test_data_order");
}
