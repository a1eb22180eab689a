#version 450
#extension GL_EXT_control_flow_attributes : enable
// variant: fwd_texel_vec4 -DSTAGE=0 -DTEXEL=1 -DVEC4=1
// variant: fwd_texel_scalar -DSTAGE=0 -DTEXEL=1 -DVEC4=0
// variant: fwd2_texel_vec4 -DSTAGE=0 -DTEXEL=1 -DVEC4=1 -DPAIR=1
// variant: fwd_storage_vec4 -DSTAGE=0 -DTEXEL=0 -DVEC4=1
// variant: fwd_storage_scalar -DSTAGE=0 -DTEXEL=0 -DVEC4=0
// variant: rows_texel_vec4 -DSTAGE=1 -DTEXEL=1 -DVEC4=1
// variant: rows_texel_scalar -DSTAGE=1 -DTEXEL=1 -DVEC4=0
// variant: rows_storage_vec4 -DSTAGE=1 -DTEXEL=0 -DVEC4=1
// variant: rows_storage_scalar -DSTAGE=1 -DTEXEL=0 -DVEC4=0
// variant: dq_texel_vec4 -DSTAGE=2 -DTEXEL=1 -DVEC4=1
// variant: dq_texel_scalar -DSTAGE=2 -DTEXEL=1 -DVEC4=0
// variant: dq2_texel_vec4 -DSTAGE=2 -DTEXEL=1 -DVEC4=1 -DPAIR=1
// variant: dq_storage_vec4 -DSTAGE=2 -DTEXEL=0 -DVEC4=1
// variant: dq_storage_scalar -DSTAGE=2 -DTEXEL=0 -DVEC4=0
// variant: dkv_texel_vec4 -DSTAGE=3 -DTEXEL=1 -DVEC4=1
// variant: dkv_texel_scalar -DSTAGE=3 -DTEXEL=1 -DVEC4=0
// variant: dkv2_texel_vec4 -DSTAGE=3 -DTEXEL=1 -DVEC4=1 -DPAIR=1
// variant: dkv_storage_vec4 -DSTAGE=3 -DTEXEL=0 -DVEC4=1
// variant: dkv_storage_scalar -DSTAGE=3 -DTEXEL=0 -DVEC4=0
// Flash attention: causal GQA self-attention (block-causal with document
// ids) that never holds the (T, T) probabilities. With s = scale·q·k over
// the allowed keys t' of query t (t' <= t, same document), kh = h/(H/KVH):
//   fwd  (per b,h,t): online softmax over the keys, m = running max,
//        l = Σ exp(s − m), acc = Σ exp(s − m)·v; saves
//        out = acc / l and lse[b,h,t] = m + log l
//   rows (per b,h,t): D = Σ_d do·out, the row term of the softmax backward;
//        writes stats[b,h,t] = (lse, D)
//   dq   (per b,h,t): P = exp(s − lse), dP = do·v[t'], dS = P·(dP − D)
//        dq[b,t,h] += scale·Σ_t' dS·k[t']
//   dkv  (per b,kh,t'): dk[b,t',kh] += scale·Σ_{h of kh} Σ_{t>=t'} dS·q[b,t,h]
//                       dv[b,t',kh] +=       Σ_{h of kh} Σ_{t>=t'} P·do[b,t,h]
// (dS = P·(dP − D) is the softmax backward: D = Σ_t' P·dP = do·out.)
// The walk over keys (fwd, dq) or query rows (dkv) covers [w0, w1) in one
// dispatch, so a host may split it to stay within a device's loop limit:
// fwd resumes from the saved (out, lse) as m = lse, l = 1, acc = out; dq,
// dk, dv accumulate. Sums run in one fixed order (no atomics).
// One invocation per row, the fastest index t (or t'), so a subgroup's
// lanes walk the same keys; per-head vectors are HDC chunks of W floats
// (specialization constant 0) held in registers, with unrolled loops.
// TEXEL = 1 reads q, k, v, do, out (and stats) through uniform texel
// buffers (CPU devices, see texel.glsl); TEXEL = 0 through storage buffers.
// Indices: q, k, v and their gradients are rows of q_stride / kv_stride
// floats from q_off / k_off / v_off (gradients from g1_off, g2_off), head h
// at +h·hd; out and do are (B,T,H,hd) from o_off; lse from l_off and stats
// ((lse, D) pairs) from x_off are (B,H,T); doc is (B,T) from doc_off.
#include "texel.glsl"
#include "finite.glsl"
#if TEXEL
#define INPUT(n, name) layout(binding = n) uniform samplerBuffer name;
#define INPUT1(n, name) INPUT(n, name)
#else
// storage inputs: the same FETCH / FETCH1 over std430 arrays
#undef FETCH
#undef FETCH1
#define INPUT(n, name) layout(std430, binding = n) readonly buffer B_##name { VT name[]; };
#define INPUT1(n, name) layout(std430, binding = n) readonly buffer B_##name { float name[]; };
#define FETCH(buf, e) buf[(e) / W]
#define FETCH1(buf, e) buf[e]
#endif
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint HDC = 16;
layout(push_constant) uniform Push {
    uint B; uint T; uint H; uint KVH; uint hd; uint has_doc; float scale;
    uint q_off; uint k_off; uint v_off; uint q_stride; uint kv_stride; // floats
    uint o_off; uint doc_off; uint l_off; uint x_off; uint g1_off; uint g2_off;
    uint w0; uint w1;
} p;

uint kidx(uint b, uint t, uint kh) { return p.k_off + (b * p.T + t) * p.kv_stride + kh * p.hd; }
uint vidx(uint b, uint t, uint kh) { return p.v_off + (b * p.T + t) * p.kv_stride + kh * p.hd; }
uint oidx(uint b, uint t, uint h) { return p.o_off + ((b * p.T + t) * p.H + h) * p.hd; }
uint ridx(uint b, uint h, uint t) { return (b * p.H + h) * p.T + t; }

#if STAGE == 1
INPUT(0, to)
INPUT(1, tdo)
layout(std430, binding = 2) readonly buffer BL { float lse[]; };
layout(std430, binding = 3) writeonly buffer BX { float stats[]; };

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.B * p.T * p.H) return;
    uint t = i % p.T, h = (i / p.T) % p.H, b = i / (p.H * p.T);
    uint oo = oidx(b, t, h), r = ridx(b, h, t);
    VT acc = VT(0.0);
    [[unroll]] for (uint c = 0u; c < HDC; c++) acc += FETCH(to, oo + c * W) * FETCH(tdo, oo + c * W);
    stats[p.x_off + 2u * r] = lse[p.l_off + r];
    stats[p.x_off + 2u * r + 1u] = HSUM(acc);
}
#else
INPUT(0, tq)
INPUT(1, tk)
INPUT(2, tv)

uint qidx(uint b, uint t, uint h) { return p.q_off + (b * p.T + t) * p.q_stride + h * p.hd; }

#if STAGE == 0
layout(std430, binding = 3) readonly buffer BDoc { int doc[]; };
layout(std430, binding = 4) buffer BL { float lse[]; };
layout(std430, binding = 5) buffer BO { VT o[]; };
#elif STAGE == 2
INPUT(3, tdo)
INPUT1(4, tst)
layout(std430, binding = 5) readonly buffer BDoc { int doc[]; };
layout(std430, binding = 6) buffer BDQ { VT dq[]; };
#else
INPUT(3, tdo)
INPUT1(4, tst)
layout(std430, binding = 5) readonly buffer BDoc { int doc[]; };
layout(std430, binding = 6) buffer BDK { VT dk[]; };
layout(std430, binding = 7) buffer BDV { VT dv[]; };
#endif

// Token s of sequence b is in document d0 (always so without documents).
bool same_doc(uint b, uint s, int d0) { return p.has_doc == 0u || doc[p.doc_off + b * p.T + s] == d0; }

#if STAGE == 0 && PAIR
// Two query rows per invocation, t0 = 2·j and t1 = t0 + 1, which share
// each key's and value's fetch (CPU devices: a texel fetch costs as much as
// several multiply-adds). Each row takes the single-row kernel's
// operations in its order, a key outside its future or document leaving
// its state as it was (selects, not arithmetic), so the bits are that
// kernel's.
void main()
{
    uint T2 = (p.T + 1u) / 2u, i = gl_GlobalInvocationID.x;
    if (i >= p.B * T2 * p.H) return;
    uint j = i % T2, h = (i / T2) % p.H, b = i / (p.H * T2), kh = h / (p.H / p.KVH);
    uint t[2] = uint[2](2u * j, 2u * j + 1u);
    bool live[2] = bool[2](t[0] >= p.w0, t[1] < p.T && t[1] >= p.w0);
    if (!live[0] && !live[1]) return;
    VT qr[2][HDC], acc[2][HDC];
    float m[2], l[2];
    int d[2];
    uint oo[2], r[2];
    [[unroll]] for (uint u = 0u; u < 2u; u++) {
        uint tu = min(t[u], p.T - 1u), qo = qidx(b, tu, h);
        oo[u] = oidx(b, tu, h) / W, r[u] = p.l_off + ridx(b, h, tu);
        [[unroll]] for (uint c = 0u; c < HDC; c++) qr[u][c] = FETCH(tq, qo + c * W);
        m[u] = NO_SCORE, l[u] = 0.0;
        if (live[u] && p.w0 > 0u && lse[r[u]] > NO_SCORE) {
            m[u] = lse[r[u]];
            l[u] = 1.0;
            [[unroll]] for (uint c = 0u; c < HDC; c++) acc[u][c] = o[oo[u] + c];
        } else {
            [[unroll]] for (uint c = 0u; c < HDC; c++) acc[u][c] = VT(0.0);
        }
        d[u] = p.has_doc != 0u ? doc[p.doc_off + b * p.T + tu] : 0;
    }
    uint end = min((live[1] ? t[1] : t[0]) + 1u, p.w1);
    for (uint s = p.w0; s < end; s++) {
        bool ok[2] = bool[2](live[0] && s <= t[0] && same_doc(b, s, d[0]), live[1] && same_doc(b, s, d[1]));
        if (!ok[0] && !ok[1]) continue;
        uint ko = kidx(b, s, kh), vo = vidx(b, s, kh);
        VT dotv[2] = VT[2](VT(0.0), VT(0.0));
        [[unroll]] for (uint c = 0u; c < HDC; c++) {
            VT kc = FETCH(tk, ko + c * W);
            dotv[0] += qr[0][c] * kc;
            dotv[1] += qr[1][c] * kc;
        }
        float a[2], e[2];
        [[unroll]] for (uint u = 0u; u < 2u; u++) {
            float score = HSUM(dotv[u]) * p.scale;
            float mn = max(m[u], score);
            a[u] = l[u] > 0.0 ? exp(m[u] - mn) : 0.0, e[u] = exp(score - mn);
            float ln = l[u] * a[u] + e[u];
            l[u] = ok[u] ? ln : l[u];
            m[u] = ok[u] ? mn : m[u];
        }
        [[unroll]] for (uint c = 0u; c < HDC; c++) {
            VT vc = FETCH(tv, vo + c * W);
            [[unroll]] for (uint u = 0u; u < 2u; u++) {
                VT an = acc[u][c] * a[u] + e[u] * vc;
                acc[u][c] = ok[u] ? an : acc[u][c];
            }
        }
    }
    [[unroll]] for (uint u = 0u; u < 2u; u++) {
        if (!live[u]) continue;
        float inv = l[u] > 0.0 ? 1.0 / l[u] : 0.0;
        [[unroll]] for (uint c = 0u; c < HDC; c++) o[oo[u] + c] = acc[u][c] * inv;
        lse[r[u]] = l[u] > 0.0 ? m[u] + log(l[u]) : NO_SCORE;
    }
}
#elif STAGE == 0
void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.B * p.T * p.H) return;
    uint t = i % p.T, h = (i / p.T) % p.H, b = i / (p.H * p.T);
    if (t < p.w0) return; // every key of this part is in its future
    uint kh = h / (p.H / p.KVH);
    uint qo = qidx(b, t, h), oo = oidx(b, t, h) / W, r = p.l_off + ridx(b, h, t);
    VT qr[HDC], acc[HDC];
    [[unroll]] for (uint c = 0u; c < HDC; c++) qr[c] = FETCH(tq, qo + c * W);
    float m = NO_SCORE, l = 0.0; // l > 0 once a key is seen (the max adds 1)
    if (p.w0 > 0u && lse[r] > NO_SCORE) {
        m = lse[r];
        l = 1.0;
        [[unroll]] for (uint c = 0u; c < HDC; c++) acc[c] = o[oo + c];
    } else {
        [[unroll]] for (uint c = 0u; c < HDC; c++) acc[c] = VT(0.0);
    }
    int d0 = p.has_doc != 0u ? doc[p.doc_off + b * p.T + t] : 0;
    uint end = min(t + 1u, p.w1);
    for (uint s = p.w0; s < end; s++) {
        if (!same_doc(b, s, d0)) continue;
        uint ko = kidx(b, s, kh), vo = vidx(b, s, kh);
        VT dotv = VT(0.0);
        [[unroll]] for (uint c = 0u; c < HDC; c++) dotv += qr[c] * FETCH(tk, ko + c * W);
        float score = HSUM(dotv) * p.scale;
        float mn = max(m, score), a = l > 0.0 ? exp(m - mn) : 0.0, e = exp(score - mn);
        l = l * a + e;
        m = mn;
        [[unroll]] for (uint c = 0u; c < HDC; c++) acc[c] = acc[c] * a + e * FETCH(tv, vo + c * W);
    }
    float inv = l > 0.0 ? 1.0 / l : 0.0;
    [[unroll]] for (uint c = 0u; c < HDC; c++) o[oo + c] = acc[c] * inv;
    lse[r] = l > 0.0 ? m + log(l) : NO_SCORE;
}
#elif STAGE == 2 && PAIR
// dq for two query rows per invocation (as the forward's PAIR: each key's
// k and v fetched once for both, each row's operations in the single-row
// kernel's order, so its bits).
void main()
{
    uint T2 = (p.T + 1u) / 2u, i = gl_GlobalInvocationID.x;
    if (i >= p.B * T2 * p.H) return;
    uint j = i % T2, h = (i / T2) % p.H, b = i / (p.H * T2), kh = h / (p.H / p.KVH);
    uint t[2] = uint[2](2u * j, 2u * j + 1u);
    bool live[2] = bool[2](t[0] >= p.w0, t[1] < p.T && t[1] >= p.w0);
    if (!live[0] && !live[1]) return;
    VT qr[2][HDC], dor[2][HDC], acc[2][HDC];
    float lse[2], D[2];
    int d[2];
    uint go[2];
    [[unroll]] for (uint u = 0u; u < 2u; u++) {
        uint tu = min(t[u], p.T - 1u), qo = qidx(b, tu, h), oo = oidx(b, tu, h), r = p.x_off + 2u * ridx(b, h, tu);
        [[unroll]] for (uint c = 0u; c < HDC; c++) {
            qr[u][c] = FETCH(tq, qo + c * W);
            dor[u][c] = FETCH(tdo, oo + c * W);
            acc[u][c] = VT(0.0);
        }
        lse[u] = FETCH1(tst, r), D[u] = FETCH1(tst, r + 1u);
        d[u] = p.has_doc != 0u ? doc[p.doc_off + b * p.T + tu] : 0;
        go[u] = (qo - p.q_off + p.g1_off) / W;
    }
    uint end = min((live[1] ? t[1] : t[0]) + 1u, p.w1);
    for (uint s = p.w0; s < end; s++) {
        bool ok[2] = bool[2](live[0] && s <= t[0] && same_doc(b, s, d[0]), live[1] && same_doc(b, s, d[1]));
        if (!ok[0] && !ok[1]) continue;
        uint ko = kidx(b, s, kh), vo = vidx(b, s, kh);
        VT kt[HDC], sv[2] = VT[2](VT(0.0), VT(0.0)), dpv[2] = VT[2](VT(0.0), VT(0.0));
        [[unroll]] for (uint c = 0u; c < HDC; c++) {
            kt[c] = FETCH(tk, ko + c * W);
            VT vc = FETCH(tv, vo + c * W);
            [[unroll]] for (uint u = 0u; u < 2u; u++) {
                sv[u] += qr[u][c] * kt[c];
                dpv[u] += dor[u][c] * vc;
            }
        }
        [[unroll]] for (uint u = 0u; u < 2u; u++) {
            float pr = exp(HSUM(sv[u]) * p.scale - lse[u]), ds = pr * (HSUM(dpv[u]) - D[u]);
            [[unroll]] for (uint c = 0u; c < HDC; c++) {
                VT an = acc[u][c] + ds * kt[c];
                acc[u][c] = ok[u] ? an : acc[u][c];
            }
        }
    }
    [[unroll]] for (uint u = 0u; u < 2u; u++)
        if (live[u])
            [[unroll]] for (uint c = 0u; c < HDC; c++) dq[go[u] + c] += p.scale * acc[u][c];
}
#elif STAGE == 2
void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.B * p.T * p.H) return;
    uint t = i % p.T, h = (i / p.T) % p.H, b = i / (p.H * p.T);
    if (t < p.w0) return;
    uint kh = h / (p.H / p.KVH);
    uint qo = qidx(b, t, h), oo = oidx(b, t, h), r = p.x_off + 2u * ridx(b, h, t);
    VT qr[HDC], dor[HDC], acc[HDC];
    [[unroll]] for (uint c = 0u; c < HDC; c++) {
        qr[c] = FETCH(tq, qo + c * W);
        dor[c] = FETCH(tdo, oo + c * W);
        acc[c] = VT(0.0);
    }
    float lse = FETCH1(tst, r), D = FETCH1(tst, r + 1u);
    int d0 = p.has_doc != 0u ? doc[p.doc_off + b * p.T + t] : 0;
    uint end = min(t + 1u, p.w1);
    for (uint s = p.w0; s < end; s++) {
        if (!same_doc(b, s, d0)) continue;
        uint ko = kidx(b, s, kh), vo = vidx(b, s, kh);
        VT kt[HDC], sv = VT(0.0), dpv = VT(0.0);
        [[unroll]] for (uint c = 0u; c < HDC; c++) {
            kt[c] = FETCH(tk, ko + c * W);
            sv += qr[c] * kt[c];
            dpv += dor[c] * FETCH(tv, vo + c * W);
        }
        float pr = exp(HSUM(sv) * p.scale - lse), ds = pr * (HSUM(dpv) - D);
        [[unroll]] for (uint c = 0u; c < HDC; c++) acc[c] += ds * kt[c];
    }
    uint go = (qo - p.q_off + p.g1_off) / W;
    [[unroll]] for (uint c = 0u; c < HDC; c++) dq[go + c] += p.scale * acc[c];
}
#elif PAIR
// dk, dv for two key rows per invocation, s0 = 2·j and s1 = s0 + 1 (as
// the forward's PAIR: each query row's q and dO fetched once for both,
// each key row's operations in the single-row kernel's order).
void main()
{
    uint T2 = (p.T + 1u) / 2u, i = gl_GlobalInvocationID.x;
    if (i >= p.B * T2 * p.KVH) return;
    uint j = i % T2, kh = (i / T2) % p.KVH, b = i / (p.KVH * T2);
    uint sr[2] = uint[2](2u * j, 2u * j + 1u);
    bool live[2] = bool[2](sr[0] < p.w1, sr[1] < p.T && sr[1] < p.w1);
    if (!live[0] && !live[1]) return;
    uint group = p.H / p.KVH, gk[2], gv[2];
    VT kr[2][HDC], vr[2][HDC], dka[2][HDC], dva[2][HDC];
    int d[2];
    [[unroll]] for (uint u = 0u; u < 2u; u++) {
        uint su = min(sr[u], p.T - 1u), ko = kidx(b, su, kh), vo = vidx(b, su, kh);
        [[unroll]] for (uint c = 0u; c < HDC; c++) {
            kr[u][c] = FETCH(tk, ko + c * W);
            vr[u][c] = FETCH(tv, vo + c * W);
            dka[u][c] = VT(0.0);
            dva[u][c] = VT(0.0);
        }
        d[u] = p.has_doc != 0u ? doc[p.doc_off + b * p.T + su] : 0;
        gk[u] = (ko - p.k_off + p.g1_off) / W, gv[u] = (vo - p.v_off + p.g2_off) / W;
    }
    uint start = max(live[0] ? sr[0] : sr[1], p.w0);
    for (uint hh = 0u; hh < group; hh++) {
        uint h = kh * group + hh;
        for (uint t = start; t < p.w1; t++) {
            bool ok[2] = bool[2](live[0] && same_doc(b, t, d[0]), live[1] && t >= sr[1] && same_doc(b, t, d[1]));
            if (!ok[0] && !ok[1]) continue;
            uint qo = qidx(b, t, h), oo = oidx(b, t, h), r = p.x_off + 2u * ridx(b, h, t);
            VT qt[HDC], dot[HDC], sv[2] = VT[2](VT(0.0), VT(0.0)), dpv[2] = VT[2](VT(0.0), VT(0.0));
            [[unroll]] for (uint c = 0u; c < HDC; c++) {
                qt[c] = FETCH(tq, qo + c * W);
                dot[c] = FETCH(tdo, oo + c * W);
                [[unroll]] for (uint u = 0u; u < 2u; u++) {
                    sv[u] += kr[u][c] * qt[c];
                    dpv[u] += vr[u][c] * dot[c];
                }
            }
            float lse = FETCH1(tst, r), D = FETCH1(tst, r + 1u);
            [[unroll]] for (uint u = 0u; u < 2u; u++) {
                float pr = exp(HSUM(sv[u]) * p.scale - lse), ds = pr * (HSUM(dpv[u]) - D);
                [[unroll]] for (uint c = 0u; c < HDC; c++) {
                    VT kn = dka[u][c] + ds * qt[c], vn = dva[u][c] + pr * dot[c];
                    dka[u][c] = ok[u] ? kn : dka[u][c];
                    dva[u][c] = ok[u] ? vn : dva[u][c];
                }
            }
        }
    }
    [[unroll]] for (uint u = 0u; u < 2u; u++)
        if (live[u])
            [[unroll]] for (uint c = 0u; c < HDC; c++) {
                dk[gk[u] + c] += p.scale * dka[u][c];
                dv[gv[u] + c] += dva[u][c];
            }
}
#else
void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.B * p.T * p.KVH) return;
    uint s = i % p.T, kh = (i / p.T) % p.KVH, b = i / (p.KVH * p.T);
    if (s >= p.w1) return; // every query of this part is in its past
    uint group = p.H / p.KVH, ko = kidx(b, s, kh), vo = vidx(b, s, kh);
    VT kr[HDC], vr[HDC], dka[HDC], dva[HDC];
    [[unroll]] for (uint c = 0u; c < HDC; c++) {
        kr[c] = FETCH(tk, ko + c * W);
        vr[c] = FETCH(tv, vo + c * W);
        dka[c] = VT(0.0);
        dva[c] = VT(0.0);
    }
    int d0 = p.has_doc != 0u ? doc[p.doc_off + b * p.T + s] : 0;
    uint start = max(s, p.w0);
    for (uint hh = 0u; hh < group; hh++) {
        uint h = kh * group + hh;
        for (uint t = start; t < p.w1; t++) {
            if (!same_doc(b, t, d0)) continue;
            uint qo = qidx(b, t, h), oo = oidx(b, t, h), r = p.x_off + 2u * ridx(b, h, t);
            VT qt[HDC], dot[HDC], sv = VT(0.0), dpv = VT(0.0);
            [[unroll]] for (uint c = 0u; c < HDC; c++) {
                qt[c] = FETCH(tq, qo + c * W);
                dot[c] = FETCH(tdo, oo + c * W);
                sv += kr[c] * qt[c];
                dpv += vr[c] * dot[c];
            }
            float pr = exp(HSUM(sv) * p.scale - FETCH1(tst, r)), ds = pr * (HSUM(dpv) - FETCH1(tst, r + 1u));
            [[unroll]] for (uint c = 0u; c < HDC; c++) {
                dka[c] += ds * qt[c];
                dva[c] += pr * dot[c];
            }
        }
    }
    uint gk = (ko - p.k_off + p.g1_off) / W, gv = (vo - p.v_off + p.g2_off) / W;
    [[unroll]] for (uint c = 0u; c < HDC; c++) {
        dk[gk + c] += p.scale * dka[c];
        dv[gv + c] += dva[c];
    }
}
#endif
#endif
