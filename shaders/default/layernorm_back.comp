#version 450
// LayerNorm backward for the input, one workgroup per row. With
// xhat = (x − mean)·rstd and g = w·dy:
//   dx = rstd·(g − mean(g) − xhat·mean(g·xhat))
// dx is accumulated (+=). Weight and bias gradients are column sums
// (colsum_scaled.comp: dw += Σ dy·xhat, db += Σ dy).
#include "rows.glsl"
layout(push_constant) uniform Push { uint C; } p;
layout(std430, binding = 0) readonly buffer BDY { float dy[]; };
layout(std430, binding = 1) readonly buffer BX { float x[]; };
layout(std430, binding = 2) readonly buffer BW { float w[]; };
layout(std430, binding = 3) readonly buffer BM { float mean[]; };
layout(std430, binding = 4) readonly buffer BR { float rstd[]; };
layout(std430, binding = 5) buffer BDX { float dx[]; };

void main()
{
    uint r = gl_WorkGroupID.x, t = gl_LocalInvocationID.x, base = r * p.C;
    float m = mean[r], rs = rstd[r];
    float a = 0.0, b = 0.0;
    for (uint i = t; i < p.C; i += WG) {
        float g = w[i] * dy[base + i];
        a += g;
        b += g * (x[base + i] - m) * rs;
    }
    a = row_sum(a) / float(p.C);
    b = row_sum(b) / float(p.C);
    for (uint i = t; i < p.C; i += WG) {
        float xhat = (x[base + i] - m) * rs;
        dx[base + i] += rs * (w[i] * dy[base + i] - a - xhat * b);
    }
}
