#version 450
// variant: vec4 -DVEC4=1
// variant: scalar -DVEC4=0
// Y[M,N] (+)= X[M,K] · W[N,K]^T, texel path (see matmul_common.glsl).
// A = X, B = W, C = Y. VEC4 needs K % 4 == 0.
// Invocation: rows r0..r0+15 of Y, columns c0..c0+3; each output is a dot
// product over K taken 4 at a time.
#define LDA_WHOLE p.K
#define LDB_WHOLE p.K
#include "matmul_common.glsl"

void main()
{
    uint r0 = (gl_WorkGroupID.y * 8u + gl_LocalInvocationID.y) * ROWS;
    uint c0 = (gl_WorkGroupID.x * 8u + gl_LocalInvocationID.x) * 4u;
    uint K4 = (p.K + 3u) / 4u;
    uint wr[4];
    [[unroll]] for (uint j = 0u; j < 4u; j++) wr[j] = UNITS(B0) + min(c0 + j, p.N - 1u) * UNITS(LDB);
    vec4 acc[ROWS];
    [[unroll]] for (uint i = 0u; i < ROWS; i++) acc[i] = vec4(0.0);
    for (uint k4 = 0u; k4 < K4; k4++) {
        uint k = 4u * k4, kt = UNITS4(k4), xk = UNITS(A0) + kt;
        vec4 w0 = load4(B, wr[0] + kt, k, p.K);
        vec4 w1 = load4(B, wr[1] + kt, k, p.K);
        vec4 w2 = load4(B, wr[2] + kt, k, p.K);
        vec4 w3 = load4(B, wr[3] + kt, k, p.K);
        [[unroll]] for (uint i = 0u; i < ROWS; i++) {
            vec4 x = load4(A, min(r0 + i, p.M - 1u) * UNITS(LDA) + xk, k, p.K);
            acc[i] += vec4(dot(x, w0), dot(x, w1), dot(x, w2), dot(x, w3));
        }
    }
    [[unroll]] for (uint i = 0u; i < ROWS; i++) {
        if (r0 + i >= p.M) break;
        [[unroll]] for (uint j = 0u; j < 4u; j++)
            if (c0 + j < p.N) store(r0 + i, c0 + j, acc[i][j]);
    }
}
