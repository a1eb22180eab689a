#version 450
// Masked softmax cross-entropy fused with its backward, texel family (CPU
// devices): the formulas of cross_entropy.comp, one invocation per row
// (no shared memory, no barriers); rows ld >= V floats apart, the floats
// after V written as 0. The logits are read through an R32F
// texel view and the row of dlogits is written through a storage binding
// of the same rows; each element is read before it is overwritten and
// never read again. softcap > 0: Gemma 2's final soft-capping, as there.
// Invalid labels (−100 = ignore) give dx = 0, row_loss = row_count = 0
// and never read the logits.
#include "finite.glsl"
#include "softcap.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint rows; uint V; float scale; uint ld; float softcap; } p;
// the logit i of the row from src, soft-capped when p.softcap > 0
#define LOGIT(i) softcap(texelFetch(tx, int(i)).x, p.softcap)
layout(binding = 0) uniform samplerBuffer tx;
layout(std430, binding = 1) writeonly buffer BL { float dx[]; };
layout(std430, binding = 2) readonly buffer BLab { int labels[]; };
layout(std430, binding = 3) writeonly buffer BLoss { float row_loss[]; };
layout(std430, binding = 4) writeonly buffer BCount { float row_count[]; };

void main()
{
    uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows) return;
    uint g = r, src = r * p.ld, dst = r * p.ld;
    int label = labels[g];
    if (label < 0 || uint(label) >= p.V) {
        for (uint i = 0u; i < p.ld; i++) dx[dst + i] = 0.0;
        row_loss[g] = 0.0;
        row_count[g] = 0.0;
        return;
    }
    float m = NO_SCORE;
    for (uint i = 0u; i < p.V; i++) m = max(m, LOGIT(src + i));
    float s = 0.0;
    for (uint i = 0u; i < p.V; i++) s += exp(LOGIT(src + i) - m);
    float target = LOGIT(src + uint(label));
    float inv = 1.0 / s;
    for (uint i = 0u; i < p.V; i++) {
        float y = LOGIT(src + i);
        precise float prob = exp(y - m) * inv; // no FMA into the next line
        dx[dst + i] = (prob - (i == uint(label) ? 1.0 : 0.0)) * p.scale * softcap_slope(y, p.softcap);
    }
    for (uint i = p.V; i < p.ld; i++) dx[dst + i] = 0.0;
    row_loss[g] = log(s) + m - target;
    row_count[g] = 1.0;
}
