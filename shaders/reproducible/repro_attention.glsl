// repro_attention: the reproducible mode's causal GQA attention (this
// include: what its forward, repro_attention.comp, and its backward,
// repro_attention_bwd.comp, share)
// (block-causal with document ids, optionally in a sliding window),
// exact per query row: no online rescaling, so the bits never depend on a
// tile or on how the walk over keys is cut into dispatches. With the
// allowed keys j of query row t (j <= t, same document, t − j < window
// where p.window > 0), kh = h / (H / KVH):
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
// tests/ref/ref_repro_attention.c is the C.
// NR rows per invocation (the texel family's vec4 variants: 8 in max8,
// 4 in fused4, 2 in dq2 and dkv2, 4 in dq4 and dkv4 at head sizes up to
// 32), query rows NR·j .. NR·j + NR − 1 (key rows in dkv),
// share each fetch of the other side: each row's operations are the
// one-row kernel's in its order, a key in a row's future or outside its
// document or window leaving that row's state as it was (selects, not arithmetic), so the
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
#ifndef REPRO_ATTENTION_GLSL
#define REPRO_ATTENTION_GLSL
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
    uint w0; uint w1; uint wlog; uint window;
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
// Packed documents and the sliding window (attention_docs.glsl): the
// walks over keys start at their first row's first key, key_first (the
// max, sum, acc and dq walks at it, the fused walk at its group of eight;
// the trees' pending subtrees there +0, as every key before it is for the
// rows), and the walk over query rows ends after its last key's last row,
// query_past: every position skipped is one no row of the invocation takes
// (weight +0, no term, no part in the max), so the bits are those of the
// whole walk, and a window of w keys costs O(w) a row. A bound, not a
// mask: llvmpipe runs a loop body under an all-false mask at full cost.
#include "attention_docs.glsl"

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
#endif
#endif
