/* test_model_memory: the two memory savers of the model against the
 * default model as the oracle, same weights (model_init_random, same seed)
 * and same batch (labels partly −100; with documents for the packed
 * cases), llama untied and tied (packed) and gpt2 (packed), both kernel
 * families.
 *
 * Chunked LM head (model_config.head_rows = 8 over 2 x 13 = 26 rows:
 * chunks of 8, 8, 8, 2) against one chunk of all rows:
 *   kept logits, the loss sum and count: bit for bit (rows are only split);
 *   every gradient but the head's weight: bit for bit (d(xf) rows are
 *     only split, so everything below the head sees the same numbers);
 *   the head's weight gradient (lm_head, or the embedding when tied): it
 *     now accumulates over 4 chunks, a different fp32 summation order, so
 *     normalized error Σ(a−b)²/Σb² < 1e-10 (fp32 reordering gives ~1e-14;
 *     a missing or doubled chunk gives errors near 1);
 *   activation bytes: exactly (26 − 8) x V floats fewer.
 * Activation checkpointing against the default: the loss and every
 * gradient bit for bit (memcmp); one layer more costs one residual stream
 * (rows x C floats) instead of a whole set of activations. */
#include <string.h>

#include "gpu_testing.h"
#include "vktrain/model.h"

enum { B = 2, T = 13, ROWS = B * T, HEAD_ROWS = 8 };
/* GPT-2's vocabulary and width: the head's weight (154 MB) exceeds
 * lavapipe's 128 MiB storage binding limit, so op_matmul splits it too. */
enum { BIG_V = 50304, BIG_C = 768, BIG_T = 40, BIG_HEAD_ROWS = 32 };

static struct gpu *g;

struct result {
    size_t rows;
    double loss, count;
    float *logits;
    float **grads;
    int n_grads;
    size_t act_bytes;
};

/* One forward and backward of B x t tokens (t <= max_seq_len); without
 * the last backward stage (the embeddings') unless embed_backward. */
static struct result run(const struct model_config *c, uint32_t t, int with_doc, int embed_backward)
{
    struct model *m = model_create(g, c, B);
    model_init_random(m, 7);
    model_keep_logits(m, 1);
    size_t rows = (size_t)B * t;
    int32_t *ids = vkt_malloc(sizeof(int32_t) * rows * 4, "batch");
    int32_t *tokens = ids, *labels = ids + rows, *positions = ids + 2 * rows, *doc = ids + 3 * rows;
    for (int i = 0; i < (int)rows; i++) {
        tokens[i] = (i * 7919 + 3) % (int)c->vocab_size;
        labels[i] = i % 5 == 1 ? -100 : (i * 4999 + 1) % (int)c->vocab_size;
        doc[i] = with_doc && i % (int)t >= 5;
        positions[i] = doc[i] ? i % (int)t - 5 : i % (int)t;
    }
    struct model_batch b = {
        .B = B, .T = t, .tokens = tokens, .labels = labels, .positions = positions, .doc_ids = with_doc ? doc : NULL};
    model_forward(m, &b, 1.0f / 17);
    for (int s = 0; s < model_backward_stages(m) - !embed_backward; s++)
        model_backward_stage(m, s);
    free(ids);
    struct result r = {.rows = rows, .act_bytes = model_activation_bytes(m)};
    model_read_loss(m, &r.loss, &r.count);
    r.logits = vkt_malloc(sizeof(float) * rows * c->vocab_size, "logits");
    model_read_logits(m, r.logits);
    r.n_grads = model_param_count(m);
    r.grads = vkt_calloc((size_t)r.n_grads, sizeof *r.grads, "grads");
    for (int i = 0; i < model_param_count(m); i++)
        r.grads[i] = download_floats(g, model_param(m, i)->grad, model_param(m, i)->numel);
    model_destroy(m);
    return r;
}

static void result_free(struct result *r)
{
    for (int i = 0; i < r->n_grads; i++)
        free(r->grads[i]);
    free(r->grads);
    free(r->logits);
}

/* Compares every gradient of got with want: bit for bit, except the head's
 * weight (head_name; NULL: none) within the tolerance above. */
static void compare(const char *what, const struct model_config *c, struct result *got, struct result *want,
                    const char *head_name)
{
    struct model *shape = model_create(g, c, 0); /* the parameter table */
    CHECK(got->loss == want->loss && got->count == want->count, "%s: loss %.9g / %g, default %.9g / %g", what,
          got->loss, got->count, want->loss, want->count);
    CHECK(!memcmp(got->logits, want->logits, sizeof(float) * got->rows * c->vocab_size), "%s: kept logits differ", what);
    int n_bitwise = 0;
    for (int i = 0; i < model_param_count(shape); i++) {
        struct model_param *p = model_param(shape, i);
        if (head_name && !strcmp(p->name, head_name)) {
            double *ref = vkt_malloc(sizeof(double) * p->numel, "reference");
            for (size_t j = 0; j < p->numel; j++)
                ref[j] = want->grads[i][j];
            double err = normalized_error(got->grads[i], ref, p->numel);
            CHECK(err < 1e-10, "%s: gradient of %s: normalized error %.3g", what, p->name, err);
            printf("  %s: %s normalized error %.2g\n", what, p->name, err);
            free(ref);
            continue;
        }
        int same = !memcmp(got->grads[i], want->grads[i], sizeof(float) * p->numel);
        CHECK(same, "%s: gradient of %s differs from the default's", what, p->name);
        n_bitwise += same;
    }
    printf("  %s: loss %.7f, %d gradients bit for bit\n", what, got->loss / got->count, n_bitwise);
    model_destroy(shape);
}

/* head_name: the LM head's weight (lm_head, or the tied embedding). */
static void check_config(const char *name, struct model_config c, int with_doc, const char *head_name)
{
    struct result base = run(&c, T, with_doc, 1);
    c.head_rows = HEAD_ROWS;
    struct result chunked = run(&c, T, with_doc, 1);
    char what[128];
    snprintf(what, sizeof what, "%s, head in chunks of %d rows", name, HEAD_ROWS);
    compare(what, &c, &chunked, &base, head_name);
    /* logits rows are V rounded up to 4 floats apart (V in the reproducible mode) */
    size_t ld = gpu_reproducible(g) ? c.vocab_size : (c.vocab_size + 3) / 4 * 4;
    CHECK(base.act_bytes - chunked.act_bytes == sizeof(float) * (ROWS - HEAD_ROWS) * ld,
          "%s: activation bytes %zu, one chunk %zu", what, chunked.act_bytes, base.act_bytes);

    c.head_rows = 0;
    c.activation_checkpointing = 1;
    struct result ckpt = run(&c, T, with_doc, 1);
    snprintf(what, sizeof what, "%s, activation checkpointing", name);
    compare(what, &c, &ckpt, &base, NULL);

    /* One layer more: one residual stream with checkpointing, a whole set without. */
    c.n_layers++;
    struct result ckpt_more = run(&c, T, with_doc, 1);
    c.activation_checkpointing = 0;
    struct result base_more = run(&c, T, with_doc, 1);
    size_t stream = sizeof(float) * ROWS * c.dim;
    CHECK(ckpt_more.act_bytes - ckpt.act_bytes == stream, "%s: a layer adds %zu activation bytes, not %zu", what,
          ckpt_more.act_bytes - ckpt.act_bytes, stream);
    CHECK(base_more.act_bytes - base.act_bytes > 4 * stream, "%s: a layer adds %zu bytes by default", what,
          base_more.act_bytes - base.act_bytes);
    printf("  %s: %zu activation bytes (default %zu); a layer adds %zu (default %zu)\n", what, ckpt.act_bytes,
           base.act_bytes, stream, base_more.act_bytes - base.act_bytes);
    result_free(&base);
    result_free(&chunked);
    result_free(&ckpt);
    result_free(&ckpt_more);
    result_free(&base_more);
}

/* The head in chunks at GPT-2's vocabulary, texel family: a model with a
 * 1-layer, narrow-MLP body and the full head; chunks of 32 over 80 rows
 * against one chunk, as above, without the embeddings' backward (its
 * kernel binds the whole 154 MB table, over the limit: not this test's
 * subject; wte's gradient is then the head's alone). The default chunk (no test knob) over
 * 1024 rows: its logits buffer, found as the activation bytes above those
 * of the smallest chunk, stays within 128 MiB and under rows x V. */
static void check_large(void)
{
    gpu_set_kernel_class(g, GPU_KERNELS_TEXEL);
    struct model_config c = {
        .arch = MODEL_GPT2, .vocab_size = BIG_V, .dim = BIG_C, .n_layers = 1, .n_heads = 12, .n_kv_heads = 12,
        .hidden_dim = 64, .max_seq_len = BIG_T, .norm_eps = 1e-5f, .init_std = 0.02f, .tie_embeddings = 1,
    };
    struct result base = run(&c, BIG_T, 1, 0);
    c.head_rows = BIG_HEAD_ROWS;
    struct result chunked = run(&c, BIG_T, 1, 0);
    compare("gpt2 V=50304 C=768, head in chunks of 32 rows", &c, &chunked, &base, "wte.weight");
    result_free(&base);
    result_free(&chunked);

    c.max_seq_len = 1024;
    c.head_rows = 0;
    struct model *m = model_create(g, &c, 1);
    size_t logits = (size_t)model_head_rows(m) * sizeof(float) * BIG_V;
    model_destroy(m);
    CHECK(logits <= (size_t)128 << 20 && logits < sizeof(float) * 1024 * BIG_V && logits > 0,
          "default LM-head chunk: %zu bytes of logits for 1024 rows", logits);
    printf("  gpt2 V=50304, 1024 rows: a logits chunk of %zu rows (%zu bytes; all rows: %zu)\n",
           logits / (sizeof(float) * BIG_V), logits, sizeof(float) * 1024 * BIG_V);
}

int main(void)
{
    g = test_gpu();
    enum gpu_kernel_class classes[2] = {GPU_KERNELS_TEXEL, GPU_KERNELS_TILED};
    for (int k = 0; k < 2; k++) {
        gpu_set_kernel_class(g, classes[k]);
        printf("%s kernels\n", k ? "tiled" : "texel");
        struct model_config llama = {
            .arch = MODEL_LLAMA, .vocab_size = 37, .dim = 16, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
            .hidden_dim = 24, .max_seq_len = T, .norm_eps = 1e-5f, .rope_theta = 10000.0, .init_std = 0.3f,
        };
        check_config("llama untied", llama, 0, "lm_head.weight");
        llama.tie_embeddings = 1;
        check_config("llama tied packed", llama, 1, "model.embed_tokens.weight");
        struct model_config gpt2 = {
            .arch = MODEL_GPT2, .vocab_size = 41, .dim = 12, .n_layers = 2, .n_heads = 3, .n_kv_heads = 3,
            .hidden_dim = 48, .max_seq_len = T, .norm_eps = 1e-5f, .init_std = 0.3f, .tie_embeddings = 1,
        };
        check_config("gpt2 packed", gpt2, 1, "wte.weight");
    }
    check_large();
    gpu_destroy(g);
    return test_result("test_model_memory");
}
