#version 450
// variant: - -DAV=0 -DBV=0
// variant: kk -DAV=1 -DBV=1
// variant: kj -DAV=1 -DBV=2
// variant: ij -DAV=2 -DBV=2
// repro_matmul_texel: the reproducible matmul for CPU devices (the texel
// family): A and B read through texel views, each invocation owns
// ROWS x COLS outputs, 8x8 invocations. The order of repro_matmul.glsl.
// The views are R32F (AV, BV = 0), or RGBA32F (the variants, where the
// host finds the operands whole texels): AV = 1 reads A's row i at
// k .. k+3 as one texel (sak = 1), AV = 2 A's rows i0 .. i0+3 at one k
// (sai = 1); BV = 1 B's column j at k .. k+3 (sbk = 1), BV = 2 B's columns
// j0 .. j0+3 at one k (sbj = 1). How a float is loaded never changes the
// order of the products: acc[r][c] takes k in order in every variant.
#include "repro_matmul.glsl"
#define ROWS 4
#define COLS 4
#if AV != 0 || BV != 0
#define KS 4 // k per step (the host makes K a multiple of 4)
#else
#define KS 1
#endif
layout(local_size_x = 8, local_size_y = 8) in;
layout(binding = 0) uniform samplerBuffer A;
layout(binding = 1) uniform samplerBuffer B;

void main()
{
    uint i0 = (gl_WorkGroupID.y * 8u + gl_LocalInvocationID.y) * ROWS;
    uint j0 = (gl_WorkGroupID.x * 8u + gl_LocalInvocationID.x) * COLS;
    if (i0 >= p.M || j0 >= p.N)
        return;
    // Rows and columns past the edge repeat the last one and are not stored
    // (AV = 2 and BV = 2 have none: the host makes M, N multiples of 4).
    uint ia[ROWS], jb[COLS];
    for (int r = 0; r < ROWS; r++)
        ia[r] = p.a0 + min(i0 + uint(r), p.M - 1u) * p.sai;
    for (int c = 0; c < COLS; c++)
        jb[c] = p.b0 + min(j0 + uint(c), p.N - 1u) * p.sbj;
    precise float acc[ROWS][COLS];
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) {
            uint ci = p.c0 + min(i0 + uint(r), p.M - 1u) * p.N + min(j0 + uint(c), p.N - 1u);
            acc[r][c] = p.accumulate != 0u ? C[ci] : 0.0f;
        }
    for (uint k = 0u; k < p.K; k += uint(KS)) {
        float a[ROWS][KS], b[KS][COLS];
#if AV == 1
        for (int r = 0; r < ROWS; r++) {
            vec4 v = texelFetch(A, int((ia[r] + k) >> 2));
            for (int kk = 0; kk < KS; kk++)
                a[r][kk] = v[kk];
        }
#elif AV == 2
        for (int kk = 0; kk < KS; kk++) {
            vec4 v = texelFetch(A, int((ia[0] + (k + uint(kk)) * p.sak) >> 2));
            for (int r = 0; r < ROWS; r++)
                a[r][kk] = v[r];
        }
#else
        for (int r = 0; r < ROWS; r++)
            for (int kk = 0; kk < KS; kk++)
                a[r][kk] = texelFetch(A, int(ia[r] + (k + uint(kk)) * p.sak)).x;
#endif
#if BV == 1
        for (int c = 0; c < COLS; c++) {
            vec4 v = texelFetch(B, int((jb[c] + k) >> 2));
            for (int kk = 0; kk < KS; kk++)
                b[kk][c] = v[kk];
        }
#elif BV == 2
        for (int kk = 0; kk < KS; kk++) {
            vec4 v = texelFetch(B, int(((k + uint(kk)) * p.sbk + jb[0]) >> 2));
            for (int c = 0; c < COLS; c++)
                b[kk][c] = v[c];
        }
#else
        for (int kk = 0; kk < KS; kk++)
            for (int c = 0; c < COLS; c++)
                b[kk][c] = texelFetch(B, int((k + uint(kk)) * p.sbk + jb[c])).x;
#endif
        for (int kk = 0; kk < KS; kk++)
            for (int r = 0; r < ROWS; r++)
                for (int c = 0; c < COLS; c++) {
                    precise float t = a[r][kk] * b[kk][c];
                    acc[r][c] = acc[r][c] + t;
                }
    }
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++)
            if (i0 + uint(r) < p.M && j0 + uint(c) < p.N)
                C[p.c0 + (i0 + uint(r)) * p.N + j0 + uint(c)] = acc[r][c];
}
