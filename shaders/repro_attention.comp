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
// variant: dk_storage_vec4 -DSTAGE=5 -DTEXEL=0 -DVEC4=1 -DPART=1
// variant: dk_storage_scalar -DSTAGE=5 -DTEXEL=0 -DVEC4=0 -DPART=1
// variant: dv_storage_vec4 -DSTAGE=5 -DTEXEL=0 -DVEC4=1 -DPART=2
// variant: dv_storage_scalar -DSTAGE=5 -DTEXEL=0 -DVEC4=0 -DPART=2
// variant: max8_texel_vec4 -DSTAGE=0 -DTEXEL=1 -DVEC4=1 -DNR=8u
// variant: dq2_texel_vec4 -DSTAGE=4 -DTEXEL=1 -DVEC4=1 -DNR=2u
// variant: dkv2_texel_vec4 -DSTAGE=5 -DTEXEL=1 -DVEC4=1 -DNR=2u
// variant: dq4_texel_vec4 -DSTAGE=4 -DTEXEL=1 -DVEC4=1 -DNR=4u
// variant: dkv4_texel_vec4 -DSTAGE=5 -DTEXEL=1 -DVEC4=1 -DNR=4u
// variant: fused4_texel_vec4 -DSTAGE=6 -DTEXEL=1 -DVEC4=1 -DNR=4u
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
// NR rows per invocation (the texel family's vec4 variants: 8 in max8,
// 4 in fused4, 2 in dq2 and dkv2, 4 in dq4 and dkv4 at head sizes up to
// 32), query rows NR·j .. NR·j + NR − 1 (key rows in dkv),
// share each fetch of the other side: each row's operations are the
// one-row kernel's in its order, a key outside a row's future or document
// leaving that row's state as it was (selects, not arithmetic), so the
// bits are the same. (The fused walk's pair was 1.3-1.4x slower than one
// row while it took one key per step, each key pushing into two trees'
// stacks; with eight keys per step it is 0.8-0.9x one row's time at hd 32
// and 64, T = 128 to 1024, bench_attention; four rows, 0.85-0.93x the
// pair's time at hd 32, T = 64 to 512, and at hd 64, T = 256 to 1024,
// alternated call by call; eight, 1.0-1.3x four's. dq and dkv with four
// rows: 0.80-0.95x the pair's time at hd 16 and 32 (T = 64 to 512), but
// 1.05-1.15x at hd 64 (T <= 512), so four only up to 32. The max keeps no
// accumulator, and 8 rows made the whole forward 8-10% faster than 2 at
// T = 1024 and 2048.)
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
#ifndef NR
#define NR 1u // rows per invocation
#endif
#define RK 8u // keys per loop step of the fused walk (its tree's lowest three levels)
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

// The document of token s of sequence b (0, as every row's, without
// documents): loaded once per key for the invocation's rows.
int doc_of(uint b, uint s) { return p.has_doc != 0u ? doc[p.doc_off + b * p.T + s] : 0; }

#if STAGE != 5
// The invocation's query rows: t[u] = NR·j + u (clamped to the sequence),
// live[u] where it is in the sequence and not before the walk's part.
VT qr[NR][HDC];

// sc[u] = s_j for the query row u in qr and the key at ko.
void scores(uint ko, out float sc[NR])
{
    precise float acc[NR];
    for (uint u = 0u; u < NR; u++)
        acc[u] = 0.0f;
    for (uint c = 0u; c < HDC; c++) {
        VT kc = FETCH(tk, ko + c * W);
        for (uint u = 0u; u < NR; u++) {
            precise float n = dot_step(acc[u], qr[u][c], kc);
            acc[u] = n;
        }
    }
    for (uint u = 0u; u < NR; u++) {
        precise float s = acc[u] * p.scale;
        sc[u] = s;
    }
}
#endif

#if STAGE == 1 || STAGE == 6
float stack[NR][32];
// The tree as a binary counter: stack[u][level] holds row u's pending
// subtree of 2^level keys. Key s's leaves v[u] join it where push[u].
#define TREE_PUSH(s, v, push)                                                                           \
    {                                                                                                   \
        uint level = 0u;                                                                                \
        while ((((s) >> level) & 1u) != 0u) {                                                           \
            for (uint u = 0u; u < NR; u++) v[u] = stack[u][level] + v[u];                     \
            level++;                                                                                    \
        }                                                                                               \
        for (uint u = 0u; u < NR; u++) if (push[u]) stack[u][level] = v[u];                   \
    }
// The sum of the first t + 1 keys' leaves of row u from its stack: the
// keys past t add +0 to non-negative sums, so it is the tree over all T.
float tree_total(uint u, uint t)
{
    uint n = t + 1u, low = uint(findLSB(n));
    precise float l = stack[u][low];
    for (uint level = low + 1u; level < 32u; level++)
        if (((n >> level) & 1u) != 0u)
            l = stack[u][level] + l;
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
    uint TR = (p.T + NR - 1u) / NR, i = gl_GlobalInvocationID.x;
    if (i >= p.B * TR * p.H)
        return;
    uint j = i % TR, h = (i / TR) % p.H, b = i / (p.H * TR), kh = h / (p.H / p.KVH);
    uint last = min(NR * j + NR - 1u, p.T - 1u);
    if (last < p.w0)
        return; // every key of this part is in the rows' future: they are done
    uint t[NR], r[NR], oo[NR];
    bool live[NR];
    int d[NR];
    for (uint u = 0u; u < NR; u++) {
        t[u] = min(NR * j + u, p.T - 1u);
        live[u] = NR * j + u < p.T && t[u] >= p.w0;
        uint qo = qidx(b, t[u], h);
        for (uint c = 0u; c < HDC; c++)
            qr[u][c] = FETCH(tq, qo + c * W);
        r[u] = ridx(b, h, t[u]), oo[u] = oidx(b, t[u], h);
        d[u] = p.has_doc != 0u ? doc[p.doc_off + b * p.T + t[u]] : 0;
    }
    uint end = min(last + 1u, p.w1);
#if STAGE == 0
    float m[NR];
    for (uint u = 0u; u < NR; u++)
        m[u] = p.w0 == 0u ? uintBitsToFloat(0xff800000u) : lse[p.l_off + r[u]];
    for (uint s = p.w0; s < end; s++) {
        bool ok[NR], any = false;
        int ds = doc_of(b, s);
        for (uint u = 0u; u < NR; u++) {
            ok[u] = live[u] && s <= t[u] && ds == d[u];
            any = any || ok[u];
        }
        if (!any)
            continue;
        float sc[NR];
        scores(kidx(b, s, kh), sc);
        for (uint u = 0u; u < NR; u++)
            m[u] = ok[u] ? max_of(m[u], sc[u]) : m[u];
    }
    for (uint u = 0u; u < NR; u++)
        if (live[u])
            lse[p.l_off + r[u]] = m[u];
#elif STAGE == 1
    // The pending subtrees at w0 come back from out's row.
    float m[NR];
    for (uint u = 0u; u < NR; u++) {
        m[u] = lse[p.l_off + r[u]];
        for (uint level = p.wlog; level < 32u; level++)
            if (((p.w0 >> level) & 1u) != 0u)
                stack[u][level] = o[oo[u] + level - p.wlog];
    }
    for (uint s = p.w0; s < end; s++) {
        bool ok[NR], push[NR], any = false;
        int ds = doc_of(b, s);
        for (uint u = 0u; u < NR; u++) {
            ok[u] = live[u] && s <= t[u] && ds == d[u];
            push[u] = live[u] && s <= t[u];
            any = any || ok[u];
        }
        precise float v[NR];
        float sc[NR];
        if (any)
            scores(kidx(b, s, kh), sc);
        for (uint u = 0u; u < NR; u++) {
            v[u] = 0.0f;
            if (ok[u]) {
                precise float dd = sc[u] - m[u];
                v[u] = repro_exp(dd);
            }
        }
        TREE_PUSH(s, v, push)
    }
    for (uint u = 0u; u < NR; u++) {
        if (!live[u])
            continue;
        if (t[u] < p.w1)
            ls[p.x_off + r[u]] = tree_total(u, t[u]);
        else
            for (uint level = p.wlog; level < 32u; level++)
                if (((p.w1 >> level) & 1u) != 0u)
                    o[oo[u] + level - p.wlog] = stack[u][level];
    }
#else
    // acc, or fused: a over the allowed keys (and, fused, l's tree)
    float m[NR];
    precise VT acc[NR][HDC];
    for (uint u = 0u; u < NR; u++) {
        m[u] = lse[p.l_off + r[u]];
        for (uint c = 0u; c < HDC; c++)
            acc[u][c] = p.w0 == 0u ? VT(0.0f) : o[oo[u] / W + c];
    }
    // Key s (none past the walk's end) for the invocation's rows: e[u] =
    // repro_exp(s_j − m) where the key is allowed for row u, else +0, and
    // acc += e·v_j over those rows.
#define KEY_STEP(s, e)                                                                                  \
    {                                                                                                   \
        bool ok[NR], any = false;                                                                       \
        int ds = (s) < end ? doc_of(b, s) : 0;                                                          \
        for (uint u = 0u; u < NR; u++) {                                                                \
            ok[u] = (s) < end && live[u] && (s) <= t[u] && ds == d[u];                                  \
            any = any || ok[u];                                                                         \
        }                                                                                               \
        for (uint u = 0u; u < NR; u++)                                                                  \
            e[u] = 0.0f;                                                                                \
        if (any) {                                                                                      \
            float sc[NR];                                                                               \
            scores(kidx(b, s, kh), sc);                                                                 \
            for (uint u = 0u; u < NR; u++)                                                              \
                if (ok[u]) {                                                                            \
                    precise float dd = sc[u] - m[u];                                                    \
                    e[u] = repro_exp(dd);                                                               \
                }                                                                                       \
            uint vo = vidx(b, s, kh);                                                                   \
            for (uint c = 0u; c < HDC; c++) {                                                           \
                VT vc = FETCH(tv, vo + c * W);                                                          \
                for (uint u = 0u; u < NR; u++) {                                                        \
                    precise VT x = e[u] * vc;                                                           \
                    precise VT an = acc[u][c] + x;                                                      \
                    acc[u][c] = ok[u] ? an : acc[u][c];                                                 \
                }                                                                                       \
            }                                                                                           \
        }                                                                                               \
    }
#if STAGE == 6
    // Keys in aligned groups of RK = 8 (w0 = 0: the fused walk is never
    // cut), one loop step each: each row's eight leaves e (+0 for a key
    // not allowed or past the walk) make the tree's three lowest levels,
    // (((e0 + e1) + (e2 + e3)) + ((e4 + e5) + (e6 + e7))), pushed as one
    // subtree of the binary counter over groups; a row's last group, partly
    // past its query, pushes +0 leaves, which change no bit of a sum of
    // non-negative terms. Each score, weight and accumulator takes the
    // same operations in the same order as key by key (the eight scores
    // are eight accumulators side by side, each in d order; every element
    // of a takes the group's keys in order), so the bits are the one-key
    // walk's. Eight keys a step: llvmpipe blends the values a loop
    // carries once per step, and eight independent chains of scores and of
    // repro_exp fill the CPU's pipelines where one chain waited on each
    // operation's latency. No [[unroll]] here: glslc's unrolling copied the
    // loops' float operations without their NoContraction (test_repro_lint
    // caught it), and llvmpipe unrolls these constant loops as fast itself.
    for (uint s8 = p.w0; s8 < end; s8 += RK) {
        bool ok[NR][RK], any = false;
        uint ks[RK];
        for (uint q = 0u; q < RK; q++) {
            ks[q] = min(s8 + q, end - 1u);
            int ds = doc_of(b, ks[q]);
            for (uint u = 0u; u < NR; u++) {
                ok[u][q] = s8 + q < end && live[u] && s8 + q <= t[u] && ds == d[u];
                any = any || ok[u][q];
            }
        }
        precise float e[NR][RK];
        for (uint u = 0u; u < NR; u++)
            for (uint q = 0u; q < RK; q++) e[u][q] = 0.0f;
        if (any) {
            precise float sa[NR][RK];
            for (uint u = 0u; u < NR; u++)
                for (uint q = 0u; q < RK; q++) sa[u][q] = 0.0f;
            for (uint c = 0u; c < HDC; c++)
                for (uint q = 0u; q < RK; q++) {
                    VT kc = FETCH(tk, kidx(b, ks[q], kh) + c * W);
                    for (uint u = 0u; u < NR; u++) {
                        precise float n = dot_step(sa[u][q], qr[u][c], kc);
                        sa[u][q] = n;
                    }
                }
            for (uint u = 0u; u < NR; u++)
                for (uint q = 0u; q < RK; q++) {
                    precise float sc = sa[u][q] * p.scale;
                    precise float dd = sc - m[u];
                    precise float x = repro_exp(dd);
                    e[u][q] = ok[u][q] ? x : 0.0f;
                }
            for (uint c = 0u; c < HDC; c++) {
                VT vc[RK];
                for (uint q = 0u; q < RK; q++) vc[q] = FETCH(tv, vidx(b, ks[q], kh) + c * W);
                for (uint u = 0u; u < NR; u++) {
                    precise VT a = acc[u][c];
                    for (uint q = 0u; q < RK; q++) {
                        precise VT x = e[u][q] * vc[q];
                        precise VT an = a + x;
                        a = ok[u][q] ? an : a;
                    }
                    acc[u][c] = a;
                }
            }
        }
        bool push[NR];
        precise float v[NR];
        for (uint u = 0u; u < NR; u++) {
            push[u] = live[u] && s8 <= t[u];
            precise float ab = e[u][0] + e[u][1];
            precise float cd = e[u][2] + e[u][3];
            precise float ef = e[u][4] + e[u][5];
            precise float gh = e[u][6] + e[u][7];
            precise float lo = ab + cd;
            precise float hi = ef + gh;
            v[u] = lo + hi;
        }
        TREE_PUSH(s8 >> 3, v, push)
    }
#else
    for (uint s = p.w0; s < end; s++) {
        precise float e[NR];
        KEY_STEP(s, e)
    }
#endif
    for (uint u = 0u; u < NR; u++) {
        if (!live[u])
            continue;
        if (t[u] < p.w1) {
#if STAGE == 6
            float l = tree_total(u, t[u] >> 3); // over groups of RK keys
#else
            float l = ls[p.x_off + r[u]];
#endif
            for (uint c = 0u; c < HDC; c++)
                o[oo[u] / W + c] = div_by(acc[u][c], l);
            precise float logl = repro_log(l);
            precise float v = m[u] + logl;
            lse[p.l_off + r[u]] = v;
        } else {
            for (uint c = 0u; c < HDC; c++)
                o[oo[u] / W + c] = acc[u][c];
        }
    }
#endif
}
#elif STAGE == 4
void main()
{
    uint TR = (p.T + NR - 1u) / NR, i = gl_GlobalInvocationID.x;
    if (i >= p.B * TR * p.H)
        return;
    uint j = i % TR, h = (i / TR) % p.H, b = i / (p.H * TR), kh = h / (p.H / p.KVH);
    uint last = min(NR * j + NR - 1u, p.T - 1u);
    if (last < p.w0)
        return;
    uint t[NR], go[NR];
    bool live[NR];
    int d[NR];
    VT dor[NR][HDC];
    float lse_t[NR], D[NR];
    precise VT acc[NR][HDC];
    for (uint u = 0u; u < NR; u++) {
        t[u] = min(NR * j + u, p.T - 1u);
        live[u] = NR * j + u < p.T && t[u] >= p.w0;
        uint qo = qidx(b, t[u], h), oo = oidx(b, t[u], h), r = p.x_off + 2u * ridx(b, h, t[u]);
        go[u] = (qo - p.q_off + p.g1_off) / W;
        for (uint c = 0u; c < HDC; c++) {
            qr[u][c] = FETCH(tq, qo + c * W);
            dor[u][c] = FETCH(tdo, oo + c * W);
            acc[u][c] = g1[go[u] + c];
        }
        lse_t[u] = FETCH1(tst, r), D[u] = FETCH1(tst, r + 1u);
        d[u] = p.has_doc != 0u ? doc[p.doc_off + b * p.T + t[u]] : 0;
    }
    uint end = min(last + 1u, p.w1);
    for (uint s = p.w0; s < end; s++) {
        bool ok[NR], any = false;
        int ds = doc_of(b, s);
        for (uint u = 0u; u < NR; u++) {
            ok[u] = live[u] && s <= t[u] && ds == d[u];
            any = any || ok[u];
        }
        if (!any)
            continue;
        uint ko = kidx(b, s, kh), vo = vidx(b, s, kh);
        VT kt[HDC];
        precise float sa[NR], da[NR];
        for (uint u = 0u; u < NR; u++)
            sa[u] = 0.0f, da[u] = 0.0f;
        for (uint c = 0u; c < HDC; c++) {
            kt[c] = FETCH(tk, ko + c * W);
            VT vc = FETCH(tv, vo + c * W);
            for (uint u = 0u; u < NR; u++) {
                precise float n = dot_step(sa[u], qr[u][c], kt[c]);
                sa[u] = n;
                precise float n2 = dot_step(da[u], dor[u][c], vc);
                da[u] = n2;
            }
        }
        for (uint u = 0u; u < NR; u++) {
            precise float sv = sa[u] * p.scale;
            precise float dd = sv - lse_t[u];
            precise float pr = repro_exp(dd);
            precise float diff = da[u] - D[u];
            precise float ds = pr * diff;
            precise float dss = ds * p.scale;
            for (uint c = 0u; c < HDC; c++) {
                precise VT x = dss * kt[c];
                precise VT an = acc[u][c] + x;
                acc[u][c] = ok[u] ? an : acc[u][c];
            }
        }
    }
    for (uint u = 0u; u < NR; u++)
        if (live[u])
            for (uint c = 0u; c < HDC; c++)
                g1[go[u] + c] = acc[u][c];
}
#else
// PART 1 computes dk only and PART 2 dv only, each accumulator with the
// same terms in the same order as both together (PART 0, the texel
// family's): the storage kernels (GPUs) come in these two, as the default
// profile's do (flash_attention.comp), since four head vectors per row
// were more local memory than NVIDIA's compiler took there.
#ifndef PART
#define PART 0
#endif
#define DK (PART != 2)
#define DV (PART != 1)
void main()
{
    // key rows sr[u] = NR·j + u, live where in the sequence
    uint TR = (p.T + NR - 1u) / NR, i = gl_GlobalInvocationID.x;
    if (i >= p.B * TR * p.KVH)
        return;
    uint j = i % TR, kh = (i / TR) % p.KVH, b = i / (p.KVH * TR);
    uint group = p.H / p.KVH;
    // The walk is over (head of the group, query row) as hh·T + t.
    uint first = p.w0 / p.T, last = min(group, (p.w1 + p.T - 1u) / p.T);
    uint sr[NR], gk[NR], gv[NR];
    bool live[NR];
    int d[NR];
    VT kr[NR][HDC];
#if DK
    VT vr[NR][HDC];
    precise VT dka[NR][HDC];
#endif
#if DV
    precise VT dva[NR][HDC];
#endif
    for (uint u = 0u; u < NR; u++) {
        sr[u] = min(NR * j + u, p.T - 1u);
        live[u] = NR * j + u < p.T;
        uint ko = kidx(b, sr[u], kh), vo = vidx(b, sr[u], kh);
        gk[u] = (ko - p.k_off + p.g1_off) / W, gv[u] = (vo - p.v_off + p.g2_off) / W;
        for (uint c = 0u; c < HDC; c++) {
            kr[u][c] = FETCH(tk, ko + c * W);
#if DK
            vr[u][c] = FETCH(tv, vo + c * W);
            dka[u][c] = g1[gk[u] + c];
#endif
#if DV
            dva[u][c] = g2[gv[u] + c];
#endif
        }
        d[u] = p.has_doc != 0u ? doc[p.doc_off + b * p.T + sr[u]] : 0;
    }
    for (uint hh = first; hh < last; hh++) {
        uint h = kh * group + hh, base = hh * p.T;
        uint lo = max(sr[0], p.w0 > base ? p.w0 - base : 0u), hi = min(p.T, p.w1 - base);
        for (uint t = lo; t < hi; t++) {
            bool ok[NR], any = false;
            int dt = doc_of(b, t);
            for (uint u = 0u; u < NR; u++) {
                ok[u] = live[u] && t >= sr[u] && dt == d[u];
                any = any || ok[u];
            }
            if (!any)
                continue;
            uint qo = qidx(b, t, h), oo = oidx(b, t, h), r = p.x_off + 2u * ridx(b, h, t);
            VT qt[HDC], dot[HDC];
            precise float sc[NR], dp[NR];
            for (uint u = 0u; u < NR; u++)
                sc[u] = 0.0f, dp[u] = 0.0f;
            for (uint c = 0u; c < HDC; c++) {
                qt[c] = FETCH(tq, qo + c * W);
                dot[c] = FETCH(tdo, oo + c * W);
                for (uint u = 0u; u < NR; u++) {
                    precise float n = dot_step(sc[u], qt[c], kr[u][c]);
                    sc[u] = n;
#if DK
                    precise float n2 = dot_step(dp[u], dot[c], vr[u][c]);
                    dp[u] = n2;
#endif
                }
            }
            float lse_t = FETCH1(tst, r), D = FETCH1(tst, r + 1u);
            for (uint u = 0u; u < NR; u++) {
                precise float sv = sc[u] * p.scale;
                precise float dd = sv - lse_t;
                precise float pr = repro_exp(dd);
#if DK
                precise float diff = dp[u] - D;
                precise float ds = pr * diff;
                precise float dss = ds * p.scale;
#endif
                for (uint c = 0u; c < HDC; c++) {
#if DK
                    precise VT x = dss * qt[c];
                    precise VT an = dka[u][c] + x;
                    dka[u][c] = ok[u] ? an : dka[u][c];
#endif
#if DV
                    precise VT y = pr * dot[c];
                    precise VT bn = dva[u][c] + y;
                    dva[u][c] = ok[u] ? bn : dva[u][c];
#endif
                }
            }
        }
    }
    for (uint u = 0u; u < NR; u++)
        if (live[u])
            for (uint c = 0u; c < HDC; c++) {
#if DK
                g1[gk[u] + c] = dka[u][c];
#endif
#if DV
                g2[gv[u] + c] = dva[u][c];
#endif
            }
}
#endif
#endif
