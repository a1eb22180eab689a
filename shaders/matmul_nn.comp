#version 450
// variant: vec4 -DVEC4=1
// variant: scalar -DVEC4=0
// dX[M,K] (+)= dY[M,N] · W[N,K], texel path (see matmul_common.glsl).
// A = dY, B = W, C = dX; the reduction runs over N. VEC4 needs N % 4 == 0
// and K % 4 == 0.
// Invocation: rows r0..r0+15 of dX, columns 4*c4..4*c4+3; per step of 4
// along N, one vec4 of dY per row times four vec4 rows of W.
#define LDA_WHOLE p.N
#define LDB_WHOLE p.K
#include "matmul_common.glsl"

void main()
{
    uint r0 = (gl_WorkGroupID.y * 8u + gl_LocalInvocationID.y) * ROWS;
    uint c4 = gl_WorkGroupID.x * 8u + gl_LocalInvocationID.x;
    uint N4 = (p.N + 3u) / 4u;
    vec4 acc[ROWS];
    [[unroll]] for (uint i = 0u; i < ROWS; i++) acc[i] = vec4(0.0);
    uint kc4 = min(c4, (p.K + 3u) / 4u - 1u), kc = 4u * kc4, wk = UNITS(B0) + UNITS4(kc4);
    for (uint n4 = 0u; n4 < N4; n4++) {
        uint n = 4u * n4, yn = UNITS(A0) + UNITS4(n4);
        // rows of W past N multiply dY elements that read as 0
        vec4 b0 = load4(B, min(n + 0u, p.N - 1u) * UNITS(LDB) + wk, kc, p.K);
        vec4 b1 = load4(B, min(n + 1u, p.N - 1u) * UNITS(LDB) + wk, kc, p.K);
        vec4 b2 = load4(B, min(n + 2u, p.N - 1u) * UNITS(LDB) + wk, kc, p.K);
        vec4 b3 = load4(B, min(n + 3u, p.N - 1u) * UNITS(LDB) + wk, kc, p.K);
        [[unroll]] for (uint i = 0u; i < ROWS; i++) {
            vec4 a = load4(A, min(r0 + i, p.M - 1u) * UNITS(LDA) + yn, n, p.N);
            acc[i] = fma(vec4(a.x), b0, acc[i]);
            acc[i] = fma(vec4(a.y), b1, acc[i]);
            acc[i] = fma(vec4(a.z), b2, acc[i]);
            acc[i] = fma(vec4(a.w), b3, acc[i]);
        }
    }
    [[unroll]] for (uint i = 0u; i < ROWS; i++) {
        if (r0 + i >= p.M) break;
        [[unroll]] for (uint j = 0u; j < 4u; j++)
            if (c4 * 4u + j < p.K) store(r0 + i, c4 * 4u + j, acc[i][j]);
    }
}
