/* test_generate: the key/value-cached decode path against the training
 * forward, and the sampling that generation draws with.
 *
 * For llama (GQA, untied, head size 6, padded vocab; and with a sliding
 * window of 5 over 16 positions), llama (tied, MHA) and gpt2, with both
 * kernel families: a sequence filling max_seq_len goes
 * through model_forward (logits kept) and, one token at a time, through
 * decoder_step; the logits at every position must agree with normalized
 * error mse(decode, batch)/mse(batch, 0) < 1e-9 (same fp32 math in another
 * order; seen ~1e-14; a wrong cache row, RoPE position or head mapping
 * gives errors near 1). A reset decoder repeats its logits bit for bit.
 *
 * generate_tokens: greedy output is deterministic and is the argmax of the
 * batch logits of the sequence it produced (teacher forcing); the same seed
 * repeats a sampled output, another seed changes it; it stops at eos and at
 * a full cache. generate_sample: greedy ties go to the lower id, top-k
 * draws only the k largest, and frequencies follow softmax(l/T). */
#include <math.h>
#include <string.h>

#include "gpu_testing.h"
#include "vktrain/generate.h"
#include "vktrain/model.h"

static struct gpu *g;

static struct model *random_model(const struct model_config *c, uint64_t seed)
{
    struct model *m = model_create(g, c, 1);
    model_init_random(m, seed);
    return m;
}

/* Logits (T x V) of the training forward on one sequence. */
static float *batch_logits(struct model *m, const int32_t *tokens, uint32_t T)
{
    uint32_t V = model_config(m)->vocab_size;
    int32_t *labels = vkt_malloc(sizeof *labels * T, "labels"), *pos = vkt_malloc(sizeof *pos * T, "positions");
    for (uint32_t t = 0; t < T; t++)
        labels[t] = -100, pos[t] = (int32_t)t;
    struct model_batch b = {.B = 1, .T = T, .tokens = tokens, .labels = labels, .positions = pos};
    model_keep_logits(m, 1);
    model_forward(m, &b, 1.0f);
    float *out = vkt_malloc(sizeof *out * T * V, "batch logits");
    model_read_logits(m, out);
    free(labels);
    free(pos);
    return out;
}

static void check_decode(const char *what, const struct model_config *c)
{
    struct model *m = random_model(c, 7);
    uint32_t T = c->max_seq_len, V = c->vocab_size;
    int32_t tokens[64];
    uint64_t s = 42;
    for (uint32_t t = 0; t < T; t++)
        tokens[t] = (int32_t)(vkt_splitmix64(&s) % V);
    float *ref = batch_logits(m, tokens, T);
    float *dec = vkt_malloc(sizeof *dec * T * V, "decode logits");
    struct decoder *d = decoder_create(m);
    double worst = 0;
    for (uint32_t t = 0; t < T; t++) {
        CHECK(decoder_position(d) == t, "%s: position %u, expected %u", what, decoder_position(d), t);
        memcpy(dec + (size_t)t * V, decoder_step(d, tokens[t]), sizeof *dec * V);
        double *r = vkt_malloc(sizeof *r * V, "reference row");
        for (uint32_t i = 0; i < V; i++)
            r[i] = ref[(size_t)t * V + i];
        double err = normalized_error(dec + (size_t)t * V, r, V);
        CHECK(err < 1e-9, "%s: logits at position %u: normalized error %.3g", what, t, err);
        worst = err > worst ? err : worst;
        free(r);
    }
    decoder_reset(d);
    int same = 1;
    for (uint32_t t = 0; t < T; t++)
        same &= !memcmp(decoder_step(d, tokens[t]), dec + (size_t)t * V, sizeof *dec * V);
    CHECK(same, "%s: a reset decoder does not repeat its logits bit for bit", what);
    printf("  %s: %u positions, worst normalized logits error %.2g\n", what, T, worst);
    decoder_destroy(d);
    free(dec);
    free(ref);
    model_destroy(m);
}

static void check_generation(const struct model_config *c)
{
    struct model *m = random_model(c, 11);
    struct decoder *d = decoder_create(m);
    uint32_t T = c->max_seq_len, V = c->vocab_size;
    int32_t prompt[3] = {256, 'h', 'i'}, a[64], b[64];
    struct generate_options o = {.max_new_tokens = 8, .temperature = 0, .seed = 1};
    enum generate_stop stop;
    size_t na = generate_tokens(d, prompt, 3, &o, a, &stop);
    size_t nb = generate_tokens(d, prompt, 3, &o, b, &stop);
    CHECK(na == 8 && nb == 8 && stop == GENERATE_STOP_LENGTH, "greedy: %zu and %zu tokens, stop %d", na, nb, stop);
    CHECK(!memcmp(a, b, sizeof *a * na), "greedy generation is not deterministic");

    /* Teacher forcing: each greedy token is the argmax of the batch logits. */
    int32_t seq[11];
    memcpy(seq, prompt, sizeof prompt);
    memcpy(seq + 3, a, sizeof *a * 8);
    float *logits = batch_logits(m, seq, 11);
    for (uint32_t t = 2; t < 10; t++) {
        int32_t best = 0;
        for (uint32_t i = 1; i < V; i++)
            if (logits[(size_t)t * V + i] > logits[(size_t)t * V + best])
                best = (int32_t)i;
        CHECK(best == seq[t + 1], "greedy token %u is %d, the batch forward's argmax %d", t - 2, seq[t + 1], best);
    }
    free(logits);

    /* Sampling: a seed repeats, another seed differs. */
    o.temperature = 1.0f, o.top_k = 50, o.seed = 5;
    na = generate_tokens(d, prompt, 3, &o, a, &stop);
    nb = generate_tokens(d, prompt, 3, &o, b, &stop);
    CHECK(na == nb && !memcmp(a, b, sizeof *a * na), "the same seed gives different samples");
    o.seed = 6;
    nb = generate_tokens(d, prompt, 3, &o, b, &stop);
    CHECK(na != nb || memcmp(a, b, sizeof *a * na), "seeds 5 and 6 give the same 8 samples");

    /* Stop tokens: the first greedy token, as the first or the second of a
     * set, ends the generation at once; a set without it does not. */
    int32_t zero = 0;
    decoder_reset(d);
    int32_t first = generate_sample(decoder_step(d, zero), V, 0, 0, &o.seed);
    int32_t other = first == 1 ? 2 : 1;
    int32_t sets[3][2] = {{first, other}, {other, first}, {other, other}};
    o.temperature = 0, o.n_stop = 2;
    for (int s = 0; s < 3; s++) {
        o.stop_ids = sets[s];
        na = generate_tokens(d, &zero, 1, &o, a, &stop);
        CHECK(s < 2 ? na == 0 && stop == GENERATE_STOP_EOS : na > 0 && a[0] == first,
              "stop ids {%d, %d}, first greedy token %d: %zu tokens, stop %d", sets[s][0], sets[s][1], first, na, stop);
    }

    /* A full cache: T-2 prompt tokens leave room to draw 3. */
    int32_t long_prompt[64] = {0};
    o.n_stop = 0, o.max_new_tokens = 10;
    na = generate_tokens(d, long_prompt, T - 2, &o, a, &stop);
    CHECK(na == 3 && stop == GENERATE_STOP_CONTEXT, "full cache: %zu tokens, stop %d", na, stop);
    CHECK(decoder_position(d) == T, "full cache: position %u", decoder_position(d));
    decoder_destroy(d);
    model_destroy(m);
}

static void check_sampling(void)
{
    uint64_t rng = 3;
    float tie[4] = {0.5f, 2.0f, 2.0f, -1.0f};
    CHECK(generate_sample(tie, 4, 0, 0, &rng) == 1, "greedy does not take the first of tied maxima");
    CHECK(generate_sample(tie, 4, 5.0f, 1, &rng) == 1, "top_k 1 is not greedy");
    CHECK(generate_sample(tie, 3, 0, 0, &rng) == 1 && generate_sample(tie + 2, 2, 0, 0, &rng) == 0, "n limits the ids");

    /* top_k 2 of {0.5, 2, 2, -1}: ids 1 and 2 only, equally often. */
    int count[4] = {0};
    for (int i = 0; i < 4000; i++)
        count[generate_sample(tie, 4, 1.0f, 2, &rng)]++;
    CHECK(count[0] == 0 && count[3] == 0, "top_k 2 drew ids 0 (%d times) or 3 (%d times)", count[0], count[3]);
    CHECK(fabs(count[1] / 4000.0 - 0.5) < 0.04, "top_k 2: id 1 drawn %d of 4000 times", count[1]);

    /* softmax(l/T): logits log 0.2, log 0.8 at T = 1 give 0.8; at T = 2,
     * sqrt(0.8)/(sqrt(0.2)+sqrt(0.8)) = 2/3. */
    float two[2] = {logf(0.2f), logf(0.8f)};
    int hits = 0, hits2 = 0;
    for (int i = 0; i < 8000; i++) {
        hits += generate_sample(two, 2, 1.0f, 0, &rng);
        hits2 += generate_sample(two, 2, 2.0f, 0, &rng);
    }
    CHECK(fabs(hits / 8000.0 - 0.8) < 0.02, "T=1: p(1) = %.3f, want 0.8", hits / 8000.0);
    CHECK(fabs(hits2 / 8000.0 - 2.0 / 3.0) < 0.02, "T=2: p(1) = %.3f, want 0.667", hits2 / 8000.0);
}

int main(void)
{
    g = test_gpu();
    struct model_config llama_gqa = {
        .arch = MODEL_LLAMA,
        .vocab_size = 300,
        .dim = 24,
        .n_layers = 2,
        .n_heads = 4,
        .n_kv_heads = 2,
        .hidden_dim = 40,
        .max_seq_len = 16,
        .norm_eps = 1e-5f,
        .rope_theta = 10000.0,
        .tie_embeddings = 0,
        .init_std = 0.3f,
    };
    struct model_config llama_tied = llama_gqa;
    llama_tied.vocab_size = 259, llama_tied.dim = 32, llama_tied.n_kv_heads = 4, llama_tied.tie_embeddings = 1;
    llama_tied.hidden_dim = 64, llama_tied.rope_theta = 500.0;
    struct model_config llama_window = llama_gqa; /* the cache's first rows leave the window */
    llama_window.sliding_window = 5;
    struct model_config gpt2 = {
        .arch = MODEL_GPT2,
        .vocab_size = 259,
        .dim = 20,
        .n_layers = 2,
        .n_heads = 2,
        .n_kv_heads = 2,
        .hidden_dim = 80,
        .max_seq_len = 16,
        .norm_eps = 1e-5f,
        .tie_embeddings = 1,
        .init_std = 0.3f,
    };
    static const char *class_names[] = {"texel", "tiled"};
    enum gpu_kernel_class native = gpu_kernel_class(g);
    for (int k = 0; k < 2; k++) {
        gpu_set_kernel_class(g, k ? GPU_KERNELS_TILED : GPU_KERNELS_TEXEL);
        char what[64];
        snprintf(what, sizeof what, "llama gqa untied (%s)", class_names[k]);
        check_decode(what, &llama_gqa);
        snprintf(what, sizeof what, "llama tied (%s)", class_names[k]);
        check_decode(what, &llama_tied);
        snprintf(what, sizeof what, "llama sliding window 5 (%s)", class_names[k]);
        check_decode(what, &llama_window);
        snprintf(what, sizeof what, "gpt2 (%s)", class_names[k]);
        check_decode(what, &gpt2);
    }
    gpu_set_kernel_class(g, native);
    check_generation(&llama_gqa);
    check_generation(&gpt2);
    check_sampling();
    gpu_destroy(g);
    return test_result("test_generate");
}
