#version 450
// variant: -
// variant: texel_wg -DTEXEL=1
// Masked softmax cross-entropy fused with its backward, one workgroup per
// row of logits (rows, V; rows ld >= V floats apart, the floats after V
// written as 0). In place: the logits row becomes dlogits.
//   valid row (0 <= label < V):  loss = logsumexp(x) − x[label]
//                                dx   = (softmax(x) − onehot(label))·scale
//                                row_loss = loss, row_count = 1
//   any other label (−100 = ignore_index; out-of-range labels, which the
//   data layer rejects, are treated the same): dx = 0 exactly,
//                                row_loss = row_count = 0
// x[label] is only read for valid rows, and only in bounds. With softcap
// c > 0 (Gemma 2's final_logit_softcapping) x stands for c·tanh(x/c) and
// dx is times 1 − tanh²(x/c), the slope of the cap (softcap.glsl).
// The step passes scale = 1/N, N the global valid-token count, so
// gradients come out normalized (docs/normalization.md).
// TEXEL (CPU devices, rows too long for cross_entropy_texel.comp's one
// invocation per row under llvmpipe's loop limit): the logits are read
// through an R32F texel view (binding 0; llvmpipe gathers a subgroup's
// neighbouring elements in one fetch, where a storage load is a loop of
// scalar loads) and dlogits written through a storage binding of the same
// rows (binding 1). Each element is read before its own invocation
// overwrites it, and the label's logit passes through shared memory.
#include "rows.glsl"
#include "finite.glsl"
#include "softcap.glsl"
#ifndef TEXEL
#define TEXEL 0
#endif
layout(push_constant) uniform Push { uint rows; uint V; float scale; uint ld; float softcap; } p;
#if TEXEL
layout(binding = 0) uniform samplerBuffer tx;
#define LOGIT(i) softcap(texelFetch(tx, int(i)).x, p.softcap)
#else
#define LOGIT(i) softcap(x[i], p.softcap)
#endif
layout(std430, binding = TEXEL) buffer BL { float x[]; };
layout(std430, binding = TEXEL + 1) readonly buffer BLab { int labels[]; };
layout(std430, binding = TEXEL + 2) writeonly buffer BLoss { float row_loss[]; };
layout(std430, binding = TEXEL + 3) writeonly buffer BCount { float row_count[]; };
shared float ce_target;

void main()
{
    uint r = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    uint base = r * p.ld;
    int label = labels[r];
    bool valid = label >= 0 && uint(label) < p.V;
    if (!valid) {
        for (uint i = t; i < p.ld; i += WG) x[base + i] = 0.0;
        if (t == 0u) { row_loss[r] = 0.0; row_count[r] = 0.0; }
        return; // uniform per workgroup: the whole row takes this branch
    }
    // x[label] passes through shared memory: it is read by the invocation
    // that owns element `label` (each invocation reads and then writes only
    // its own elements i ≡ t mod WG), before the barriers of row_max. Read
    // from the buffer by every invocation, it could race with that owner's
    // write below: barrier() orders shared memory only, not buffers.
    if (t == uint(label) % WG) ce_target = LOGIT(base + uint(label));
    float m = NO_SCORE;
    for (uint i = t; i < p.V; i += WG) m = max(m, LOGIT(base + i));
    m = row_max(m);
    float target = ce_target;
    float s = 0.0;
    for (uint i = t; i < p.V; i += WG) s += exp(LOGIT(base + i) - m);
    s = row_sum(s);
    float inv = 1.0 / s;
    for (uint i = t; i < p.V; i += WG) {
        float y = LOGIT(base + i);
        precise float prob = exp(y - m) * inv; // no FMA into the next line
        x[base + i] = (prob - (i == uint(label) ? 1.0 : 0.0)) * p.scale * softcap_slope(y, p.softcap);
    }
    for (uint i = p.V + t; i < p.ld; i += WG) x[base + i] = 0.0;
    if (t == 0u) {
        row_loss[r] = log(s) + m - target;
        row_count[r] = 1.0;
    }
}
