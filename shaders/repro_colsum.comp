#version 450
// variant: plain -DMODE=0
// variant: rms -DMODE=1
// variant: ln -DMODE=2
// repro_colsum: the reproducible profile's column sums over rows
// [row0, row1), one invocation per column, starting from the output's old
// value and adding the rows in row order (so cutting the rows into calls
// gives the same bits):
//   plain: o[c] = o[c] + dy[r,c]                           (bias gradient)
//   rms:   o[c] = o[c] + dy[r,c]·(x[r,c]·rstd[r])           (RMSNorm weight)
//   ln:    o[c] = o[c] + dy[r,c]·((x[r,c] − mean[r])·rstd[r]) (LayerNorm weight)
// The reference is src/repro/repro_ops.c.
#include "repro_math.glsl"
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Push { uint row0; uint row1; uint C; } p;
layout(std430, binding = 0) readonly buffer BDY { float dy[]; };
layout(std430, binding = 1) readonly buffer BX { float x[]; };
layout(std430, binding = 2) readonly buffer BM { float mean[]; };
layout(std430, binding = 3) readonly buffer BR { float rstd[]; };
layout(std430, binding = 4) buffer BO { float o[]; };

void main()
{
    uint c = gl_GlobalInvocationID.x;
    if (c >= p.C)
        return;
    precise float acc = o[c];
    for (uint r = p.row0; r < p.row1; r++) {
        precise float g = dy[r * p.C + c];
#if MODE == 1
        precise float xs = x[r * p.C + c] * rstd[r];
        g = g * xs;
#elif MODE == 2
        precise float xhat = x[r * p.C + c] - mean[r];
        xhat = xhat * rstd[r];
        g = g * xhat;
#endif
        acc = acc + g;
    }
    o[c] = acc;
}
