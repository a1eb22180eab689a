#version 450
// variant: vec4 -DVEC4=1
// variant: shift -DVEC4=1 -DSHIFT_A=1
// variant: scalar -DVEC4=0
// variant: vec4_img -DVEC4=1 -DIMG_C=1
// variant: shift_img -DVEC4=1 -DSHIFT_A=1 -DIMG_C=1
// dW[N,K] (+)= dY[M,N]^T · X[M,K], texel path (see matmul_common.glsl).
// A = dY, B = X, C = dW; the reduction runs over the M tokens. VEC4 needs
// N % 4 == 0 and K % 4 == 0; SHIFT_A only K % 4 == 0. A block of dW rows reads a block of dY
// columns: a0 is that block's first column, lda the full width of dY.
// Invocation: rows n0..n0+15 of dW and 4 vec4 columns, cb, cb+8, cb+16,
// cb+24 (the 8 lanes of a subgroup read neighbouring texels of a row of
// X); per step of 4 tokens, four vec4 of dY (16 rows) and four of X per
// token: each output adds a 4-term dot product over the tokens. The last
// M % 4 tokens take one token per step.
#define LDA_WHOLE p.N
#define LDB_WHOLE p.K
#include "matmul_common.glsl"

vec4 acc[ROWS * COLS4];

// Tokens m..m+T-1 (T a constant): X's texels at xt + v·8 units, dY's at
// yt + h units, both advanced a row per token.
#define TN_STEP(T)                                                                                    \
    {                                                                                                 \
        vec4 x[T * COLS4], dy[T * 4u];                                                                \
        [[unroll]] for (uint u = 0u; u < T; u++) {                                                    \
            uint xu = xt + u * UNITS(LDB), yu = yt + u * AUNITS(LDA);                                 \
            [[unroll]] for (uint v = 0u; v < COLS4; v++) x[u * COLS4 + v] = load4(B, xu + xk[v], kc[v], p.K); \
            [[unroll]] for (uint h = 0u; h < 4u; h++) dy[u * 4u + h] = load4a(yu + yn[h], nc[h], p.N, alast); \
        }                                                                                             \
        [[unroll]] for (uint h = 0u; h < 4u; h++)                                                     \
            [[unroll]] for (uint e = 0u; e < 4u; e++)                                                 \
                [[unroll]] for (uint v = 0u; v < COLS4; v++) {                                        \
                    vec4 s = dy[h][e] * x[v];                                                         \
                    [[unroll]] for (uint u = 1u; u < T; u++) s += dy[u * 4u + h][e] * x[u * COLS4 + v]; \
                    acc[(4u * h + e) * COLS4 + v] += s;                                               \
                }                                                                                     \
    }

void main()
{
    uint n0 = (gl_WorkGroupID.y * 8u + gl_LocalInvocationID.y) * ROWS;
    uint cb = gl_WorkGroupID.x * 8u * COLS4 + gl_LocalInvocationID.x;
    uint K4 = (p.K + 3u) / 4u, N4 = (p.N + 3u) / 4u;
    bool live = n0 < p.N && cb < K4;
    // the units of a token's row that this invocation reads: X's vec4
    // columns, dY's four texels of columns n0..n0+15 (clamped past K and N:
    // outputs that are not stored)
    uint xk[COLS4], kc[COLS4], yn[4], nc[4];
    [[unroll]] for (uint v = 0u; v < COLS4; v++) {
        uint c4 = min(cb + 8u * v, K4 - 1u);
        kc[v] = 4u * c4;
        xk[v] = UNITS4(c4);
    }
    [[unroll]] for (uint h = 0u; h < 4u; h++) {
        uint a4 = min(n0 / 4u + h, N4 - 1u);
        nc[h] = 4u * a4;
        yn[h] = AUNITS4(a4);
    }
    uint alast = uint(textureSize(A)) - 1u;
    [[unroll]] for (uint i = 0u; i < ROWS * COLS4; i++) acc[i] = vec4(0.0);
    uint M4 = p.M / 4u, xt = UNITS(B0), yt = AUNITS(A0);
    for (uint mc = 0u; mc < M4; mc += CHUNK) {
        for (uint m4 = mc; live && m4 < min(mc + CHUNK, M4); m4++, xt += 4u * UNITS(LDB), yt += 4u * AUNITS(LDA))
            TN_STEP(4u)
        barrier();
    }
    for (uint m = 4u * M4; live && m < p.M; m++, xt += UNITS(LDB), yt += AUNITS(LDA))
        TN_STEP(1u)
    uint e0 = p.c0 + n0 * p.ldc + 4u * cb, ldc = p.ldc; /* element of output (n0, 4 cb); elements per row */
#if IMG_C
    uint t0 = e0 >> 2, ld4 = ldc >> 2;
#endif
    if (!live)
        return;
    [[unroll]] for (uint i = 0u; i < ROWS; i++) {
        if (n0 + i >= p.N) break;
        [[unroll]] for (uint v = 0u; v < COLS4; v++)
#if IMG_C
            if (4u * (cb + 8u * v) < p.K) store4(int(t0 + i * ld4 + 8u * v), acc[i * COLS4 + v]);
#else
            [[unroll]] for (uint j = 0u; j < 4u; j++)
                if (4u * (cb + 8u * v) + j < p.K) store(e0 + i * ldc + 32u * v + j, acc[i * COLS4 + v][j]);
#endif
    }
}
