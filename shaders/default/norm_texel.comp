#version 450
// variant: rms_vec4 -DVEC4=1 -DKIND=0
// variant: rms_scalar -DVEC4=0 -DKIND=0
// variant: rmsback_vec4 -DVEC4=1 -DKIND=1
// variant: rmsback_scalar -DVEC4=0 -DKIND=1
// variant: ln_vec4 -DVEC4=1 -DKIND=2
// variant: ln_scalar -DVEC4=0 -DKIND=2
// variant: lnback_vec4 -DVEC4=1 -DKIND=3
// variant: lnback_scalar -DVEC4=0 -DKIND=3
// Row normalizations, texel family (CPU devices): one invocation per row
// (no shared memory, no barriers), inputs read with texelFetch, rows of
// C floats in C/W chunks. Same formulas as rmsnorm.comp, rmsnorm_back.comp,
// layernorm.comp and layernorm_back.comp:
//   rms:     rstd = (mean(x²) + eps)^(-1/2), y = x·rstd·w
//   rmsback: dx += rstd·w·dy − (rstd³/C)·x·Σ w·dy·x
//   ln:      y = (x − mean)·rstd·w + b, rstd = (var + eps)^(-1/2)
//   lnback:  dx += rstd·(w·dy − mean(w·dy) − xhat·mean(w·dy·xhat))
// Each row's sums run in a fixed order (deterministic). The backward
// reads the gradient it adds to (dx) through a view too (each row read,
// then written, by one invocation): a storage load is a scalar load per
// lane and component on llvmpipe.
#include "texel.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint rows; uint C; float eps; } p;

#if KIND == 0
layout(binding = 0) uniform samplerBuffer tx;
layout(binding = 1) uniform samplerBuffer tw;
layout(std430, binding = 2) writeonly buffer BY { VT y[]; };
layout(std430, binding = 3) writeonly buffer BR { float rstd[]; };
#elif KIND == 1
layout(binding = 0) uniform samplerBuffer tdy;
layout(binding = 1) uniform samplerBuffer tx;
layout(binding = 2) uniform samplerBuffer tw;
layout(binding = 3) uniform samplerBuffer tr; // R32F
layout(binding = 4) uniform samplerBuffer tdx;
layout(std430, binding = 5) writeonly buffer BDX { VT dx[]; };
#elif KIND == 2
layout(binding = 0) uniform samplerBuffer tx;
layout(binding = 1) uniform samplerBuffer tw;
layout(binding = 2) uniform samplerBuffer tb;
layout(std430, binding = 3) writeonly buffer BY { VT y[]; };
layout(std430, binding = 4) writeonly buffer BM { float mean[]; };
layout(std430, binding = 5) writeonly buffer BR { float rstd[]; };
#else
layout(binding = 0) uniform samplerBuffer tdy;
layout(binding = 1) uniform samplerBuffer tx;
layout(binding = 2) uniform samplerBuffer tw;
layout(binding = 3) uniform samplerBuffer tm; // R32F
layout(binding = 4) uniform samplerBuffer tr; // R32F
layout(binding = 5) uniform samplerBuffer tdx;
layout(std430, binding = 6) writeonly buffer BDX { VT dx[]; };
#endif

void main()
{
    uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows) return;
    uint n = p.C / W, base = r * p.C, o = base / W;
#if KIND == 0
    VT ss = VT(0.0);
    for (uint c = 0u; c < n; c++) { VT xv = FETCH(tx, base + c * W); ss += xv * xv; }
    float s = inversesqrt(HSUM(ss) / float(p.C) + p.eps);
    for (uint c = 0u; c < n; c++) y[o + c] = FETCH(tx, base + c * W) * s * FETCH(tw, c * W);
    rstd[r] = s;
#elif KIND == 1
    VT d = VT(0.0);
    for (uint c = 0u; c < n; c++) d += FETCH(tw, c * W) * FETCH(tdy, base + c * W) * FETCH(tx, base + c * W);
    float s = FETCH1(tr, r), k = s * s * s * HSUM(d) / float(p.C);
    for (uint c = 0u; c < n; c++)
        dx[o + c] = FETCH(tdx, base + c * W) + (s * FETCH(tw, c * W) * FETCH(tdy, base + c * W) - k * FETCH(tx, base + c * W));
#elif KIND == 2
    VT a = VT(0.0);
    for (uint c = 0u; c < n; c++) a += FETCH(tx, base + c * W);
    float m = HSUM(a) / float(p.C);
    VT v = VT(0.0);
    for (uint c = 0u; c < n; c++) { VT d = FETCH(tx, base + c * W) - m; v += d * d; }
    float rs = inversesqrt(HSUM(v) / float(p.C) + p.eps);
    for (uint c = 0u; c < n; c++)
        y[o + c] = (FETCH(tx, base + c * W) - m) * rs * FETCH(tw, c * W) + FETCH(tb, c * W);
    mean[r] = m;
    rstd[r] = rs;
#else
    float m = FETCH1(tm, r), rs = FETCH1(tr, r);
    VT a = VT(0.0), b = VT(0.0);
    for (uint c = 0u; c < n; c++) {
        VT g = FETCH(tw, c * W) * FETCH(tdy, base + c * W);
        a += g;
        b += g * (FETCH(tx, base + c * W) - m) * rs;
    }
    float ma = HSUM(a) / float(p.C), mb = HSUM(b) / float(p.C);
    for (uint c = 0u; c < n; c++) {
        VT xhat = (FETCH(tx, base + c * W) - m) * rs;
        dx[o + c] = FETCH(tdx, base + c * W) + rs * (FETCH(tw, c * W) * FETCH(tdy, base + c * W) - ma - xhat * mb);
    }
#endif
}
