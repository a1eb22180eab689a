/* test_model: the whole model in shaders against the double C reference
 * model (tests/ref/ref_model.c), for llama (untied, GQA; tied with packed
 * documents; sliding windows of 2 and 3 keys) and gpt2 (fused c_attn; with documents): the loss, the valid
 * token count and every parameter gradient after one forward/backward on a
 * batch with ignored labels. Both models get the same random weights (the
 * reference's, rounded to float; GPT-2 Conv1D weights transposed into the
 * internal (out, in) layout).
 *
 * Tolerances: loss relative error < 1e-5; each gradient's normalized error
 * mse(gpu, ref)/mse(ref, 0) < 1e-8 (fp32 against double through a few
 * layers; seen ~1e-12; a wrong formula or index gives errors near 1).
 * Determinism: a second forward/backward gives bit-identical gradients. */
#include <string.h>

#include "gpu_testing.h"
#include "ref_model.h"
#include "vktrain/model.h"
#include "vktrain/ops.h"

static struct gpu *g;

static void copy_weights(struct model *m, struct ref_model *r)
{
    for (int i = 0; i < model_param_count(m); i++) {
        struct model_param *p = model_param(m, i);
        struct ref_param *q = ref_model_param(r, p->name);
        CHECK(q != NULL, "parameter %s is missing from the reference", p->name);
        if (!q)
            continue;
        float *f = vkt_malloc(p->numel * sizeof *f, "weights");
        for (size_t j = 0; j < p->numel; j++) {
            /* internal (out, in) element j = (o, k); HF Conv1D stores (in, out) */
            size_t src = p->hf_transposed ? (j % p->shape[1]) * p->shape[0] + j / p->shape[1] : j;
            q->data[src] = (double)(float)q->data[src];
            f[j] = (float)q->data[src];
        }
        gpu_upload(g, p->w, 0, f, p->numel * sizeof *f);
        free(f);
    }
    CHECK(model_param_count(m) == r->n_params, "%d parameters, reference %d", model_param_count(m), r->n_params);
}

static void check_grads(struct model *m, struct ref_model *r, const char *what)
{
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < model_param_count(m); i++) {
        struct model_param *p = model_param(m, i);
        struct ref_param *q = ref_model_param(r, p->name);
        if (!q)
            continue;
        float *gpu = download_floats(g, p->grad, p->numel);
        double *ref = vkt_malloc(p->numel * sizeof *ref, "grads");
        for (size_t j = 0; j < p->numel; j++)
            ref[j] = q->grad[p->hf_transposed ? (j % p->shape[1]) * p->shape[0] + j / p->shape[1] : j];
        double err = normalized_error(gpu, ref, p->numel);
        CHECK(err < 1e-8, "%s: gradient of %s: normalized error %.3g", what, p->name, err);
        if (err > worst)
            worst = err, worst_name = p->name;
        free(gpu);
        free(ref);
    }
    printf("  %s: worst gradient normalized error %.2g (%s)\n", what, worst, worst_name);
}

/* One forward/backward of B = 2 rows of T tokens. */
static void run(const char *what, const struct ref_model_config *rc, int with_doc, int T)
{
    enum { B = 2, MAX_T = 8 };
    CHECK(T <= MAX_T, "%s: T = %d", what, T);
    struct model_config mc = {
        .arch = rc->arch == REF_ARCH_LLAMA ? MODEL_LLAMA : MODEL_GPT2, .vocab_size = (uint32_t)rc->vocab,
        .dim = (uint32_t)rc->dim, .n_layers = (uint32_t)rc->n_layers, .n_heads = (uint32_t)rc->n_heads,
        .n_kv_heads = (uint32_t)rc->n_kv_heads, .hidden_dim = (uint32_t)rc->hidden_dim,
        .max_seq_len = (uint32_t)rc->max_seq_len, .norm_eps = (float)rc->norm_eps, .rope_theta = rc->rope_theta,
        .tie_embeddings = rc->tied, .init_std = 0.02f, .sliding_window = (uint32_t)rc->sliding_window,
    };
    for (uint32_t l = 0; l < mc.n_layers; l++) {
        if (rc->full_layers >> l & 1)
            vkt_layers_add(&mc.full_layers, l);
        if (rc->nope_layers >> l & 1)
            vkt_layers_add(&mc.nope_layers, l);
    }
    struct ref_model r;
    CHECK(ref_model_init(&r, rc) == 0, "%s: reference config rejected", what);
    ref_model_randomize(&r, 99, 0.3);
    struct model *m = model_create(g, &mc, B);
    copy_weights(m, &r);

    int32_t tokens[B * MAX_T], labels[B * MAX_T], positions[B * MAX_T], doc[B * MAX_T];
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (i * 7 + 3) % rc->vocab;
        labels[i] = i % 5 == 1 ? -100 : (i * 5 + 1) % rc->vocab;
        doc[i] = with_doc ? (i % T >= 3) : 0; /* two documents per row */
        positions[i] = with_doc && i % T >= 3 ? i % T - 3 : i % T;
    }
    int valid = 0;
    for (int i = 0; i < B * T; i++)
        valid += labels[i] != -100;
    double scale = 1.0 / valid, ref_loss = 0;
    int ref_count = 0;
    ref_model_forward(&r, B, T, tokens, labels, positions, with_doc ? doc : NULL, scale, &ref_loss, &ref_count);
    ref_model_backward(&r);

    struct model_batch b = {
        .B = B, .T = T, .tokens = tokens, .labels = labels, .positions = positions, .doc_ids = with_doc ? doc : NULL};
    model_zero_grad(m);
    model_loss_reset(m);
    /* where the weight gradients' tn runs through transposes
     * (op_matmul_tn_scratch), the backward takes that path */
    int transposed = op_matmul_tn_scratch(g, B * (uint32_t)T, mc.dim, mc.dim) > 0;
    int timed = transposed && gpu_profile_start(g);
    model_forward(m, &b, (float)scale);
    model_backward(m);
    if (timed) {
        gpu_submit(g);
        gpu_profile_stop(g);
        CHECK(profile_dispatches(g, "transpose_texel") > 0,
              "%s: no transpose_texel dispatch: the tn path through transposes was not taken", what);
    }
    double loss, count;
    model_read_loss(m, &loss, &count);
    CHECK(count == ref_count, "%s: %g valid tokens, reference %d", what, count, ref_count);
    CHECK(fabs(loss - ref_loss) <= 1e-5 * fabs(ref_loss), "%s: loss %.9g, reference %.9g", what, loss, ref_loss);
    printf("  %s: loss %.7f (reference %.7f), %g tokens\n", what, loss / count, ref_loss / ref_count, count);
    check_grads(m, &r, what);

    /* Determinism: the same step again, bit for bit. */
    struct model_param *p0 = model_param(m, 1);
    float *first = download_floats(g, p0->grad, p0->numel);
    model_zero_grad(m);
    model_forward(m, &b, (float)scale);
    model_backward(m);
    float *second = download_floats(g, p0->grad, p0->numel);
    CHECK(!memcmp(first, second, p0->numel * sizeof(float)), "%s: gradients of %s differ between two runs", what,
          p0->name);
    free(first);
    free(second);
    model_destroy(m);
    ref_model_free(&r);
}

int main(void)
{
    g = test_gpu();
    /* Both kernel families on this device (texel: CPU, tiled: GPU). */
    enum gpu_kernel_class classes[2] = {GPU_KERNELS_TEXEL, GPU_KERNELS_TILED};
    for (int c = 0; c < 2; c++) {
        gpu_set_kernel_class(g, classes[c]);
        struct ref_model_config llama = {REF_ARCH_LLAMA, 37, 16, 2, 4, 2, 24, 8, 1e-5, 10000.0, 0, 0, 0, 0};
        run(c ? "llama untied GQA 4/2 (tiled)" : "llama untied GQA 4/2 (texel)", &llama, 0, 7);
        llama.tied = 1, llama.n_kv_heads = 1;
        run(c ? "llama tied GQA 4/1 packed (tiled)" : "llama tied GQA 4/1 packed (texel)", &llama, 1, 7);
        struct ref_model_config gpt2 = {REF_ARCH_GPT2, 41, 12, 2, 3, 3, 48, 8, 1e-5, 10000.0, 1, 0, 0, 0};
        run(c ? "gpt2 (tiled)" : "gpt2 (texel)", &gpt2, 0, 7);
        run(c ? "gpt2 packed (tiled)" : "gpt2 packed (texel)", &gpt2, 1, 7);
        /* head size 6: the R32F texel kernels */
        struct ref_model_config odd = {REF_ARCH_LLAMA, 37, 18, 1, 3, 3, 24, 8, 1e-5, 10000.0, 0, 0, 0, 0};
        run(c ? "llama head size 6 packed (tiled)" : "llama head size 6 packed (texel)", &odd, 1, 7);
        /* a sliding window of 2 keys and 3 (T = 8, packed: the window
         * within the second document) */
        llama.sliding_window = 2;
        run(c ? "llama sliding window 2 (tiled)" : "llama sliding window 2 (texel)", &llama, 0, 8);
        llama.sliding_window = 3;
        run(c ? "llama sliding window 3 packed (tiled)" : "llama sliding window 3 packed (texel)", &llama, 1, 8);
        /* per layer (Qwen2's max_window_layers, SmolLM3's no_rope_layers):
         * layer 0 global without RoPE, layer 1 windowed with it; then the
         * other way round */
        llama.sliding_window = 2, llama.full_layers = 1, llama.nope_layers = 1;
        run(c ? "llama layer 0 global without RoPE (tiled)" : "llama layer 0 global without RoPE (texel)", &llama, 1,
            8);
        llama.full_layers = 2, llama.nope_layers = 2;
        run(c ? "llama layer 1 global without RoPE (tiled)" : "llama layer 1 global without RoPE (texel)", &llama, 0,
            8);
        llama.sliding_window = 0, llama.full_layers = 0, llama.nope_layers = 0;
        /* dim and hidden 512, 16 rows: on the texel family the weight
         * gradients' tn through a transpose and nn (op_matmul_tn_scratch);
         * every weight within 1 MiB (test_limits runs this under
         * allocation=1M) */
        struct ref_model_config wide = {REF_ARCH_LLAMA, 37, 512, 1, 4, 2, 512, 8, 1e-5, 10000.0, 0, 0, 0, 0};
        run(c ? "llama dim 512 (tiled)" : "llama dim 512, tn through transposes (texel)", &wide, 1, 8);
    }
    gpu_destroy(g);
    return test_result("test_model");
}
