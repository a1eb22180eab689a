/* test_repro_host: the host's inputs to the device in the reproducible
 * mode (src/repro/repro_host.c, schedule_lr_repro), which call only
 * IEEE + − × / and sqrt and the math layer (read the code: no libm):
 *   - the RoPE table within 1e-6 of op_rope_table's (libm in double) for
 *     the default, linear and llama3 frequencies, head dimensions 64, 96
 *     (a root that is not a power of two) and 128, 4096 positions;
 *   - the cosine schedule within 1e-6·lr of schedule_lr, and the same bits
 *     where no cosine is taken (warmup, constant, linear);
 *   - the normal deviates within their error bound of Box–Muller in double
 *     from the same uniforms, with mean 0 and variance 1, and a model
 *     initialized with the gpu's reproducible flag draws them from the
 *     same random words as the default (within 1e-4·std);
 *   - the bits themselves: a digest of each, which any host must give
 *     (they change only when the math layer does, and then every
 *     reproducible run's bits change with them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_testing.h"
#include "vktrain/model.h"
#include "vktrain/repro.h"
#include "vktrain/schedule.h"

static uint64_t digest(const float *x, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = repro_bits_of(x[i]);
        for (int b = 0; b < 4; b++)
            h = (h ^ ((u >> (8 * b)) & 0xff)) * 0x100000001b3ull; /* FNV-1a */
    }
    return h;
}

static uint64_t check_rope(const char *what, uint32_t hd, double theta, const struct op_rope_scaling *s)
{
    enum { P = 4096 };
    size_t n = (size_t)P * hd;
    float *want = vkt_malloc(n * sizeof *want, "table"), *got = vkt_malloc(n * sizeof *got, "table");
    float *again = vkt_malloc(n * sizeof *again, "table");
    op_rope_table(want, P, hd, theta, s);
    repro_rope_table(got, P, hd, theta, s);
    repro_rope_table(again, P, hd, theta, s);
    double worst = 0;
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, fabs((double)got[i] - (double)want[i]));
    printf("  rope %s: max |repro - libm| = %.3g\n", what, worst);
    CHECK(worst <= 1e-6, "rope %s: the reproducible table is %g from libm's", what, worst);
    CHECK(!memcmp(got, again, n * sizeof *got), "rope %s: two tables differ", what);
    uint64_t h = digest(got, n, 0xcbf29ce484222325ull);
    free(want), free(got), free(again);
    return h;
}

static uint64_t check_schedule(void)
{
    const enum lr_schedule types[] = {LR_CONSTANT, LR_COSINE, LR_LINEAR};
    uint64_t h = 0xcbf29ce484222325ull;
    double worst = 0;
    for (int k = 0; k < 3; k++)
        for (int64_t step = 0; step < 1100; step++) {
            double lr = schedule_lr(types[k], 3e-3, 20, 1000, 0.1, step);
            double r = schedule_lr_repro(types[k], 3e-3, 20, 1000, 0.1, step);
            if (types[k] != LR_COSINE || step < 20)
                CHECK(r == lr, "schedule %d step %lld: %.17g, not %.17g", k, (long long)step, r, lr);
            worst = fmax(worst, fabs(r - lr) / 3e-3);
            float f = (float)r;
            h = digest(&f, 1, h);
        }
    printf("  schedule: max |repro - libm| / lr = %.3g\n", worst);
    CHECK(worst <= 1e-6, "the reproducible schedule is %g lr from libm's", worst);
    return h;
}

static uint64_t check_normal(void)
{
    enum { N = 200000 };
    uint64_t s = 42, h = 0xcbf29ce484222325ull;
    double sum = 0, sum2 = 0, worst = 0;
    for (int i = 0; i < N; i++) {
        uint64_t r1 = vkt_splitmix64(&s), r2 = vkt_splitmix64(&s);
        float x = repro_normal(r1, r2);
        /* the same uniforms in double */
        double u1 = (double)((r1 >> 40) + 1) * 0x1p-24, u2 = (double)(r2 >> 40) * 0x1p-24;
        double radius = sqrt(-2.0 * log(u1)), want = radius * cos(6.283185307179586 * u2);
        /* log 2 ULP, sqrt and the products 0.5 ULP each, the angle's
         * rounding 2^-22 absolute, cos 4 ULP or 2^-23 */
        double bound = 1.2e-6 * radius + 1e-6 * fabs(want);
        worst = fmax(worst, fabs((double)x - want) / bound);
        sum += x, sum2 += (double)x * x;
        h = digest(&x, 1, h);
    }
    double mean = sum / N, var = sum2 / N - mean * mean;
    printf("  normal: worst error %.2f of its bound, mean %.4f, variance %.4f\n", worst, mean, var);
    CHECK(worst <= 1.0, "repro_normal is %.2f times its error bound from Box-Muller in double", worst);
    CHECK(fabs(mean) < 0.01 && fabs(var - 1.0) < 0.01, "mean %g, variance %g", mean, var);
    return h;
}

/* A weights-only llama initialized with and without the reproducible flag:
 * the same random words, so the same values to the uniforms' and the math
 * layer's rounding; not the same bits (the flag took the other path). */
static void check_model_init(void)
{
    struct gpu *g = test_gpu();
    struct model_config mc = {.arch = MODEL_LLAMA,
                              .vocab_size = 64,
                              .dim = 32,
                              .n_layers = 1,
                              .n_heads = 2,
                              .n_kv_heads = 2,
                              .hidden_dim = 48,
                              .max_seq_len = 16,
                              .norm_eps = 1e-5f,
                              .rope_theta = 10000.0,
                              .init_std = 0.02f};
    float *w[2];
    size_t n = 0;
    for (int repro = 0; repro < 2; repro++) {
        gpu_set_reproducible(g, repro);
        struct model *m = model_create(g, &mc, 0);
        model_init_random(m, 7);
        struct model_param *p = model_param(m, 0); /* the token embedding */
        n = p->numel;
        w[repro] = vkt_malloc(n * sizeof(float), "weights");
        model_param_download(m, p, w[repro]);
        model_destroy(m);
    }
    gpu_set_reproducible(g, 0);
    size_t same = 0, far = 0;
    for (size_t i = 0; i < n; i++) {
        same += w[0][i] == w[1][i];
        far += fabs((double)w[0][i] - (double)w[1][i]) > 1e-4 * 0.02;
    }
    printf("  model init: %zu of %zu equal, %zu beyond 1e-4 std\n", same, n, far);
    CHECK(same < n, "the reproducible flag did not change the initialization");
    CHECK(far == 0, "%zu of %zu initial weights differ from the default's by more than 1e-4 std", far, n);
    free(w[0]), free(w[1]);
    gpu_destroy(g);
}

int main(void)
{
    const struct op_rope_scaling linear = {.type = OP_ROPE_LINEAR, .factor = 4.0};
    const struct op_rope_scaling llama3 = {
        .type = OP_ROPE_LLAMA3, .factor = 32.0, .low_freq_factor = 1.0, .high_freq_factor = 4.0, .original_max = 8192};
    /* longrope (Phi-4-mini's kind): per-pair factors, the cos/sin factor;
     * the short table and the long one */
    struct op_rope_scaling longrope = {.type = OP_ROPE_LONGROPE, .original_max = 4096, .attention = 1.19};
    for (int j = 0; j < OP_ROPE_MAX_FREQS; j++)
        longrope.short_factor[j] = 1.0 + 0.05 * j, longrope.long_factor[j] = 1.0 + 0.9 * j;
    check_rope("hd 96, longrope short", 96, 10000.0, &longrope);
    longrope.long_table = 1;
    check_rope("hd 96, longrope long", 96, 10000.0, &longrope);
    uint64_t h[5] = {
        check_rope("hd 64, theta 1e4", 64, 10000.0, NULL),
        check_rope("hd 96, theta 1e4, linear x4", 96, 10000.0, &linear),
        check_rope("hd 128, theta 5e5, llama3", 128, 500000.0, &llama3),
        check_schedule(),
        check_normal(),
    };
    /* The bits of this version's math layer (x86-64, glibc): a host where
     * they differ computes something else than IEEE arithmetic gives. */
    const uint64_t want[5] = {0x70b7b9093b1730b8ull, 0x64dd5e52ca0b2aeaull, 0x4098b8534b1ddbe2ull,
                              0x0646635ab4a01870ull, 0x665337d8c35e1e28ull};
    const char *names[5] = {"rope hd 64", "rope hd 96", "rope hd 128 llama3", "schedule", "normal"};
    for (int i = 0; i < 5; i++)
        CHECK(h[i] == want[i], "%s: digest 0x%016llx, this version's bits give 0x%016llx", names[i],
              (unsigned long long)h[i], (unsigned long long)want[i]);
    check_model_init();
    return test_failures ? 1 : 0;
}
