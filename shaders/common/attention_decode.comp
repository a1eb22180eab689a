#version 450
// variant: append -DAPPEND=1
// variant: attend -DAPPEND=0
// Attention of ONE new token over a key/value cache (generation).
// The caches Kc, Vc of a layer are (max_pos, KVH, hd); kvd = KVH·hd.
//
// append: one invocation per i < kvd copies the new token's k and v (rows
// of any buffer, starting at k_off / v_off: GPT-2's fused qkv or llama's
// separate k, v) into row `pos` of the caches:
//   Kc[pos, i] = k[k_off + i],  Vc[pos, i] = v[v_off + i]
//
// attend: one workgroup per query head h, kh = h / (H/KVH) (grouped-query):
//   s[t] = q[h]·Kc[t, kh] · scale          for t = first..pos (causal: all
//                                          cached; first > 0 in a sliding window)
//   e[t] = exp(s[t] − max s),  out[h] = Σ_t e[t]·Vc[t, kh] / Σ_t e[t]
// The same softmax the training attention computes for its last row; e is
// kept in `scores` (H, max_pos). Reductions use rows.glsl's fixed tree, so
// the result is deterministic. Cost: O(pos·hd) per head, linear in pos.
#if APPEND
layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint pos; uint kvd; uint k_off; uint v_off; } p;
layout(std430, binding = 0) readonly buffer BK { float k[]; };
layout(std430, binding = 1) readonly buffer BV { float v[]; };
layout(std430, binding = 2) writeonly buffer BKC { float kc[]; };
layout(std430, binding = 3) writeonly buffer BVC { float vc[]; };

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.kvd) return;
    kc[p.pos * p.kvd + i] = k[p.k_off + i];
    vc[p.pos * p.kvd + i] = v[p.v_off + i];
}
#else
#include "rows.glsl"
#include "finite.glsl"
#include "softcap.glsl"
layout(push_constant) uniform Push {
    uint pos; uint H; uint KVH; uint hd; uint q_off; uint max_pos; float scale; uint first;
    float softcap; // Gemma 2's c (0: none)
} p;
layout(std430, binding = 0) readonly buffer BQ { float q[]; };
layout(std430, binding = 1) readonly buffer BKC { float kc[]; };
layout(std430, binding = 2) readonly buffer BVC { float vc[]; };
layout(std430, binding = 3) buffer BS { float scores[]; };
layout(std430, binding = 4) writeonly buffer BO { float o[]; };

void main()
{
    uint h = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    uint kh = h / (p.H / p.KVH), kvd = p.KVH * p.hd;
    uint qo = p.q_off + h * p.hd, so = h * p.max_pos;
    float m = NO_SCORE; // invocation 0 has key first, so row_max is a real score
    for (uint s = p.first + t; s <= p.pos; s += WG) {
        uint ko = s * kvd + kh * p.hd;
        float dotp = 0.0;
        for (uint d = 0u; d < p.hd; d++) dotp += q[qo + d] * kc[ko + d];
        float score = softcap(dotp * p.scale, p.softcap);
        scores[so + s] = score;
        m = max(m, score);
    }
    m = row_max(m);
    float sum = 0.0;
    for (uint s = p.first + t; s <= p.pos; s += WG) {
        float e = exp(scores[so + s] - m);
        scores[so + s] = e;
        sum += e;
    }
    sum = row_sum(sum);
    memoryBarrierBuffer();
    barrier();
    float inv = 1.0 / sum;
    for (uint d = t; d < p.hd; d += WG) {
        float acc = 0.0;
        for (uint s = p.first; s <= p.pos; s++) acc += scores[so + s] * inv * vc[s * kvd + kh * p.hd + d];
        o[h * p.hd + d] = acc;
    }
}
#endif
