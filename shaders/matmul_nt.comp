#version 450
// variant: vec4 -DVEC4=1
// variant: scalar -DVEC4=0
// Y[M,N] (+)= X[M,K] · W[N,K]^T, texel path (see matmul_common.glsl).
// A = X, B = W, C = Y. VEC4 needs K % 4 == 0.
// Invocation: rows r0..r0+15 of Y, columns c0..c0+3; each output is a dot
// product over K taken 4 at a time.
#include "matmul_common.glsl"

void main()
{
    uint r0 = (gl_WorkGroupID.y * 8u + gl_LocalInvocationID.y) * ROWS;
    uint c0 = (gl_WorkGroupID.x * 8u + gl_LocalInvocationID.x) * 4u;
    uint K4 = (p.K + 3u) / 4u;
    uint wr[4];
    [[unroll]] for (uint j = 0u; j < 4u; j++) wr[j] = min(c0 + j, p.N - 1u);
    vec4 acc[ROWS];
    [[unroll]] for (uint i = 0u; i < ROWS; i++) acc[i] = vec4(0.0);
    for (uint k4 = 0u; k4 < K4; k4++) {
        vec4 w0 = load4(B, wr[0], k4, p.K);
        vec4 w1 = load4(B, wr[1], k4, p.K);
        vec4 w2 = load4(B, wr[2], k4, p.K);
        vec4 w3 = load4(B, wr[3], k4, p.K);
        [[unroll]] for (uint i = 0u; i < ROWS; i++) {
            vec4 x = load4(A, min(r0 + i, p.M - 1u), k4, p.K);
            acc[i] += vec4(dot(x, w0), dot(x, w1), dot(x, w2), dot(x, w3));
        }
    }
    [[unroll]] for (uint i = 0u; i < ROWS; i++) {
        if (r0 + i >= p.M) break;
        [[unroll]] for (uint j = 0u; j < 4u; j++)
            if (c0 + j < p.N) store(r0 + i, c0 + j, p.N, acc[i][j]);
    }
}
