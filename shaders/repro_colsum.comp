#version 450
// variant: plain -DMODE=0
// variant: rms -DMODE=1
// variant: ln -DMODE=2
// variant: plain_tex -DMODE=0 -DTEX=1
// variant: rms_tex -DMODE=1 -DTEX=1
// variant: ln_tex -DMODE=2 -DTEX=1
// repro_colsum: the reproducible profile's column sums over rows
// [row0, row1), one invocation per column, starting from the output's old
// value and adding the rows in row order (so cutting the rows into calls
// gives the same bits):
//   plain: o[c] = o[c] + dy[r,c]                           (bias gradient)
//   rms:   o[c] = o[c] + dy[r,c]·(x[r,c]·rstd[r])           (RMSNorm weight)
//   ln:    o[c] = o[c] + dy[r,c]·((x[r,c] − mean[r])·rstd[r]) (LayerNorm weight)
// The _tex variants (CPU devices) read dy, x, mean, rstd through R32F
// texel views, which llvmpipe loads faster than storage. The reference is
// src/repro/repro_ops.c.
// Sums over samples (precision: reproducible, src/repro/repro_samples.c):
// with seg_rows != 0 the rows are a micro-batch's samples of seg_rows rows,
// binding row 0 being row seg_base; after each sample's last row the
// column's value joins the tree over samples as repro_push.comp does, on
// the stack S (levels floats per column), and restarts at +0.
#include "repro_math.glsl"
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Push { uint row0; uint row1; uint C; uint seg_rows; uint seg_base; uint levels; } p;
#if TEX
layout(binding = 0) uniform samplerBuffer dy;
layout(binding = 1) uniform samplerBuffer x;
layout(binding = 2) uniform samplerBuffer mean;
layout(binding = 3) uniform samplerBuffer rstd;
#define LD(name, i) texelFetch(name, int(i)).x
#else
layout(std430, binding = 0) readonly buffer BDY { float dy[]; };
layout(std430, binding = 1) readonly buffer BX { float x[]; };
layout(std430, binding = 2) readonly buffer BM { float mean[]; };
layout(std430, binding = 3) readonly buffer BR { float rstd[]; };
#define LD(name, i) name[i]
#endif
layout(std430, binding = 4) buffer BO { float o[]; };
layout(std430, binding = 5) buffer BS { float S[]; };

void main()
{
    uint c = gl_GlobalInvocationID.x;
    if (c >= p.C)
        return;
    precise float acc = o[c];
    for (uint r = p.row0; r < p.row1; r++) {
        precise float g = LD(dy, r * p.C + c);
#if MODE == 1
        precise float xs = LD(x, r * p.C + c) * LD(rstd, r);
        g = g * xs;
#elif MODE == 2
        precise float xhat = LD(x, r * p.C + c) - LD(mean, r);
        xhat = xhat * LD(rstd, r);
        g = g * xhat;
#endif
        acc = acc + g;
        if (p.seg_rows != 0u && (p.seg_base + r + 1u) % p.seg_rows == 0u) {
            uint j = (p.seg_base + r + 1u) / p.seg_rows - 1u, l = 0u;
            for (; l < p.levels && ((j >> l) & 1u) != 0u; l++) {
                precise float t = S[c * p.levels + l] + acc;
                acc = t;
            }
            if (l < p.levels) {
                S[c * p.levels + l] = acc;
                acc = 0.0f;
            }
        }
    }
    o[c] = acc;
}
