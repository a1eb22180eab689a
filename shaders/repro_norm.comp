#version 450
// variant: rms -DMODE=0 -DPER_ROW=0
// variant: rmsback -DMODE=1 -DPER_ROW=0
// variant: ln -DMODE=2 -DPER_ROW=0
// variant: lnback -DMODE=3 -DPER_ROW=0
// variant: rms_row -DMODE=0 -DPER_ROW=1
// variant: rmsback_row -DMODE=1 -DPER_ROW=1
// variant: ln_row -DMODE=2 -DPER_ROW=1
// variant: lnback_row -DMODE=3 -DPER_ROW=1
// repro_norm: the reproducible profile's RMSNorm and LayerNorm rows of C
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
// outputs (and dx, added into) storage.
#if PER_ROW
#define IN(b, name) layout(binding = b) uniform samplerBuffer name;
#define LD(name, i) texelFetch(name, int(i)).x
#else
#define IN(b, name) layout(std430, binding = b) readonly buffer B_##name { float name[]; };
#define LD(name, i) name[i]
#endif
#if MODE == 0
IN(0, x)
IN(1, w)
layout(std430, binding = 2) writeonly buffer BY { float y[]; };
layout(std430, binding = 3) writeonly buffer BR { float rstd[]; };
#elif MODE == 1
IN(0, dy)
IN(1, x)
IN(2, w)
IN(3, rstd)
layout(std430, binding = 4) buffer BDX { float dx[]; };
#elif MODE == 2
IN(0, x)
IN(1, w)
IN(2, b)
layout(std430, binding = 3) writeonly buffer BY { float y[]; };
layout(std430, binding = 4) writeonly buffer BM { float mean[]; };
layout(std430, binding = 5) writeonly buffer BR { float rstd[]; };
#else
IN(0, dy)
IN(1, x)
IN(2, w)
IN(3, mean)
IN(4, rstd)
layout(std430, binding = 5) buffer BDX { float dx[]; };
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
#define REPRO_TREE_LOAD(i) term(i)
#define REPRO_TREE_MAX_LOG 16
#include "repro_tree.glsl"

// The row's sum `what` (every invocation of a workgroup calls it and gets
// it).
float row_sum(uint what)
{
    which = what;
#if PER_ROW
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
        dx[base + i] = repro_rms_dx(dx[base + i], s, LD(w, i), LD(dy, base + i), k, LD(x, base + i));
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
        dx[base + i] = repro_ln_dx(dx[base + i], g, LD(x, base + i), m_row, s_row, a, bb);
    }
#endif
}
