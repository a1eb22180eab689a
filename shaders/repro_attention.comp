#version 450
// variant: max_texel_vec4 -DSTAGE=0 -DTEXEL=1 -DVEC4=1
// variant: max_texel_scalar -DSTAGE=0 -DTEXEL=1 -DVEC4=0
// variant: max_storage_vec4 -DSTAGE=0 -DTEXEL=0 -DVEC4=1
// variant: max_storage_scalar -DSTAGE=0 -DTEXEL=0 -DVEC4=0
// variant: sum_texel_vec4 -DSTAGE=1 -DTEXEL=1 -DVEC4=1
// variant: sum_texel_scalar -DSTAGE=1 -DTEXEL=1 -DVEC4=0
// variant: sum_storage_vec4 -DSTAGE=1 -DTEXEL=0 -DVEC4=1
// variant: sum_storage_scalar -DSTAGE=1 -DTEXEL=0 -DVEC4=0
// variant: acc_texel_vec4 -DSTAGE=2 -DTEXEL=1 -DVEC4=1
// variant: acc_texel_scalar -DSTAGE=2 -DTEXEL=1 -DVEC4=0
// variant: acc_storage_vec4 -DSTAGE=2 -DTEXEL=0 -DVEC4=1
// variant: acc_storage_scalar -DSTAGE=2 -DTEXEL=0 -DVEC4=0
// variant: fused_texel_vec4 -DSTAGE=6 -DTEXEL=1 -DVEC4=1
// variant: fused_texel_scalar -DSTAGE=6 -DTEXEL=1 -DVEC4=0
// variant: fused_storage_vec4 -DSTAGE=6 -DTEXEL=0 -DVEC4=1
// variant: fused_storage_scalar -DSTAGE=6 -DTEXEL=0 -DVEC4=0
// variant: rows_texel_vec4 -DSTAGE=3 -DTEXEL=1 -DVEC4=1
// variant: rows_texel_scalar -DSTAGE=3 -DTEXEL=1 -DVEC4=0
// variant: rows_storage_vec4 -DSTAGE=3 -DTEXEL=0 -DVEC4=1
// variant: rows_storage_scalar -DSTAGE=3 -DTEXEL=0 -DVEC4=0
// variant: dq_texel_vec4 -DSTAGE=4 -DTEXEL=1 -DVEC4=1
// variant: dq_texel_scalar -DSTAGE=4 -DTEXEL=1 -DVEC4=0
// variant: dq_storage_vec4 -DSTAGE=4 -DTEXEL=0 -DVEC4=1
// variant: dq_storage_scalar -DSTAGE=4 -DTEXEL=0 -DVEC4=0
// variant: dkv_texel_vec4 -DSTAGE=5 -DTEXEL=1 -DVEC4=1
// variant: dkv_texel_scalar -DSTAGE=5 -DTEXEL=1 -DVEC4=0
// variant: dkv_storage_vec4 -DSTAGE=5 -DTEXEL=0 -DVEC4=1
// variant: dkv_storage_scalar -DSTAGE=5 -DTEXEL=0 -DVEC4=0
// repro_attention: the reproducible profile's causal GQA attention
// (block-causal with document ids), exact per query row: no online
// rescaling, so the bits never depend on a tile or on how the walk over
// keys is cut into dispatches. With the allowed keys j of query row t
// (j <= t, same document), kh = h / (H / KVH):
//   s_j  = (q·k_j, one accumulator from +0 in d order) · scale
//   max  (per b,h,t): m = the max of s_j (compare and select) -> lse
//   then, with e_j = repro_exp(s_j − m):
//   l = the repro_tree sum over j = 0 .. T−1 of e_j (+0 where not
//       allowed), a = Σ_j e_j · v_j over the allowed keys, one accumulator
//       per element from +0, j in order;
//   out = repro_div(a, l) per element, lse = m + repro_log(l).
//   fused (per b,h,t): l and a in one walk, where the walk is not cut (no
//        state but the row's lse and out survives a dispatch);
//   sum, acc (per b,h,t): the same in two walks where it is cut: sum
//        puts l in the scratch row ls (x_off), acc takes it at the end.
//   rows (per b,h,t): D = Σ_d do·out (d order) -> stats = (lse, D)
//   dq   (per b,h,t): P = repro_exp(s_j − lse), dP = do·v_j (d order),
//        dS = P·(dP − D); dq += (dS·scale)·k_j, j in order
//   dkv  (per b,kh,j): over the group's query heads h = kh·G .. kh·G+G−1
//        in order, and within each over the query rows t = j .. T−1 in
//        order: dk += (dS·scale)·q_t, dv += P·do_t
// Every gradient is one accumulator per element that starts from the
// element's old value (the op accumulates), so a walk cut into dispatches
// [w0, w1) stores and reloads the accumulator and gives the same bits. The
// max is exact in any order; the sum's tree is cut at power-of-two key
// boundaries (the host makes every part but the last 2^wlog keys long),
// its pending subtrees kept between dispatches in the row of out, which
// acc overwrites afterwards; fused and sum + acc compute the same
// operations, so the bits do not depend on the cut either.
// src/repro/repro_attention.c is the C.
// TEXEL = 1 reads the inputs through uniform texel buffers (CPU devices),
// TEXEL = 0 through storage buffers: the same floats, the same bits.
// Layout as shaders/flash_attention.comp: q, k, v and their gradients are
// rows of q_stride / kv_stride floats from q_off / k_off / v_off
// (gradients from g1_off, g2_off), head h at +h·hd; out and do are
// (B,T,H,hd) from o_off; lse from l_off and stats from x_off are (B,H,T);
// doc is (B,T) from doc_off.
#include "repro_math.glsl"
#include "texel.glsl"
#if TEXEL
#define INPUT(n, name) layout(binding = n) uniform samplerBuffer name;
#define INPUT1(n, name) INPUT(n, name)
#else
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
    uint w0; uint w1; uint wlog;
} p;

uint kidx(uint b, uint t, uint kh) { return p.k_off + (b * p.T + t) * p.kv_stride + kh * p.hd; }
uint vidx(uint b, uint t, uint kh) { return p.v_off + (b * p.T + t) * p.kv_stride + kh * p.hd; }
uint qidx(uint b, uint t, uint h) { return p.q_off + (b * p.T + t) * p.q_stride + h * p.hd; }
uint oidx(uint b, uint t, uint h) { return p.o_off + ((b * p.T + t) * p.H + h) * p.hd; }
uint ridx(uint b, uint h, uint t) { return (b * p.H + h) * p.T + t; }

// acc + a·b over the W floats of a chunk, in order, each operation rounded.
float dot_step(float acc, VT a, VT b)
{
#if VEC4
    precise float s = acc;
    precise float t = a.x * b.x;
    s = s + t;
    t = a.y * b.y;
    s = s + t;
    t = a.z * b.z;
    s = s + t;
    t = a.w * b.w;
    s = s + t;
    return s;
#else
    precise float t = a * b;
    precise float s = acc + t;
    return s;
#endif
}

float max_of(float a, float b) { return b > a || isnan(b) ? b : a; }

#if STAGE == 3
INPUT(0, to)
INPUT(1, tdo)
layout(std430, binding = 2) readonly buffer BL { float lse[]; };
layout(std430, binding = 3) writeonly buffer BX { float stats[]; };

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.B * p.T * p.H)
        return;
    uint t = i % p.T, h = (i / p.T) % p.H, b = i / (p.H * p.T);
    uint oo = oidx(b, t, h), r = ridx(b, h, t);
    precise float acc = 0.0f;
    for (uint c = 0u; c < HDC; c++) {
        precise float n = dot_step(acc, FETCH(tdo, oo + c * W), FETCH(to, oo + c * W));
        acc = n;
    }
    stats[p.x_off + 2u * r] = lse[p.l_off + r];
    stats[p.x_off + 2u * r + 1u] = acc;
}
#else
INPUT(0, tq)
INPUT(1, tk)
INPUT(2, tv)
#if STAGE <= 2 || STAGE == 6
layout(std430, binding = 3) readonly buffer BDoc { int doc[]; };
layout(std430, binding = 4) buffer BL { float lse[]; };
#if STAGE == 1
layout(std430, binding = 5) buffer BO { float o[]; };
#else
layout(std430, binding = 5) buffer BO { VT o[]; };
#endif
#if STAGE == 1 || STAGE == 2
layout(std430, binding = 6) buffer BS { float ls[]; }; // l per row, from x_off
#endif
#else
INPUT(3, tdo)
INPUT1(4, tst)
layout(std430, binding = 5) readonly buffer BDoc { int doc[]; };
layout(std430, binding = 6) buffer BG1 { VT g1[]; };
#if STAGE == 5
layout(std430, binding = 7) buffer BG2 { VT g2[]; };
#endif
#endif

// Token s of sequence b is in document d0 (always so without documents).
bool same_doc(uint b, uint s, int d0) { return p.has_doc == 0u || doc[p.doc_off + b * p.T + s] == d0; }

VT qr[HDC];

// s_j for the query in qr and the key at ko.
float score(uint ko)
{
    precise float acc = 0.0f;
    for (uint c = 0u; c < HDC; c++) {
        precise float n = dot_step(acc, qr[c], FETCH(tk, ko + c * W));
        acc = n;
    }
    precise float s = acc * p.scale;
    return s;
}

#if STAGE == 1 || STAGE == 6
float stack[32];
// The tree as a binary counter: stack[level] holds the pending subtree of
// 2^level keys. Key s's leaf v joins it.
#define TREE_PUSH(s, v)                                                                                 \
    {                                                                                                   \
        uint level = 0u;                                                                                \
        while ((((s) >> level) & 1u) != 0u) {                                                           \
            v = stack[level] + v;                                                                       \
            level++;                                                                                    \
        }                                                                                               \
        stack[level] = v;                                                                               \
    }
// The sum of the first t + 1 keys' leaves from the stack: the keys past t
// add +0 to non-negative sums, so it is the tree over all T.
float tree_total(uint t)
{
    uint n = t + 1u, low = uint(findLSB(n));
    precise float l = stack[low];
    for (uint level = low + 1u; level < 32u; level++)
        if (((n >> level) & 1u) != 0u)
            l = stack[level] + l;
    l = l + 0.0f;
    return l;
}
#endif
#if STAGE == 2 || STAGE == 6
// out's texel c = a / l per element.
VT div_by(VT a, float l)
{
#if VEC4
    precise float x = repro_div(a.x, l), y = repro_div(a.y, l), z = repro_div(a.z, l), w = repro_div(a.w, l);
    return vec4(x, y, z, w);
#else
    precise float x = repro_div(a, l);
    return x;
#endif
}
#endif

#if STAGE <= 2 || STAGE == 6
void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.B * p.T * p.H)
        return;
    uint t = i % p.T, h = (i / p.T) % p.H, b = i / (p.H * p.T);
    if (t < p.w0)
        return; // every key of this part is in its future: the row is done
    uint kh = h / (p.H / p.KVH), qo = qidx(b, t, h), r = p.l_off + ridx(b, h, t);
    for (uint c = 0u; c < HDC; c++)
        qr[c] = FETCH(tq, qo + c * W);
    int d0 = p.has_doc != 0u ? doc[p.doc_off + b * p.T + t] : 0;
    uint end = min(t + 1u, p.w1);
#if STAGE == 0
    float m = p.w0 == 0u ? uintBitsToFloat(0xff800000u) : lse[r];
    for (uint s = p.w0; s < end; s++)
        if (same_doc(b, s, d0))
            m = max_of(m, score(kidx(b, s, kh)));
    lse[r] = m;
#elif STAGE == 1
    // The pending subtrees at w0 come back from out's row.
    float m = lse[r];
    uint oo = oidx(b, t, h);
    for (uint level = p.wlog; level < 32u; level++)
        if (((p.w0 >> level) & 1u) != 0u)
            stack[level] = o[oo + level - p.wlog];
    for (uint s = p.w0; s < end; s++) {
        precise float v = 0.0f;
        if (same_doc(b, s, d0)) {
            precise float d = score(kidx(b, s, kh)) - m;
            v = repro_exp(d);
        }
        TREE_PUSH(s, v)
    }
    if (end == t + 1u)
        ls[p.x_off + ridx(b, h, t)] = tree_total(t);
    else
        for (uint level = p.wlog; level < 32u; level++)
            if (((p.w1 >> level) & 1u) != 0u)
                o[oo + level - p.wlog] = stack[level];
#else
    // acc, or fused: a over the allowed keys (and, fused, l's tree)
    float m = lse[r];
    uint oo = oidx(b, t, h) / W;
    precise VT acc[HDC];
    for (uint c = 0u; c < HDC; c++)
        acc[c] = p.w0 == 0u ? VT(0.0f) : o[oo + c];
    for (uint s = p.w0; s < end; s++) {
        precise float e = 0.0f;
        if (same_doc(b, s, d0)) {
            precise float d = score(kidx(b, s, kh)) - m;
            e = repro_exp(d);
            uint vo = vidx(b, s, kh);
            for (uint c = 0u; c < HDC; c++) {
                precise VT x = e * FETCH(tv, vo + c * W);
                acc[c] = acc[c] + x;
            }
        }
#if STAGE == 6
        TREE_PUSH(s, e)
#endif
    }
    if (end == t + 1u) {
#if STAGE == 6
        float l = tree_total(t);
#else
        float l = ls[p.x_off + ridx(b, h, t)];
#endif
        for (uint c = 0u; c < HDC; c++)
            o[oo + c] = div_by(acc[c], l);
        precise float logl = repro_log(l);
        precise float v = m + logl;
        lse[r] = v;
    } else {
        for (uint c = 0u; c < HDC; c++)
            o[oo + c] = acc[c];
    }
#endif
}
#elif STAGE == 4
void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.B * p.T * p.H)
        return;
    uint t = i % p.T, h = (i / p.T) % p.H, b = i / (p.H * p.T);
    if (t < p.w0)
        return;
    uint kh = h / (p.H / p.KVH), qo = qidx(b, t, h), oo = oidx(b, t, h), r = p.x_off + 2u * ridx(b, h, t);
    VT dor[HDC];
    for (uint c = 0u; c < HDC; c++) {
        qr[c] = FETCH(tq, qo + c * W);
        dor[c] = FETCH(tdo, oo + c * W);
    }
    float lse_t = FETCH1(tst, r), D = FETCH1(tst, r + 1u);
    uint go = (qo - p.q_off + p.g1_off) / W;
    precise VT acc[HDC];
    for (uint c = 0u; c < HDC; c++)
        acc[c] = g1[go + c];
    int d0 = p.has_doc != 0u ? doc[p.doc_off + b * p.T + t] : 0;
    uint end = min(t + 1u, p.w1);
    for (uint s = p.w0; s < end; s++) {
        if (!same_doc(b, s, d0))
            continue;
        uint ko = kidx(b, s, kh), vo = vidx(b, s, kh);
        precise float d = score(ko) - lse_t;
        precise float pr = repro_exp(d);
        precise float dp = 0.0f;
        for (uint c = 0u; c < HDC; c++) {
            precise float n = dot_step(dp, dor[c], FETCH(tv, vo + c * W));
            dp = n;
        }
        precise float diff = dp - D;
        precise float ds = pr * diff;
        precise float dss = ds * p.scale;
        for (uint c = 0u; c < HDC; c++) {
            precise VT x = dss * FETCH(tk, ko + c * W);
            acc[c] = acc[c] + x;
        }
    }
    for (uint c = 0u; c < HDC; c++)
        g1[go + c] = acc[c];
}
#else
void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.B * p.T * p.KVH)
        return;
    uint s = i % p.T, kh = (i / p.T) % p.KVH, b = i / (p.KVH * p.T);
    uint group = p.H / p.KVH, ko = kidx(b, s, kh), vo = vidx(b, s, kh);
    // The walk is over (head of the group, query row) as hh·T + t.
    uint first = p.w0 / p.T, last = min(group, (p.w1 + p.T - 1u) / p.T);
    VT kr[HDC], vr[HDC];
    for (uint c = 0u; c < HDC; c++) {
        kr[c] = FETCH(tk, ko + c * W);
        vr[c] = FETCH(tv, vo + c * W);
    }
    uint gk = (ko - p.k_off + p.g1_off) / W, gv = (vo - p.v_off + p.g2_off) / W;
    precise VT dka[HDC], dva[HDC];
    for (uint c = 0u; c < HDC; c++) {
        dka[c] = g1[gk + c];
        dva[c] = g2[gv + c];
    }
    int d0 = p.has_doc != 0u ? doc[p.doc_off + b * p.T + s] : 0;
    for (uint hh = first; hh < last; hh++) {
        uint h = kh * group + hh, base = hh * p.T;
        uint lo = max(s, p.w0 > base ? p.w0 - base : 0u), hi = min(p.T, p.w1 - base);
        for (uint t = lo; t < hi; t++) {
            if (!same_doc(b, t, d0))
                continue;
            uint qo = qidx(b, t, h), oo = oidx(b, t, h), r = p.x_off + 2u * ridx(b, h, t);
            VT qt[HDC], dot[HDC];
            precise float sc = 0.0f, dp = 0.0f;
            for (uint c = 0u; c < HDC; c++) {
                qt[c] = FETCH(tq, qo + c * W);
                dot[c] = FETCH(tdo, oo + c * W);
                precise float n = dot_step(sc, qt[c], kr[c]);
                sc = n;
                precise float n2 = dot_step(dp, dot[c], vr[c]);
                dp = n2;
            }
            precise float sv = sc * p.scale;
            precise float d = sv - FETCH1(tst, r);
            precise float pr = repro_exp(d);
            precise float diff = dp - FETCH1(tst, r + 1u);
            precise float ds = pr * diff;
            precise float dss = ds * p.scale;
            for (uint c = 0u; c < HDC; c++) {
                precise VT x = dss * qt[c];
                dka[c] = dka[c] + x;
                precise VT y = pr * dot[c];
                dva[c] = dva[c] + y;
            }
        }
    }
    for (uint c = 0u; c < HDC; c++) {
        g1[gk + c] = dka[c];
        g2[gv + c] = dva[c];
    }
}
#endif
#endif
