#version 450
// variant: f32 -DQ4_B=0
// variant: q4 -DQ4_B=1
// repro_matmul_tiled: the reproducible matmul for GPUs (the tiled family):
// 64x64 outputs per workgroup of 16x16 invocations, each invocation 4x4
// of them (rows ty + 16r, columns tx + 16c: neighbouring invocations read
// neighbouring shared words), tiles of 16 k of A and B staged in shared
// memory. The order of repro_matmul.glsl: one accumulator per output, a
// tile contributes its k in order, and a short last tile only its real k
// (no zero padding). Each shared value read serves four products, where
// one output per invocation read two per product (an H200 ran that at a
// sixth of the default matmul's speed). Q4_B: B is a 4-bit weight bound
// whole as words (as in repro_matmul_texel.comp), dequantized as it is
// staged.
#include "repro_matmul.glsl"
#define TM 64u
#define TK 16u
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) readonly buffer BA { float A[]; };
#if Q4_B
layout(std430, binding = 1) readonly buffer BB { uint BQ[]; };
#define Q4_WORD(i) BQ[i]
#define Q4_SPEC 0
#define Q4_UNROLL
#include "quant4.glsl"
#define LOAD_B(e) q4_value(e)
#else
layout(std430, binding = 1) readonly buffer BB { float B[]; };
#define LOAD_B(e) B[e]
#endif
shared float As[TK][TM + 1u]; // +1: a load along k stores down a column
shared float Bs[TK][TM + 1u];

void main()
{
    uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, id = ty * 16u + tx;
    uint i0 = gl_WorkGroupID.y * TM, j0 = gl_WorkGroupID.x * TM;
#if Q4_B
    q4_init();
#endif
    precise float acc[4][4];
    for (uint r = 0u; r < 4u; r++)
        for (uint c = 0u; c < 4u; c++) {
            uint i = i0 + ty + 16u * r, j = j0 + tx + 16u * c;
            acc[r][c] = i < p.M && j < p.N && p.accumulate != 0u ? C[p.c0 + i * p.N + j] : 0.0f;
        }
    // Each invocation loads 4 of a tile's 1,024 floats of A and of B,
    // consecutive invocations along whichever of the operand's strides is 1.
    bool a_along_k = p.sak == 1u, b_along_j = p.sbj == 1u || p.sbk != 1u;
    for (uint k0 = 0u; k0 < p.K; k0 += TK) {
        for (uint q = 0u; q < 4u; q++) {
            uint l = id + 256u * q;
            uint ar = a_along_k ? l / TK : l % TM, ak = a_along_k ? l % TK : l / TM;
            uint i = i0 + ar, ka = k0 + ak;
            As[ak][ar] = i < p.M && ka < p.K ? A[p.a0 + i * p.sai + ka * p.sak] : 0.0f;
            uint bc = b_along_j ? l % TM : l / TK, bk = b_along_j ? l / TM : l % TK;
            uint j = j0 + bc, kb = k0 + bk;
            Bs[bk][bc] = kb < p.K && j < p.N ? LOAD_B(p.b0 + kb * p.sbk + j * p.sbj) : 0.0f;
        }
        barrier();
        uint kn = min(TK, p.K - k0);
        for (uint kk = 0u; kk < kn; kk++) {
            float a[4], b[4];
            for (uint r = 0u; r < 4u; r++)
                a[r] = As[kk][ty + 16u * r];
            for (uint c = 0u; c < 4u; c++)
                b[c] = Bs[kk][tx + 16u * c];
            for (uint r = 0u; r < 4u; r++)
                for (uint c = 0u; c < 4u; c++) {
                    precise float t = a[r] * b[c];
                    acc[r][c] = acc[r][c] + t;
                }
        }
        barrier();
    }
    for (uint r = 0u; r < 4u; r++)
        for (uint c = 0u; c < 4u; c++) {
            uint i = i0 + ty + 16u * r, j = j0 + tx + 16u * c;
            if (i < p.M && j < p.N)
                C[p.c0 + i * p.N + j] = acc[r][c];
        }
}
