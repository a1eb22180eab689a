/* test_lora_model: LoRA in the model (docs/lora.md) on the device, for
 * llama (untied, GQA 4/2, q/k/v biases) and gpt2 (fused c_attn), each with
 * every linear layer adapted (rank 3, alpha 6).
 *   - the table: the adapters are the only trained parameters, the base has
 *     no gradient buffers;
 *   - with B = 0 (a fresh adapter) the logits are the base model's, bit for
 *     bit (the same seed gives the same base);
 *   - gradients: with B random, the adapters' gradients against those the
 *     full model gives for the merged weights W' = W + s·B·A (s =
 *     alpha/rank): dB = s·dW'·Aᵀ, dA = s·Bᵀ·dW' (host, double), normalized
 *     error < 1e-8 (fp32 sums against fp32 sums, seen ~1e-13), and the
 *     losses agree to 1e-6 relative; activation checkpointing gives the
 *     same gradients bit for bit;
 *   - 3 AdamW steps move every adapter and leave every base tensor
 *     bitwise unchanged;
 *   - LoRA dropout 0.1: activation checkpointing gives the same gradients
 *     bit for bit; the batch as B micro-batches of one sequence (sample0
 *     counting on) gives the same gradients to fp32 rounding (normalized
 *     error < 1e-10) while a wrong sample index does not (> 1e-6); the
 *     gradients differ from those without dropout; an evaluation forward
 *     (scale 0) gives the logits without dropout bit for bit;
 *   - model.base_dtype bf16: the base's matrices, the embedding tables
 *     among them (not the norms, biases), are stored in bf16 at 2 bytes per
 *     value; 3 AdamW steps against the fp32 model whose base was rounded to
 *     bf16 first (the oracle): the matmuls and the embedding kernels read
 *     the same values in the same order, so
 *     losses and adapters are expected bitwise equal; checked: losses rel
 *     < 1e-6, adapters within 1e-6 of their scale, and the base, read back,
 *     bitwise the rounded one before and after. */
#include <string.h>

#include "gpu_testing.h"
#include "vktrain/model.h"
#include "vktrain/ops_optim.h"

static struct gpu *g;
enum { B = 2, T = 6 };

static float *download_param(struct model_param *p)
{
    return download_floats(g, p->w, p->numel);
}

static void step(struct model *m, const struct model_batch *b, float scale)
{
    model_zero_grad(m);
    model_loss_reset(m);
    model_forward(m, b, scale);
    model_backward(m);
}

/* `steps` AdamW steps of the trained tensors on batch b; loss[t] the mean
 * loss of step t (NULL: not read). */
static void adamw_steps(struct model *m, const struct model_batch *b, float scale, int steps, double *loss)
{
    struct gpu_buffer **st = vkt_calloc(2 * (size_t)model_param_count(m), sizeof *st, "adam state");
    for (int i = 0; i < 2 * model_param_count(m); i++) {
        st[i] = gpu_buffer_create(g, model_param(m, i / 2)->numel * sizeof(float), "adam");
        gpu_zero(g, st[i]);
    }
    for (int t = 1; t <= steps; t++) {
        step(m, b, scale);
        struct op_adamw_step a = {
            .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .t = t, .grad_scale = 1.0};
        for (int i = 0; i < model_param_count(m); i++) {
            struct model_param *p = model_param(m, i);
            op_adamw(g, p->w, p->grad, st[2 * i], st[2 * i + 1], p->numel, &a);
        }
        gpu_submit(g);
        double sum, count;
        if (loss) {
            model_read_loss(m, &sum, &count);
            loss[t - 1] = sum / count;
        }
    }
    for (int i = 0; i < 2 * model_param_count(m); i++)
        gpu_buffer_destroy(g, st[i]);
    free(st);
}

/* The base weight an adapter belongs to: its PEFT name's module + ".weight". */
static struct model_param *base_of(struct model *m, const struct model_param *a)
{
    char name[128];
    const char *mod = a->name + strlen("base_model.model.");
    if (!strncmp(mod, "transformer.", 12))
        mod += 12;
    snprintf(name, sizeof name, "%.*s.weight", (int)(strstr(mod, ".lora_") - mod), mod);
    return model_param_find(m, name);
}

static void copy_weights(struct model *from, struct model *to)
{
    for (int i = 0; i < model_tensor_count(from); i++) {
        float *w = download_param(model_tensor(from, i));
        gpu_upload(g, model_tensor(to, i)->w, 0, w, model_tensor(from, i)->numel * sizeof *w);
        free(w);
    }
}

/* The worst normalized error between the trained gradients of a and b. */
static double grad_error(struct model *a, struct model *b)
{
    double worst = 0;
    for (int i = 0; i < model_param_count(a); i++) {
        struct model_param *p = model_param(a, i);
        float *x = download_floats(g, p->grad, p->numel), *y = download_floats(g, model_param(b, i)->grad, p->numel);
        double *yd = vkt_malloc(p->numel * sizeof *yd, "gradient");
        for (size_t j = 0; j < p->numel; j++)
            yd[j] = y[j];
        worst = fmax(worst, normalized_error(x, yd, p->numel));
        free(x), free(y), free(yd);
    }
    return worst;
}

/* LoRA dropout on m's weights (m holds the gradients of b without it). */
static void check_dropout(const char *what, struct model_config mc, struct model *m, const struct model_batch *b0,
                          float scale)
{
    struct model_batch b = *b0;
    b.seed = 9, b.step = 4, b.sample0 = 2;
    mc.lora_dropout = 0.1f;
    struct model *md[2];
    for (int k = 0; k < 2; k++) {
        mc.activation_checkpointing = k;
        md[k] = model_create(g, &mc, B);
        copy_weights(m, md[k]);
        step(md[k], &b, scale);
    }
    CHECK(grad_error(md[0], md[1]) == 0, "%s: with dropout, checkpointing changes the gradients", what);
    CHECK(grad_error(md[0], m) > 1e-6, "%s: dropout 0.1 leaves the gradients unchanged", what);

    /* One sequence per micro-batch, sample0 counting on (and, as a control,
     * stuck at the first). */
    for (int wrong = 0; wrong < 2; wrong++) {
        model_zero_grad(md[1]);
        for (int s = 0; s < B; s++) {
            struct model_batch one = b;
            one.B = 1, one.tokens += s * T, one.labels += s * T, one.positions += s * T;
            one.sample0 = b.sample0 + (wrong ? 0 : (uint32_t)s);
            model_forward(md[1], &one, scale);
            model_backward(md[1]);
        }
        double e = grad_error(md[1], md[0]);
        if (wrong)
            CHECK(e > 1e-6, "%s: a wrong sample index gives the same gradients (error %.3g)", what, e);
        else
            CHECK(e < 1e-10, "%s: B micro-batches of one sequence: gradient error %.3g", what, e);
    }

    size_t nl = (size_t)B * T * mc.vocab_size;
    float *l0 = vkt_malloc(nl * sizeof *l0, "logits"), *l1 = vkt_malloc(nl * sizeof *l1, "logits");
    model_keep_logits(md[0], 1);
    model_forward(md[0], &b, 0.0f);
    model_forward(m, &b, 0.0f);
    model_read_logits(md[0], l0);
    model_read_logits(m, l1);
    CHECK(!memcmp(l0, l1, nl * sizeof *l0), "%s: dropout changes an evaluation forward", what);
    free(l0), free(l1);
    model_destroy(md[0]);
    model_destroy(md[1]);
}

/* Every linear layer adapted, rank 3, alpha 6. */
static void adapt_all(struct model_config *mc)
{
    static const char *const llama[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
    static const char *const gpt2[] = {"c_attn", "c_proj", "c_fc"};
    int gpt = mc->arch == MODEL_GPT2;
    mc->lora_rank = 3, mc->lora_alpha = 6.0f, mc->lora_targets = gpt ? gpt2 : llama, mc->lora_n_targets = gpt ? 3 : 7;
}

static void run(const char *what, struct model_config mc)
{
    int gpt = mc.arch == MODEL_GPT2, n_slots = gpt ? 4 : 7;
    struct model *base = model_create(g, &mc, B);
    adapt_all(&mc);
    struct model *m = model_create(g, &mc, B);
    model_init_random(base, 7);
    model_init_random(m, 7);
    float s = mc.lora_alpha / (float)mc.lora_rank;

    CHECK(model_param_count(m) == 2 * n_slots * (int)mc.n_layers, "%s: %d trained tensors, want %d", what,
          model_param_count(m), 2 * n_slots * (int)mc.n_layers);
    for (int i = 0; i < model_param_count(m); i++)
        CHECK(model_param(m, i)->adapter && model_param(m, i)->grad, "%s: %s is trained", what,
              model_param(m, i)->name);
    for (int i = 0; i < model_tensor_count(m); i++)
        CHECK(model_tensor(m, i)->adapter || !model_tensor(m, i)->grad, "%s: the base's %s has a gradient", what,
              model_tensor(m, i)->name);

    int32_t tokens[B * T], labels[B * T], positions[B * T];
    for (int i = 0; i < B * T; i++)
        tokens[i] = (i * 7 + 3) % (int)mc.vocab_size, labels[i] = i % 5 == 1 ? -100 : (i * 5 + 1) % (int)mc.vocab_size,
        positions[i] = i % T;
    struct model_batch b = {.B = B, .T = T, .tokens = tokens, .labels = labels, .positions = positions};
    size_t nl = (size_t)B * T * mc.vocab_size;
    float *l0 = vkt_malloc(nl * sizeof *l0, "logits"), *l1 = vkt_malloc(nl * sizeof *l1, "logits");
    model_keep_logits(base, 1);
    model_keep_logits(m, 1);
    step(base, &b, 0.1f);
    step(m, &b, 0.1f);
    model_read_logits(base, l0);
    model_read_logits(m, l1);
    CHECK(!memcmp(l0, l1, nl * sizeof *l0), "%s: with B = 0 the logits differ from the base model's", what);

    /* B random; the base model gets the merged weights. */
    for (int i = 0; i < model_param_count(m); i++) {
        struct model_param *p = model_param(m, i);
        if (!strstr(p->name, ".lora_B."))
            continue;
        float *r = vkt_malloc(p->numel * sizeof *r, "B");
        for (size_t j = 0; j < p->numel; j++)
            r[j] = (float)(0.2 * sin(0.7 * (double)(j + 13 * (size_t)i)));
        gpu_upload(g, p->w, 0, r, p->numel * sizeof *r);
        free(r);
        struct model_param *pa = model_param(m, i - 1), *w = base_of(m, p), *wb = model_param_find(base, w->name);
        float *A = download_param(pa), *Bm = download_floats(g, p->w, p->numel), *W = download_param(w);
        uint32_t out = w->shape[0], in = w->shape[1], rk = mc.lora_rank;
        for (uint32_t o = 0; o < out; o++)
            for (uint32_t k = 0; k < in; k++) {
                double d = 0;
                for (uint32_t q = 0; q < rk; q++)
                    d += (double)Bm[o * rk + q] * A[q * in + k];
                W[o * in + k] += (float)(s * d);
            }
        gpu_upload(g, wb->w, 0, W, w->numel * sizeof *W);
        free(A), free(Bm), free(W);
    }
    float scale = 1.0f / (float)(B * T);
    step(base, &b, scale);
    step(m, &b, scale);
    double loss0, loss1, c0, c1;
    model_read_loss(base, &loss0, &c0);
    model_read_loss(m, &loss1, &c1);
    CHECK(fabs(loss0 - loss1) <= 1e-6 * fabs(loss0), "%s: loss %.9g, merged model %.9g", what, loss1, loss0);
    double worst = 0;
    for (int i = 0; i + 1 < model_param_count(m); i += 2) {
        struct model_param *pa = model_param(m, i), *pb = model_param(m, i + 1);
        struct model_param *w = model_param_find(base, base_of(m, pa)->name);
        float *A = download_param(pa), *Bm = download_param(pb), *dW = download_floats(g, w->grad, w->numel);
        float *dA = download_floats(g, pa->grad, pa->numel), *dB = download_floats(g, pb->grad, pb->numel);
        uint32_t out = w->shape[0], in = w->shape[1], rk = mc.lora_rank;
        double *wantA = vkt_calloc(pa->numel, sizeof(double), "dA"),
               *wantB = vkt_calloc(pb->numel, sizeof(double), "dB");
        for (uint32_t o = 0; o < out; o++)
            for (uint32_t k = 0; k < in; k++)
                for (uint32_t q = 0; q < rk; q++) {
                    wantB[o * rk + q] += s * (double)dW[o * in + k] * A[q * in + k];
                    wantA[q * in + k] += s * (double)Bm[o * rk + q] * dW[o * in + k];
                }
        double ea = normalized_error(dA, wantA, pa->numel), eb = normalized_error(dB, wantB, pb->numel);
        CHECK(ea < 1e-8 && eb < 1e-8, "%s: %s: gradient errors %.3g (A), %.3g (B)", what, pa->name, ea, eb);
        worst = fmax(worst, fmax(ea, eb));
        free(A), free(Bm), free(dW), free(dA), free(dB), free(wantA), free(wantB);
    }
    printf("  %s: loss %.7f, worst adapter gradient normalized error %.2g\n", what, loss1 / c1, worst);

    /* Activation checkpointing: the same gradients, bit for bit. */
    struct model_config ck = mc;
    ck.activation_checkpointing = 1;
    struct model *mk = model_create(g, &ck, B);
    copy_weights(m, mk);
    step(mk, &b, scale);
    for (int i = 0; i < model_param_count(m); i++) {
        struct model_param *p = model_param(m, i);
        float *a = download_floats(g, p->grad, p->numel), *c = download_floats(g, model_param(mk, i)->grad, p->numel);
        CHECK(!memcmp(a, c, p->numel * sizeof *a), "%s: %s: checkpointing changes the gradient", what, p->name);
        free(a), free(c);
    }
    model_destroy(mk);
    check_dropout(what, mc, m, &b, scale);

    /* AdamW steps: the adapters move, the base stays bitwise. */
    float **before = vkt_calloc((size_t)model_tensor_count(m), sizeof *before, "weights");
    for (int i = 0; i < model_tensor_count(m); i++)
        before[i] = download_param(model_tensor(m, i));
    adamw_steps(m, &b, scale, 3, NULL);
    for (int i = 0; i < model_tensor_count(m); i++) {
        struct model_param *p = model_tensor(m, i);
        float *w = download_param(p);
        int same = !memcmp(w, before[i], p->numel * sizeof *w);
        CHECK(p->adapter ? !same : same, "%s: %s %s", what, p->name, p->adapter ? "did not move" : "(frozen) changed");
        free(w);
        free(before[i]);
    }
    free(before), free(l0), free(l1);
    model_destroy(m);
    model_destroy(base);
}

static void run_bf16(const char *what, struct model_config mc)
{
    adapt_all(&mc);
    struct model *ref = model_create(g, &mc, B);
    mc.base_bf16 = 1;
    struct model *m = model_create(g, &mc, B);
    model_init_random(ref, 7);
    /* The oracle's base rounded to bf16 (in fp32), B random; m gets the same values. */
    size_t matrices = 0, bytes16 = 0, bytes32 = 0;
    float **base = vkt_calloc((size_t)model_tensor_count(m), sizeof *base, "weights");
    for (int i = 0; i < model_tensor_count(m); i++) {
        struct model_param *p = model_tensor(ref, i), *q = model_tensor(m, i);
        float *w = vkt_malloc(p->numel * sizeof *w, "weights");
        model_param_download(ref, p, w);
        if (strstr(p->name, ".lora_B."))
            for (size_t j = 0; j < p->numel; j++)
                w[j] = (float)(0.2 * sin(0.7 * (double)(j + 13 * (size_t)i)));
        /* every frozen matrix: the linear weights, the LM head and the
         * embedding tables (gpt2's positions too) */
        int matrix = !p->adapter && p->ndim == 2;
        CHECK(q->bf16 == matrix, "%s: %s is %s, want %s", what, q->name, q->bf16 ? "bf16" : "fp32",
              matrix ? "bf16" : "fp32");
        if (q->bf16) {
            uint16_t *h = vkt_malloc(p->numel * sizeof *h, "bf16");
            vkt_bf16_round(h, w, p->numel);
            vkt_bf16_widen(w, h, p->numel);
            free(h);
            matrices++;
        }
        bytes16 += gpu_buffer_size(q->w), bytes32 += gpu_buffer_size(p->w);
        model_param_upload(ref, p, w);
        model_param_upload(m, q, w);
        base[i] = w;
    }
    printf("  %s, base_dtype bf16: %zu matrices in bf16, weights %zu bytes (fp32: %zu)\n", what, matrices, bytes16,
           bytes32);
    int32_t tokens[B * T], labels[B * T], positions[B * T];
    for (int i = 0; i < B * T; i++)
        tokens[i] = (i * 7 + 3) % (int)mc.vocab_size, labels[i] = (i * 5 + 1) % (int)mc.vocab_size,
        positions[i] = i % T;
    struct model_batch b = {.B = B, .T = T, .tokens = tokens, .labels = labels, .positions = positions};
    double want[3], got[3];
    adamw_steps(ref, &b, 1.0f / (B * T), 3, want);
    adamw_steps(m, &b, 1.0f / (B * T), 3, got);
    int bitwise = 1;
    for (int t = 0; t < 3; t++) {
        CHECK(fabs(got[t] - want[t]) <= 1e-6 * fabs(want[t]), "%s: step %d loss %.9g, with the rounded fp32 base %.9g",
              what, t + 1, got[t], want[t]);
        bitwise &= got[t] == want[t];
    }
    for (int i = 0; i < model_tensor_count(m); i++) {
        struct model_param *p = model_tensor(ref, i), *q = model_tensor(m, i);
        float *a = vkt_malloc(p->numel * sizeof *a, "weights"), *c = vkt_malloc(p->numel * sizeof *c, "weights");
        model_param_download(ref, p, a);
        model_param_download(m, q, c);
        double worst = 0, scale = 0;
        for (size_t j = 0; j < p->numel; j++)
            worst = fmax(worst, fabs((double)a[j] - c[j])), scale = fmax(scale, fabs(a[j]));
        bitwise &= !memcmp(a, c, p->numel * sizeof *a);
        if (p->adapter)
            CHECK(worst <= 1e-6 * scale, "%s: %s differs from the oracle's by %.3g (scale %.3g)", what, p->name, worst,
                  scale);
        else
            CHECK(!memcmp(c, base[i], p->numel * sizeof *c), "%s: the base's %s changed", what, q->name);
        free(a), free(c), free(base[i]);
    }
    printf("  %s, base_dtype bf16: losses %.7f %.7f %.7f, %s the oracle's\n", what, got[0], got[1], got[2],
           bitwise ? "bit for bit" : "close to (not bitwise)");
    free(base);
    model_destroy(m);
    model_destroy(ref);
}

int main(void)
{
    g = test_gpu();
    enum gpu_kernel_class classes[2] = {GPU_KERNELS_TEXEL, GPU_KERNELS_TILED};
    for (int c = 0; c < 2; c++) {
        gpu_set_kernel_class(g, classes[c]);
        struct model_config llama = {.arch = MODEL_LLAMA,
                                     .vocab_size = 37,
                                     .dim = 16,
                                     .n_layers = 2,
                                     .n_heads = 4,
                                     .n_kv_heads = 2,
                                     .hidden_dim = 24,
                                     .max_seq_len = 8,
                                     .norm_eps = 1e-5f,
                                     .rope_theta = 10000.0,
                                     .init_std = 0.3f,
                                     .qkv_bias = 1};
        run(c ? "llama (tiled)" : "llama (texel)", llama);
        run_bf16(c ? "llama (tiled)" : "llama (texel)", llama);
        struct model_config gpt2 = {.arch = MODEL_GPT2,
                                    .vocab_size = 41,
                                    .dim = 12,
                                    .n_layers = 2,
                                    .n_heads = 3,
                                    .n_kv_heads = 3,
                                    .hidden_dim = 48,
                                    .max_seq_len = 8,
                                    .norm_eps = 1e-5f,
                                    .tie_embeddings = 1,
                                    .init_std = 0.3f};
        run(c ? "gpt2 (tiled)" : "gpt2 (texel)", gpt2);
        run_bf16(c ? "gpt2 (tiled)" : "gpt2 (texel)", gpt2);
    }
    gpu_destroy(g);
    return test_result("test_lora_model");
}
