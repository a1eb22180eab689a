#version 450
// RMSNorm forward, one workgroup per row of x (rows, C):
//   rstd = 1/sqrt(mean(x²) + eps),  y = x·rstd·w;  rstd saved per row.
#include "rows.glsl"
layout(push_constant) uniform Push { uint C; float eps; } p;
layout(std430, binding = 0) readonly buffer BX { float x[]; };
layout(std430, binding = 1) readonly buffer BW { float w[]; };
layout(std430, binding = 2) writeonly buffer BY { float y[]; };
layout(std430, binding = 3) writeonly buffer BR { float rstd[]; };

void main()
{
    uint r = gl_WorkGroupID.x, t = gl_LocalInvocationID.x, base = r * p.C;
    float ss = 0.0;
    for (uint i = t; i < p.C; i += WG) ss += x[base + i] * x[base + i];
    ss = row_sum(ss);
    float s = inversesqrt(ss / float(p.C) + p.eps);
    for (uint i = t; i < p.C; i += WG) y[base + i] = x[base + i] * s * w[i];
    if (t == 0u) rstd[r] = s;
}
