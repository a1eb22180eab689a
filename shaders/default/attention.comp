#version 450
// Causal self-attention forward with grouped-query heads and optional
// document ids (block-causal packing). One invocation per (b, t, h):
//   s[t'] = q[b,t,h]·k[b,t',kh] / sqrt(hd)   for allowed t' (t' <= t and,
//           with documents, doc[b,t'] == doc[b,t]); kh = h / (H/KVH)
//   P[b,h,t,:] = softmax(s) over the allowed keys, 0 elsewhere (saved)
//   out[b,t,h] = Σ_t' P[b,h,t,t'] · v[b,t',kh]
// out is (B,T,H,hd); q, k, v are rows of q_stride / kv_stride floats
// starting at q_off / k_off / v_off (separate buffers, or views into one
// fused qkv buffer), head h at +h·hd; doc is (B,T) (has_doc 0: one document
// per sequence); probs is (B,H,T,T).
#include "finite.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
    uint B; uint T; uint H; uint KVH; uint hd; uint has_doc; float scale;
    uint q_off; uint k_off; uint v_off; uint q_stride; uint kv_stride; // floats
    uint o_off; uint p_off; uint doc_off; // out, dout / probs, dscores / doc from these floats
} p;
layout(std430, binding = 0) readonly buffer BQ { float q[]; };
layout(std430, binding = 1) readonly buffer BK { float k[]; };
layout(std430, binding = 2) readonly buffer BV { float v[]; };
layout(std430, binding = 3) readonly buffer BDoc { int doc[]; };
layout(std430, binding = 4) buffer BP { float probs[]; };
layout(std430, binding = 5) buffer BO { float o[]; };

// Key s may be attended from a query of document d0 (causality aside).
bool allowed(uint b, uint s, int d0) { return p.has_doc == 0u || doc[p.doc_off + b * p.T + s] == d0; }

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.B * p.T * p.H) return;
    uint h = i % p.H, t = (i / p.H) % p.T, b = i / (p.H * p.T);
    uint kh = h / (p.H / p.KVH);
    uint qo = p.q_off + (b * p.T + t) * p.q_stride + h * p.hd;
    uint oo = p.o_off + ((b * p.T + t) * p.H + h) * p.hd;
    uint prow = p.p_off + ((b * p.H + h) * p.T + t) * p.T;
    int d0 = p.has_doc != 0u ? doc[p.doc_off + b * p.T + t] : 0;
    float m = NO_SCORE; // key t is always allowed, so m ends a real score
    for (uint s = 0u; s <= t; s++) {
        float score = 0.0;
        if (allowed(b, s, d0)) {
            uint ko = p.k_off + (b * p.T + s) * p.kv_stride + kh * p.hd;
            float dotp = 0.0;
            for (uint d = 0u; d < p.hd; d++) dotp += q[qo + d] * k[ko + d];
            score = dotp * p.scale;
            m = max(m, score);
        }
        probs[prow + s] = score;
    }
    float sum = 0.0;
    for (uint s = 0u; s <= t; s++) {
        float e = allowed(b, s, d0) ? exp(probs[prow + s] - m) : 0.0;
        probs[prow + s] = e;
        sum += e;
    }
    for (uint s = t + 1u; s < p.T; s++) probs[prow + s] = 0.0;
    float inv = 1.0 / sum;
    for (uint d = 0u; d < p.hd; d++) o[oo + d] = 0.0;
    for (uint s = 0u; s <= t; s++) {
        float w = probs[prow + s] * inv;
        probs[prow + s] = w;
        uint vo = p.v_off + (b * p.T + s) * p.kv_stride + kh * p.hd;
        for (uint d = 0u; d < p.hd; d++) o[oo + d] += w * v[vo + d];
    }
}
