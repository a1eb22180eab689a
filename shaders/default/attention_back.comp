#version 450
// variant: ds -DSTAGE=0
// variant: dq -DSTAGE=1
// variant: dkv -DSTAGE=2
// Causal GQA attention backward in three deterministic passes (no atomics).
// With P the saved probabilities, s = scale·q·k, o = P·v:
//   ds  (per b,t,h):  dP[t'] = do[b,t,h]·v[b,t',kh]
//                     dS[t'] = P[t']·(dP[t'] − Σ_u P[u]·dP[u])   (saved, B,H,T,T)
//   dq  (per b,t,h):  dq[b,t,h] += scale·Σ_t' dS[t,t']·k[b,t',kh]
//   dkv (per b,t',kh): dk[b,t',kh] += scale·Σ_{h of kh} Σ_{t>=t'} dS[h,t,t']·q[b,t,h]
//                      dv[b,t',kh] +=       Σ_{h of kh} Σ_{t>=t'} P[h,t,t']·do[b,t,h]
// Masked entries of P (and so of dS) are 0, so they contribute nothing.
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
    uint B; uint T; uint H; uint KVH; uint hd; uint has_doc; float scale;
    uint q_off; uint k_off; uint v_off; uint q_stride; uint kv_stride; // floats
    uint o_off; uint p_off; uint doc_off; // out, dout / probs, dscores / doc from these floats
} p;
layout(std430, binding = 0) readonly buffer BQ { float q[]; };
layout(std430, binding = 1) readonly buffer BK { float k[]; };
layout(std430, binding = 2) readonly buffer BV { float v[]; };
layout(std430, binding = 3) readonly buffer BP { float probs[]; };
layout(std430, binding = 4) readonly buffer BDO { float dout[]; };
layout(std430, binding = 5) buffer BDS { float ds[]; };
layout(std430, binding = 6) buffer BG1 { float g1[]; }; // dq, or dk
layout(std430, binding = 7) buffer BG2 { float g2[]; }; // unused, or dv

// q, k, v and their gradients share one layout (see attention.comp); do is
// packed (B,T,H,hd).
uint qidx(uint b, uint t, uint h) { return p.q_off + (b * p.T + t) * p.q_stride + h * p.hd; }
uint kidx(uint b, uint t, uint kh) { return p.k_off + (b * p.T + t) * p.kv_stride + kh * p.hd; }
uint vidx(uint b, uint t, uint kh) { return p.v_off + (b * p.T + t) * p.kv_stride + kh * p.hd; }
uint oidx(uint b, uint t, uint h) { return p.o_off + ((b * p.T + t) * p.H + h) * p.hd; }
uint pidx(uint b, uint h, uint t) { return p.p_off + ((b * p.H + h) * p.T + t) * p.T; }

void main()
{
    uint i = gl_GlobalInvocationID.x;
#if STAGE < 2
    if (i >= p.B * p.T * p.H) return;
    uint h = i % p.H, t = (i / p.H) % p.T, b = i / (p.H * p.T);
    uint kh = h / (p.H / p.KVH);
    uint qo = qidx(b, t, h), oo = oidx(b, t, h), pr = pidx(b, h, t);
#if STAGE == 0
    float c = 0.0;
    for (uint s = 0u; s <= t; s++) {
        uint vo = vidx(b, s, kh);
        float dp = 0.0;
        for (uint d = 0u; d < p.hd; d++) dp += dout[oo + d] * v[vo + d];
        ds[pr + s] = dp;
        c += probs[pr + s] * dp;
    }
    for (uint s = 0u; s < p.T; s++) ds[pr + s] = s <= t ? probs[pr + s] * (ds[pr + s] - c) : 0.0;
#else
    for (uint d = 0u; d < p.hd; d++) {
        float acc = 0.0;
        for (uint s = 0u; s <= t; s++) acc += ds[pr + s] * k[kidx(b, s, kh) + d];
        g1[qo + d] += p.scale * acc;
    }
#endif
#else
    if (i >= p.B * p.T * p.KVH) return;
    uint kh = i % p.KVH, s = (i / p.KVH) % p.T, b = i / (p.KVH * p.T);
    uint group = p.H / p.KVH, ko = kidx(b, s, kh), vo = vidx(b, s, kh);
    for (uint d = 0u; d < p.hd; d++) {
        float dk = 0.0, dv = 0.0;
        for (uint hh = 0u; hh < group; hh++) {
            uint h = kh * group + hh;
            for (uint t = s; t < p.T; t++) {
                uint pr = pidx(b, h, t) + s;
                dk += ds[pr] * q[qidx(b, t, h) + d];
                dv += probs[pr] * dout[oidx(b, t, h) + d];
            }
        }
        g1[ko + d] += p.scale * dk;
        g2[vo + d] += dv;
    }
#endif
}
