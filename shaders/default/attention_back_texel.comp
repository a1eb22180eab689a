#version 450
// variant: ds_vec4 -DVEC4=1 -DSTAGE=0
// variant: ds_scalar -DVEC4=0 -DSTAGE=0
// variant: dkv_vec4 -DVEC4=1 -DSTAGE=2
// variant: dkv_scalar -DVEC4=0 -DSTAGE=2
// Causal GQA attention backward, texel family (CPU devices): the passes of
// attention_back.comp with inputs read through texel buffers and per-head
// vectors (HDC chunks of W floats, specialization constant 0) in registers.
//   ds (per b,h,t; t fastest): c = Σ_t' P[t']·dP[t'], dP[t'] = do·v[t']
//        dS[t'] = P[t']·(dP[t'] − c)  (saved, B,H,T,T; dP recomputed)
//        and, fused, dq[b,t,h] += scale·Σ_t' dS[t'] k[t']
//   dkv (per b,kh,t'; t' fastest): as attention_back.comp
//        dk += scale·Σ_h Σ_{t>=t'} dS[h,t,t']·q[b,t,h]
//        dv +=       Σ_h Σ_{t>=t'} P[h,t,t']·do[b,t,h]
// Sums run in the same orders on every run (deterministic, no atomics).
#include "texel.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint HDC = 8;
layout(push_constant) uniform Push {
    uint B; uint T; uint H; uint KVH; uint hd; uint has_doc; float scale;
    uint q_off; uint k_off; uint v_off; uint q_stride; uint kv_stride; // floats
    uint o_off; uint p_off; uint doc_off; // out, dout / probs, dscores / doc from these floats
} p;

uint qidx(uint b, uint t, uint h) { return p.q_off + (b * p.T + t) * p.q_stride + h * p.hd; }
uint kidx(uint b, uint t, uint kh) { return p.k_off + (b * p.T + t) * p.kv_stride + kh * p.hd; }
uint vidx(uint b, uint t, uint kh) { return p.v_off + (b * p.T + t) * p.kv_stride + kh * p.hd; }
uint oidx(uint b, uint t, uint h) { return p.o_off + ((b * p.T + t) * p.H + h) * p.hd; }

#if STAGE == 0
layout(binding = 0) uniform samplerBuffer tk;
layout(binding = 1) uniform samplerBuffer tv;
layout(binding = 2) uniform samplerBuffer tp;
layout(binding = 3) uniform samplerBuffer tdo;
layout(std430, binding = 4) writeonly buffer BDS { float ds[]; };
layout(std430, binding = 5) buffer BDQ { VT dq[]; };

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.B * p.T * p.H) return;
    uint t = i % p.T, h = (i / p.T) % p.H, b = i / (p.H * p.T);
    uint kh = h / (p.H / p.KVH);
    uint prow = p.p_off + i * p.T, oo = oidx(b, t, h), k0 = kidx(b, 0u, kh), v0 = vidx(b, 0u, kh);
    VT dor[HDC];
    for (uint c = 0u; c < HDC; c++) dor[c] = FETCH(tdo, oo + c * W);
    float cs = 0.0;
    for (uint s = 0u; s <= t; s++) {
        uint vo = v0 + s * p.kv_stride;
        VT acc = VT(0.0);
        for (uint c = 0u; c < HDC; c++) acc += dor[c] * FETCH(tv, vo + c * W);
        cs += FETCH1(tp, prow + s) * HSUM(acc);
    }
    VT dqa[HDC];
    for (uint c = 0u; c < HDC; c++) dqa[c] = VT(0.0);
    for (uint s = 0u; s <= t; s++) {
        uint vo = v0 + s * p.kv_stride, ko = k0 + s * p.kv_stride;
        VT acc = VT(0.0);
        for (uint c = 0u; c < HDC; c++) acc += dor[c] * FETCH(tv, vo + c * W);
        float d = FETCH1(tp, prow + s) * (HSUM(acc) - cs);
        ds[prow + s] = d;
        for (uint c = 0u; c < HDC; c++) dqa[c] += d * FETCH(tk, ko + c * W);
    }
    for (uint s = t + 1u; s < p.T; s++) ds[prow + s] = 0.0;
    uint qo = qidx(b, t, h) / W;
    for (uint c = 0u; c < HDC; c++) dq[qo + c] += p.scale * dqa[c];
}
#else
layout(binding = 0) uniform samplerBuffer tq;
layout(binding = 1) uniform samplerBuffer tp;
layout(binding = 2) uniform samplerBuffer tds;
layout(binding = 3) uniform samplerBuffer tdo;
layout(std430, binding = 4) buffer BDK { VT dk[]; };
layout(std430, binding = 5) buffer BDV { VT dv[]; };

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.B * p.T * p.KVH) return;
    uint s = i % p.T, kh = (i / p.T) % p.KVH, b = i / (p.KVH * p.T);
    uint group = p.H / p.KVH;
    VT dka[HDC], dva[HDC];
    for (uint c = 0u; c < HDC; c++) { dka[c] = VT(0.0); dva[c] = VT(0.0); }
    for (uint hh = 0u; hh < group; hh++) {
        uint h = kh * group + hh;
        for (uint t = s; t < p.T; t++) {
            uint pr = p.p_off + ((b * p.H + h) * p.T + t) * p.T + s;
            float d = FETCH1(tds, pr), pv = FETCH1(tp, pr);
            if (d == 0.0 && pv == 0.0) continue; // masked by document: adds exactly 0
            uint qo = qidx(b, t, h), oo = oidx(b, t, h);
            for (uint c = 0u; c < HDC; c++) {
                dka[c] += d * FETCH(tq, qo + c * W);
                dva[c] += pv * FETCH(tdo, oo + c * W);
            }
        }
    }
    uint ko = kidx(b, s, kh) / W, vo = vidx(b, s, kh) / W;
    for (uint c = 0u; c < HDC; c++) {
        dk[ko + c] += p.scale * dka[c];
        dv[vo + c] += dva[c];
    }
}
#endif
