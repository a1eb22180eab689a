/* test_optim: the optimizer pieces against double references.
 *
 *   op_adamw: 10 steps on random tensors of odd sizes (1, 7, 1000, and
 *     2^20 + 3, which the capped grid strides over), in both kernel
 *     families (vec4 texel reads with a tail, and storage), against a plain double
 *     C implementation of torch.optim.AdamW, with and without weight decay
 *     and with grad_scale != 1. Tolerance: max|gpu − ref| / scale < 1e-5
 *     for θ, m and v after every step, scale = the tensor's max|ref|, or for
 *     θ its initial max|θ| and for m the max of m run on |g| if larger (the
 *     size of the summed terms: an element of m that cancels to ~0 keeps the
 *     absolute error of its terms). Float state against exact state errs by
 *     a few units of 2^-24 per step. Two cases give the
 *     formula's details teeth at that tolerance: lr·wd = 0.05 (decay applied
 *     after instead of before the Adam update moves θ by ~5e-3) and
 *     eps = 1e-3 with gradients ~1e-3 (eps inside the sqrt, or without the
 *     sqrt(bc2) division, changes the update by tens of percent).
 *     Also against a float emulation of the shader's operation order, at
 *     max|gpu − emu| / max|emu| < 2e-6 (bit-identical on a device with
 *     correctly rounded division and sqrt, such as lavapipe; other devices
 *     may round those within a few ulps).
 *   grad norm: grad_norm_record + grad_norm_total over tensors of 1, 7,
 *     1000 and 300001 floats against sqrt(Σ x²) in double: relative error
 *     < 1e-5 (op_sumsq's bound is ~1.3e-6·Σx²); grad_clip_factor exactly
 *     min(1, max_norm/(norm + 1e-6)).
 *   schedule_lr: every type at step 0, the last warmup step, the first
 *     decay step, mid-decay, the last step and past the end, against numbers
 *     written out from the formula in include/vktrain/schedule.h (1e-12). */
#include <math.h>
#include <string.h>

#include "gpu_testing.h"
#include "ref_ops.h"
#include "vktrain/ops.h"
#include "vktrain/ops_optim.h"
#include "vktrain/schedule.h"

static struct ref_rng rng;

/* floats in [-scale, scale), as doubles */
static double *random_doubles(size_t n, double scale)
{
    double *x = vkt_malloc(n * sizeof *x, "test data");
    for (size_t i = 0; i < n; i++)
        x[i] = (double)(float)(scale * (2.0 * ref_rng_uniform(&rng) - 1.0));
    return x;
}

/* torch.optim.AdamW, exactly, in double. mabs follows m with |g|: the size
 * of the terms m sums, which bounds its float error where m cancels. */
static void ref_adamw(double *th, const double *grad, double *m, double *v, double *mabs, size_t n,
                      const struct op_adamw_step *s)
{
    double bc1 = 1.0 - pow(s->beta1, (double)s->t), bc2 = 1.0 - pow(s->beta2, (double)s->t);
    for (size_t i = 0; i < n; i++) {
        double g = grad[i] * s->grad_scale;
        mabs[i] = s->beta1 * mabs[i] + (1.0 - s->beta1) * fabs(g);
        th[i] *= 1.0 - s->lr * s->weight_decay;
        m[i] = s->beta1 * m[i] + (1.0 - s->beta1) * g;
        v[i] = s->beta2 * v[i] + (1.0 - s->beta2) * g * g;
        double mhat = m[i] / bc1, vhat = v[i] / bc2;
        th[i] -= s->lr * mhat / (sqrt(vhat) + s->eps);
    }
}

/* The shader's operation order in float (C11 without extensions does not
 * contract into fma). */
static void emu_adamw(float *th, const float *grad, float *m, float *v, size_t n, const struct op_adamw_step *s)
{
    double bc1 = 1.0 - pow(s->beta1, (double)s->t), bc2 = 1.0 - pow(s->beta2, (double)s->t);
    float gs = (float)s->grad_scale, decay = (float)(1.0 - s->lr * s->weight_decay);
    float b1 = (float)s->beta1, omb1 = (float)(1.0 - s->beta1), b2 = (float)s->beta2, omb2 = (float)(1.0 - s->beta2);
    float bc2s = (float)sqrt(bc2), nss = (float)(-(s->lr / bc1)), eps = (float)s->eps;
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * gs;
        float t = th[i] * decay;
        float mm = m[i] * b1;
        float mg = omb1 * g;
        mm = mm + mg;
        float vv = v[i] * b2;
        float vg = omb2 * g;
        vg = vg * g;
        vv = vv + vg;
        float denom = sqrtf(vv) / bc2s;
        denom = denom + eps;
        float upd = nss * mm;
        upd = upd / denom;
        th[i] = t + upd;
        m[i] = mm;
        v[i] = vv;
    }
}

/* max|a − b| / max(max|b|, max|size|): the error relative to the tensor's
 * scale, where size (or NULL) gives the magnitude of the terms b was summed
 * from, so a value that cancels towards 0 is not held to its own size. */
static double max_rel_error_sized(const float *a, const double *b, const double *size, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        e = d > e ? d : e;
        s = fabs(b[i]) > s ? fabs(b[i]) : s;
        if (size)
            s = fabs(size[i]) > s ? fabs(size[i]) : s;
    }
    return s > 0 ? e / s : e;
}

static double max_rel_error(const float *a, const double *b, size_t n)
{
    return max_rel_error_sized(a, b, NULL, n);
}

static double max_rel_error_f(const float *a, const float *b, size_t n)
{
    double *bd = vkt_malloc(n * sizeof *bd, "test doubles");
    for (size_t i = 0; i < n; i++)
        bd[i] = b[i];
    double e = max_rel_error(a, bd, n);
    free(bd);
    return e;
}

struct adamw_case {
    const char *name;
    double lr, beta1, beta2, eps, wd, grad_scale, grad_size;
};

static void test_adamw(struct gpu *g, const struct adamw_case *c, size_t n, int steps)
{
    double *th = random_doubles(n, 1.0), *th0 = vkt_malloc(n * sizeof *th0, "theta0");
    memcpy(th0, th, n * sizeof *th0);
    double *m = vkt_calloc(n, sizeof *m, "m"), *v = vkt_calloc(n, sizeof *v, "v");
    double *mabs = vkt_calloc(n, sizeof *mabs, "|m|");
    float *eth = vkt_malloc(n * sizeof *eth, "emu"), *em = vkt_calloc(n, sizeof *em, "emu");
    float *ev = vkt_calloc(n, sizeof *ev, "emu"), *eg = vkt_malloc(n * sizeof *eg, "emu");
    for (size_t i = 0; i < n; i++)
        eth[i] = (float)th[i];
    struct gpu_buffer *bth = buffer_from_doubles(g, th, n, "theta");
    struct gpu_buffer *bg = gpu_buffer_create(g, n * sizeof(float), "grad");
    struct gpu_buffer *bm = gpu_buffer_create(g, n * sizeof(float), "exp_avg");
    struct gpu_buffer *bv = gpu_buffer_create(g, n * sizeof(float), "exp_avg_sq");
    gpu_zero(g, bm);
    gpu_zero(g, bv);
    double worst = 0, worst_emu = 0;
    for (int t = 1; t <= steps; t++) {
        double *grad = random_doubles(n, c->grad_size);
        for (size_t i = 0; i < n; i++)
            eg[i] = (float)grad[i];
        gpu_upload(g, bg, 0, eg, n * sizeof(float));
        struct op_adamw_step s = {.lr = c->lr, .beta1 = c->beta1, .beta2 = c->beta2, .eps = c->eps,
                                  .weight_decay = c->wd, .t = t, .grad_scale = c->grad_scale};
        op_adamw(g, bth, bg, bm, bv, n, &s);
        ref_adamw(th, grad, m, v, mabs, n, &s);
        emu_adamw(eth, eg, em, ev, n, &s);
        float *gth = download_floats(g, bth, n), *gm = download_floats(g, bm, n), *gv = download_floats(g, bv, n);
        double e[3] = {max_rel_error_sized(gth, th, th0, n), max_rel_error_sized(gm, m, mabs, n),
                       max_rel_error(gv, v, n)};
        double f[3] = {max_rel_error_f(gth, eth, n), max_rel_error_f(gm, em, n), max_rel_error_f(gv, ev, n)};
        const char *what[3] = {"theta", "exp_avg", "exp_avg_sq"};
        for (int k = 0; k < 3; k++) {
            CHECK(e[k] < 1e-5, "adamw %s n=%zu step %d: %s max rel. error %.3g vs double reference", c->name, n, t,
                  what[k], e[k]);
            CHECK(f[k] < 2e-6, "adamw %s n=%zu step %d: %s max rel. error %.3g vs float emulation", c->name, n, t,
                  what[k], f[k]);
            worst = e[k] > worst ? e[k] : worst;
            worst_emu = f[k] > worst_emu ? f[k] : worst_emu;
        }
        free(gth), free(gm), free(gv), free(grad);
    }
    printf("  adamw %-12s n=%-7zu %d steps: max rel. error %.2g vs double, %.2g vs float emulation\n", c->name, n,
           steps, worst, worst_emu);
    gpu_buffer_destroy(g, bth);
    gpu_buffer_destroy(g, bg);
    gpu_buffer_destroy(g, bm);
    gpu_buffer_destroy(g, bv);
    free(th), free(th0), free(mabs), free(m), free(v), free(eth), free(em), free(ev), free(eg);
}

/* The cases above have teeth: show that the variants they should catch
 * differ from the reference by far more than the tolerance. */
static void test_adamw_teeth(void)
{
    /* decay after the update, lr·wd = 0.05, one step from θ = 1, g = 1:
     * update = lr·1/(1 + eps) ≈ 0.1; decay-before: (1 − 0.05) − 0.1;
     * decay-after: (1 − 0.1)(1 − 0.05). Differ by 0.05·0.1 = 5e-3. */
    double before = (1.0 - 0.05) - 0.1, after = (1.0 - 0.1) * (1.0 - 0.05);
    CHECK(fabs(before - after) > 1e-3, "decay order indistinguishable");
    /* eps inside the sqrt with v̂ = 1e-6, eps = 1e-3: 1/(1e-3 + 1e-3) vs
     * 1/sqrt(1e-6 + 1e-3). */
    double outside = 1.0 / (sqrt(1e-6) + 1e-3), inside = 1.0 / sqrt(1e-6 + 1e-3);
    CHECK(fabs(outside - inside) / outside > 0.1, "eps placement indistinguishable");
}

static void test_grad_norm(struct gpu *g)
{
    enum { COUNT = 4, FIRST = 2 };
    size_t sizes[COUNT] = {1, 7, 1000, 300001};
    struct grad_tensor t[COUNT];
    double exact = 0;
    double *x[COUNT];
    for (int i = 0; i < COUNT; i++) {
        x[i] = random_doubles(sizes[i], 0.01 * (i + 1));
        for (size_t j = 0; j < sizes[i]; j++)
            exact += x[i][j] * x[i][j];
        t[i].grad = buffer_from_doubles(g, x[i], sizes[i], "grad");
        t[i].n = sizes[i];
    }
    exact = sqrt(exact);
    size_t ns = grad_norm_scratch(g, t, COUNT);
    CHECK(ns == op_reduce_scratch(g, 300001), "scratch %zu, want the largest tensor's %zu", ns,
          op_reduce_scratch(g, 300001));
    struct gpu_buffer *scratch = gpu_buffer_create(g, ns * sizeof(float), "scratch");
    struct gpu_buffer *slots = gpu_buffer_create(g, (FIRST + COUNT) * sizeof(float), "slots");
    gpu_zero(g, slots);
    grad_norm_record(g, t, COUNT, scratch, slots, FIRST);
    float s[FIRST + COUNT];
    gpu_download(g, slots, 0, s, sizeof s);
    CHECK(s[0] == 0.0f && s[1] == 0.0f, "slots before first_slot were written");
    for (int i = 0; i < COUNT; i++) {
        double e = 0;
        for (size_t j = 0; j < sizes[i]; j++)
            e += x[i][j] * x[i][j];
        CHECK(fabs(s[FIRST + i] - e) <= 1e-5 * e, "slot %d: %.9g vs %.9g", i, s[FIRST + i], e);
    }
    double norm = grad_norm_total(s + FIRST, COUNT);
    double rel = fabs(norm - exact) / exact;
    CHECK(rel < 1e-5, "grad norm %.9g vs exact %.9g (rel. %.3g)", norm, exact, rel);
    printf("  grad norm %.9g vs exact %.9g: rel. error %.2g\n", norm, exact, rel);

    /* Rerun: bit-identical slots. */
    grad_norm_record(g, t, COUNT, scratch, slots, FIRST);
    float s2[FIRST + COUNT];
    gpu_download(g, slots, 0, s2, sizeof s2);
    CHECK(memcmp(s, s2, sizeof s) == 0, "grad norm slots differ between two runs");

    /* clip factor: min(1, max_norm/(norm + 1e-6)) */
    CHECK(grad_clip_factor(10.0, 1.0) == 1.0 / (10.0 + 1e-6), "clip 10 -> 1");
    CHECK(grad_clip_factor(0.5, 1.0) == 1.0, "no clip below max_norm");
    CHECK(grad_clip_factor(1.0, 1.0) == 1.0 / (1.0 + 1e-6), "norm == max_norm still scales by 1/(1+1e-6)");
    CHECK(grad_clip_factor(0.0, 1.0) == 1.0, "zero norm");
    CHECK(grad_clip_factor(100.0, 0.0) == 1.0, "max_norm 0 = no clipping");
    CHECK(isnan(grad_clip_factor(NAN, 1.0)), "NaN norm propagates");
    CHECK(grad_clip_factor(INFINITY, 1.0) == 0.0, "inf norm gives 0");

    gpu_buffer_destroy(g, scratch);
    gpu_buffer_destroy(g, slots);
    for (int i = 0; i < COUNT; i++) {
        gpu_buffer_destroy(g, t[i].grad);
        free(x[i]);
    }
}

#define CHECK_LR(type, W, S, step, want)                                                                               \
    do {                                                                                                               \
        double got_ = schedule_lr(type, 2.0, W, S, 0.1, step);                                                         \
        CHECK(fabs(got_ - (want)) < 1e-12, "schedule %s W=%d S=%d step %d: %.17g, want %.17g", #type, W, S, step,     \
              got_, (double)(want));                                                                                   \
    } while (0)

static void test_schedule(void)
{
    /* lr = 2, W = 4 warmup steps, S = 12 total, min_lr_ratio r = 0.1.
     * warmup (step < 4): 2·(step + 1)/4, every type. */
    enum lr_schedule types[3] = {LR_CONSTANT, LR_COSINE, LR_LINEAR};
    for (int k = 0; k < 3; k++) {
        CHECK_LR(types[k], 4, 12, 0, 0.5); /* 2·1/4 */
        CHECK_LR(types[k], 4, 12, 2, 1.5); /* 2·3/4 */
        CHECK_LR(types[k], 4, 12, 3, 2.0); /* last warmup step: 2·4/4 */
        CHECK_LR(types[k], 4, 12, 4, 2.0); /* first decay step, p = 0 */
        CHECK_LR(types[k], 0, 12, 0, 2.0); /* no warmup: p = 0 */
    }
    /* p = (step − 4)/(12 − 4) */
    CHECK_LR(LR_CONSTANT, 4, 12, 11, 2.0);
    CHECK_LR(LR_CONSTANT, 4, 12, 50, 2.0);
    /* cosine: 2·(0.1 + 0.9·0.5·(1 + cos(π·p))) */
    CHECK_LR(LR_COSINE, 4, 12, 5, 1.9314915792601581);  /* p = 1/8, cos(π/8) = 0.9238795325112867 */
    CHECK_LR(LR_COSINE, 4, 12, 8, 1.1);                 /* p = 1/2: 2·(0.1 + 0.45) */
    CHECK_LR(LR_COSINE, 4, 12, 11, 0.26850842073984194); /* last step, p = 7/8, cos = −0.9238795325112867 */
    CHECK_LR(LR_COSINE, 4, 12, 12, 0.2);                /* p = 1: the floor 2·0.1 */
    CHECK_LR(LR_COSINE, 4, 12, 50, 0.2);                /* past the end: p clamped to 1 */
    /* linear: 2·(1 − 0.9·p) */
    CHECK_LR(LR_LINEAR, 4, 12, 5, 1.775);  /* 2·(1 − 0.1125) */
    CHECK_LR(LR_LINEAR, 4, 12, 8, 1.1);    /* 2·(1 − 0.45) */
    CHECK_LR(LR_LINEAR, 4, 12, 11, 0.425); /* 2·(1 − 0.7875) */
    CHECK_LR(LR_LINEAR, 4, 12, 12, 0.2);
    CHECK_LR(LR_LINEAR, 4, 12, 50, 0.2);
    /* no warmup, S = 10, last step 9: p = 9/10 */
    CHECK_LR(LR_LINEAR, 0, 10, 9, 2.0 * (1.0 - 0.9 * 0.9)); /* 0.38 */
    /* degenerate: S <= W. Warmup as usual, then max(1, S − W) = 1. */
    CHECK_LR(LR_COSINE, 5, 3, 4, 2.0);  /* warmup 2·5/5 */
    CHECK_LR(LR_COSINE, 5, 3, 5, 2.0);  /* p = 0 */
    CHECK_LR(LR_COSINE, 5, 3, 6, 0.2);  /* p = 1 */
}

int main(void)
{
    ref_rng_seed(&rng, 7);
    test_schedule();
    test_adamw_teeth();
    struct gpu *g = test_gpu();
    static const struct adamw_case cases[] = {
        {"plain", 1e-3, 0.9, 0.999, 1e-8, 0.0, 1.0, 1.0},
        {"decay+scale", 3e-3, 0.9, 0.95, 1e-8, 0.1, 0.37, 1.0},
        {"strong-decay", 0.1, 0.9, 0.95, 1e-8, 0.5, 0.8, 1.0},
        {"eps-matters", 1e-2, 0.9, 0.95, 1e-3, 0.01, 1.0, 1e-3},
    };
    size_t sizes[] = {1, 7, 1000};
    /* Both kernel families (texel: adamw_texel.comp, tiled: adamw.comp). */
    enum gpu_kernel_class classes[2] = {GPU_KERNELS_TEXEL, GPU_KERNELS_TILED};
    for (int f = 0; f < 2; f++) {
        gpu_set_kernel_class(g, classes[f]);
        printf(" %s kernels\n", f ? "tiled" : "texel");
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
                test_adamw(g, &cases[c], sizes[k], 10);
        test_adamw(g, &cases[1], (1u << 20) + 3, 3);
        test_grad_norm(g);
    }
    gpu_destroy(g);
    return test_result("test_optim");
}
