#version 450
// variant: vec4 -DVEC4=1
// variant: scalar -DVEC4=0
// variant: vec4_bf16 -DVEC4=1 -DBF16_B=1
// variant: scalar_bf16 -DVEC4=0 -DBF16_B=1
// variant: vec4_bias -DVEC4=1 -DBIAS=1
// variant: scalar_bias -DVEC4=0 -DBIAS=1
// variant: vec4_img -DVEC4=1 -DIMG_C=1
// variant: vec4_bf16_img -DVEC4=1 -DBF16_B=1 -DIMG_C=1
// variant: vec4_bias_img -DVEC4=1 -DBIAS=1 -DIMG_C=1
// variant: vec4_q4 -DVEC4=1 -DQ4_B=1
// variant: scalar_q4 -DVEC4=0 -DQ4_B=1
// variant: vec4_q4_img -DVEC4=1 -DQ4_B=1 -DIMG_C=1
// Y[M,N] (+)= X[M,K] · W[N,K]^T, texel path (see matmul_common.glsl).
// A = X, B = W, C = Y. VEC4 needs K % 4 == 0; BF16_B: W holds bf16; Q4_B: W is 4-bit (quant4.glsl).
// BIAS (a dispatch that covers the whole product): each output then adds
// bias[column] (binding 3, an R32F view) as it is stored, the additions
// op_bias_add would make after the product, in the same order.
// Invocation: rows r0..r0+15 of Y, columns c0..c0+15; per step of 4 along
// K, one vec4 of X per row and one of W per column, and each output adds
// the dot product of its row's and column's vec4.
#define LDA_WHOLE p.K
#define LDB_WHOLE p.K
#include "matmul_common.glsl"
#if BIAS
layout(binding = 3) uniform samplerBuffer Bias;
#endif

void main()
{
    B_INIT();
    uint r0 = (gl_WorkGroupID.y * 8u + gl_LocalInvocationID.y) * ROWS;
    uint c0 = (gl_WorkGroupID.x * 8u + gl_LocalInvocationID.x) * COLS;
    bool live = r0 < p.M && c0 < p.N;
    uint K4 = (p.K + 3u) / 4u;
    // first texels of the rows of X and W this invocation reads (the
    // clamped ones past M or N compute outputs that are not stored)
    uint xr[ROWS], wr[COLS];
    [[unroll]] for (uint i = 0u; i < ROWS; i++) xr[i] = UNITS(A0) + min(r0 + i, p.M - 1u) * UNITS(LDA);
    [[unroll]] for (uint j = 0u; j < COLS; j++) wr[j] = UNITS(B0) + min(c0 + j, p.N - 1u) * UNITS(LDB);
    float acc[ROWS * COLS];
    [[unroll]] for (uint i = 0u; i < ROWS * COLS; i++) acc[i] = 0.0;
    for (uint kc = 0u; kc < K4; kc += CHUNK) {
        for (uint k4 = kc; live && k4 < min(kc + CHUNK, K4); k4++) {
            uint k = 4u * k4, kt = UNITS4(k4);
            vec4 w[COLS];
            [[unroll]] for (uint j = 0u; j < COLS; j++) w[j] = loadB4(wr[j] + kt, k, p.K);
            [[unroll]] for (uint i = 0u; i < ROWS; i++) {
                vec4 x = load4(A, xr[i] + kt, k, p.K);
                [[unroll]] for (uint j = 0u; j < COLS; j++) acc[i * COLS + j] += dot(x, w[j]);
            }
        }
        barrier();
    }
    uint e0 = p.c0 + r0 * p.ldc + c0, ldc = p.ldc; /* element of output (r0, c0); elements per row */
#if IMG_C
    uint t0 = e0 >> 2, ld4 = ldc >> 2;
#endif
    if (!live)
        return;
#if BIAS
    float bias[COLS];
    [[unroll]] for (uint j = 0u; j < COLS; j++) bias[j] = texelFetch(Bias, int(min(c0 + j, p.N - 1u))).x;
#endif
    [[unroll]] for (uint i = 0u; i < ROWS; i++) {
        if (r0 + i >= p.M) break;
#if IMG_C
        [[unroll]] for (uint j = 0u; j < COLS; j += 4u) {
            vec4 v = vec4(acc[i * COLS + j], acc[i * COLS + j + 1u], acc[i * COLS + j + 2u], acc[i * COLS + j + 3u]);
#if BIAS
            if (c0 + j < p.N) store4_bias(int(t0 + i * ld4 + j / 4u), v, vec4(bias[j], bias[j + 1u], bias[j + 2u], bias[j + 3u]));
#else
            if (c0 + j < p.N) store4(int(t0 + i * ld4 + j / 4u), v);
#endif
        }
#else
        [[unroll]] for (uint j = 0u; j < COLS; j++)
#if BIAS
            if (c0 + j < p.N) store_bias(e0 + i * ldc + j, acc[i * COLS + j], bias[j]);
#else
            if (c0 + j < p.N) store(e0 + i * ldc + j, acc[i * COLS + j]);
#endif
#endif
    }
}
