#version 450
// variant: vec4 -DVEC4=1
// variant: shift -DVEC4=1 -DSHIFT_A=1
// variant: scalar -DVEC4=0
// variant: vec4_bf16 -DVEC4=1 -DBF16_B=1
// variant: shift_bf16 -DVEC4=1 -DSHIFT_A=1 -DBF16_B=1
// variant: scalar_bf16 -DVEC4=0 -DBF16_B=1
// variant: vec4_img -DVEC4=1 -DIMG_C=1
// variant: shift_img -DVEC4=1 -DSHIFT_A=1 -DIMG_C=1
// variant: vec4_bf16_img -DVEC4=1 -DBF16_B=1 -DIMG_C=1
// variant: shift_bf16_img -DVEC4=1 -DSHIFT_A=1 -DBF16_B=1 -DIMG_C=1
// variant: vec4_q4 -DVEC4=1 -DQ4_B=1
// variant: shift_q4 -DVEC4=1 -DSHIFT_A=1 -DQ4_B=1
// variant: scalar_q4 -DVEC4=0 -DQ4_B=1
// variant: vec4_q4_img -DVEC4=1 -DQ4_B=1 -DIMG_C=1
// variant: shift_q4_img -DVEC4=1 -DSHIFT_A=1 -DQ4_B=1 -DIMG_C=1
// dX[M,K] (+)= dY[M,N] · W[N,K], texel path (see matmul_common.glsl).
// A = dY, B = W, C = dX; the reduction runs over N. VEC4 needs K % 4 == 0
// and dY's rows of whole texels: N % 4 == 0, or rows N rounded up to a
// multiple of 4 apart whose pad holds zeros (the LM head's dlogits; a
// whole dispatch takes that as dY's width); SHIFT_A only K % 4 == 0.
// BF16_B: W holds bf16; Q4_B: W is 4-bit (quant4.glsl).
// Invocation: rows r0..r0+15 of dX and 4 vec4 columns, cb, cb+8, cb+16,
// cb+24 (so the 8 lanes of a subgroup read 8 neighbouring texels of a row
// of W); per step of 4 along N, one vec4 of dY per row times four rows of
// W: each output adds a 4-term dot product.
#if VEC4 && !SHIFT_A
#define LDA_WHOLE ((p.N + 3u) & ~3u)
#else
#define LDA_WHOLE p.N
#endif
#define LDB_WHOLE p.K
#include "matmul_common.glsl"

void main()
{
    B_INIT();
    uint r0 = (gl_WorkGroupID.y * 8u + gl_LocalInvocationID.y) * ROWS;
    uint cb = gl_WorkGroupID.x * 8u * COLS4 + gl_LocalInvocationID.x;
    uint K4 = (p.K + 3u) / 4u, N4 = (p.N + 3u) / 4u;
    bool live = r0 < p.M && cb < K4;
    // texels of dY's rows and W's columns (clamped past M and K: outputs
    // that are not stored)
    uint yr[ROWS], wk[COLS4], kc[COLS4];
    [[unroll]] for (uint i = 0u; i < ROWS; i++) yr[i] = AUNITS(A0) + min(r0 + i, p.M - 1u) * AUNITS(LDA);
    uint alast = uint(textureSize(A)) - 1u;
    [[unroll]] for (uint v = 0u; v < COLS4; v++) {
        uint c4 = min(cb + 8u * v, K4 - 1u);
        kc[v] = 4u * c4;
        wk[v] = UNITS(B0) + UNITS4(c4);
    }
    vec4 acc[ROWS * COLS4];
    [[unroll]] for (uint i = 0u; i < ROWS * COLS4; i++) acc[i] = vec4(0.0);
    for (uint nc = 0u; nc < N4; nc += CHUNK) {
        for (uint n4 = nc; live && n4 < min(nc + CHUNK, N4); n4++) {
            uint n = 4u * n4, yn = AUNITS4(n4);
            // rows of W past N multiply dY elements that read as 0
            vec4 w[4u * COLS4];
            [[unroll]] for (uint q = 0u; q < 4u; q++) {
                uint wn = min(n + q, p.N - 1u) * UNITS(LDB);
                [[unroll]] for (uint v = 0u; v < COLS4; v++) w[q * COLS4 + v] = loadB4(wn + wk[v], kc[v], p.K);
            }
            [[unroll]] for (uint i = 0u; i < ROWS; i++) {
                vec4 a = load4a(yr[i] + yn, n, p.N, alast);
                [[unroll]] for (uint v = 0u; v < COLS4; v++)
                    acc[i * COLS4 + v] +=
                        a.x * w[v] + a.y * w[COLS4 + v] + a.z * w[2u * COLS4 + v] + a.w * w[3u * COLS4 + v];
            }
        }
        barrier();
    }
    uint e0 = p.c0 + r0 * p.ldc + 4u * cb, ldc = p.ldc; /* element of output (r0, 4 cb); elements per row */
#if IMG_C
    uint t0 = e0 >> 2, ld4 = ldc >> 2;
#endif
    if (!live)
        return;
    [[unroll]] for (uint i = 0u; i < ROWS; i++) {
        if (r0 + i >= p.M) break;
        [[unroll]] for (uint v = 0u; v < COLS4; v++)
#if IMG_C
            if (4u * (cb + 8u * v) < p.K) store4(int(t0 + i * ld4 + 8u * v), acc[i * COLS4 + v]);
#else
            [[unroll]] for (uint j = 0u; j < 4u; j++)
                if (4u * (cb + 8u * v) + j < p.K) store(e0 + i * ldc + 32u * v + j, acc[i * COLS4 + v][j]);
#endif
    }
}
