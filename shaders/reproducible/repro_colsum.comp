#version 450
// variant: plain -DMODE=0 -DPIECES=1
// variant: rms -DMODE=1 -DPIECES=1
// variant: ln -DMODE=2 -DPIECES=1
// variant: plain_tex -DMODE=0 -DTEX=1
// variant: rms_tex -DMODE=1 -DTEX=1
// variant: ln_tex -DMODE=2 -DTEX=1
// variant: plain_tex4 -DMODE=0 -DTEX=1 -DVEC4=1
// variant: rms_tex4 -DMODE=1 -DTEX=1 -DVEC4=1
// variant: ln_tex4 -DMODE=2 -DTEX=1 -DVEC4=1
// repro_colsum: the reproducible mode's column sums over rows
// [row0, row1), one invocation per column, starting from the output's old
// value and adding the rows in row order (so cutting the rows into calls
// gives the same bits):
//   plain: o[c] = o[c] + dy[r,c]                           (bias gradient)
//   rms:   o[c] = o[c] + dy[r,c]·(x[r,c]·rstd[r])           (RMSNorm weight)
//   ln:    o[c] = o[c] + dy[r,c]·((x[r,c] − mean[r])·rstd[r]) (LayerNorm weight)
// The _tex variants (CPU devices) read dy, x, mean, rstd through R32F
// texel views, which llvmpipe loads faster than storage; the _tex4 ones
// (C % 4 == 0) read dy and x as RGBA32F, an invocation owning 4 columns as
// the components of a vec4 (each component's operations those of one
// column, rounded on their own: the same bits). The reference is
// tests/ref/ref_repro_ops.c.
// Sums over samples (precision: reproducible, src/repro/repro_samples.c):
// with seg_rows != 0 the rows are a micro-batch's samples of seg_rows rows,
// binding row 0 being row seg_base; after each sample's last row the
// column's value joins the tree over samples as repro_push.comp does, on
// the stack S (levels floats per column, in groups of four columns as
// repro_push.comp's), and restarts at +0.
// The storage variants (GPUs; PIECES) take the samples in parallel, where
// one invocation per column walked all of them (GPT-2's 8 × 1024 rows
// over 768 columns, a few hundred invocations, for a GPU of thousands of
// lanes): a workgroup of 32 columns × 8 lanes, each lane walking the rows
// of a piece, the first piece from row0 to the end of its sample and
// starting from the output's old value, the others a whole sample (or the
// rest up to row1) from +0, as the walk above restarts after each sample.
// Then one lane per column joins the pieces' values in order with the
// stack as above: the same operations on the same values, so the same
// bits. (A piece after the micro-batch's last sample, where the stack
// keeps the value rather than restarting, cannot exist: the rows end
// there.) Columns from c0 (windows within the workgroup count).
#include "repro_math.glsl"
#if PIECES
layout(local_size_x = 32, local_size_y = 8) in;
layout(push_constant) uniform Push {
    uint row0; uint row1; uint C; uint seg_rows; uint seg_base; uint levels; uint c0;
} p;
#else
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Push { uint row0; uint row1; uint C; uint seg_rows; uint seg_base; uint levels; } p;
#endif
#if TEX
layout(binding = 0) uniform samplerBuffer dy;
layout(binding = 1) uniform samplerBuffer x;
layout(binding = 2) uniform samplerBuffer mean;
layout(binding = 3) uniform samplerBuffer rstd;
#define LD1(name, i) texelFetch(name, int(i)).x
#if VEC4
#define FT vec4
#define LD(name, i) texelFetch(name, int(i))
#else
#define FT float
#define LD(name, i) texelFetch(name, int(i)).x
#endif
#else
#define FT float
layout(std430, binding = 0) readonly buffer BDY { float dy[]; };
layout(std430, binding = 1) readonly buffer BX { float x[]; };
layout(std430, binding = 2) readonly buffer BM { float mean[]; };
layout(std430, binding = 3) readonly buffer BR { float rstd[]; };
#define LD(name, i) name[i]
#define LD1(name, i) name[i]
#endif
layout(std430, binding = 4) buffer BO { float o[]; };
#if VEC4
// the stack as RGBA32F storage texels: a column group's level is one texel
layout(binding = 5, rgba32f) uniform imageBuffer S4;
#else
layout(std430, binding = 5) buffer BS { float S[]; };
#endif
#if VEC4
#define W 4u
// the 4 floats of columns 4c .. 4c + 3 at f(column)
#define GATHER(f) vec4(f(4u * c), f(4u * c + 1u), f(4u * c + 2u), f(4u * c + 3u))
#define SCATTER(f, v) f(4u * c) = v.x; f(4u * c + 1u) = v.y; f(4u * c + 2u) = v.z; f(4u * c + 3u) = v.w;
#else
#define W 1u
#define GATHER(f) f(c)
#define SCATTER(f, v) f(c) = v;
#endif
#define O_AT(k) o[k]
#if VEC4
#define S_LOAD imageLoad(S4, int(c * p.levels + l))
#define S_STORE(v) imageStore(S4, int(c * p.levels + l), v);
#else
#define S_LOAD S[((c >> 2) * p.levels + l) * 4u + (c & 3u)]
#define S_STORE(v) S_LOAD = v;
#endif

// Row r's term of column c (of W) of n.
FT term(uint r, uint c, uint n)
{
    precise FT g = LD(dy, r * n + c);
#if MODE == 1
    precise FT xs = LD(x, r * n + c) * LD1(rstd, r);
    g = g * xs;
#elif MODE == 2
    precise FT xhat = LD(x, r * n + c) - LD1(mean, r);
    xhat = xhat * LD1(rstd, r);
    g = g * xhat;
#endif
    return g;
}

// After a sample's last row (`end`, a row of the call): the column's
// value joins the tree over samples; returns it, or +0 once stacked.
FT push_sample(uint c, uint end, FT acc)
{
    uint j = (p.seg_base + end) / p.seg_rows - 1u, l = 0u;
    for (; l < p.levels && ((j >> l) & 1u) != 0u; l++) {
        precise FT t = S_LOAD + acc;
        acc = t;
    }
    if (l < p.levels) {
        S_STORE(acc)
        acc = FT(0.0f);
    }
    return acc;
}

#if PIECES
shared float part[32][32]; // [piece of the batch][column]

void main()
{
    uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y, n = p.C;
    uint c = p.c0 + gl_WorkGroupID.x * 32u + lx;
    bool live = c < n;
    // piece 0 ends at its sample's end (or row1), each other one a sample later
    uint first_end = p.row1;
    if (p.seg_rows != 0u)
        first_end = min(p.row1, p.row0 + p.seg_rows - (p.seg_base + p.row0) % p.seg_rows);
    uint pieces = 1u + (first_end < p.row1 ? (p.row1 - first_end + p.seg_rows - 1u) / p.seg_rows : 0u);
    precise float acc = 0.0f; // the join's value (lane 0)
    for (uint base = 0u; base < pieces; base += 32u) {
        for (uint q = ly; q < 32u && base + q < pieces; q += 8u) {
            uint pc = base + q;
            uint rs = pc == 0u ? p.row0 : first_end + (pc - 1u) * p.seg_rows;
            uint re = pc == 0u ? first_end : min(p.row1, rs + p.seg_rows);
            precise float s = pc == 0u && live ? o[c] : 0.0f;
            if (live)
                for (uint r = rs; r < re; r++) {
                    precise float t = s + term(r, c, n);
                    s = t;
                }
            part[q][lx] = s;
        }
        barrier();
        if (ly == 0u && live)
            for (uint q = 0u; q < 32u && base + q < pieces; q++) {
                uint pc = base + q, re = pc == 0u ? first_end : min(p.row1, first_end + pc * p.seg_rows);
                acc = part[q][lx];
                if (p.seg_rows != 0u && (p.seg_base + re) % p.seg_rows == 0u)
                    acc = push_sample(c, re, acc);
            }
        barrier();
    }
    if (ly == 0u && live)
        o[c] = acc;
}
#else
void main()
{
    uint c = gl_GlobalInvocationID.x, n = p.C / W; // column (of W) c of n
    if (c >= n)
        return;
    precise FT acc = GATHER(O_AT);
    // the rows in pieces that end at a sample's last row (or at row1): a
    // remainder per piece, not per row (a CPU device divides lane by lane)
    for (uint r = p.row0; r < p.row1;) {
        uint end = p.row1;
        if (p.seg_rows != 0u)
            end = min(p.row1, r + p.seg_rows - (p.seg_base + r) % p.seg_rows);
        for (; r < end; r++) {
            precise FT t = acc + term(r, c, n);
            acc = t;
        }
        if (p.seg_rows != 0u && (p.seg_base + end) % p.seg_rows == 0u)
            acc = push_sample(c, end, acc);
    }
    SCATTER(O_AT, acc)
}
#endif
