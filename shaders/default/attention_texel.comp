#version 450
// variant: vec4 -DVEC4=1
// variant: scalar -DVEC4=0
// Causal GQA self-attention forward, texel family (CPU devices): the same
// result as attention.comp, restructured for llvmpipe. One invocation per
// (b, h, t), t fastest, so a subgroup's lanes walk the same keys; q is kept
// in registers (HDC chunks of W floats, specialization constant 0), k and
// v are read with texelFetch.
//   pass 1, keys t' <= t allowed: running max m and l = Σ exp(s − m)
//   pass 2: P[t'] = exp(s − m)/l (saved; 0 for masked and future keys),
//           out += P[t']·v[t'] in registers
// Scores are computed twice instead of stored and read back.
#include "texel.glsl"
#include "finite.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint HDC = 8;
layout(push_constant) uniform Push {
    uint B; uint T; uint H; uint KVH; uint hd; uint has_doc; float scale;
    uint q_off; uint k_off; uint v_off; uint q_stride; uint kv_stride; // floats
    uint o_off; uint p_off; uint doc_off; // out, dout / probs, dscores / doc from these floats
} p;
layout(binding = 0) uniform samplerBuffer tq;
layout(binding = 1) uniform samplerBuffer tk;
layout(binding = 2) uniform samplerBuffer tv;
layout(std430, binding = 3) readonly buffer BDoc { int doc[]; };
layout(std430, binding = 4) writeonly buffer BP { float probs[]; };
layout(std430, binding = 5) writeonly buffer BO { VT o[]; };

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.B * p.T * p.H) return;
    uint t = i % p.T, h = (i / p.T) % p.H, b = i / (p.H * p.T);
    uint kh = h / (p.H / p.KVH);
    uint qo = p.q_off + (b * p.T + t) * p.q_stride + h * p.hd;
    uint kb = p.k_off + b * p.T * p.kv_stride + kh * p.hd;
    uint vb = p.v_off + b * p.T * p.kv_stride + kh * p.hd;
    uint prow = p.p_off + i * p.T; // ((b·H + h)·T + t)·T
    VT qr[HDC];
    for (uint c = 0u; c < HDC; c++) qr[c] = FETCH(tq, qo + c * W);
    int d0 = p.has_doc != 0u ? doc[p.doc_off + b * p.T + t] : 0;
    float m = NO_SCORE, l = 0.0; // l > 0 once a key is seen (the max adds 1)
    for (uint s = 0u; s <= t; s++) {
        if (p.has_doc != 0u && doc[p.doc_off + b * p.T + s] != d0) continue;
        uint ko = kb + s * p.kv_stride;
        VT acc = VT(0.0);
        for (uint c = 0u; c < HDC; c++) acc += qr[c] * FETCH(tk, ko + c * W);
        float score = HSUM(acc) * p.scale;
        float mn = max(m, score);
        l = (l > 0.0 ? l * exp(m - mn) : 0.0) + exp(score - mn);
        m = mn;
    }
    float inv = 1.0 / l;
    VT out_[HDC];
    for (uint c = 0u; c < HDC; c++) out_[c] = VT(0.0);
    for (uint s = 0u; s <= t; s++) {
        float w = 0.0;
        if (p.has_doc == 0u || doc[p.doc_off + b * p.T + s] == d0) {
            uint ko = kb + s * p.kv_stride, vo = vb + s * p.kv_stride;
            VT acc = VT(0.0);
            for (uint c = 0u; c < HDC; c++) acc += qr[c] * FETCH(tk, ko + c * W);
            w = exp(HSUM(acc) * p.scale - m) * inv;
            for (uint c = 0u; c < HDC; c++) out_[c] += w * FETCH(tv, vo + c * W);
        }
        probs[prow + s] = w;
    }
    for (uint s = t + 1u; s < p.T; s++) probs[prow + s] = 0.0;
    uint oo = (p.o_off + ((b * p.T + t) * p.H + h) * p.hd) / W;
    for (uint c = 0u; c < HDC; c++) o[oo + c] = out_[c];
}
