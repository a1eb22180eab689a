#version 450
// LayerNorm forward, one workgroup per row of x (rows, C), biased variance:
//   mean, rstd = 1/sqrt(var + eps), y = (x − mean)·rstd·w + b.
// mean and rstd are saved per row for the backward.
#include "rows.glsl"
layout(push_constant) uniform Push { uint C; float eps; } p;
layout(std430, binding = 0) readonly buffer BX { float x[]; };
layout(std430, binding = 1) readonly buffer BW { float w[]; };
layout(std430, binding = 2) readonly buffer BB { float b[]; };
layout(std430, binding = 3) writeonly buffer BY { float y[]; };
layout(std430, binding = 4) writeonly buffer BM { float mean[]; };
layout(std430, binding = 5) writeonly buffer BR { float rstd[]; };

void main()
{
    uint r = gl_WorkGroupID.x, t = gl_LocalInvocationID.x, base = r * p.C;
    float s = 0.0;
    for (uint i = t; i < p.C; i += WG) s += x[base + i];
    float m = row_sum(s) / float(p.C);
    float v = 0.0;
    for (uint i = t; i < p.C; i += WG) { float d = x[base + i] - m; v += d * d; }
    float rs = inversesqrt(row_sum(v) / float(p.C) + p.eps);
    for (uint i = t; i < p.C; i += WG) y[base + i] = (x[base + i] - m) * rs * w[i] + b[i];
    if (t == 0u) { mean[r] = m; rstd[r] = rs; }
}
