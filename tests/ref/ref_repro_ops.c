/* ref_repro_ops: the C references of the reproducible mode's kernels of the
 * model's ops (shaders/reproducible/repro_elementwise.comp, repro_colsum.comp,
 * repro_norm.comp, repro_activation.comp, repro_rope.comp,
 * repro_embedding.comp, repro_embedding_back.comp): the same operations in
 * the same order, so a device's bits can be compared with them. The
 * per-element formulas are compiled from the shaders' own source
 * (shaders/reproducible/repro_ops.glsl), the row sums are repro_sum_ref. Built with
 * -ffp-contract=off, as src/repro is (tests/CMakeLists.txt). */
#include <stdlib.h>
#include <string.h>

#include "repro_ref.h"
#include "vktrain/util.h"

#include "repro_glsl_c.h"

#include "../../shaders/reproducible/repro_ops.glsl"

void repro_add_ref(const float *x, const float *y, float *z, size_t n)
{
    for (size_t i = 0; i < n; i++)
        z[i] = x[i] + y[i];
}

void repro_scale_ref(float *x, float a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] * a;
}

void repro_axpy_ref(float a, const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float t = a * x[i];
        y[i] = y[i] + t;
    }
}

void repro_bias_add_ref(const float *bias, float *y, size_t rows, size_t C)
{
    for (size_t i = 0; i < rows * C; i++)
        y[i] = y[i] + bias[i % C];
}

void repro_colsum_ref(enum repro_colsum mode, const float *dy, const float *x, const float *mean, const float *rstd,
                      float *out, size_t rows, size_t C)
{
    for (size_t c = 0; c < C; c++) {
        float acc = out[c];
        for (size_t r = 0; r < rows; r++) {
            float g = dy[r * C + c];
            if (mode == REPRO_COLSUM_RMS) {
                float xs = x[r * C + c] * rstd[r];
                g = g * xs;
            } else if (mode == REPRO_COLSUM_LN) {
                float xhat = x[r * C + c] - mean[r];
                xhat = xhat * rstd[r];
                g = g * xhat;
            }
            acc = acc + g;
        }
        out[c] = acc;
    }
}

float repro_sumsq_ref(const float *x, size_t n)
{
    float *sq = vkt_malloc(n * sizeof *sq, "repro sumsq");
    for (size_t i = 0; i < n; i++)
        sq[i] = x[i] * x[i];
    float s = repro_sum_ref(sq, n);
    free(sq);
    return s;
}

void repro_rmsnorm_ref(const float *x, const float *w, float *y, float *rstd, size_t rows, size_t C, float eps)
{
    float *t = vkt_malloc(C * sizeof *t, "repro rmsnorm row");
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        for (size_t i = 0; i < C; i++)
            t[i] = xr[i] * xr[i];
        float s = repro_norm_rstd(repro_sum_ref(t, C), (float)C, eps);
        for (size_t i = 0; i < C; i++)
            y[r * C + i] = repro_rms_y(xr[i], s, w[i]);
        rstd[r] = s;
    }
    free(t);
}

void repro_rmsnorm_backward_ref(const float *dy, const float *x, const float *w, const float *rstd, float *dx,
                                float *dw, size_t rows, size_t C)
{
    float *t = vkt_malloc(C * sizeof *t, "repro rmsnorm row");
    for (size_t r = 0; r < rows; r++) {
        size_t b = r * C;
        for (size_t i = 0; i < C; i++) {
            float v = w[i] * dy[b + i];
            t[i] = v * x[b + i];
        }
        float s = rstd[r], k = repro_rms_k(s, repro_sum_ref(t, C), (float)C);
        for (size_t i = 0; i < C; i++)
            dx[b + i] = repro_rms_dx(dx[b + i], s, w[i], dy[b + i], k, x[b + i]);
    }
    free(t);
    repro_colsum_ref(REPRO_COLSUM_RMS, dy, x, rstd, rstd, dw, rows, C);
}

void repro_layernorm_ref(const float *x, const float *w, const float *b, float *y, float *mean, float *rstd,
                         size_t rows, size_t C, float eps)
{
    float *t = vkt_malloc(C * sizeof *t, "repro layernorm row");
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        float m = repro_div(repro_sum_ref(xr, C), (float)C);
        for (size_t i = 0; i < C; i++) {
            float d = xr[i] - m;
            t[i] = d * d;
        }
        float s = repro_norm_rstd(repro_sum_ref(t, C), (float)C, eps);
        for (size_t i = 0; i < C; i++)
            y[r * C + i] = repro_ln_y(xr[i], m, s, w[i], b[i]);
        mean[r] = m;
        rstd[r] = s;
    }
    free(t);
}

void repro_layernorm_backward_ref(const float *dy, const float *x, const float *w, const float *mean, const float *rstd,
                                  float *dx, float *dw, float *db, size_t rows, size_t C)
{
    float *g = vkt_malloc(C * sizeof *g, "repro layernorm row");
    float *t = vkt_malloc(C * sizeof *t, "repro layernorm row");
    for (size_t r = 0; r < rows; r++) {
        size_t o = r * C;
        float m = mean[r], s = rstd[r];
        for (size_t i = 0; i < C; i++) {
            g[i] = w[i] * dy[o + i];
            float d = x[o + i] - m;
            float v = g[i] * d;
            t[i] = v * s;
        }
        float a = repro_div(repro_sum_ref(g, C), (float)C);
        float bb = repro_div(repro_sum_ref(t, C), (float)C);
        for (size_t i = 0; i < C; i++)
            dx[o + i] = repro_ln_dx(dx[o + i], g[i], x[o + i], m, s, a, bb);
    }
    free(g);
    free(t);
    repro_colsum_ref(REPRO_COLSUM_LN, dy, x, mean, rstd, dw, rows, C);
    repro_colsum_ref(REPRO_COLSUM_PLAIN, dy, dy, dy, dy, db, rows, C);
}

void repro_swiglu_ref(const float *gate, const float *up, float *h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h[i] = repro_swiglu_h(gate[i], up[i]);
}

void repro_swiglu_backward_ref(const float *gate, const float *up, const float *dh, float *dgate, float *dup, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dgate[i] = repro_swiglu_dgate(dgate[i], gate[i], up[i], dh[i]);
        dup[i] = repro_swiglu_dup(dup[i], gate[i], dh[i]);
    }
}

void repro_gelu_ref(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = repro_gelu(x[i]);
}

void repro_gelu_backward_ref(const float *x, const float *dy, float *dx, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dx[i] = repro_gelu_dx(dx[i], x[i], dy[i]);
}

static size_t clamp_id(int32_t id, size_t n)
{
    return id < 0 ? 0 : (size_t)id >= n ? n - 1 : (size_t)id;
}

void repro_rope_ref(float *x, const int32_t *positions, const float *table, size_t rows, size_t H, size_t hd,
                    size_t max_pos, int backward)
{
    size_t half = hd / 2;
    for (size_t r = 0; r < rows; r++) {
        size_t ps = clamp_id(positions[r], max_pos);
        for (size_t h = 0; h < H; h++)
            for (size_t j = 0; j < half; j++) {
                const float *cs = table + (ps * half + j) * 2;
                float c = cs[0], sn = (backward ? -1.0f : 1.0f) * cs[1];
                float *v = x + (r * H + h) * hd;
                float a = v[j], b = v[j + half];
                float ac = a * c, bs = b * sn, bc = b * c, as = a * sn;
                v[j] = ac - bs;
                v[j + half] = bc + as;
            }
    }
}

void repro_embedding_ref(const int32_t *tokens, const int32_t *positions, const float *wte, const float *wpe,
                         float *out, size_t rows, size_t C, size_t V, size_t P)
{
    for (size_t r = 0; r < rows; r++) {
        const float *t = wte + clamp_id(tokens[r], V) * C;
        const float *q = wpe ? wpe + clamp_id(positions[r], P) * C : NULL;
        for (size_t c = 0; c < C; c++)
            out[r * C + c] = q ? t[c] + q[c] : t[c];
    }
}

void repro_embedding_backward_ref(const int32_t *ids, const float *dout, float *dtable, size_t rows, size_t C, size_t V)
{
    for (size_t r = 0; r < rows; r++) {
        float *t = dtable + clamp_id(ids[r], V) * C;
        for (size_t c = 0; c < C; c++)
            t[c] = t[c] + dout[r * C + c];
    }
}
