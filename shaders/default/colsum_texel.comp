#version 450
// variant: plain_vec4 -DVEC4=1 -DMODE=0
// variant: plain_scalar -DVEC4=0 -DMODE=0
// variant: rms_vec4 -DVEC4=1 -DMODE=1
// variant: rms_scalar -DVEC4=0 -DMODE=1
// variant: ln_vec4 -DVEC4=1 -DMODE=2
// variant: ln_scalar -DVEC4=0 -DMODE=2
// Column sums of colsum.comp, texel family (CPU devices): one invocation
// per chunk of W columns, rows in order (deterministic, no atomics), inputs
// read with texelFetch (mean and rstd as R32F):
//   plain: out[c] += Σ_r dy[r,c]
//   rms:   out[c] += Σ_r dy[r,c]·x[r,c]·rstd[r]
//   ln:    out[c] += Σ_r dy[r,c]·(x[r,c]−mean[r])·rstd[r]
#include "texel.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint row0; uint row1; uint C; } p; // rows [row0, row1)
layout(binding = 0) uniform samplerBuffer tdy;
layout(binding = 1) uniform samplerBuffer tx;
layout(binding = 2) uniform samplerBuffer tm;
layout(binding = 3) uniform samplerBuffer tr;
layout(std430, binding = 4) buffer BO { VT o[]; };

void main()
{
    uint c = gl_GlobalInvocationID.x;
    if (c >= p.C / W) return;
    VT s = VT(0.0);
    for (uint r = p.row0; r < p.row1; r++) {
        uint e = r * p.C + c * W;
        VT g = FETCH(tdy, e);
#if MODE == 1
        g *= FETCH(tx, e) * FETCH1(tr, r);
#elif MODE == 2
        g *= (FETCH(tx, e) - FETCH1(tm, r)) * FETCH1(tr, r);
#endif
        s += g;
    }
    o[c] += s;
}
