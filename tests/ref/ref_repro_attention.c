/* ref_repro_attention: the C reference of the reproducible attention
 * (shaders/reproducible/repro_attention.comp and _bwd.comp), forward and backward: the same
 * operations in the same order, written as the plain loops of the formulas
 * (the probabilities of a row computed once, the row sum by repro_sum_ref
 * over all T keys, +0 for the keys not allowed: another document's, the
 * future's, those outside the sliding window), not as the shader's walk. */
#include <math.h>
#include <stdlib.h>

#include "repro_ref.h"
#include "vktrain/util.h"

/* The shape with packed strides filled in; window 0 (none) where it holds
 * the whole sequence, as the op's push constants. */
struct layout {
    size_t B, T, H, KVH, hd, group, qs, kvs, q0, k0, v0, window;
    float scale;
};

static struct layout layout_of(const struct op_attention_shape *s)
{
    /* the scale of attention_push_of: 1/sqrt(hd) in double (correctly
     * rounded, so the same on every host), rounded to a float */
    struct layout l = {.B = s->B, .T = s->T, .H = s->H, .KVH = s->KVH, .hd = s->hd, .group = s->H / s->KVH};
    l.qs = s->q_stride, l.kvs = s->kv_stride, l.q0 = s->q_off, l.k0 = s->k_off, l.v0 = s->v_off;
    l.scale = (float)(1.0 / sqrt((double)s->hd));
    l.window = s->window < s->T ? s->window : 0;
    if (!l.qs)
        l.qs = l.H * l.hd;
    if (!l.kvs)
        l.kvs = l.KVH * l.hd;
    return l;
}

static size_t qat(const struct layout *l, size_t b, size_t t, size_t h)
{
    return l->q0 + (b * l->T + t) * l->qs + h * l->hd;
}
static size_t kat(const struct layout *l, size_t b, size_t t, size_t kh)
{
    return l->k0 + (b * l->T + t) * l->kvs + kh * l->hd;
}
static size_t vat(const struct layout *l, size_t b, size_t t, size_t kh)
{
    return l->v0 + (b * l->T + t) * l->kvs + kh * l->hd;
}
static size_t oat(const struct layout *l, size_t b, size_t t, size_t h)
{
    return ((b * l->T + t) * l->H + h) * l->hd;
}
static size_t rat(const struct layout *l, size_t b, size_t h, size_t t)
{
    return (b * l->H + h) * l->T + t;
}

/* Key j for query row t: in its past, its window (t − j < window) and its
 * document. */
static int allowed(const struct layout *l, const int32_t *doc, size_t b, size_t t, size_t j)
{
    return j <= t && (!l->window || t - j < l->window) && (!doc || doc[b * l->T + j] == doc[b * l->T + t]);
}

/* Σ_d x[d]·y[d] from +0 in d order. */
static float dot(const float *x, const float *y, size_t n)
{
    float acc = 0.0f;
    for (size_t d = 0; d < n; d++) {
        float t = x[d] * y[d];
        acc = acc + t;
    }
    return acc;
}

static float max_of(float a, float b)
{
    return b > a || b != b ? b : a;
}

/* P[j] = repro_exp(s_j − lse) of query (b, h, t) for its allowed keys. */
static void probabilities(const struct layout *l, const float *q, const float *k, const int32_t *doc, size_t b,
                          size_t h, size_t t, float lse, float *P)
{
    for (size_t j = 0; j <= t; j++)
        if (allowed(l, doc, b, t, j)) {
            float s = dot(q + qat(l, b, t, h), k + kat(l, b, j, h / l->group), l->hd) * l->scale;
            P[j] = repro_exp(s - lse);
        }
}

void repro_attention_ref(const struct op_attention_shape *shape, const float *q, const float *k, const float *v,
                         const int32_t *doc, float *out, float *lse)
{
    struct layout l = layout_of(shape);
    float *s = vkt_malloc(l.T * sizeof *s, "repro attention scores");
    float *e = vkt_malloc(l.T * sizeof *e, "repro attention row");
    for (size_t b = 0; b < l.B; b++)
        for (size_t h = 0; h < l.H; h++)
            for (size_t t = 0; t < l.T; t++) {
                float m = repro_float_of(0xff800000u);
                for (size_t j = 0; j < l.T; j++) {
                    e[j] = 0.0f;
                    if (allowed(&l, doc, b, t, j)) {
                        s[j] = dot(q + qat(&l, b, t, h), k + kat(&l, b, j, h / l.group), l.hd) * l.scale;
                        m = max_of(m, s[j]);
                    }
                }
                for (size_t j = 0; j < l.T; j++)
                    if (allowed(&l, doc, b, t, j))
                        e[j] = repro_exp(s[j] - m);
                float sum = repro_sum_ref(e, l.T);
                lse[rat(&l, b, h, t)] = m + repro_log(sum);
                float *o = out + oat(&l, b, t, h);
                for (size_t d = 0; d < l.hd; d++)
                    o[d] = 0.0f;
                for (size_t j = 0; j < l.T; j++)
                    if (allowed(&l, doc, b, t, j)) {
                        const float *vj = v + vat(&l, b, j, h / l.group);
                        for (size_t d = 0; d < l.hd; d++) {
                            float x = e[j] * vj[d];
                            o[d] = o[d] + x;
                        }
                    }
                for (size_t d = 0; d < l.hd; d++)
                    o[d] = repro_div(o[d], sum);
            }
    free(s);
    free(e);
}

void repro_attention_backward_ref(const struct op_attention_shape *shape, const float *q, const float *k,
                                  const float *v, const int32_t *doc, const float *out, const float *lse,
                                  const float *dout, float *dq, float *dk, float *dv)
{
    struct layout l = layout_of(shape);
    size_t rows = l.B * l.H * l.T;
    float *D = vkt_malloc(rows * sizeof *D, "repro attention D");
    float *P = vkt_malloc(rows * l.T * sizeof *P, "repro attention P");
    float *dS = vkt_malloc(rows * l.T * sizeof *dS, "repro attention dS");
    for (size_t b = 0; b < l.B; b++)
        for (size_t h = 0; h < l.H; h++)
            for (size_t t = 0; t < l.T; t++) {
                size_t r = rat(&l, b, h, t);
                D[r] = dot(dout + oat(&l, b, t, h), out + oat(&l, b, t, h), l.hd);
                probabilities(&l, q, k, doc, b, h, t, lse[r], P + r * l.T);
                for (size_t j = 0; j <= t; j++)
                    if (allowed(&l, doc, b, t, j)) {
                        float dp = dot(dout + oat(&l, b, t, h), v + vat(&l, b, j, h / l.group), l.hd);
                        float ds = P[r * l.T + j] * (dp - D[r]);
                        dS[r * l.T + j] = ds * l.scale;
                    }
            }
    /* dq: per query row, keys in order */
    for (size_t b = 0; b < l.B; b++)
        for (size_t h = 0; h < l.H; h++)
            for (size_t t = 0; t < l.T; t++) {
                size_t r = rat(&l, b, h, t);
                float *g = dq + qat(&l, b, t, h);
                for (size_t j = 0; j <= t; j++)
                    if (allowed(&l, doc, b, t, j)) {
                        const float *kj = k + kat(&l, b, j, h / l.group);
                        for (size_t d = 0; d < l.hd; d++) {
                            float x = dS[r * l.T + j] * kj[d];
                            g[d] = g[d] + x;
                        }
                    }
            }
    /* dk, dv: per key row, the group's heads in order, then query rows */
    for (size_t b = 0; b < l.B; b++)
        for (size_t kh = 0; kh < l.KVH; kh++)
            for (size_t j = 0; j < l.T; j++) {
                float *gk = dk + kat(&l, b, j, kh), *gv = dv + vat(&l, b, j, kh);
                for (size_t h = kh * l.group; h < (kh + 1) * l.group; h++)
                    for (size_t t = j; t < l.T; t++) {
                        if (!allowed(&l, doc, b, t, j))
                            continue;
                        size_t r = rat(&l, b, h, t);
                        const float *qt = q + qat(&l, b, t, h), *dot_ = dout + oat(&l, b, t, h);
                        for (size_t d = 0; d < l.hd; d++) {
                            float x = dS[r * l.T + j] * qt[d];
                            gk[d] = gk[d] + x;
                            float y = P[r * l.T + j] * dot_[d];
                            gv[d] = gv[d] + y;
                        }
                    }
            }
    free(D);
    free(P);
    free(dS);
}
