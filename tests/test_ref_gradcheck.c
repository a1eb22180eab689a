/*
 * test_ref_gradcheck.c — proves the C reference's backward passes right by
 * central finite differences in double, op by op and for a tiny model of each
 * architecture, and checks the cross-entropy's masking contract.
 *
 * For an op with output y, the scalar differentiated is L = Σ y ⊙ r with a
 * fixed random r, so the op's backward is given dout = r. Every entry of every
 * floating-point input is checked with the fourth-order central difference
 *
 *   numeric  = (8·(L(x+h) − L(x−h)) − (L(x+2h) − L(x−2h))) / (12·h),  h = 2e-4
 *   rel. err = |analytic − numeric| / max(|analytic|, |numeric|, 1e-3)
 *
 * which must be < 1e-6. Its truncation error is h⁴·L⁽⁵⁾/30 ≈ 5e-17·L⁽⁵⁾ and
 * its rounding error ≈ 1e-16·|L|/h ≈ 5e-13·|L|; measured errors are ~1e-8 at
 * worst, so a wrong derivative (an error of order 1) stands out by orders of
 * magnitude. (The plain two-point difference leaves ~1e-7 of noise here; at
 * h = 1e-3 the tied llama's truncation error already reaches 1.4e-6.) The
 * 1e-3 floor judges entries whose gradient is ~0 (masked keys, ignored rows)
 * by an absolute error of 1e-9.
 * Gradient buffers start at random values and the check subtracts them, so
 * it also proves that every backward accumulates (+=).
 *
 * Prints one line per check; exits non-zero on any failure.
 */
#include "ref_model.h"
#include "ref_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FD_H 2e-4
#define FD_TOL 1e-6
#define FD_FLOOR 1e-3

static int failures;
static struct ref_rng rng;

static double *randn(size_t n, double std)
{
    double *x = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        x[i] = std * ref_rng_normal(&rng);
    }
    return x;
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        s += a[i] * b[i];
    }
    return s;
}

static double rel_err(double analytic, double numeric)
{
    double scale = fmax(fmax(fabs(analytic), fabs(numeric)), FD_FLOOR);
    return fabs(analytic - numeric) / scale;
}

/* dL/dx by the fourth-order central difference, L evaluated by loss(ctx)
 * with *x moved to x ± h, x ± 2h; *x is restored. */
static double central_difference(double (*loss)(void *ctx), void *ctx, double *x)
{
    double x0 = *x;
    *x = x0 + FD_H;
    double l1p = loss(ctx);
    *x = x0 - FD_H;
    double l1m = loss(ctx);
    *x = x0 + 2.0 * FD_H;
    double l2p = loss(ctx);
    *x = x0 - 2.0 * FD_H;
    double l2m = loss(ctx);
    *x = x0;
    return (8.0 * (l1p - l1m) - (l2p - l2m)) / (12.0 * FD_H);
}

/* ---- op checks ---------------------------------------------------------- */

#define MAX_IN 4

/* One op under test: its floating-point inputs, the gradients its backward
 * gives them, its output and the fixed dL/dout = r. */
struct op_case {
    const char *name;
    int B, T, N, C, OC, H, KVH, hd;
    int32_t *ids, *ids2, *doc; // tokens / positions / document ids, (N)
    int n_in;
    const char *in_name[MAX_IN];
    double *in[MAX_IN], *din[MAX_IN], *din0[MAX_IN];
    size_t in_n[MAX_IN];
    double *out, *r, *save1, *save2;
    size_t out_n;
    void (*forward)(struct op_case *c);
    void (*backward)(struct op_case *c); // din += ∂L/∂in, with dout = r
};

static void case_input(struct op_case *c, const char *name, size_t n, double std)
{
    int i = c->n_in++;
    c->in_name[i] = name;
    c->in_n[i] = n;
    c->in[i] = randn(n, std);
    c->din[i] = randn(n, 1.0); // a random start: the backward must add to it
    c->din0[i] = malloc(n * sizeof(double));
    memcpy(c->din0[i], c->din[i], n * sizeof(double));
}

static void case_output(struct op_case *c, size_t n, size_t n_save1, size_t n_save2)
{
    c->out_n = n;
    c->out = calloc(n, sizeof(double));
    c->r = randn(n, 1.0);
    c->save1 = calloc(n_save1 ? n_save1 : 1, sizeof(double));
    c->save2 = calloc(n_save2 ? n_save2 : 1, sizeof(double));
}

static double case_loss(struct op_case *c)
{
    c->forward(c);
    return dot(c->out, c->r, c->out_n);
}

static double case_loss_at(void *ctx)
{
    return case_loss(ctx);
}

/* Runs the forward and backward once, then compares every input entry with
 * its central difference; prints the worst relative error and its input, and
 * frees the case. */
static void case_run(struct op_case *c)
{
    c->forward(c);
    c->backward(c);
    double worst = 0.0, max_grad = 0.0;
    const char *worst_name = "";
    size_t checked = 0;
    for (int i = 0; i < c->n_in; i++) {
        for (size_t j = 0; j < c->in_n[i]; j++) {
            double numeric = central_difference(case_loss_at, c, &c->in[i][j]);
            double analytic = c->din[i][j] - c->din0[i][j];
            double e = rel_err(analytic, numeric);
            if (e >= worst) {
                worst = e;
                worst_name = c->in_name[i];
            }
            max_grad = fmax(max_grad, fabs(analytic));
            checked++;
        }
    }
    int ok = worst < FD_TOL && max_grad > 0.0;
    if (!ok)
        failures++;
    printf("gradcheck op    %-28s %5zu entries  max |grad| %8.2e  max rel err %8.2e (%s)  %s\n", c->name, checked,
           max_grad, worst, worst_name, ok ? "ok" : "FAIL");
    for (int i = 0; i < c->n_in; i++) {
        free(c->in[i]);
        free(c->din[i]);
        free(c->din0[i]);
    }
    free(c->out);
    free(c->r);
    free(c->save1);
    free(c->save2);
    free(c->ids);
    free(c->ids2);
    free(c->doc);
}

static int32_t *random_ids(int n, int bound)
{
    int32_t *ids = malloc((size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++) {
        ids[i] = (int32_t)(ref_rng_u64(&rng) % (uint64_t)bound);
    }
    return ids;
}

static void matmul_fwd(struct op_case *c)
{
    ref_matmul_forward(c->out, c->in[0], c->in[1], c->in[2], c->N, c->C, c->OC);
}
static void matmul_bwd(struct op_case *c)
{
    ref_matmul_backward(c->din[0], c->din[1], c->din[2], c->r, c->in[0], c->in[1], c->N, c->C, c->OC);
}
static void conv1d_fwd(struct op_case *c)
{
    ref_conv1d_forward(c->out, c->in[0], c->in[1], c->in[2], c->N, c->C, c->OC);
}
static void conv1d_bwd(struct op_case *c)
{
    ref_conv1d_backward(c->din[0], c->din[1], c->din[2], c->r, c->in[0], c->in[1], c->N, c->C, c->OC);
}
static void bias_fwd(struct op_case *c)
{
    memcpy(c->out, c->in[0], c->out_n * sizeof(double));
    ref_bias_add_forward(c->out, c->in[1], c->N, c->C);
}
static void bias_bwd(struct op_case *c)
{
    for (size_t i = 0; i < c->out_n; i++)
        c->din[0][i] += c->r[i];
    ref_bias_add_backward(c->din[1], c->r, c->N, c->C);
}
static void residual_fwd(struct op_case *c)
{
    ref_residual_forward(c->out, c->in[0], c->in[1], c->out_n);
}
static void residual_bwd(struct op_case *c)
{
    ref_residual_backward(c->din[0], c->din[1], c->r, c->out_n);
}
static void embedding_fwd(struct op_case *c)
{
    ref_embedding_forward(c->out, c->ids, c->ids2, c->in[0], c->n_in > 1 ? c->in[1] : NULL, c->N, c->C);
}
static void embedding_bwd(struct op_case *c)
{
    ref_embedding_backward(c->din[0], c->n_in > 1 ? c->din[1] : NULL, c->r, c->ids, c->ids2, c->N, c->C);
}
static void rmsnorm_fwd(struct op_case *c)
{
    ref_rmsnorm_forward(c->out, c->save1, c->in[0], c->in[1], c->N, c->C, 1e-5);
}
static void rmsnorm_bwd(struct op_case *c)
{
    ref_rmsnorm_backward(c->din[0], c->din[1], c->r, c->in[0], c->in[1], c->save1, c->N, c->C);
}
static void layernorm_fwd(struct op_case *c)
{
    ref_layernorm_forward(c->out, c->save1, c->save2, c->in[0], c->in[1], c->in[2], c->N, c->C, 1e-5);
}
static void layernorm_bwd(struct op_case *c)
{
    ref_layernorm_backward(c->din[0], c->din[1], c->din[2], c->r, c->in[0], c->in[1], c->save1, c->save2, c->N, c->C);
}
static void rope_fwd(struct op_case *c)
{
    ref_rope_forward(c->out, c->in[0], c->ids, c->N, c->H, c->hd, 10000.0);
}
static void rope_bwd(struct op_case *c)
{
    ref_rope_backward(c->din[0], c->r, c->ids, c->N, c->H, c->hd, 10000.0);
}
static void attention_fwd(struct op_case *c)
{
    ref_attention_forward(c->out, c->save1, c->in[0], c->in[1], c->in[2], c->doc, c->B, c->T, c->H, c->KVH, c->hd);
}
static void attention_bwd(struct op_case *c)
{
    ref_attention_backward(c->din[0], c->din[1], c->din[2], c->r, c->save1, c->in[0], c->in[1], c->in[2], c->B, c->T,
                           c->H, c->KVH, c->hd);
}
static void swiglu_fwd(struct op_case *c)
{
    ref_swiglu_forward(c->out, c->in[0], c->in[1], c->out_n);
}
static void swiglu_bwd(struct op_case *c)
{
    ref_swiglu_backward(c->din[0], c->din[1], c->r, c->in[0], c->in[1], c->out_n);
}
static void gelu_fwd(struct op_case *c)
{
    ref_gelu_forward(c->out, c->in[0], c->out_n);
}
static void gelu_bwd(struct op_case *c)
{
    ref_gelu_backward(c->din[0], c->r, c->in[0], c->out_n);
}

/* Cross-entropy's output is the scalar scale·Σ ℓ; its backward writes
 * dlogits, which the check adds to din (r is the scalar's weight). */
static const double ce_scale = 1.0 / 7.0;
static void ce_fwd(struct op_case *c)
{
    double loss_sum = 0.0;
    int count = 0;
    ref_crossentropy_forward_backward(NULL, &loss_sum, &count, c->in[0], c->ids, c->N, c->OC, 1.0);
    c->out[0] = ce_scale * loss_sum;
}
static void ce_bwd(struct op_case *c)
{
    double loss_sum = 0.0;
    int count = 0;
    size_t n = c->in_n[0];
    ref_crossentropy_forward_backward(c->save1, &loss_sum, &count, c->in[0], c->ids, c->N, c->OC, ce_scale);
    for (size_t i = 0; i < n; i++)
        c->din[0][i] += c->r[0] * c->save1[i];
}

static void check_ops(void)
{
    struct op_case c;
    int N = 7, C = 6, OC = 5;

    c = (struct op_case){
        .name = "matmul (Linear, bias)", .N = N, .C = C, .OC = OC, .forward = matmul_fwd, .backward = matmul_bwd};
    case_input(&c, "inp", (size_t)N * C, 1.0);
    case_input(&c, "weight", (size_t)OC * C, 1.0);
    case_input(&c, "bias", OC, 1.0);
    case_output(&c, (size_t)N * OC, 0, 0);
    case_run(&c);

    c = (struct op_case){
        .name = "conv1d (GPT-2 [in,out])", .N = N, .C = C, .OC = OC, .forward = conv1d_fwd, .backward = conv1d_bwd};
    case_input(&c, "inp", (size_t)N * C, 1.0);
    case_input(&c, "weight", (size_t)C * OC, 1.0);
    case_input(&c, "bias", OC, 1.0);
    case_output(&c, (size_t)N * OC, 0, 0);
    case_run(&c);

    c = (struct op_case){.name = "bias add", .N = N, .C = C, .forward = bias_fwd, .backward = bias_bwd};
    case_input(&c, "inp", (size_t)N * C, 1.0);
    case_input(&c, "bias", C, 1.0);
    case_output(&c, (size_t)N * C, 0, 0);
    case_run(&c);

    c = (struct op_case){.name = "residual add", .forward = residual_fwd, .backward = residual_bwd};
    case_input(&c, "a", (size_t)N * C, 1.0);
    case_input(&c, "b", (size_t)N * C, 1.0);
    case_output(&c, (size_t)N * C, 0, 0);
    case_run(&c);

    // 9 tokens from a vocab of 4: repeated ids exercise the scatter-add
    int V = 4, P = 5;
    c = (struct op_case){
        .name = "embedding (wte)", .N = 9, .C = C, .forward = embedding_fwd, .backward = embedding_bwd};
    c.ids = random_ids(9, V);
    case_input(&c, "wte", (size_t)V * C, 1.0);
    case_output(&c, (size_t)9 * C, 0, 0);
    case_run(&c);

    c = (struct op_case){
        .name = "embedding (wte + wpe)", .N = 9, .C = C, .forward = embedding_fwd, .backward = embedding_bwd};
    c.ids = random_ids(9, V);
    c.ids2 = random_ids(9, P);
    case_input(&c, "wte", (size_t)V * C, 1.0);
    case_input(&c, "wpe", (size_t)P * C, 1.0);
    case_output(&c, (size_t)9 * C, 0, 0);
    case_run(&c);

    c = (struct op_case){.name = "rmsnorm", .N = N, .C = C, .forward = rmsnorm_fwd, .backward = rmsnorm_bwd};
    case_input(&c, "inp", (size_t)N * C, 1.0);
    case_input(&c, "weight", C, 1.0);
    case_output(&c, (size_t)N * C, N, 0);
    case_run(&c);

    c = (struct op_case){.name = "layernorm", .N = N, .C = C, .forward = layernorm_fwd, .backward = layernorm_bwd};
    case_input(&c, "inp", (size_t)N * C, 1.0);
    case_input(&c, "weight", C, 1.0);
    case_input(&c, "bias", C, 1.0);
    case_output(&c, (size_t)N * C, N, N);
    case_run(&c);

    // RoPE on (N,H,hd) = (5,3,8) at scattered positions
    c = (struct op_case){
        .name = "rope (rotate_half)", .N = 5, .H = 3, .hd = 8, .forward = rope_fwd, .backward = rope_bwd};
    c.ids = random_ids(5, 40);
    case_input(&c, "inp", (size_t)5 * 3 * 8, 1.0);
    case_output(&c, (size_t)5 * 3 * 8, 0, 0);
    case_run(&c);

    // attention: B=2, T=5, H=4, KVH=2, hd=3, causal, then block-causal
    int B = 2, T = 5, H = 4, KVH = 2, hd = 3;
    static const int32_t docs[10] = {0, 0, 0, 1, 1, 7, 8, 8, 8, 8};
    for (int with_doc = 0; with_doc < 2; with_doc++) {
        c = (struct op_case){.name = with_doc ? "attention (GQA 4/2, doc ids)" : "attention (GQA 4/2, causal)",
                             .B = B,
                             .T = T,
                             .H = H,
                             .KVH = KVH,
                             .hd = hd,
                             .forward = attention_fwd,
                             .backward = attention_bwd};
        if (with_doc) {
            c.doc = malloc(sizeof docs);
            memcpy(c.doc, docs, sizeof docs);
        }
        case_input(&c, "q", (size_t)B * T * H * hd, 1.0);
        case_input(&c, "k", (size_t)B * T * KVH * hd, 1.0);
        case_input(&c, "v", (size_t)B * T * KVH * hd, 1.0);
        case_output(&c, (size_t)B * T * H * hd, (size_t)B * H * T * T, 0);
        case_run(&c);
    }

    c = (struct op_case){.name = "swiglu", .forward = swiglu_fwd, .backward = swiglu_bwd};
    case_input(&c, "gate", 40, 2.0);
    case_input(&c, "up", 40, 1.0);
    case_output(&c, 40, 0, 0);
    case_run(&c);

    c = (struct op_case){.name = "gelu (tanh)", .forward = gelu_fwd, .backward = gelu_bwd};
    case_input(&c, "inp", 40, 2.0);
    case_output(&c, 40, 0, 0);
    case_run(&c);

    // cross-entropy: 8 rows of V=6, rows 2 and 5 ignored
    c = (struct op_case){.name = "cross-entropy (masked)", .N = 8, .OC = 6, .forward = ce_fwd, .backward = ce_bwd};
    c.ids = random_ids(8, 6);
    c.ids[2] = REF_IGNORE_INDEX;
    c.ids[5] = REF_IGNORE_INDEX;
    case_input(&c, "logits", 8 * 6, 2.0);
    case_output(&c, 1, 8 * 6, 0);
    case_run(&c);
}

/* ---- the cross-entropy's masking contract ------------------------------- */

static void expect(int ok, const char *what)
{
    if (!ok) {
        failures++;
        printf("  FAIL: %s\n", what);
    }
}

/* Ignored rows get dlogits exactly 0 and are never read; out-of-range labels
 * are treated as ignored and counted, never used as an index. Rows that must
 * not be read hold NaN, so any read would poison the loss. */
static void check_crossentropy_masking(void)
{
    enum { N = 8, V = 5 };
    const int32_t labels[N] = {2, REF_IGNORE_INDEX, V, -1, 4, INT32_MAX, INT32_MIN, -101};
    double logits[N * V], dlogits[N * V];
    for (int n = 0; n < N; n++) {
        int valid = labels[n] >= 0 && labels[n] < V;
        for (int i = 0; i < V; i++) {
            logits[n * V + i] = valid ? 2.0 * ref_rng_normal(&rng) : NAN;
            dlogits[n * V + i] = 99.0;
        }
    }
    double loss = 0.0, scale = 0.5;
    int count = 0;
    int bad = ref_crossentropy_forward_backward(dlogits, &loss, &count, logits, labels, N, V, scale);

    // the loss of rows 0 and 4, computed naively as −log softmax
    double expected = 0.0;
    for (int n = 0; n < N; n += 4) {
        double z = 0.0;
        for (int i = 0; i < V; i++)
            z += exp(logits[n * V + i]);
        expected += -log(exp(logits[n * V + labels[n]]) / z);
    }
    int ignored_zero = 1, rows_sum_zero = 1;
    for (int n = 0; n < N; n++) {
        int valid = labels[n] >= 0 && labels[n] < V;
        double row_sum = 0.0;
        for (int i = 0; i < V; i++) {
            if (!valid && dlogits[n * V + i] != 0.0)
                ignored_zero = 0;
            row_sum += dlogits[n * V + i];
        }
        if (fabs(row_sum) > 1e-15)
            rows_sum_zero = 0;
    }
    int fail0 = failures;
    expect(bad == 5, "5 out-of-range labels reported");
    expect(count == 2, "only the 2 valid rows counted");
    expect(isfinite(loss), "ignored and out-of-range rows never read (loss finite)");
    expect(fabs(loss - expected) < 1e-12, "loss = Σ −log softmax[label] over valid rows");
    expect(ignored_zero, "dlogits exactly 0 on ignored and out-of-range rows");
    expect(rows_sum_zero, "each dlogits row sums to 0");

    // uniform logits: ℓ = ln V, dlogits = (1/V − [i == label])·scale
    const double flat[3] = {0.0, 0.0, 0.0};
    const int32_t one_label[1] = {1};
    double dflat[3], flat_loss = 0.0;
    int flat_count = 0;
    ref_crossentropy_forward_backward(dflat, &flat_loss, &flat_count, flat, one_label, 1, 3, 0.25);
    expect(fabs(flat_loss - log(3.0)) < 1e-15, "uniform logits give ln V");
    expect(fabs(dflat[0] - 0.25 / 3.0) < 1e-16 && fabs(dflat[1] - 0.25 * (1.0 / 3.0 - 1.0)) < 1e-16,
           "uniform logits give (1/V − onehot)·scale");
    int ok = failures == fail0;
    printf("check  ce       %-28s ignored rows 0, %d bad labels reported, loss %.6f  %s\n", "masking and label range",
           bad, loss, ok ? "ok" : "FAIL");
}

/* ---- tiny whole models -------------------------------------------------- */

/* A model and the batch it is differentiated on. */
struct model_batch {
    struct ref_model *m;
    int B, T;
    const int32_t *tokens, *labels, *pos, *doc;
    double scale;
};

/* L = scale·Σ ℓ_i, as the backward differentiates it. */
static double model_loss_at(void *ctx)
{
    struct model_batch *mb = ctx;
    double loss_sum;
    int count;
    ref_model_forward(mb->m, mb->B, mb->T, mb->tokens, mb->labels, mb->pos, mb->doc, mb->scale, &loss_sum, &count);
    return mb->scale * loss_sum;
}

/* Every entry of every parameter tensor against its central difference of
 * L = scale·Σ ℓ_i, scale = 1/count as the step uses. */
static void check_model(const char *name, const struct ref_model_config *cfg, int with_doc, int bad_label)
{
    enum { B = 2, T = 5, N = B * T };
    struct ref_model m;
    if (ref_model_init(&m, cfg) != 0) {
        failures++;
        printf("gradcheck model %-28s init FAIL\n", name);
        return;
    }
    ref_model_randomize(&m, ref_rng_u64(&rng), 0.5);

    // two sequences; with doc ids: documents of 2+3 and 4+1 tokens, positions restart
    static const int32_t docs[N] = {0, 0, 1, 1, 1, 5, 5, 5, 5, 6};
    static const int32_t doc_pos[N] = {0, 1, 0, 1, 2, 0, 1, 2, 3, 0};
    int32_t tokens[N], labels[N];
    for (int n = 0; n < N; n++) {
        tokens[n] = (int32_t)(ref_rng_u64(&rng) % (uint64_t)cfg->vocab);
        labels[n] = (int32_t)(ref_rng_u64(&rng) % (uint64_t)cfg->vocab);
    }
    labels[1] = labels[4] = labels[9] = REF_IGNORE_INDEX;
    if (bad_label)
        labels[6] = cfg->vocab + 3;
    const int32_t *doc = with_doc ? docs : NULL;
    const int32_t *pos = with_doc ? doc_pos : NULL;

    double loss_sum;
    int count;
    ref_model_forward(&m, B, T, tokens, labels, pos, doc, 1.0, &loss_sum, &count);
    double scale = 1.0 / count;
    ref_model_forward(&m, B, T, tokens, labels, pos, doc, scale, &loss_sum, &count);
    ref_model_zero_grad(&m);
    ref_model_backward(&m);
    struct model_batch mb = {&m, B, T, tokens, labels, pos, doc, scale};

    double worst = 0.0;
    const char *worst_name = "";
    size_t checked = 0;
    int fail0 = failures;
    for (int p = 0; p < m.n_params; p++) {
        struct ref_param *t = &m.params[p];
        double tensor_worst = 0.0, tensor_max_grad = 0.0;
        for (size_t j = 0; j < t->numel; j++) {
            double numeric = central_difference(model_loss_at, &mb, &t->data[j]);
            double e = rel_err(t->grad[j], numeric);
            tensor_worst = fmax(tensor_worst, e);
            tensor_max_grad = fmax(tensor_max_grad, fabs(t->grad[j]));
            checked++;
        }
        if (tensor_worst >= FD_TOL || tensor_max_grad == 0.0) {
            failures++;
            printf("  FAIL: %s max |grad| %.2e max rel err %.2e\n", t->hf_name, tensor_max_grad, tensor_worst);
        }
        if (tensor_worst >= worst) {
            worst = tensor_worst;
            worst_name = t->hf_name;
        }
    }

    // a second backward of the same forward adds the same gradient again
    // (to rounding: the sums are taken in a different order)
    double *first = malloc(m.num_parameters * sizeof(double));
    memcpy(first, m.grads_memory, m.num_parameters * sizeof(double));
    ref_model_forward(&m, B, T, tokens, labels, pos, doc, scale, &loss_sum, &count);
    ref_model_backward(&m);
    int doubled = 1;
    for (size_t i = 0; i < m.num_parameters; i++) {
        if (fabs(m.grads_memory[i] - 2.0 * first[i]) > 1e-12 * (1.0 + fabs(first[i])))
            doubled = 0;
    }
    free(first);
    expect(doubled, "a second backward accumulates the same gradient");
    expect(count == (bad_label ? 6 : 7), "valid tokens counted");
    expect(m.n_bad_labels == bad_label, "out-of-range label reported");

    int ok = failures == fail0;
    printf("gradcheck model %-28s %2d tensors %5zu entries  loss %.4f/%d  max rel err %8.2e (%s)  %s\n", name,
           m.n_params, checked, loss_sum * scale, count, worst, worst_name, ok ? "ok" : "FAIL");
    ref_model_free(&m);
}

static void check_models(void)
{
    struct ref_model_config llama = {
        .arch = REF_ARCH_LLAMA,
        .vocab = 11,
        .dim = 8,
        .n_layers = 2,
        .n_heads = 2,
        .n_kv_heads = 1,
        .hidden_dim = 12,
        .max_seq_len = 16,
        .norm_eps = 1e-5,
        .rope_theta = 10000.0,
        .tied = 0,
    };
    check_model("llama untied, GQA 2/1", &llama, 0, 0);

    struct ref_model_config llama_tied = llama;
    llama_tied.dim = 16;
    llama_tied.n_heads = 4;
    llama_tied.n_kv_heads = 2;
    llama_tied.tied = 1;
    check_model("llama tied, GQA 4/2, doc ids", &llama_tied, 1, 1);

    struct ref_model_config gpt2 = {
        .arch = REF_ARCH_GPT2,
        .vocab = 11,
        .dim = 8,
        .n_layers = 2,
        .n_heads = 2,
        .n_kv_heads = 2,
        .hidden_dim = 32,
        .max_seq_len = 8,
        .norm_eps = 1e-5,
        .rope_theta = 0.0,
        .tied = 1,
    };
    check_model("gpt2", &gpt2, 0, 0);
    check_model("gpt2, doc ids", &gpt2, 1, 1);
}

int main(void)
{
    ref_rng_seed(&rng, 20240520);
    printf("4th-order central differences, h %.0e; pass: rel err < %.0e (denominator floored at %.0e)\n", FD_H, FD_TOL,
           FD_FLOOR);
    check_ops();
    check_crossentropy_masking();
    check_models();
    if (failures) {
        printf("test_ref_gradcheck: %d FAILED\n", failures);
        return 1;
    }
    printf("test_ref_gradcheck: all checks passed\n");
    return 0;
}
