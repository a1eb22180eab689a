#version 450
// repro_matmul_tiled: the reproducible matmul for GPUs (the tiled family):
// 16x16 tiles of A and B staged in shared memory, one output per
// invocation. The order of repro_matmul.glsl: a tile contributes its k in
// order, and a short last tile only its real k (no zero padding).
#include "repro_matmul.glsl"
#define T 16u
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) readonly buffer BA { float A[]; };
layout(std430, binding = 1) readonly buffer BB { float B[]; };
shared float As[T][T];
shared float Bs[T][T];

void main()
{
    uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    uint i = gl_WorkGroupID.y * T + ty, j = gl_WorkGroupID.x * T + tx;
    bool inside = i < p.M && j < p.N;
    precise float acc = inside && p.accumulate != 0u ? C[p.c0 + i * p.N + j] : 0.0f;
    for (uint k0 = 0u; k0 < p.K; k0 += T) {
        uint ka = k0 + tx, kb = k0 + ty;
        As[ty][tx] = i < p.M && ka < p.K ? A[p.a0 + i * p.sai + ka * p.sak] : 0.0f;
        Bs[ty][tx] = kb < p.K && j < p.N ? B[p.b0 + kb * p.sbk + j * p.sbj] : 0.0f;
        barrier();
        uint kn = min(T, p.K - k0);
        for (uint kk = 0u; kk < kn; kk++) {
            precise float t = As[ty][kk] * Bs[kk][tx];
            acc = acc + t;
        }
        barrier();
    }
    if (inside)
        C[p.c0 + i * p.N + j] = acc;
}
