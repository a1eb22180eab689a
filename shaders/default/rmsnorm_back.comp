#version 450
// RMSNorm backward for the input, one workgroup per row. With
// y_i = w_i·x_i·s, s = (mean(x²) + eps)^(-1/2) and ∂s/∂x_j = −s³·x_j/C:
//   dx_j = s·w_j·dy_j − (s³/C)·x_j·Σ_i w_i·dy_i·x_i
// dx is accumulated (+=): it adds into the residual stream's gradient.
// The weight gradient is colsum_scaled.comp (dw_i += Σ_rows dy_i·x_i·s).
#include "rows.glsl"
layout(push_constant) uniform Push { uint C; } p;
layout(std430, binding = 0) readonly buffer BDY { float dy[]; };
layout(std430, binding = 1) readonly buffer BX { float x[]; };
layout(std430, binding = 2) readonly buffer BW { float w[]; };
layout(std430, binding = 3) readonly buffer BR { float rstd[]; };
layout(std430, binding = 4) buffer BDX { float dx[]; };

void main()
{
    uint r = gl_WorkGroupID.x, t = gl_LocalInvocationID.x, base = r * p.C;
    float d = 0.0;
    for (uint i = t; i < p.C; i += WG) d += w[i] * dy[base + i] * x[base + i];
    d = row_sum(d);
    float s = rstd[r], k = s * s * s * d / float(p.C);
    for (uint i = t; i < p.C; i += WG) dx[base + i] += s * w[i] * dy[base + i] - k * x[base + i];
}
