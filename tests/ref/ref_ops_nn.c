/*
 * ref_ops_nn.c — reference linear layers, embeddings, norms and activations
 * (declared in ref_ops.h). Double precision, plain loops, llm.c style.
 * Backward functions accumulate (+=) into every gradient they are given.
 */
#include "ref_ops.h"

#include <math.h>

/* ---- linear layers ------------------------------------------------------ */

void ref_matmul_forward(double *out, const double *inp, const double *weight, const double *bias, int N, int C, int OC)
{
    // out is (N,OC), inp is (N,C), weight is (OC,C), bias is (OC)
    for (int n = 0; n < N; n++) {
        const double *x = inp + (size_t)n * C;
        for (int o = 0; o < OC; o++) {
            const double *w = weight + (size_t)o * C;
            double y = bias ? bias[o] : 0.0;
            for (int c = 0; c < C; c++) {
                y += x[c] * w[c];
            }
            out[(size_t)n * OC + o] = y;
        }
    }
}

void ref_matmul_backward(double *dinp, double *dweight, double *dbias, const double *dout, const double *inp,
                         const double *weight, int N, int C, int OC)
{
    // dout is (N,OC); dinp, inp are (N,C); dweight, weight are (OC,C)
    for (int n = 0; n < N; n++) {
        for (int o = 0; o < OC; o++) {
            double g = dout[(size_t)n * OC + o];
            for (int c = 0; c < C; c++) {
                if (dinp)
                    dinp[(size_t)n * C + c] += g * weight[(size_t)o * C + c];
                if (dweight)
                    dweight[(size_t)o * C + c] += g * inp[(size_t)n * C + c];
            }
            if (dbias)
                dbias[o] += g;
        }
    }
}

void ref_conv1d_forward(double *out, const double *inp, const double *weight, const double *bias, int N, int C, int OC)
{
    // out is (N,OC), inp is (N,C), weight is (C,OC) [in, out], bias is (OC)
    for (int n = 0; n < N; n++) {
        const double *x = inp + (size_t)n * C;
        for (int o = 0; o < OC; o++) {
            double y = bias ? bias[o] : 0.0;
            for (int c = 0; c < C; c++) {
                y += x[c] * weight[(size_t)c * OC + o];
            }
            out[(size_t)n * OC + o] = y;
        }
    }
}

void ref_conv1d_backward(double *dinp, double *dweight, double *dbias, const double *dout, const double *inp,
                         const double *weight, int N, int C, int OC)
{
    // dout is (N,OC); dinp, inp are (N,C); dweight, weight are (C,OC)
    for (int n = 0; n < N; n++) {
        for (int o = 0; o < OC; o++) {
            double g = dout[(size_t)n * OC + o];
            for (int c = 0; c < C; c++) {
                if (dinp)
                    dinp[(size_t)n * C + c] += g * weight[(size_t)c * OC + o];
                if (dweight)
                    dweight[(size_t)c * OC + o] += inp[(size_t)n * C + c] * g;
            }
            if (dbias)
                dbias[o] += g;
        }
    }
}

void ref_bias_add_forward(double *out, const double *bias, int N, int C)
{
    // out is (N,C), bias is (C)
    for (int n = 0; n < N; n++) {
        for (int c = 0; c < C; c++) {
            out[(size_t)n * C + c] += bias[c];
        }
    }
}

void ref_bias_add_backward(double *dbias, const double *dout, int N, int C)
{
    // dout is (N,C), dbias is (C)
    for (int n = 0; n < N; n++) {
        for (int c = 0; c < C; c++) {
            dbias[c] += dout[(size_t)n * C + c];
        }
    }
}

void ref_residual_forward(double *out, const double *a, const double *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        out[i] = a[i] + b[i];
    }
}

void ref_residual_backward(double *da, double *db, const double *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}

/* ---- embeddings --------------------------------------------------------- */

void ref_embedding_forward(double *out, const int32_t *tokens, const int32_t *positions, const double *wte,
                           const double *wpe, int N, int C)
{
    // out is (N,C), tokens and positions are (N), wte is (V,C), wpe is (P,C)
    for (int n = 0; n < N; n++) {
        const double *e = wte + (size_t)tokens[n] * C;
        for (int c = 0; c < C; c++) {
            out[(size_t)n * C + c] = e[c];
        }
        if (wpe) {
            const double *p = wpe + (size_t)positions[n] * C;
            for (int c = 0; c < C; c++) {
                out[(size_t)n * C + c] += p[c];
            }
        }
    }
}

void ref_embedding_backward(double *dwte, double *dwpe, const double *dout, const int32_t *tokens,
                            const int32_t *positions, int N, int C)
{
    // dout is (N,C), dwte is (V,C), dwpe is (P,C)
    for (int n = 0; n < N; n++) {
        const double *g = dout + (size_t)n * C;
        for (int c = 0; c < C; c++) {
            dwte[(size_t)tokens[n] * C + c] += g[c];
        }
        if (dwpe) {
            for (int c = 0; c < C; c++) {
                dwpe[(size_t)positions[n] * C + c] += g[c];
            }
        }
    }
}

/* ---- normalization ------------------------------------------------------ */

void ref_rmsnorm_forward(double *out, double *rstd, const double *inp, const double *weight, int N, int C, double eps)
{
    // out, inp are (N,C), weight is (C), rstd is (N)
    for (int n = 0; n < N; n++) {
        const double *x = inp + (size_t)n * C;
        double ms = 0.0;
        for (int c = 0; c < C; c++) {
            ms += x[c] * x[c];
        }
        ms /= C;
        double r = 1.0 / sqrt(ms + eps);
        for (int c = 0; c < C; c++) {
            out[(size_t)n * C + c] = x[c] * r * weight[c];
        }
        if (rstd)
            rstd[n] = r;
    }
}

/* y_i = x_i·r·w_i with r = (Σ_k x_k²/C + eps)^(−1/2), so ∂r/∂x_j = −r³·x_j/C and
 *   dx_j = r·w_j·g_j − (r³/C)·x_j·Σ_i g_i·w_i·x_i,   dw_i = g_i·x_i·r. */
void ref_rmsnorm_backward(double *dinp, double *dweight, const double *dout, const double *inp, const double *weight,
                          const double *rstd, int N, int C)
{
    // dout, dinp, inp are (N,C); weight, dweight are (C); rstd is (N)
    for (int n = 0; n < N; n++) {
        const double *x = inp + (size_t)n * C;
        const double *g = dout + (size_t)n * C;
        double r = rstd[n];
        double gwx = 0.0;
        for (int c = 0; c < C; c++) {
            gwx += g[c] * weight[c] * x[c];
        }
        for (int c = 0; c < C; c++) {
            if (dinp) {
                dinp[(size_t)n * C + c] += r * weight[c] * g[c] - r * r * r / C * x[c] * gwx;
            }
            if (dweight)
                dweight[c] += g[c] * x[c] * r;
        }
    }
}

void ref_layernorm_forward(double *out, double *mean, double *rstd, const double *inp, const double *weight,
                           const double *bias, int N, int C, double eps)
{
    // out, inp are (N,C), weight and bias are (C), mean and rstd are (N)
    for (int n = 0; n < N; n++) {
        const double *x = inp + (size_t)n * C;
        double m = 0.0;
        for (int c = 0; c < C; c++) {
            m += x[c];
        }
        m /= C;
        double var = 0.0;
        for (int c = 0; c < C; c++) {
            var += (x[c] - m) * (x[c] - m);
        }
        var /= C;
        double r = 1.0 / sqrt(var + eps);
        for (int c = 0; c < C; c++) {
            double norm = (x[c] - m) * r;
            out[(size_t)n * C + c] = norm * weight[c] + (bias ? bias[c] : 0.0);
        }
        if (mean)
            mean[n] = m;
        if (rstd)
            rstd[n] = r;
    }
}

/* With x̂ = (x − mean)·r and dx̂ = g ⊙ w (as in llm.c):
 *   dx = r·(dx̂ − mean(dx̂) − x̂·mean(dx̂ ⊙ x̂)),  dw += g ⊙ x̂,  db += g. */
void ref_layernorm_backward(double *dinp, double *dweight, double *dbias, const double *dout, const double *inp,
                            const double *weight, const double *mean, const double *rstd, int N, int C)
{
    // dout, dinp, inp are (N,C); weight, dweight, dbias are (C); mean, rstd are (N)
    for (int n = 0; n < N; n++) {
        const double *x = inp + (size_t)n * C;
        const double *g = dout + (size_t)n * C;
        double m = mean[n];
        double r = rstd[n];
        double dnorm_mean = 0.0;
        double dnorm_norm_mean = 0.0;
        for (int c = 0; c < C; c++) {
            double norm = (x[c] - m) * r;
            double dnorm = g[c] * weight[c];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int c = 0; c < C; c++) {
            double norm = (x[c] - m) * r;
            double dnorm = g[c] * weight[c];
            if (dinp)
                dinp[(size_t)n * C + c] += r * (dnorm - dnorm_mean - norm * dnorm_norm_mean);
            if (dweight)
                dweight[c] += g[c] * norm;
            if (dbias)
                dbias[c] += g[c];
        }
    }
}

/* ---- activations -------------------------------------------------------- */

static double sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

void ref_swiglu_forward(double *h, const double *gate, const double *up, size_t n)
{
    // h, gate, up are (n), e.g. (N, hidden_dim)
    for (size_t i = 0; i < n; i++) {
        double g = gate[i];
        h[i] = g * sigmoid(g) * up[i];
    }
}

/* silu'(g) = σ(g) + g·σ(g)·(1 − σ(g)) = σ(g)·(1 + g·(1 − σ(g))). */
void ref_swiglu_backward(double *dgate, double *dup, const double *dh, const double *gate, const double *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double g = gate[i];
        double s = sigmoid(g);
        dgate[i] += dh[i] * up[i] * s * (1.0 + g * (1.0 - s));
        dup[i] += dh[i] * g * s;
    }
}

#define GELU_SCALE 0.7978845608028654 /* sqrt(2/pi) */
#define GELU_CUBIC 0.044715

void ref_gelu_forward(double *out, const double *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double x = inp[i];
        double u = GELU_SCALE * (x + GELU_CUBIC * x * x * x);
        out[i] = 0.5 * x * (1.0 + tanh(u));
    }
}

/* gelu'(x) = 0.5·(1 + tanh u) + 0.5·x·(1 − tanh² u)·√(2/π)·(1 + 3·0.044715·x²). */
void ref_gelu_backward(double *dinp, const double *dout, const double *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double x = inp[i];
        double u = GELU_SCALE * (x + GELU_CUBIC * x * x * x);
        double th = tanh(u);
        double du = GELU_SCALE * (1.0 + 3.0 * GELU_CUBIC * x * x);
        dinp[i] += dout[i] * (0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du);
    }
}
