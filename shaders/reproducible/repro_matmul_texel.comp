#version 450
// variant: f32 -DQ4_B=0
// variant: q4 -DQ4_B=1
// repro_matmul_texel: the reproducible matmul for CPU devices (the texel
// family): A and B read through R32F texel views, each invocation owns
// ROWS x COLS outputs, 8x8 invocations. The order of repro_matmul.glsl.
// Q4_B: B is a 4-bit weight (nt, nn; include/vktrain/quant4.h) bound whole
// through an R32UI view, b0 its element index; each value dequantized as
// quant4.glsl computes it (one exact product, and two for a double-quant
// scale: the same on every device), so the bits are the fp32 kernel's on
// the dequantized weight.
#include "repro_matmul.glsl"
#define ROWS 4
#define COLS 4
layout(local_size_x = 8, local_size_y = 8) in;
layout(binding = 0) uniform samplerBuffer A;
#if Q4_B
layout(binding = 1) uniform usamplerBuffer BQ;
#define Q4_WORD(i) texelFetch(BQ, int(i)).x
#define Q4_SPEC 0
#define Q4_UNROLL
#include "quant4.glsl"
#define LOAD_B(e) q4_value(e)
#else
layout(binding = 1) uniform samplerBuffer B;
#define LOAD_B(e) texelFetch(B, int(e)).x
#endif

void main()
{
    uint i0 = (gl_WorkGroupID.y * 8u + gl_LocalInvocationID.y) * ROWS;
    uint j0 = (gl_WorkGroupID.x * 8u + gl_LocalInvocationID.x) * COLS;
    if (i0 >= p.M || j0 >= p.N)
        return;
#if Q4_B
    q4_init();
#endif
    // Rows and columns past the edge repeat the last one and are not stored.
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
    for (uint k = 0u; k < p.K; k++) {
        float a[ROWS], b[COLS];
        for (int r = 0; r < ROWS; r++)
            a[r] = texelFetch(A, int(ia[r] + k * p.sak)).x;
        for (int c = 0; c < COLS; c++)
            b[c] = LOAD_B(k * p.sbk + jb[c]);
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < COLS; c++) {
                precise float t = a[r] * b[c];
                acc[r][c] = acc[r][c] + t;
            }
    }
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++)
            if (i0 + uint(r) < p.M && j0 + uint(c) < p.N)
                C[p.c0 + (i0 + uint(r)) * p.N + j0 + uint(c)] = acc[r][c];
}
