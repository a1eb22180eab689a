#version 450
// variant: texel -DTEXEL=1
// variant: storage -DTEXEL=0
// repro_cross_entropy: the reproducible mode's masked softmax
// cross-entropy fused with its backward (the contract of op_cross_entropy
// in include/vktrain/ops.h), one workgroup per row of logits (rows, V), in
// place: the row becomes dlogits. For a row whose label is in [0, V):
//   m      = max of the row (compare and select: exact, any order; a NaN
//            anywhere gives a NaN)
//   l      = the repro_tree sum of repro_exp(x_i − m) over i (+0 padded)
//   lse    = m + repro_log(l)
//   loss   = lse − x[label],   row_count = 1
//   dx_i   = repro_exp(x_i − lse) · scale,  dx_label = (repro_exp(x_label − lse) − 1) · scale
// Any other label (−100 = ignore, out of range): dx = +0, loss = count = 0.
// Each invocation sums an aligned run of 2^log_run elements (the host
// picks log_run so the workgroup covers V); neither the run nor the
// workgroup size changes the bits. tests/ref/ref_repro_cross_entropy.c is the C.
// TEXEL = 1 (CPU devices) reads the logits through an R32F texel view and
// writes dlogits through a storage binding of the same rows, TEXEL = 0
// reads and writes one storage binding: the same floats, the same bits.
// Every read of the row happens before the workgroup's barriers, every
// write after them.
#include "repro_math.glsl"
layout(local_size_x_id = 0) in; // a power of two
layout(push_constant) uniform Push { uint rows; uint V; float scale; uint log_run; } p;
#if TEXEL
layout(binding = 0) uniform samplerBuffer tx;
layout(std430, binding = 1) writeonly buffer BD { float dx[]; };
#define LOGIT(i) texelFetch(tx, int(i)).x
#else
layout(std430, binding = 0) buffer BL { float dx[]; };
#define LOGIT(i) dx[i]
#endif
layout(std430, binding = 1 + TEXEL) readonly buffer BLab { int labels[]; };
layout(std430, binding = 2 + TEXEL) writeonly buffer BLoss { float row_loss[]; };
layout(std430, binding = 3 + TEXEL) writeonly buffer BCount { float row_count[]; };

uint base;
float row_max;

float shifted_exp(uint i)
{
    precise float d = LOGIT(base + i) - row_max;
    precise float e = repro_exp(d);
    return e;
}
#define REPRO_TREE_LOAD(i) shifted_exp(i)
#include "repro_tree.glsl"

float max_of(float a, float b) { return b > a || isnan(b) ? b : a; }

void main()
{
    uint r = gl_WorkGroupID.x, t = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    if (r >= p.rows)
        return; // uniform per workgroup
    base = r * p.V;
    int label = labels[r];
    if (label < 0 || uint(label) >= p.V) {
        for (uint i = t; i < p.V; i += wg)
            dx[base + i] = 0.0f;
        if (t == 0u) {
            row_loss[r] = 0.0f;
            row_count[r] = 0.0f;
        }
        return;
    }
    float target = LOGIT(base + uint(label));
    float m = uintBitsToFloat(0xff800000u);
    for (uint i = t; i < p.V; i += wg)
        m = max_of(m, LOGIT(base + i));
    repro_tree_s[t] = m;
    barrier();
    for (uint h = wg >> 1; h > 0u; h >>= 1) {
        if (t < h)
            repro_tree_s[t] = max_of(repro_tree_s[t], repro_tree_s[t + h]);
        barrier();
    }
    row_max = repro_tree_s[0];
    barrier();
    precise float l = repro_tree_workgroup(repro_tree_run(t << p.log_run, p.log_run, p.V));
    l = l + 0.0f;
    precise float logl = repro_log(l);
    precise float lse = row_max + logl;
    for (uint i = t; i < p.V; i += wg) {
        precise float d = LOGIT(base + i) - lse;
        precise float e = repro_exp(d);
        if (i == uint(label))
            e = e - 1.0f;
        e = e * p.scale;
        dx[base + i] = e;
    }
    if (t == 0u) {
        precise float loss = lse - target;
        row_loss[r] = loss;
        row_count[r] = 1.0f;
    }
}
