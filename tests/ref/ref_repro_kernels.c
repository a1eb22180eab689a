/* ref_repro_kernels: the C references of the reproducible mode's sum,
 * matrix product and AdamW step (tests/ref/repro_ref.h): each float
 * operation on its own, in the order of the device's kernels. */
#include <stdlib.h>

#include "repro_ref.h"
#include "vktrain/util.h"

struct product {
    uint32_t M, N, K, sai, sak, sbk, sbj;
};

float repro_sum_ref(const float *x, size_t n)
{
    size_t q = 1;
    while (q < n)
        q *= 2;
    float *t = vkt_malloc(q * sizeof *t, "repro sum tree");
    for (size_t i = 0; i < q; i++)
        t[i] = i < n ? x[i] : 0.0f;
    for (size_t width = q; width > 1; width /= 2)
        for (size_t i = 0; i < width / 2; i++) {
            float v = t[2 * i] + t[2 * i + 1];
            t[i] = v;
        }
    float total = t[0] + 0.0f;
    free(t);
    return total;
}

void repro_matmul_ref(enum repro_layout layout, const float *a, const float *b, float *c, uint32_t M, uint32_t N,
                      uint32_t K, int accumulate)
{
    /* c[i, j] (+)= Σ_k a[i·sai + k·sak]·b[k·sbk + j·sbj] over p.M x p.N outputs:
     * nt Y = X·Wᵀ, nn dX = dY·W, tn dW = dYᵀ·X */
    struct product p = {N, K, M, 1, N, K, 1};
    if (layout == REPRO_NT)
        p = (struct product){M, N, K, K, 1, 1, K};
    else if (layout == REPRO_NN)
        p = (struct product){M, K, N, N, 1, K, 1};
    for (size_t i = 0; i < p.M; i++)
        for (size_t j = 0; j < p.N; j++) {
            float acc = accumulate ? c[i * p.N + j] : 0.0f;
            for (size_t k = 0; k < p.K; k++) {
                float t = a[i * p.sai + k * p.sak] * b[k * p.sbk + j * p.sbj];
                acc = acc + t;
            }
            c[i * p.N + j] = acc;
        }
}

void repro_adamw_ref(float *theta, const float *grad, float *m, float *v, size_t n, const struct op_adamw_step *s)
{
    struct repro_adamw_push p;
    repro_adamw_scalars(s, (uint32_t)n, &p);
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * p.grad_scale;
        float th = theta[i] * p.decay;
        float mi = m[i] * p.beta1, mg = p.one_minus_beta1 * g;
        mi = mi + mg;
        float vi = v[i] * p.beta2, vg = p.one_minus_beta2 * g;
        vg = vg * g;
        vi = vi + vg;
        float denom = repro_sqrt_fast(vi) * p.inv_bc2_sqrt;
        denom = denom + p.eps;
        float upd = p.neg_step_size * mi, q = upd * repro_recip_fast(denom);
        th = th + q;
        m[i] = mi;
        v[i] = vi;
        theta[i] = th;
    }
}
