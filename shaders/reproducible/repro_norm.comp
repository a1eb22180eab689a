#version 450
// variant: rms -DMODE=0 -DPER_ROW=0
// variant: rmsback -DMODE=1 -DPER_ROW=0
// variant: ln -DMODE=2 -DPER_ROW=0
// variant: lnback -DMODE=3 -DPER_ROW=0
// variant: rms_row -DMODE=0 -DPER_ROW=1
// variant: rmsback_row -DMODE=1 -DPER_ROW=1
// variant: ln_row -DMODE=2 -DPER_ROW=1
// variant: lnback_row -DMODE=3 -DPER_ROW=1
// variant: rms_row4 -DMODE=0 -DPER_ROW=1 -DVEC4=1
// variant: rmsback_row4 -DMODE=1 -DPER_ROW=1 -DVEC4=1
// variant: ln_row4 -DMODE=2 -DPER_ROW=1 -DVEC4=1
// variant: lnback_row4 -DMODE=3 -DPER_ROW=1 -DVEC4=1
// repro_norm: the reproducible mode's RMSNorm and LayerNorm rows of C
// floats, one workgroup per row (GPUs), or one invocation per row (the
// _row variants, for CPU devices, where a workgroup's barriers are dear).
// The row sums are the fixed tree of repro_tree.glsl (each invocation an
// aligned run of 2^log_run elements, then the workgroup, then + 0; a _row
// invocation the whole row as one run, then + 0): the bits of
// repro_sum_ref over the row's terms either way; the per-element formulas are
// repro_ops.glsl's, in the default kernels' order:
//   rms:     ss = Σ x·x, s = 1/sqrt(ss/C + eps), y = (x·s)·w, rstd = s
//   rmsback: d = Σ (w·dy)·x, dx = dx + ((s·w)·dy − k·x), k = s³·d/C
//   ln:      m = (Σ x)/C, v = Σ (x−m)·(x−m), rs = 1/sqrt(v/C + eps),
//            y = ((x−m)·rs)·w + b
//   lnback:  g = w·dy, a = (Σ g)/C, b = (Σ (g·(x−m))·rs)/C,
//            dx = dx + rs·((g − a) − ((x−m)·rs)·b)
// dx is added into (the residual stream's gradient), as the default ops
// do. The weight and bias gradients are repro_colsum.comp.
#include "repro_ops.glsl"
layout(local_size_x_id = 0) in; // a power of two
// rows: the _row variants' row count
layout(push_constant) uniform Push { uint rows; uint C; float eps; uint log_run; } p;
// The inputs: R32F texel views in the _row variants (CPU devices, where
// llvmpipe loads them faster than storage), storage otherwise; the
// outputs storage; dx, added into, is read as an input (dx_in: the same
// buffer, each element read, then written, by one invocation: on llvmpipe
// a storage load is a scalar load per lane). The _row4 variants (C % 4 == 0)
// read the rows and w, b as RGBA32F texels, four elements a step (a
// quarter of the gathers; the row's per-row values, mean and rstd, stay
// R32F) and write vec4s: each component the scalar formula, the tree the
// same (its two lowest levels, ((a + b) + (c + d)), from one texel).
#if PER_ROW
#define IN(b, name) layout(binding = b) uniform samplerBuffer name;
#define LD(name, i) texelFetch(name, int(i)).x
#define LD4(name, i4) texelFetch(name, int(i4))
#else
#define IN(b, name) layout(std430, binding = b) readonly buffer B_##name { float name[]; };
#define LD(name, i) name[i]
#endif
#if VEC4
#define OUT_T vec4
#else
#define OUT_T float
#endif
#if MODE == 0
IN(0, x)
IN(1, w)
layout(std430, binding = 2) writeonly buffer BY { OUT_T y[]; };
layout(std430, binding = 3) writeonly buffer BR { float rstd[]; };
#elif MODE == 1
IN(0, dy)
IN(1, x)
IN(2, w)
IN(3, rstd)
IN(4, dx_in)
layout(std430, binding = 5) writeonly buffer BDX { OUT_T dx[]; };
#elif MODE == 2
IN(0, x)
IN(1, w)
IN(2, b)
layout(std430, binding = 3) writeonly buffer BY { OUT_T y[]; };
layout(std430, binding = 4) writeonly buffer BM { float mean[]; };
layout(std430, binding = 5) writeonly buffer BR { float rstd[]; };
#else
IN(0, dy)
IN(1, x)
IN(2, w)
IN(3, mean)
IN(4, rstd)
IN(5, dx_in)
layout(std430, binding = 6) writeonly buffer BDX { OUT_T dx[]; };
#endif

uint base;         // the row's first element
uint which;        // which of the row's sums the tree takes
float m_row, s_row; // the row's mean and rstd, where a sum needs them

// Term i of the sum `which` of the row.
float term(uint i)
{
    uint e = base + i;
#if MODE == 0
    precise float t = LD(x, e) * LD(x, e);
#elif MODE == 1
    precise float t = LD(w, i) * LD(dy, e);
    t = t * LD(x, e);
#elif MODE == 2
    precise float t = LD(x, e);
    if (which != 0u) {
        precise float d = LD(x, e) - m_row;
        t = d * d;
    }
#else
    precise float t = LD(w, i) * LD(dy, e);
    if (which != 0u) {
        precise float d = LD(x, e) - m_row;
        t = t * d;
        t = t * s_row;
    }
#endif
    return t;
}
#if VEC4
// Terms 4·i4 .. 4·i4 + 3 of the sum `which` of the row: term()'s
// operations on each component.
vec4 term4(uint i4)
{
    uint e4 = base / 4u + i4;
#if MODE == 0
    precise vec4 t = LD4(x, e4) * LD4(x, e4);
#elif MODE == 1
    precise vec4 t = LD4(w, i4) * LD4(dy, e4);
    t = t * LD4(x, e4);
#elif MODE == 2
    precise vec4 t = LD4(x, e4);
    if (which != 0u) {
        precise vec4 d = LD4(x, e4) - m_row;
        t = d * d;
    }
#else
    precise vec4 t = LD4(w, i4) * LD4(dy, e4);
    if (which != 0u) {
        precise vec4 d = LD4(x, e4) - m_row;
        t = t * d;
        t = t * s_row;
    }
#endif
    return t;
}
#define REPRO_TREE_LOAD4(i4) term4(i4)
#endif
#define REPRO_TREE_LOAD(i) term(i)
#define REPRO_TREE_MAX_LOG 16
#include "repro_tree.glsl"

// The row's sum `what` (every invocation of a workgroup calls it and gets
// it).
float row_sum(uint what)
{
    which = what;
#if VEC4
    precise float total = repro_tree_run4(p.log_run, p.C);
#elif PER_ROW
    precise float total = repro_tree_run(0u, p.log_run, p.C);
#else
    precise float total = repro_tree_workgroup(repro_tree_run(gl_LocalInvocationID.x << p.log_run, p.log_run, p.C));
#endif
    total = total + 0.0f;
    return total;
}

void main()
{
#if PER_ROW
    uint r = gl_GlobalInvocationID.x, t = 0u, wg = 1u;
    if (r >= p.rows)
        return;
#else
    uint r = gl_WorkGroupID.x, t = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
#endif
    base = r * p.C;
    float C = float(p.C);
#if VEC4
    // four elements a step: texel j of the row, the scalar formula on each
    uint b4 = base / 4u, n4 = p.C / 4u;
#define EACH4(f) vec4(f(x), f(y), f(z), f(w))
#if MODE == 0
    float s = repro_norm_rstd(row_sum(0u), C, p.eps);
    for (uint j = 0u; j < n4; j++) {
        vec4 xv = LD4(x, b4 + j), wv = LD4(w, j);
#define F(c) repro_rms_y(xv.c, s, wv.c)
        y[b4 + j] = EACH4(F);
#undef F
    }
    rstd[r] = s;
#elif MODE == 1
    float s = LD(rstd, r);
    float k = repro_rms_k(s, row_sum(0u), C);
    for (uint j = 0u; j < n4; j++) {
        vec4 d = LD4(dx_in, b4 + j), wv = LD4(w, j), gv = LD4(dy, b4 + j), xv = LD4(x, b4 + j);
#define F(c) repro_rms_dx(d.c, s, wv.c, gv.c, k, xv.c)
        dx[b4 + j] = EACH4(F);
#undef F
    }
#elif MODE == 2
    m_row = repro_div(row_sum(0u), C);
    float s = repro_norm_rstd(row_sum(1u), C, p.eps);
    for (uint j = 0u; j < n4; j++) {
        vec4 xv = LD4(x, b4 + j), wv = LD4(w, j), bv = LD4(b, j);
#define F(c) repro_ln_y(xv.c, m_row, s, wv.c, bv.c)
        y[b4 + j] = EACH4(F);
#undef F
    }
    mean[r] = m_row;
    rstd[r] = s;
#else
    m_row = LD(mean, r);
    s_row = LD(rstd, r);
    float a = repro_div(row_sum(0u), C);
    float bb = repro_div(row_sum(1u), C);
    for (uint j = 0u; j < n4; j++) {
        vec4 d = LD4(dx_in, b4 + j), xv = LD4(x, b4 + j);
        precise vec4 g = LD4(w, j) * LD4(dy, b4 + j);
#define F(c) repro_ln_dx(d.c, g.c, xv.c, m_row, s_row, a, bb)
        dx[b4 + j] = EACH4(F);
#undef F
    }
#endif
#else
#if MODE == 0
    float s = repro_norm_rstd(row_sum(0u), C, p.eps);
    for (uint i = t; i < p.C; i += wg)
        y[base + i] = repro_rms_y(LD(x, base + i), s, LD(w, i));
    if (t == 0u)
        rstd[r] = s;
#elif MODE == 1
    float s = LD(rstd, r);
    float k = repro_rms_k(s, row_sum(0u), C);
    for (uint i = t; i < p.C; i += wg)
        dx[base + i] = repro_rms_dx(LD(dx_in, base + i), s, LD(w, i), LD(dy, base + i), k, LD(x, base + i));
#elif MODE == 2
    m_row = repro_div(row_sum(0u), C);
    float s = repro_norm_rstd(row_sum(1u), C, p.eps);
    for (uint i = t; i < p.C; i += wg)
        y[base + i] = repro_ln_y(LD(x, base + i), m_row, s, LD(w, i), LD(b, i));
    if (t == 0u) {
        mean[r] = m_row;
        rstd[r] = s;
    }
#else
    m_row = LD(mean, r);
    s_row = LD(rstd, r);
    float a = repro_div(row_sum(0u), C);
    float bb = repro_div(row_sum(1u), C);
    for (uint i = t; i < p.C; i += wg) {
        precise float g = LD(w, i) * LD(dy, base + i);
        dx[base + i] = repro_ln_dx(LD(dx_in, base + i), g, LD(x, base + i), m_row, s_row, a, bb);
    }
#endif
#endif
}
