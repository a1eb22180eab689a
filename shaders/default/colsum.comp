#version 450
// variant: plain -DMODE=0
// variant: rms -DMODE=1
// variant: ln -DMODE=2
// Column sums over rows [row0, row1), accumulated:
//   plain: out[c] += Σ_r dy[r,c]                        (bias gradient)
//   rms:   out[c] += Σ_r dy[r,c]·x[r,c]·rstd[r]          (RMSNorm weight)
//   ln:    out[c] += Σ_r dy[r,c]·(x[r,c]−mean[r])·rstd[r] (LayerNorm weight)
// A workgroup of WG invocations (a multiple of 32, at most 1024) owns 32
// columns from c0 + 32·(workgroup index) and splits the rows into S =
// WG/32 contiguous blocks, one per slice y = index/32: each invocation sums
// its column over its block in row order (neighbouring invocations read
// neighbouring columns of a row), then slice 0 adds the S partial sums in
// block order. The order of every addition is fixed by the row range and
// WG, so a rerun gives the same bits (no atomics); the walk of one column
// is S times shorter than one invocation walking every row.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(push_constant) uniform Push { uint row0; uint row1; uint C; uint c0; } p;
layout(std430, binding = 0) readonly buffer BDY { float dy[]; };
layout(std430, binding = 1) readonly buffer BX { float x[]; };
layout(std430, binding = 2) readonly buffer BM { float mean[]; };
layout(std430, binding = 3) readonly buffer BR { float rstd[]; };
layout(std430, binding = 4) buffer BO { float o[]; };

// sized for the largest WG, not by the specialization constant (which
// SPIRV-Cross, behind MoltenVK, would size by its default)
shared float part[1024];

void main()
{
    const uint S = WG / 32u;
    uint i = gl_LocalInvocationIndex, y = i / 32u;
    uint c = p.c0 + gl_WorkGroupID.x * 32u + i % 32u;
    uint n = p.row1 - p.row0, len = (n + S - 1u) / S;
    uint r1 = p.row0 + min((y + 1u) * len, n);
    float s = 0.0;
    for (uint r = p.row0 + min(y * len, n); c < p.C && r < r1; r++) {
        float g = dy[r * p.C + c];
#if MODE == 1
        g *= x[r * p.C + c] * rstd[r];
#elif MODE == 2
        g *= (x[r * p.C + c] - mean[r]) * rstd[r];
#endif
        s += g;
    }
    part[i] = s;
    barrier();
    if (y != 0u || c >= p.C) return;
    for (uint b = 1u; b < S; b++) s += part[b * 32u + i];
    o[c] += s;
}
