#version 450
// The tiled matmul's split-k, second pass: C (+)= P_0 + P_1 + ... +
// P_{parts-1}, the parts' partial products (matmul_tiled.comp, one per
// range of the reduction) added in part order, so the result depends only
// on the shape, not on the grid or the timing. P holds the parts one after
// another, each rows x cols packed; C's rows are ldc apart from element
// c0 of its binding. Grid-stride over the rows x cols outputs (`step` =
// the dispatch's invocations), so any count of workgroups covers them.
layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    uint rows, cols, ldc, c0, parts, accumulate, step;
} p;

layout(std430, binding = 0) readonly buffer BP { float P[]; };
layout(std430, binding = 1) buffer BC { float C[]; };

void main()
{
    uint n = p.rows * p.cols;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += p.step) {
        uint o = p.c0 + (i / p.cols) * p.ldc + i % p.cols;
        float s = p.accumulate != 0u ? C[o] + P[i] : P[i];
        for (uint z = 1u; z < p.parts; z++)
            s += P[z * n + i];
        C[o] = s;
    }
}
