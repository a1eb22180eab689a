/*
 * test_ref_forward.c — checks that the C reference's forward passes compute
 * the right function (the gradient check only proves each backward matches
 * its forward): small hand-computed values, and properties that pin down the
 * conventions — Linear vs Conv1D layouts, RoPE's rotate_half pairing, the
 * causal and document masks, grouped-query head sharing, the Hugging Face
 * parameter table and which tensor each name drives, GPT-2's [q | k | v]
 * split, and that a packed batch with document ids and restarting
 * positions gives exactly the logits of its documents run one by one.
 *
 * Tolerances: hand-computed values 1e-14 absolute; equalities between two
 * computations of the same math (packed vs separate) 1e-12 absolute.
 * Prints one line per check; exits non-zero on any failure.
 */
#include "ref_model.h"
#include "ref_ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures;
static struct ref_rng rng;

static void report(const char *name, int ok)
{
    if (!ok)
        failures++;
    printf("forward %-52s %s\n", name, ok ? "ok" : "FAIL");
}

static int close_to(double a, double b, double tol)
{
    return fabs(a - b) <= tol;
}

static int all_close(const double *a, const double *b, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++) {
        if (!close_to(a[i], b[i], tol))
            return 0;
    }
    return 1;
}

static void fill_randn(double *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        x[i] = ref_rng_normal(&rng);
    }
}

static void check_linear_layouts(void)
{
    // x (1,2) = [1 2]; Linear W (3,2) rows [1 0], [0 1], [1 1]; bias [10 20 30]
    const double x[2] = {1, 2}, w[6] = {1, 0, 0, 1, 1, 1}, b[3] = {10, 20, 30};
    double y[3];
    ref_matmul_forward(y, x, w, b, 1, 2, 3);
    report("matmul: y = x.W^T + b, W (out,in)", y[0] == 11 && y[1] == 22 && y[2] == 33);

    // the same map as a Conv1D weight (2,3) = Wᵀ
    const double wt[6] = {1, 0, 1, 0, 1, 1};
    double z[3];
    ref_conv1d_forward(z, x, wt, b, 1, 2, 3);
    report("conv1d: y = x.W + b, W (in,out)", z[0] == 11 && z[1] == 22 && z[2] == 33);
}

static void check_norms_and_activations(void)
{
    const double x[2] = {3, 4}, w[2] = {1, 2}, b[2] = {0.5, -0.5};
    double y[2], mean, rstd;
    ref_rmsnorm_forward(y, &rstd, x, w, 1, 2, 0.0);
    double r = 1.0 / sqrt(12.5);
    report("rmsnorm([3,4], w=[1,2]) = [3r, 8r], r = 12.5^-0.5",
           close_to(y[0], 3 * r, 1e-14) && close_to(y[1], 8 * r, 1e-14) && close_to(rstd, r, 1e-14));
    ref_layernorm_forward(y, &mean, &rstd, x, w, b, 1, 2, 0.0);
    report("layernorm([3,4], w=[1,2], b) = [-1+0.5, 2-0.5]",
           close_to(y[0], -0.5, 1e-14) && close_to(y[1], 1.5, 1e-14) && mean == 3.5 && close_to(rstd, 2.0, 1e-14));

    const double gx[3] = {0, 1, -2};
    double gy[3];
    ref_gelu_forward(gy, gx, 3);
    report("gelu_tanh(0, 1, -2)",
           gy[0] == 0 && close_to(gy[1], 0.8411919906082768, 1e-14) && close_to(gy[2], -0.04540230591222494, 1e-14));
    const double gate[2] = {1, 0}, up[2] = {2, 5};
    double h[2];
    ref_swiglu_forward(h, gate, up, 2);
    report("swiglu: silu(1)*2, silu(0)*5", close_to(h[0], 2 * 0.7310585786300049, 1e-14) && h[1] == 0);
}

static void check_rope(void)
{
    // hd = 4: pairs (0,2) at inv_freq 1 and (1,3) at inv_freq 10000^(-1/2) = 0.01
    const double x[4] = {1, 2, 3, 4};
    const int32_t pos[1] = {3};
    double y[4];
    ref_rope_forward(y, x, pos, 1, 1, 4, 10000.0);
    double a = 3.0, b = 0.03;
    int ok = close_to(y[0], 1 * cos(a) - 3 * sin(a), 1e-14) && close_to(y[2], 3 * cos(a) + 1 * sin(a), 1e-14) &&
             close_to(y[1], 2 * cos(b) - 4 * sin(b), 1e-14) && close_to(y[3], 4 * cos(b) + 2 * sin(b), 1e-14);
    report("rope: rotate_half pairs (j, j+hd/2), theta^(-2j/hd)", ok);

    // q(m)·k(n) depends on m − n only
    double q[8], k[8], qr[8], kr[8];
    fill_randn(q, 8);
    fill_randn(k, 8);
    const int32_t p1[2] = {7, 2}, p2[2] = {12, 7};
    double d1 = 0, d2 = 0;
    ref_rope_forward(qr, q, &p1[0], 1, 1, 8, 10000.0);
    ref_rope_forward(kr, k, &p1[1], 1, 1, 8, 10000.0);
    for (int i = 0; i < 8; i++)
        d1 += qr[i] * kr[i];
    ref_rope_forward(qr, q, &p2[0], 1, 1, 8, 10000.0);
    ref_rope_forward(kr, k, &p2[1], 1, 1, 8, 10000.0);
    for (int i = 0; i < 8; i++)
        d2 += qr[i] * kr[i];
    report("rope: q(m).k(n) depends only on m - n", close_to(d1, d2, 1e-12));
}

static void check_attention(void)
{
    // hand-computed: T = 2, hd = 1: out[0] = v0, out[1] = softmax(q1·k0, q1·k1)·v
    const double q[2] = {0.3, 2.0}, k[2] = {1.0, -0.5}, v[2] = {4.0, -1.0};
    double out[2], probs[4];
    ref_attention_forward(out, probs, q, k, v, NULL, 1, 2, 1, 1, 1);
    double e0 = exp(2.0 * 1.0), e1 = exp(2.0 * -0.5);
    report("attention: hand-computed T=2, masked prob exactly 0",
           out[0] == 4.0 && probs[1] == 0.0 && close_to(out[1], (e0 * 4.0 - e1) / (e0 + e1), 1e-14));

    // causality: changing the last token's k and v changes no earlier output
    enum { T = 6, H = 4, KVH = 2, hd = 3 };
    double qa[T * H * hd], ka[T * KVH * hd], va[T * KVH * hd], o1[T * H * hd], o2[T * H * hd], p[H * T * T];
    fill_randn(qa, T * H * hd);
    fill_randn(ka, T * KVH * hd);
    fill_randn(va, T * KVH * hd);
    ref_attention_forward(o1, p, qa, ka, va, NULL, 1, T, H, KVH, hd);
    ka[(T - 1) * KVH * hd] += 1.0;
    va[(T - 1) * KVH * hd + 1] += 1.0;
    ref_attention_forward(o2, p, qa, ka, va, NULL, 1, T, H, KVH, hd);
    report("attention: causal (future keys never seen)",
           memcmp(o1, o2, (T - 1) * H * hd * sizeof(double)) == 0 && o1[(T - 1) * H * hd] != o2[(T - 1) * H * hd]);

    // grouped-query: KVH = 2 equals KVH = H = 4 with each kv head repeated for its 2 query heads
    double kf[T * H * hd], vf[T * H * hd], of[T * H * hd];
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < H; h++) {
            for (int i = 0; i < hd; i++) {
                kf[(t * H + h) * hd + i] = ka[(t * KVH + h / 2) * hd + i];
                vf[(t * H + h) * hd + i] = va[(t * KVH + h / 2) * hd + i];
            }
        }
    }
    ref_attention_forward(of, p, qa, kf, vf, NULL, 1, T, H, H, hd);
    report("attention: GQA head h uses kv head h/(H/KVH)", all_close(of, o2, T * H * hd, 1e-14));

    // block-causal: documents [0,0,0,0 | 1,1] equal two separate sequences
    const int32_t doc[T] = {3, 3, 3, 3, 9, 9};
    double op[T * H * hd], os[T * H * hd], ps[H * T * T];
    ref_attention_forward(op, p, qa, ka, va, doc, 1, T, H, KVH, hd);
    ref_attention_forward(os, ps, qa, ka, va, NULL, 1, 4, H, KVH, hd);
    ref_attention_forward(os + 4 * H * hd, ps, qa + 4 * H * hd, ka + 4 * KVH * hd, va + 4 * KVH * hd, NULL, 1, 2, H,
                          KVH, hd);
    report("attention: doc ids = documents run separately", all_close(op, os, T * H * hd, 1e-14));
}

/* The table of a 1-layer model, in order, as Hugging Face names and shapes. */
static void check_table(enum ref_arch arch, int tied, const char *const *names, const int (*shapes)[2], int n)
{
    struct ref_model_config cfg = {arch, 11, 8, 1, 2, arch == REF_ARCH_LLAMA ? 1 : 2, 12, 16, 1e-5, 10000.0, tied, 0, 0, 0};
    struct ref_model m;
    int ok = ref_model_init(&m, &cfg) == 0 && m.n_params == n;
    size_t total = 0;
    for (int i = 0; ok && i < n; i++) {
        struct ref_param *p = &m.params[i];
        ok = strcmp(p->hf_name, names[i]) == 0 && p->shape[0] == shapes[i][0] && p->shape[1] == shapes[i][1] &&
             ref_model_param(&m, names[i]) == p;
        total += p->numel;
    }
    ok = ok && total == m.num_parameters && (tied ? m.w.lm_head == m.w.wte : m.w.lm_head != m.w.wte);
    // each name points at the tensor the forward uses for it
    const struct ref_layer_weights *lw = &m.w.layers[0];
    const double *bound[16];
    if (arch == REF_ARCH_LLAMA) {
        const double *b[12] = {m.w.wte,     lw->norm1_w, lw->wq,   lw->wk,     lw->wv,      lw->wo,
                               lw->norm2_w, lw->w_gate,  lw->w_up, lw->w_down, m.w.normf_w, m.w.lm_head};
        memcpy(bound, b, sizeof b);
    } else {
        const double *b[16] = {m.w.wte,    m.w.wpe,    lw->norm1_w, lw->norm1_b, lw->wqkv, lw->bqkv,
                               lw->wo,     lw->bo,     lw->norm2_w, lw->norm2_b, lw->w_fc, lw->b_fc,
                               lw->w_proj, lw->b_proj, m.w.normf_w, m.w.normf_b};
        memcpy(bound, b, sizeof b);
    }
    for (int i = 0; ok && i < n; i++) {
        ok = m.params[i].data == bound[i] && m.params[i].grad - m.grads_memory == bound[i] - m.params_memory;
    }
    char name[64];
    snprintf(name, sizeof name, "table: %s%s HF names and shapes", arch == REF_ARCH_LLAMA ? "llama" : "gpt2",
             tied ? " tied" : " untied");
    report(name, ok);
    ref_model_free(&m);
}

static void check_tables(void)
{
    // dim 8, 2 heads (hd 4), 1 kv head for llama, hidden 12, vocab 11, max_seq_len 16
    static const char *const llama[] = {"model.embed_tokens.weight",
                                        "model.layers.0.input_layernorm.weight",
                                        "model.layers.0.self_attn.q_proj.weight",
                                        "model.layers.0.self_attn.k_proj.weight",
                                        "model.layers.0.self_attn.v_proj.weight",
                                        "model.layers.0.self_attn.o_proj.weight",
                                        "model.layers.0.post_attention_layernorm.weight",
                                        "model.layers.0.mlp.gate_proj.weight",
                                        "model.layers.0.mlp.up_proj.weight",
                                        "model.layers.0.mlp.down_proj.weight",
                                        "model.norm.weight",
                                        "lm_head.weight"};
    static const int llama_shapes[][2] = {{11, 8}, {8, 0},  {8, 8},  {4, 8},  {4, 8}, {8, 8},
                                          {8, 0},  {12, 8}, {12, 8}, {8, 12}, {8, 0}, {11, 8}};
    check_table(REF_ARCH_LLAMA, 0, llama, llama_shapes, 12);
    check_table(REF_ARCH_LLAMA, 1, llama, llama_shapes, 11);
    static const char *const gpt2[] = {"wte.weight",
                                       "wpe.weight",
                                       "h.0.ln_1.weight",
                                       "h.0.ln_1.bias",
                                       "h.0.attn.c_attn.weight",
                                       "h.0.attn.c_attn.bias",
                                       "h.0.attn.c_proj.weight",
                                       "h.0.attn.c_proj.bias",
                                       "h.0.ln_2.weight",
                                       "h.0.ln_2.bias",
                                       "h.0.mlp.c_fc.weight",
                                       "h.0.mlp.c_fc.bias",
                                       "h.0.mlp.c_proj.weight",
                                       "h.0.mlp.c_proj.bias",
                                       "ln_f.weight",
                                       "ln_f.bias"};
    static const int gpt2_shapes[][2] = {{11, 8}, {16, 8}, {8, 0},  {8, 0},  {8, 24}, {24, 0}, {8, 8}, {8, 0},
                                         {8, 0},  {8, 0},  {8, 12}, {12, 0}, {12, 8}, {8, 0},  {8, 0}, {8, 0}};
    check_table(REF_ARCH_GPT2, 1, gpt2, gpt2_shapes, 16);

    struct ref_model m;
    struct ref_model_config bad = {REF_ARCH_GPT2, 11, 8, 1, 2, 2, 12, 16, 1e-5, 0.0, 0, 0, 0, 0};
    int rejected = ref_model_init(&m, &bad) != 0;
    bad = (struct ref_model_config){REF_ARCH_LLAMA, 11, 6, 1, 2, 2, 12, 16, 1e-5, 10000.0, 0, 0, 0, 0}; // hd 3
    rejected = rejected && ref_model_init(&m, &bad) != 0;
    bad.dim = 8;
    bad.n_kv_heads = 3;
    rejected = rejected && ref_model_init(&m, &bad) != 0;
    report("config: untied gpt2, odd head_dim, bad KVH rejected", rejected);
}

/* A packed sequence of two documents (doc ids, positions restarting) gives the
 * logits and loss of the two documents run as separate sequences. */
static void check_packing(enum ref_arch arch)
{
    struct ref_model_config cfg = {
        arch, 11, 16, 2, 4, arch == REF_ARCH_LLAMA ? 2 : 4, 24, 8, 1e-5, 10000.0, arch == REF_ARCH_GPT2, 0, 0, 0};
    struct ref_model m;
    ref_model_init(&m, &cfg);
    ref_model_randomize(&m, 7, 0.5);
    enum { T = 7, T1 = 4, V = 11 };
    const int32_t tokens[T] = {1, 5, 9, 2, 3, 3, 10}, labels[T] = {5, 9, 2, -100, 3, 10, 4};
    const int32_t pos[T] = {0, 1, 2, 3, 0, 1, 2}, doc[T] = {0, 0, 0, 0, 1, 1, 1};
    double packed[T * V], loss_packed, loss1, loss2;
    int count;
    int rc = ref_model_forward(&m, 1, T, tokens, labels, pos, doc, 1.0, &loss_packed, &count);
    memcpy(packed, m.acts.logits, sizeof packed);
    rc |= ref_model_forward(&m, 1, T1, tokens, labels, NULL, NULL, 1.0, &loss1, &count);
    int ok = all_close(packed, m.acts.logits, T1 * V, 1e-12);
    rc |= ref_model_forward(&m, 1, T - T1, tokens + T1, labels + T1, NULL, NULL, 1.0, &loss2, &count);
    ok = ok && all_close(packed + T1 * V, m.acts.logits, (T - T1) * V, 1e-12);
    ok = ok && close_to(loss_packed, loss1 + loss2, 1e-12) && rc == 0;

    // bad inputs are refused, not read out of bounds
    const int32_t bad_token[1] = {V}, bad_pos[1] = {8}, ok_token[1] = {0};
    ok = ok && ref_model_forward(&m, 1, 1, bad_token, NULL, NULL, NULL, 1.0, &loss1, &count) != 0;
    ok = ok && ref_model_forward(&m, 1, 1, ok_token, NULL, bad_pos, NULL, 1.0, &loss1, &count) != 0;
    report(arch == REF_ARCH_LLAMA ? "model llama: packed docs = separate sequences"
                                  : "model gpt2: packed docs = separate sequences",
           ok);
    ref_model_free(&m);
}

/* GPT-2 splits c_attn's output as [q | k | v]. With the k slice's weights 0
 * and its bias a constant u, every score q_t·u is the same for all keys, so
 * attention is uniform over the allowed keys (a q/k mix-up would not be);
 * with the v slice's weights 0 and bias c, the attention output is c. */
static void check_gpt2_qkv_split(void)
{
    struct ref_model_config cfg = {REF_ARCH_GPT2, 11, 8, 1, 2, 2, 12, 8, 1e-5, 0.0, 1, 0, 0, 0};
    struct ref_model m;
    ref_model_init(&m, &cfg);
    ref_model_randomize(&m, 3, 0.5);
    enum { C = 8, T = 5 };
    double *w = ref_model_param(&m, "h.0.attn.c_attn.weight")->data; // (C,3C)
    double *b = ref_model_param(&m, "h.0.attn.c_attn.bias")->data;   // (3C)
    for (int c = 0; c < C; c++) {
        for (int o = C; o < 3 * C; o++)
            w[c * 3 * C + o] = 0.0;
    }
    for (int o = 0; o < C; o++) {
        b[C + o] = 0.7;
        b[2 * C + o] = o - 3.0;
    }
    const int32_t tokens[T] = {1, 2, 3, 4, 5};
    double loss;
    int count;
    ref_model_forward(&m, 1, T, tokens, NULL, NULL, NULL, 1.0, &loss, &count);
    const struct ref_layer_acts *la = &m.acts.layers[0];
    int ok = 1;
    for (int h = 0; h < 2; h++) {
        for (int t = 0; t < T; t++) {
            for (int t2 = 0; t2 < T; t2++) {
                double expected = t2 <= t ? 1.0 / (t + 1) : 0.0;
                ok = ok && close_to(la->probs[(h * T + t) * T + t2], expected, 1e-14);
            }
        }
    }
    for (int t = 0; t < T; t++) {
        for (int o = 0; o < C; o++)
            ok = ok && close_to(la->att[t * C + o], o - 3.0, 1e-14);
    }
    report("model gpt2: c_attn output split as [q | k | v]", ok);
    ref_model_free(&m);
}

int main(void)
{
    ref_rng_seed(&rng, 42);
    check_linear_layouts();
    check_norms_and_activations();
    check_rope();
    check_attention();
    check_tables();
    check_gpt2_qkv_split();
    check_packing(REF_ARCH_LLAMA);
    check_packing(REF_ARCH_GPT2);
    if (failures) {
        printf("test_ref_forward: %d FAILED\n", failures);
        return 1;
    }
    printf("test_ref_forward: all checks passed\n");
    return 0;
}
