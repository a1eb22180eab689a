/*
 * ref_attention.c — reference rotary position embedding (Hugging Face
 * rotate_half convention) and causal / block-causal self-attention with
 * grouped-query heads (declared in ref_ops.h). Double precision, plain loops.
 * Backward functions accumulate (+=) into every gradient they are given.
 */
#include "ref_ops.h"

#include <math.h>

/* ---- RoPE --------------------------------------------------------------- */

/* The rotation angle of pair j (j < hd/2) at position pos:
 * pos·inv_freq[j] with inv_freq[j] = theta^(−2j/hd). */
static double rope_angle(int32_t pos, int j, int hd, double theta)
{
    return (double)pos * pow(theta, -2.0 * j / hd);
}

void ref_rope_forward(double *out, const double *inp, const int32_t *positions, int N, int H, int hd, double theta)
{
    // out, inp are (N,H,hd), positions is (N)
    int half = hd / 2;
    for (int n = 0; n < N; n++) {
        for (int h = 0; h < H; h++) {
            const double *x = inp + ((size_t)n * H + h) * hd;
            double *y = out + ((size_t)n * H + h) * hd;
            for (int j = 0; j < half; j++) {
                double a = rope_angle(positions[n], j, hd, theta);
                double x1 = x[j];
                double x2 = x[j + half];
                y[j] = x1 * cos(a) - x2 * sin(a);
                y[j + half] = x2 * cos(a) + x1 * sin(a);
            }
        }
    }
}

/* The forward is y = R·x with R = [cos −sin; sin cos] on each pair
 * (x[j], x[j+hd/2]); R is orthogonal, so dx = Rᵀ·dy = [cos sin; −sin cos]·dy. */
void ref_rope_backward(double *dinp, const double *dout, const int32_t *positions, int N, int H, int hd, double theta)
{
    // dinp, dout are (N,H,hd), positions is (N)
    int half = hd / 2;
    for (int n = 0; n < N; n++) {
        for (int h = 0; h < H; h++) {
            const double *dy = dout + ((size_t)n * H + h) * hd;
            double *dx = dinp + ((size_t)n * H + h) * hd;
            for (int j = 0; j < half; j++) {
                double a = rope_angle(positions[n], j, hd, theta);
                double dy1 = dy[j];
                double dy2 = dy[j + half];
                dx[j] += dy1 * cos(a) + dy2 * sin(a);
                dx[j + half] += -dy1 * sin(a) + dy2 * cos(a);
            }
        }
    }
}

/* ---- attention ---------------------------------------------------------- */

/* Query t of sequence b may attend key t' when t' ≤ t, t − t' < window
 * (window > 0) and, with document ids, both tokens belong to the same
 * document. */
static int attention_allowed(const int32_t *doc, int b, int T, int t, int t2, int window)
{
    if (t2 > t || (window > 0 && t - t2 >= window))
        return 0;
    return doc == NULL || doc[b * T + t2] == doc[b * T + t];
}

void ref_attention_forward(double *out, double *probs, const double *q, const double *k, const double *v,
                           const int32_t *doc, int B, int T, int H, int KVH, int hd)
{
    ref_attention_forward_window(out, probs, q, k, v, doc, B, T, H, KVH, hd, 0);
}

void ref_attention_forward_window(double *out, double *probs, const double *q, const double *k, const double *v,
                                  const int32_t *doc, int B, int T, int H, int KVH, int hd, int window)
{
    ref_attention_forward_capped(out, probs, q, k, v, doc, B, T, H, KVH, hd, window, 0.0);
}

void ref_attention_forward_capped(double *out, double *probs, const double *q, const double *k, const double *v,
                                  const int32_t *doc, int B, int T, int H, int KVH, int hd, int window,
                                  double softcap)
{
    // out, q are (B,T,H,hd); k, v are (B,T,KVH,hd); doc is (B,T); probs is (B,H,T,T)
    int group = H / KVH; // query heads per kv head
    double scale = 1.0 / sqrt((double)hd);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            int kh = h / group;
            for (int t = 0; t < T; t++) {
                const double *qt = q + (((size_t)b * T + t) * H + h) * hd;
                double *p = probs + (((size_t)b * H + h) * T + t) * T;

                // scores and their max over the allowed keys (t' = t always is)
                double maxs = -INFINITY;
                for (int t2 = 0; t2 < T; t2++) {
                    p[t2] = 0.0;
                    if (!attention_allowed(doc, b, T, t, t2, window))
                        continue;
                    const double *kt = k + (((size_t)b * T + t2) * KVH + kh) * hd;
                    double s = 0.0;
                    for (int i = 0; i < hd; i++) {
                        s += qt[i] * kt[i];
                    }
                    p[t2] = softcap > 0 ? softcap * tanh(s * scale / softcap) : s * scale;
                    if (p[t2] > maxs)
                        maxs = p[t2];
                }

                // softmax over the allowed keys; masked entries stay exactly 0
                double sum = 0.0;
                for (int t2 = 0; t2 < T; t2++) {
                    if (!attention_allowed(doc, b, T, t, t2, window))
                        continue;
                    p[t2] = exp(p[t2] - maxs);
                    sum += p[t2];
                }
                for (int t2 = 0; t2 < T; t2++) {
                    p[t2] /= sum;
                }

                // weighted sum of the values
                double *ot = out + (((size_t)b * T + t) * H + h) * hd;
                for (int i = 0; i < hd; i++) {
                    ot[i] = 0.0;
                }
                for (int t2 = 0; t2 < T; t2++) {
                    const double *vt = v + (((size_t)b * T + t2) * KVH + kh) * hd;
                    for (int i = 0; i < hd; i++) {
                        ot[i] += p[t2] * vt[i];
                    }
                }
            }
        }
    }
}

/* With s = scale·q·kᵀ, P = softmax(s) (masked) and o = P·v:
 *   dv[t']  += Σ_t P[t,t']·do[t]
 *   dP[t,t'] = do[t]·v[t']
 *   ds[t,t'] = P[t,t']·(dP[t,t'] − Σ_u P[t,u]·dP[t,u])   (0 where masked, since P = 0)
 *   dq[t]   += scale·Σ_t' ds[t,t']·k[t'],   dk[t'] += scale·Σ_t ds[t,t']·q[t]
 * Query heads sharing a kv head all add into its dk, dv. */
void ref_attention_backward(double *dq, double *dk, double *dv, const double *dout, const double *probs,
                            const double *q, const double *k, const double *v, int B, int T, int H, int KVH, int hd)
{
    ref_attention_backward_capped(dq, dk, dv, dout, probs, q, k, v, B, T, H, KVH, hd, 0.0);
}

/* The slope of the soft-capped score at t' of query row qt: 1 − tanh²(s/c). */
static double cap_slope(const double *qt, const double *kt, int hd, double scale, double softcap)
{
    if (softcap <= 0)
        return 1.0;
    double s = 0.0;
    for (int i = 0; i < hd; i++)
        s += qt[i] * kt[i];
    double th = tanh(s * scale / softcap);
    return 1.0 - th * th;
}

void ref_attention_backward_capped(double *dq, double *dk, double *dv, const double *dout, const double *probs,
                                   const double *q, const double *k, const double *v, int B, int T, int H, int KVH,
                                   int hd, double softcap)
{
    // dout, dq, q are (B,T,H,hd); dk, dv, k, v are (B,T,KVH,hd); probs is (B,H,T,T)
    int group = H / KVH;
    double scale = 1.0 / sqrt((double)hd);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            int kh = h / group;
            for (int t = 0; t < T; t++) {
                const double *p = probs + (((size_t)b * H + h) * T + t) * T;
                const double *dot = dout + (((size_t)b * T + t) * H + h) * hd;
                const double *qt = q + (((size_t)b * T + t) * H + h) * hd;
                double *dqt = dq + (((size_t)b * T + t) * H + h) * hd;

                // dP[t,t'] and Σ_u P[t,u]·dP[t,u]
                double pdp = 0.0;
                for (int t2 = 0; t2 < T; t2++) {
                    const double *vt = v + (((size_t)b * T + t2) * KVH + kh) * hd;
                    double dp = 0.0;
                    for (int i = 0; i < hd; i++) {
                        dp += dot[i] * vt[i];
                    }
                    pdp += p[t2] * dp;
                }

                for (int t2 = 0; t2 < T; t2++) {
                    const double *kt = k + (((size_t)b * T + t2) * KVH + kh) * hd;
                    const double *vt = v + (((size_t)b * T + t2) * KVH + kh) * hd;
                    double *dkt = dk + (((size_t)b * T + t2) * KVH + kh) * hd;
                    double *dvt = dv + (((size_t)b * T + t2) * KVH + kh) * hd;
                    double dp = 0.0;
                    for (int i = 0; i < hd; i++) {
                        dp += dot[i] * vt[i];
                    }
                    double ds = p[t2] * (dp - pdp) * cap_slope(qt, kt, hd, scale, softcap);
                    for (int i = 0; i < hd; i++) {
                        dvt[i] += p[t2] * dot[i];
                        dqt[i] += scale * ds * kt[i];
                        dkt[i] += scale * ds * qt[i];
                    }
                }
            }
        }
    }
}
