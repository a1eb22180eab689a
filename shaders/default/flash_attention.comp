#version 450
#extension GL_EXT_control_flow_attributes : enable
// variant: fwd_texel_vec4 -DSTAGE=0 -DTEXEL=1 -DVEC4=1
// variant: fwd_texel_scalar -DSTAGE=0 -DTEXEL=1 -DVEC4=0
// variant: fwd4_texel_vec4 -DSTAGE=0 -DTEXEL=1 -DVEC4=1 -DNR=4u
// variant: fwd_storage_vec4 -DSTAGE=0 -DTEXEL=0 -DVEC4=1
// variant: fwd_storage_scalar -DSTAGE=0 -DTEXEL=0 -DVEC4=0
// variant: rows_texel_vec4 -DSTAGE=1 -DTEXEL=1 -DVEC4=1
// variant: rows_texel_scalar -DSTAGE=1 -DTEXEL=1 -DVEC4=0
// variant: rows_storage_vec4 -DSTAGE=1 -DTEXEL=0 -DVEC4=1
// variant: rows_storage_scalar -DSTAGE=1 -DTEXEL=0 -DVEC4=0
// variant: dq_texel_vec4 -DSTAGE=2 -DTEXEL=1 -DVEC4=1
// variant: dq_texel_scalar -DSTAGE=2 -DTEXEL=1 -DVEC4=0
// variant: dq2_texel_vec4 -DSTAGE=2 -DTEXEL=1 -DVEC4=1 -DNR=2u
// variant: dq_storage_vec4 -DSTAGE=2 -DTEXEL=0 -DVEC4=1 -DKS=1u
// variant: dq_storage_scalar -DSTAGE=2 -DTEXEL=0 -DVEC4=0 -DKS=1u
// variant: dkv_texel_vec4 -DSTAGE=3 -DTEXEL=1 -DVEC4=1
// variant: dkv_texel_scalar -DSTAGE=3 -DTEXEL=1 -DVEC4=0
// variant: dkv2_texel_vec4 -DSTAGE=3 -DTEXEL=1 -DVEC4=1 -DNR=2u
// variant: dk_storage_vec4 -DSTAGE=3 -DTEXEL=0 -DVEC4=1 -DPART=1 -DKS=1u
// variant: dk_storage_scalar -DSTAGE=3 -DTEXEL=0 -DVEC4=0 -DPART=1 -DKS=1u
// variant: dv_storage_vec4 -DSTAGE=3 -DTEXEL=0 -DVEC4=1 -DPART=2 -DKS=1u
// variant: dv_storage_scalar -DSTAGE=3 -DTEXEL=0 -DVEC4=0 -DPART=2 -DKS=1u
// Flash attention: causal GQA self-attention (block-causal with document
// ids, and a sliding window) that never holds the (T, T) probabilities.
// With s = scale·q·k over the allowed keys t' of query t (t' <= t, same
// document, t − t' < window where one is set), kh = h/(H/KVH):
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
// One invocation per row (or NR rows, below), the fastest index t (or t'),
// so a subgroup's lanes walk the same keys; per-head vectors are HDC chunks of W floats
// (specialization constant 0) held in registers, with unrolled loops.
// TEXEL = 1 reads q, k, v, do, out (and stats) through uniform texel
// buffers (CPU devices, see texel.glsl); TEXEL = 0 through storage buffers.
// Indices: q, k, v and their gradients are rows of q_stride / kv_stride
// floats from q_off / k_off / v_off (gradients from g1_off, g2_off), head h
// at +h·hd; out and do are (B,T,H,hd) from o_off; lse from l_off and stats
// ((lse, D) pairs) from x_off are (B,H,T); doc is (B,T) from doc_off.
#include "texel.glsl"
#include "finite.glsl"
#include "softcap.glsl"
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
    uint w0; uint w1; uint wlog; uint window; float softcap; // softcap: Gemma 2's c (0: none)
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
#include "attention_docs.glsl" // bounds and windows of the walks (below)

// The invocation's rows: NR per invocation, t[u] = NR·j + u (query rows
// in fwd and dq, key rows in dkv; clamped to the sequence), live[u] where
// the row is in the sequence and the walk's part reaches it. The texel
// family's vec4 variants take 4 rows (fwd4) or 2 (dq2, dkv2; 4 were no
// faster there) and share each fetch of the other side between the rows
// (CPU devices: a texel fetch costs as much as several multiply-adds;
// fwd4 was 1.2x faster than two rows at T = 1024 and 2048, eight no
// faster than four at 1024 and slower at 256).
// Each loop step takes KS = 8 keys (fwd, dq) or query rows (dkv). A key
// a row may not see (its future, another document, past the walk's end)
// gets weight 0 (e, P, dS: a select, not arithmetic) and no part in the
// max, and each accumulator takes the step's terms in one update:
// llvmpipe blends every value a loop carries under the loop's mask once
// per step, so with one key per step that blend cost as much as the
// multiply-adds (texel vec4, bench_attention 1 12 12 64 at T = 1024:
// forward 67 -> 57 ms, backward 245 -> 217; 2 and 4 keys slower than 8,
// 16 no faster; at hd 32, T = 64 and 128 the backward 3-5% slower, the
// masked keys of each walk's last step, and the forward 5% faster). The
// forward's online softmax rescales once per step, by the max over its
// keys, in steps from the walk's start for every row. A step with nothing
// for a row leaves its state as it was (a factor of exactly 1, terms of
// 0), and dq, dk and dv add their terms one by one in the walk's order,
// so every variant of a width gives each row the same bits whatever NR
// and family (up to the sign of a zero sum; test_flash_attention checks
// it).
#ifndef NR
#define NR 1u
#endif
// The storage family's backward (GPUs) takes one key (dk, dv: one query
// row) per step, KS = 1: the same bits, since the backward adds its terms
// one by one in the walk's order whatever KS. On an H200 the default dq
// with eight per step took 589 ms a GPT-2 step where the reproducible
// mode's dq, one key per step with its own exp, took 85: eight keys'
// state and the fully unrolled step leave a GPU few registers.
#ifndef KS
#define KS 8u
#endif
// The accumulators take the step's key (dkv: query row) vectors, which dq
// and dkv have fetched for the scores already, and the forward's value
// vectors: the texel family (CPU devices, where a fetch costs several
// multiply-adds) keeps them, the storage one (GPUs, where registers are
// scarce) fetches each where it is used, from the cache.
// KEEP(kept, q, c, v) is v, kept as kept[q][c] in the texel family only:
// the storage family declares no such array.
#if TEXEL
#define KEPT(kept, q, c, buf, at) kept[q][c]
#define KEEP(kept, q, c, v) (kept[q][c] = (v))
#define KEPT_ARRAY(kept) VT kept[KS][HDC]
#else
#define KEPT(kept, q, c, buf, at) FETCH(buf, at)
#define KEEP(kept, q, c, v) (v)
#define KEPT_ARRAY(kept)
#endif

// The rows' masks for the step of KS positions from i0 (keys, or query
// rows in dkv) in a walk that ends before `end`: pos[q] the position
// (clamped into the walk), ok[u][q] whether row u takes it (a key in its
// past, a query row in its future with dkv, in its window and document); false
// where no row takes any.
bool step_mask(uint b, uint i0, uint end, uint t[NR], bool live[NR], int d[NR], out uint pos[KS],
               out bool ok[NR][KS])
{
    bool any = false;
    [[unroll]] for (uint q = 0u; q < KS; q++) {
        pos[q] = min(i0 + q, end - 1u);
        // the position's document, loaded once for the NR rows (0, as
        // every row's, without documents)
        int dq = p.has_doc != 0u ? doc[p.doc_off + b * p.T + pos[q]] : 0;
        [[unroll]] for (uint u = 0u; u < NR; u++) {
#if STAGE == 3
            bool seen = pos[q] >= t[u] && in_window(pos[q], t[u]);
#else
            bool seen = pos[q] <= t[u] && in_window(t[u], pos[q]);
#endif
            ok[u][q] = live[u] && i0 + q < end && seen && dq == d[u];
            any = any || ok[u][q];
        }
    }
    return any;
}

// Packed documents and windows (attention_docs.glsl): a walk over keys
// starts at the step (from `from`, KS positions each) that holds the
// first key of its first row's document and window, a walk over query
// rows ends after the step that holds the last row of its last key's
// document and window (so a window of w keys costs O(w) a row): the steps
// skipped are the ones where no row of the invocation takes any position
// (keys of earlier documents, rows of later ones), which leave every row's
// state as it was, so the bits are those of the whole walk. A bound, not
// a mask: llvmpipe runs a step's body under an all-false mask at full cost
// where the loop goes on (the default recipe's fortunes: about a fifth
// of the causal pairs are in other documents).
// The first step's start from `from` (steps of KS) for keys from `first`.
uint step_start(uint from, uint first)
{
    return first > from ? from + (first - from) / KS * KS : from;
}

#if STAGE == 0
void main()
{
    uint TR = (p.T + NR - 1u) / NR, i = gl_GlobalInvocationID.x;
    if (i >= p.B * TR * p.H) return;
    uint j = i % TR, h = (i / TR) % p.H, b = i / (p.H * TR), kh = h / (p.H / p.KVH);
    uint last = min(NR * j + NR - 1u, p.T - 1u);
    if (last < p.w0) return; // every key of this part is in the rows' future
    uint t[NR], oo[NR], r[NR];
    bool live[NR];
    int d[NR];
    VT qr[NR][HDC], acc[NR][HDC];
    float m[NR], l[NR]; // l > 0 once a key is seen (the max adds 1)
    [[unroll]] for (uint u = 0u; u < NR; u++) {
        t[u] = min(NR * j + u, p.T - 1u);
        live[u] = NR * j + u < p.T && t[u] >= p.w0;
        uint qo = qidx(b, t[u], h);
        oo[u] = oidx(b, t[u], h) / W, r[u] = p.l_off + ridx(b, h, t[u]);
        [[unroll]] for (uint c = 0u; c < HDC; c++) qr[u][c] = FETCH(tq, qo + c * W);
        m[u] = NO_SCORE, l[u] = 0.0;
        if (live[u] && p.w0 > 0u && lse[r[u]] > NO_SCORE) {
            m[u] = lse[r[u]];
            l[u] = 1.0;
            [[unroll]] for (uint c = 0u; c < HDC; c++) acc[u][c] = o[oo[u] + c];
        } else {
            [[unroll]] for (uint c = 0u; c < HDC; c++) acc[u][c] = VT(0.0);
        }
        d[u] = p.has_doc != 0u ? doc[p.doc_off + b * p.T + t[u]] : 0;
    }
    uint end = min(last + 1u, p.w1);
    for (uint s0 = step_start(p.w0, key_first(b, t[0])); s0 < end; s0 += KS) {
        uint ks[KS];
        bool ok[NR][KS];
        if (!step_mask(b, s0, end, t, live, d, ks, ok)) continue;
        VT dotv[NR][KS];
        uint vo[KS];
        [[unroll]] for (uint q = 0u; q < KS; q++) {
            uint ko = kidx(b, ks[q], kh);
            vo[q] = vidx(b, ks[q], kh);
            [[unroll]] for (uint u = 0u; u < NR; u++) dotv[u][q] = VT(0.0);
            [[unroll]] for (uint c = 0u; c < HDC; c++) {
                VT kc = FETCH(tk, ko + c * W);
                [[unroll]] for (uint u = 0u; u < NR; u++) dotv[u][q] += qr[u][c] * kc;
            }
        }
        // each row's new max over its keys of the step, the old state's
        // factor a (exactly 1 where the max stays) and each key's weight e
        float a[NR], e[NR][KS];
        [[unroll]] for (uint u = 0u; u < NR; u++) {
            float score[KS], mn = m[u], le = 0.0;
            [[unroll]] for (uint q = 0u; q < KS; q++) {
                score[q] = softcap(HSUM(dotv[u][q]) * p.scale, p.softcap);
                mn = ok[u][q] ? max(mn, score[q]) : mn;
            }
            a[u] = l[u] > 0.0 ? (mn > m[u] ? exp(m[u] - mn) : 1.0) : 0.0;
            [[unroll]] for (uint q = 0u; q < KS; q++) {
                e[u][q] = ok[u][q] ? exp(score[q] - mn) : 0.0;
                le += e[u][q];
            }
            l[u] = l[u] * a[u] + le;
            m[u] = mn;
        }
#if TEXEL
        VT vk[KS][HDC];
        [[unroll]] for (uint q = 0u; q < KS; q++)
            [[unroll]] for (uint c = 0u; c < HDC; c++) vk[q][c] = FETCH(tv, vo[q] + c * W);
#endif
        [[unroll]] for (uint c = 0u; c < HDC; c++)
            [[unroll]] for (uint u = 0u; u < NR; u++) {
                VT sum = acc[u][c] * a[u];
                [[unroll]] for (uint q = 0u; q < KS; q++) sum += e[u][q] * KEPT(vk, q, c, tv, vo[q] + c * W);
                acc[u][c] = sum;
            }
    }
    [[unroll]] for (uint u = 0u; u < NR; u++) {
        if (!live[u]) continue;
        float inv = l[u] > 0.0 ? 1.0 / l[u] : 0.0;
        [[unroll]] for (uint c = 0u; c < HDC; c++) o[oo[u] + c] = acc[u][c] * inv;
        lse[r[u]] = l[u] > 0.0 ? m[u] + log(l[u]) : NO_SCORE;
    }
}
#elif STAGE == 2
void main()
{
    uint TR = (p.T + NR - 1u) / NR, i = gl_GlobalInvocationID.x;
    if (i >= p.B * TR * p.H) return;
    uint j = i % TR, h = (i / TR) % p.H, b = i / (p.H * TR), kh = h / (p.H / p.KVH);
    uint last = min(NR * j + NR - 1u, p.T - 1u);
    if (last < p.w0) return;
    uint t[NR], go[NR];
    bool live[NR];
    int d[NR];
    VT qr[NR][HDC], dor[NR][HDC], acc[NR][HDC];
    float lse[NR], D[NR];
    [[unroll]] for (uint u = 0u; u < NR; u++) {
        t[u] = min(NR * j + u, p.T - 1u);
        live[u] = NR * j + u < p.T && t[u] >= p.w0;
        uint qo = qidx(b, t[u], h), oo = oidx(b, t[u], h), r = p.x_off + 2u * ridx(b, h, t[u]);
        [[unroll]] for (uint c = 0u; c < HDC; c++) {
            qr[u][c] = FETCH(tq, qo + c * W);
            dor[u][c] = FETCH(tdo, oo + c * W);
            acc[u][c] = VT(0.0);
        }
        lse[u] = FETCH1(tst, r), D[u] = FETCH1(tst, r + 1u);
        d[u] = p.has_doc != 0u ? doc[p.doc_off + b * p.T + t[u]] : 0;
        go[u] = (qo - p.q_off + p.g1_off) / W;
    }
    uint end = min(last + 1u, p.w1);
    for (uint s0 = step_start(p.w0, key_first(b, t[0])); s0 < end; s0 += KS) {
        uint ks[KS], ko[KS];
        bool ok[NR][KS];
        if (!step_mask(b, s0, end, t, live, d, ks, ok)) continue;
        // dS of each row and key of the step (0 where not taken)
        KEPT_ARRAY(kt);
        float ds[NR][KS];
        [[unroll]] for (uint q = 0u; q < KS; q++) {
            uint vo = vidx(b, ks[q], kh);
            ko[q] = kidx(b, ks[q], kh);
            VT sv[NR], dpv[NR];
            [[unroll]] for (uint u = 0u; u < NR; u++) sv[u] = VT(0.0), dpv[u] = VT(0.0);
            [[unroll]] for (uint c = 0u; c < HDC; c++) {
                VT kc = KEEP(kt, q, c, FETCH(tk, ko[q] + c * W));
                VT vc = FETCH(tv, vo + c * W);
                [[unroll]] for (uint u = 0u; u < NR; u++) {
                    sv[u] += qr[u][c] * kc;
                    dpv[u] += dor[u][c] * vc;
                }
            }
            [[unroll]] for (uint u = 0u; u < NR; u++) {
                float sc = softcap(HSUM(sv[u]) * p.scale, p.softcap), pr = exp(sc - lse[u]);
                ds[u][q] = ok[u][q] ? pr * (HSUM(dpv[u]) - D[u]) * softcap_slope(sc, p.softcap) : 0.0;
            }
        }
        [[unroll]] for (uint c = 0u; c < HDC; c++)
            [[unroll]] for (uint u = 0u; u < NR; u++) {
                VT sum = acc[u][c];
                [[unroll]] for (uint q = 0u; q < KS; q++) sum += ds[u][q] * KEPT(kt, q, c, tk, ko[q] + c * W);
                acc[u][c] = sum;
            }
    }
    [[unroll]] for (uint u = 0u; u < NR; u++)
        if (live[u])
            [[unroll]] for (uint c = 0u; c < HDC; c++) dq[go[u] + c] += p.scale * acc[u][c];
}
#else
// dk, dv per key row s[u], over the group's query heads and the query rows
// t >= s[u] of this part. PART 1 computes dk only and PART 2 dv only, the
// same terms in the same order: the storage kernels (GPUs) come in these
// two, since one kernel with four head vectors per row (2 KB at head size
// 128) was more local memory than NVIDIA's compiler took (an H200, driver
// 580), where dq's three compiled. PART 0, both: the texel family's.
#ifndef PART
#define PART 0
#endif
#define DK (PART != 2)
#define DV (PART != 1)
void main()
{
    uint TR = (p.T + NR - 1u) / NR, i = gl_GlobalInvocationID.x;
    if (i >= p.B * TR * p.KVH) return;
    uint j = i % TR, kh = (i / TR) % p.KVH, b = i / (p.KVH * TR);
    if (NR * j >= p.w1) return; // every query of this part is in the rows' past
    uint group = p.H / p.KVH, s[NR], gk[NR], gv[NR];
    bool live[NR];
    int d[NR];
    VT kr[NR][HDC];
#if DK
    VT vr[NR][HDC], dka[NR][HDC];
#endif
#if DV
    VT dva[NR][HDC];
#endif
    [[unroll]] for (uint u = 0u; u < NR; u++) {
        s[u] = min(NR * j + u, p.T - 1u);
        live[u] = NR * j + u < p.T && s[u] < p.w1;
        uint ko = kidx(b, s[u], kh), vo = vidx(b, s[u], kh);
        [[unroll]] for (uint c = 0u; c < HDC; c++) {
            kr[u][c] = FETCH(tk, ko + c * W);
#if DK
            vr[u][c] = FETCH(tv, vo + c * W);
            dka[u][c] = VT(0.0);
#endif
#if DV
            dva[u][c] = VT(0.0);
#endif
        }
        d[u] = p.has_doc != 0u ? doc[p.doc_off + b * p.T + s[u]] : 0;
        gk[u] = (ko - p.k_off + p.g1_off) / W, gv[u] = (vo - p.v_off + p.g2_off) / W;
    }
    uint start = max(NR * j, p.w0), past = query_past(b, s[NR - 1u]);
    uint stop = min(p.w1, past > start ? start + (past - start + KS - 1u) / KS * KS : start);
    for (uint hh = 0u; hh < group; hh++) {
        uint h = kh * group + hh;
        for (uint t0 = start; t0 < stop; t0 += KS) {
            uint ts[KS], qo[KS], oo[KS];
            bool ok[NR][KS];
            if (!step_mask(b, t0, p.w1, s, live, d, ts, ok)) continue;
            // P and dS of each key row and query row of the step (0 where
            // not taken)
            KEPT_ARRAY(qt);
            KEPT_ARRAY(dot);
            float pr[NR][KS], ds[NR][KS];
            [[unroll]] for (uint q = 0u; q < KS; q++) {
                uint r = p.x_off + 2u * ridx(b, h, ts[q]);
                qo[q] = qidx(b, ts[q], h), oo[q] = oidx(b, ts[q], h);
                VT sv[NR], dpv[NR];
                [[unroll]] for (uint u = 0u; u < NR; u++) sv[u] = VT(0.0), dpv[u] = VT(0.0);
                [[unroll]] for (uint c = 0u; c < HDC; c++) {
                    VT qc = KEEP(qt, q, c, FETCH(tq, qo[q] + c * W));
#if DK
                    VT dc = KEEP(dot, q, c, FETCH(tdo, oo[q] + c * W));
#endif
                    [[unroll]] for (uint u = 0u; u < NR; u++) {
                        sv[u] += kr[u][c] * qc;
#if DK
                        dpv[u] += vr[u][c] * dc;
#endif
                    }
                }
                float lse = FETCH1(tst, r), D = FETCH1(tst, r + 1u);
                [[unroll]] for (uint u = 0u; u < NR; u++) {
                    float sc = softcap(HSUM(sv[u]) * p.scale, p.softcap), pq = exp(sc - lse);
                    pr[u][q] = ok[u][q] ? pq : 0.0;
                    ds[u][q] = ok[u][q] ? pq * (HSUM(dpv[u]) - D) * softcap_slope(sc, p.softcap) : 0.0;
                }
            }
            [[unroll]] for (uint c = 0u; c < HDC; c++)
                [[unroll]] for (uint u = 0u; u < NR; u++) {
#if DK
                    VT kn = dka[u][c];
                    [[unroll]] for (uint q = 0u; q < KS; q++) kn += ds[u][q] * KEPT(qt, q, c, tq, qo[q] + c * W);
                    dka[u][c] = kn;
#endif
#if DV
                    VT vn = dva[u][c];
                    [[unroll]] for (uint q = 0u; q < KS; q++) vn += pr[u][q] * KEPT(dot, q, c, tdo, oo[q] + c * W);
                    dva[u][c] = vn;
#endif
                }
        }
    }
    [[unroll]] for (uint u = 0u; u < NR; u++)
        if (live[u])
            [[unroll]] for (uint c = 0u; c < HDC; c++) {
#if DK
                dk[gk[u] + c] += p.scale * dka[u][c];
#endif
#if DV
                dv[gv[u] + c] += dva[u][c];
#endif
            }
}
#endif
#endif
