#version 450
// variant: vec4 -DVEC4=1
// variant: scalar -DVEC4=0
// dW[N,K] (+)= dY[M,N]^T · X[M,K], texel path (see matmul_common.glsl).
// A = dY, B = X, C = dW; the reduction runs over the M tokens. VEC4 needs
// N % 4 == 0 and K % 4 == 0. A block of dW rows reads a block of dY
// columns: a0 is that block's first column, lda the full width of dY.
// Invocation: rows n0..n0+15 of dW, columns 4*c4..4*c4+3; per token m, four
// vec4 of dY (16 rows) times one vec4 of X: an outer product of 64 FMAs.
#define LDA_WHOLE p.N
#define LDB_WHOLE p.K
#include "matmul_common.glsl"

void main()
{
    uint n0 = (gl_WorkGroupID.y * 8u + gl_LocalInvocationID.y) * ROWS;
    uint c4 = gl_WorkGroupID.x * 8u + gl_LocalInvocationID.x;
    uint N4 = (p.N + 3u) / 4u;
    uint kc4 = min(c4, (p.K + 3u) / 4u - 1u), kc = 4u * kc4;
    uint a4 = min(n0 / 4u, N4 - 1u);
    vec4 acc[ROWS];
    [[unroll]] for (uint i = 0u; i < ROWS; i++) acc[i] = vec4(0.0);
    // the texels of X and dY that token m reads, advanced a row per step
    uint xt = UNITS(B0) + UNITS4(kc4), yt = UNITS(A0);
    for (uint m = 0u; m < p.M; m++, xt += UNITS(LDB), yt += UNITS(LDA)) {
        vec4 x = load4(B, xt, kc, p.K);
        [[unroll]] for (uint q = 0u; q < 4u; q++) {
            uint n4 = min(a4 + q, N4 - 1u);
            vec4 dy = load4(A, yt + UNITS4(n4), 4u * n4, p.N);
            acc[4u * q + 0u] = fma(vec4(dy.x), x, acc[4u * q + 0u]);
            acc[4u * q + 1u] = fma(vec4(dy.y), x, acc[4u * q + 1u]);
            acc[4u * q + 2u] = fma(vec4(dy.z), x, acc[4u * q + 2u]);
            acc[4u * q + 3u] = fma(vec4(dy.w), x, acc[4u * q + 3u]);
        }
    }
    [[unroll]] for (uint i = 0u; i < ROWS; i++) {
        if (n0 + i >= p.N) break;
        [[unroll]] for (uint j = 0u; j < 4u; j++)
            if (c4 * 4u + j < p.K) store(n0 + i, c4 * 4u + j, acc[i][j]);
    }
}
