/* test_large: the GPT-2 LM head and cross-entropy at the full vocabulary
 * (V = 50304, D = 768), whose tensors exceed maxStorageBufferRange (128 MiB
 * on lavapipe), in both kernel families:
 *   logits[M,V] = X[M,D] · W[V,D]ᵀ        (nt; W is 154 MB, the logits of
 *                                           M ≥ 667 rows exceed 128 MiB)
 *   cross-entropy in place → dlogits[M,V]  (labels partly −100)
 *   dX[M,D]  = dlogits · W                 (nn; reduction over V)
 *   dW[V,D] += dlogitsᵀ · X                (tn; dW is 154 MB)
 * A full double reference would take minutes, so each matmul is checked on
 * ~2000 entries (random ones plus the corners of the blocks op_matmul.c
 * cuts at the 128 MiB limit) against double sums over the same fp32
 * inputs (the GPU's own logits / dlogits feed the next check), and the
 * cross-entropy on a few whole rows against ref_crossentropy_forward_backward.
 *
 * Row counts: texel family M = 1000 (every storage binding over the limit);
 * tiled family M = 128, since its kernel runs ~2.5 GFLOP/s on lavapipe
 * (3 × 2·M·V·D flops): W as a storage input and dW as the output exceed
 * the limit, the logits do not (test_ops covers split logits rows there).
 *
 * Tolerances (normalized error Σ(gpu−ref)²/Σref² over the sampled entries;
 * an indexing mistake gives errors near 1):
 *   logits (sums of 768), dW (sums of M): < 1e-10, as in test_ops;
 *   dX (sums of 50304): < 1e-8: an fp32 running sum of L terms errs by about
 *     sqrt(L)·2^-24 relative, 1.3e-5 at L = 50304, i.e. ~2e-10 squared;
 *   cross-entropy rows: dlogits < 1e-9 (as test_ops_nn), loss within
 *     1e-5 relative + 1e-6, count exact, ignored rows exactly 0. */
#include <math.h>
#include <string.h>

#include "gpu_testing.h"
#include "ref_ops.h"
#include "vktrain/ops.h"

#define V 50304
#define D 768
#define M_MAX 1000
#define SAMPLES 2000
#define CE_ROWS 6

static struct ref_rng rng;

struct entry {
    uint32_t r, c;
};

/* SAMPLES entries of a rows × cols matrix: the corners of blocks that
 * start at multiples of `brow` rows and `bcol` columns, then random ones. */
static void sample_entries(struct entry *e, uint32_t rows, uint32_t cols, uint32_t brow, uint32_t bcol)
{
    uint32_t rs[4] = {0, brow - 1, brow, rows - 1}, cs[4] = {0, bcol - 1, bcol, cols - 1};
    int n = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            e[n++] = (struct entry){rs[i] < rows ? rs[i] : rows - 1, cs[j] < cols ? cs[j] : cols - 1};
    for (; n < SAMPLES; n++)
        e[n] = (struct entry){(uint32_t)(ref_rng_u64(&rng) % rows), (uint32_t)(ref_rng_u64(&rng) % cols)};
}

/* Normalized error of got[] against ref[] over n sampled entries. */
static double sampled_error(const double *got, const double *ref, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++)
        num += (got[i] - ref[i]) * (got[i] - ref[i]), den += ref[i] * ref[i];
    return den > 0 ? num / den : num;
}

struct bufs {
    struct gpu_buffer *x, *w, *logits, *labels, *loss, *count, *dx, *dw;
};

static void run_family(struct gpu *g, enum gpu_kernel_class kc, uint32_t M, const struct bufs *b, const float *x,
                       const float *w, float *host_mv, float *host_vd)
{
    const char *fam = kc == GPU_KERNELS_TEXEL ? "texel" : "tiled";
    gpu_set_kernel_class(g, kc);
    struct entry *e = vkt_malloc(sizeof *e * SAMPLES, "entries");
    double *got = vkt_malloc(sizeof(double) * SAMPLES, "got"), *ref = vkt_malloc(sizeof(double) * SAMPLES, "ref");

    /* logits = X · Wᵀ; blocks of 640 rows (and 43648 columns, tiled). */
    double t0 = vkt_now();
    op_matmul_nt(g, b->x, b->w, b->logits, M, V, D, 0);
    gpu_submit(g);
    double t_nt = vkt_now() - t0;
    gpu_download(g, b->logits, 0, host_mv, sizeof(float) * M * V);
    sample_entries(e, M, V, 640, 43648);
    for (int i = 0; i < SAMPLES; i++) {
        double s = 0;
        for (int k = 0; k < D; k++)
            s += (double)x[(size_t)e[i].r * D + k] * w[(size_t)e[i].c * D + k];
        ref[i] = s, got[i] = host_mv[(size_t)e[i].r * V + e[i].c];
    }
    double err = sampled_error(got, ref, SAMPLES);
    printf("%s M=%u: logits (nt)  %.2f s, normalized error %.3g\n", fam, M, t_nt, err);
    CHECK(err < 1e-10, "%s logits: normalized error %.3g", fam, err);

    /* Cross-entropy: labels random, every 5th row ignored; the reference
     * rows are taken from the GPU's logits before they become dlogits. */
    int32_t *labels = vkt_malloc(sizeof(int32_t) * M, "labels");
    int valid = 0;
    for (uint32_t r = 0; r < M; r++) {
        labels[r] = r % 5 == 3 ? -100 : (int32_t)(ref_rng_u64(&rng) % V);
        valid += labels[r] >= 0;
    }
    gpu_upload(g, b->labels, 0, labels, sizeof(int32_t) * M);
    uint32_t ce_rows[CE_ROWS] = {0, 3, 641, M / 2, M - 2, M - 1};
    double *ce_logits = vkt_malloc(sizeof(double) * V, "ce row"),
           *ce_dl = vkt_malloc(sizeof(double) * V * CE_ROWS, "ce reference");
    double ce_loss[CE_ROWS], scale = 1.0 / valid;
    for (int i = 0; i < CE_ROWS; i++) {
        uint32_t r = ce_rows[i] < M ? ce_rows[i] : M - 1;
        for (int j = 0; j < V; j++)
            ce_logits[j] = host_mv[(size_t)r * V + j];
        int count = 0;
        ce_loss[i] = 0;
        ref_crossentropy_forward_backward(ce_dl + (size_t)i * V, &ce_loss[i], &count, ce_logits, &labels[r], 1, V,
                                          scale);
    }
    t0 = vkt_now();
    op_cross_entropy(g, b->logits, b->labels, b->loss, b->count, M, V, (float)scale);
    gpu_submit(g);
    double t_ce = vkt_now() - t0;
    gpu_download(g, b->logits, 0, host_mv, sizeof(float) * M * V);
    float *loss = download_floats(g, b->loss, M), *count = download_floats(g, b->count, M);
    double worst_dl = 0, worst_loss = 0;
    for (int i = 0; i < CE_ROWS; i++) {
        uint32_t r = ce_rows[i] < M ? ce_rows[i] : M - 1;
        double num = 0, den = 0;
        for (int j = 0; j < V; j++) {
            double d = host_mv[(size_t)r * V + j] - ce_dl[(size_t)i * V + j];
            num += d * d, den += ce_dl[(size_t)i * V + j] * ce_dl[(size_t)i * V + j];
        }
        double dl_err = den > 0 ? num / den : num, loss_err = fabs(loss[r] - ce_loss[i]);
        worst_dl = dl_err > worst_dl ? dl_err : worst_dl;
        worst_loss = loss_err > worst_loss ? loss_err : worst_loss;
        CHECK(den > 0 ? dl_err < 1e-9 : num == 0, "%s CE row %u: dlogits error %.3g", fam, r, dl_err);
        CHECK(loss_err <= 1e-5 * fabs(ce_loss[i]) + 1e-6, "%s CE row %u: loss %.9g vs reference %.9g", fam, r,
              (double)loss[r], ce_loss[i]);
        CHECK(count[r] == (labels[r] >= 0 ? 1.0f : 0.0f), "%s CE row %u: count %g", fam, r, (double)count[r]);
    }
    printf("%s M=%u: cross-entropy %.2f s, dlogits error %.3g, loss |diff| %.3g\n", fam, M, t_ce, worst_dl, worst_loss);

    /* dX = dlogits · W. */
    t0 = vkt_now();
    op_matmul_nn(g, b->logits, b->w, b->dx, M, V, D, 0);
    gpu_submit(g);
    double t_nn = vkt_now() - t0;
    float *dx = download_floats(g, b->dx, (size_t)M * D);
    sample_entries(e, M, D, 640, D);
    for (int i = 0; i < SAMPLES; i++) {
        double s = 0;
        for (int n = 0; n < V; n++)
            s += (double)host_mv[(size_t)e[i].r * V + n] * w[(size_t)n * D + e[i].c];
        ref[i] = s, got[i] = dx[(size_t)e[i].r * D + e[i].c];
    }
    err = sampled_error(got, ref, SAMPLES);
    printf("%s M=%u: dX (nn)      %.2f s, normalized error %.3g\n", fam, M, t_nn, err);
    CHECK(err < 1e-8, "%s dX: normalized error %.3g", fam, err);

    /* dW += dlogitsᵀ · X onto zeros; half the sampled rows of dW are
     * labels, where the gradient is large. */
    gpu_zero(g, b->dw);
    t0 = vkt_now();
    op_matmul_tn(g, b->logits, b->x, b->dw, M, V, D, 1);
    gpu_submit(g);
    double t_tn = vkt_now() - t0;
    gpu_download(g, b->dw, 0, host_vd, sizeof(float) * V * D);
    sample_entries(e, V, D, 43648, D);
    for (int i = 16; i < SAMPLES; i += 2) {
        int32_t lab = labels[ref_rng_u64(&rng) % M];
        e[i].r = lab >= 0 ? (uint32_t)lab : e[i].r;
    }
    for (int i = 0; i < SAMPLES; i++) {
        double s = 0;
        for (uint32_t m = 0; m < M; m++)
            s += (double)host_mv[(size_t)m * V + e[i].r] * x[(size_t)m * D + e[i].c];
        ref[i] = s, got[i] = host_vd[(size_t)e[i].r * D + e[i].c];
    }
    err = sampled_error(got, ref, SAMPLES);
    printf("%s M=%u: dW (tn)      %.2f s, normalized error %.3g\n", fam, M, t_tn, err);
    CHECK(err < 1e-10, "%s dW: normalized error %.3g", fam, err);

    free(e), free(got), free(ref), free(labels), free(ce_logits), free(ce_dl), free(loss), free(count), free(dx);
}

int main(void)
{
    ref_rng_seed(&rng, 50304);
    struct gpu *g = test_gpu();
    printf("maxStorageBufferRange %u bytes; W and dW %zu bytes, logits %zu bytes at M=%d\n",
           gpu_info(g)->max_storage_buffer_range, sizeof(float) * V * D, sizeof(float) * M_MAX * V, M_MAX);
    float *x = vkt_malloc(sizeof(float) * M_MAX * D, "X"), *w = vkt_malloc(sizeof(float) * V * D, "W");
    for (size_t i = 0; i < (size_t)M_MAX * D; i++)
        x[i] = (float)(2.0 * ref_rng_uniform(&rng) - 1.0);
    for (size_t i = 0; i < (size_t)V * D; i++)
        w[i] = (float)(0.1 * ref_rng_uniform(&rng) - 0.05);
    struct bufs b = {
        .x = gpu_buffer_create(g, sizeof(float) * M_MAX * D, "X"),
        .w = gpu_buffer_create(g, sizeof(float) * V * D, "W"),
        .logits = gpu_buffer_create(g, sizeof(float) * M_MAX * V, "logits"),
        .labels = gpu_buffer_create(g, sizeof(int32_t) * M_MAX, "labels"),
        .loss = gpu_buffer_create(g, sizeof(float) * M_MAX, "row loss"),
        .count = gpu_buffer_create(g, sizeof(float) * M_MAX, "row count"),
        .dx = gpu_buffer_create(g, sizeof(float) * M_MAX * D, "dX"),
        .dw = gpu_buffer_create(g, sizeof(float) * V * D, "dW"),
    };
    gpu_upload(g, b.x, 0, x, sizeof(float) * M_MAX * D);
    gpu_upload(g, b.w, 0, w, sizeof(float) * V * D);
    float *host_mv = vkt_malloc(sizeof(float) * M_MAX * V, "logits"),
          *host_vd = vkt_malloc(sizeof(float) * V * D, "dW");
    double t0 = vkt_now();
    run_family(g, GPU_KERNELS_TEXEL, M_MAX, &b, x, w, host_mv, host_vd);
    double t1 = vkt_now();
    run_family(g, GPU_KERNELS_TILED, 128, &b, x, w, host_mv, host_vd);
    printf("texel family %.1f s, tiled family %.1f s\n", t1 - t0, vkt_now() - t1);
    struct gpu_buffer *all[] = {b.x, b.w, b.logits, b.labels, b.loss, b.count, b.dx, b.dw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        gpu_buffer_destroy(g, all[i]);
    free(x), free(w), free(host_mv), free(host_vd);
    gpu_destroy(g);
    return test_result("test_large");
}
