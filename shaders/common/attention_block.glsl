// attention_block: what the block attention kernels share
// (flash_block.comp; repro_attention_block.comp, the reproducible
// mode's): the push constants and bindings of flash_attention.comp's
// kernels (fwd: q, k, v, documents, lse, out; the backward: q, k, v, do,
// the (lse, D) statistics, documents, then dq or dk and dv), the indices,
// the shared blocks and their loads. STAGE 0 is dkv, 1 dq, 2 the forward;
// HDMAX the largest head size and BLK the rows of a block (variants);
// 64 invocations per workgroup.
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint HD = 64; // the head size, <= HDMAX
layout(push_constant) uniform Push {
    uint B; uint T; uint H; uint KVH; uint hd; uint has_doc; float scale;
    uint q_off; uint k_off; uint v_off; uint q_stride; uint kv_stride; // floats
    uint o_off; uint doc_off; uint l_off; uint x_off; uint g1_off; uint g2_off;
    uint w0; uint w1; uint wlog; uint window; float softcap; // softcap: Gemma 2's c (0: none)
} p;
layout(std430, binding = 0) readonly buffer BufQ { float q[]; };
layout(std430, binding = 1) readonly buffer BufK { float k[]; };
layout(std430, binding = 2) readonly buffer BufV { float v[]; };
#if STAGE == 2
layout(std430, binding = 3) readonly buffer BufDoc { int doc[]; };
layout(std430, binding = 4) buffer BufL { float lse[]; };
layout(std430, binding = 5) buffer BufO { float o[]; };
#else
layout(std430, binding = 3) readonly buffer BufDO { float dout[]; };
layout(std430, binding = 4) readonly buffer BufStats { float stats[]; };
layout(std430, binding = 5) readonly buffer BufDoc { int doc[]; };
#endif
#if STAGE == 0
layout(std430, binding = 6) buffer BufDK { float dk[]; };
layout(std430, binding = 7) buffer BufDV { float dv[]; };
#elif STAGE == 1
layout(std430, binding = 6) buffer BufDQ { float dq[]; };
#endif

uint kidx(uint b, uint t, uint kh) { return p.k_off + (b * p.T + t) * p.kv_stride + kh * p.hd; }
uint vidx(uint b, uint t, uint kh) { return p.v_off + (b * p.T + t) * p.kv_stride + kh * p.hd; }
uint qidx(uint b, uint t, uint h) { return p.q_off + (b * p.T + t) * p.q_stride + h * p.hd; }
uint oidx(uint b, uint t, uint h) { return p.o_off + ((b * p.T + t) * p.H + h) * p.hd; }
uint ridx(uint b, uint h, uint t) { return (b * p.H + h) * p.T + t; }
#include "attention_docs.glsl" // in_window, window_first, window_past
int doc_of(uint b, uint t) { return p.has_doc != 0u ? doc[p.doc_off + b * p.T + t] : 0; }

// The score tiles: 8 x 8 invocations, each SR rows x SR keys.
#define SR (BLK / 8u)
// The accumulators: BLK / 4 groups of 4 rows (keys in dkv) across, TD
// invocations along the head, each taking columns td + TD·c, c < DPT.
#define TD (64u / (BLK / 4u))
#define DPT (HDMAX / TD)

shared float Qs[BLK][HDMAX + 1u]; // query rows' q
shared float Ks[BLK][HDMAX + 1u];
shared float Vs[BLK][HDMAX + 1u];
shared float Ss[BLK][BLK + 1u]; // dS, or in fwd the scores, then the weights [query row][key]
shared int row_doc[BLK], key_doc[BLK];
#if STAGE == 2
shared float row_m[BLK], row_l[BLK], row_a[BLK]; // the online softmax's max, sum, factor
#else
shared float Os[BLK][HDMAX + 1u]; // query rows' do
shared float row_lse[BLK], row_d[BLK];
#endif
#if STAGE == 0
shared float Ps[BLK][BLK + 1u]; // P [query row][key]
#endif

// Whether query row t0 + qi sees key s0 + kj: in its past, window and
// document, the walk's position (the row in dkv, the key otherwise) in
// [w0, w1).
bool allowed(uint t0, uint qi, uint s0, uint kj)
{
    uint t = t0 + qi, s = s0 + kj;
#if STAGE == 0
    uint w = t;
#else
    uint w = s;
#endif
    return t < p.T && s <= t && in_window(t, s) && w >= p.w0 && w < p.w1 && row_doc[qi] == key_doc[kj];
}

#if STAGE != 2
// Query rows t0 .. t0 + BLK − 1 of head h (clamped to the sequence): q, do,
// lse, D and the document.
void load_rows(uint b, uint h, uint t0, uint lid)
{
    for (uint e = lid; e < BLK * HD; e += 64u) {
        uint i = e / HD, d = e % HD, t = min(t0 + i, p.T - 1u);
        Qs[i][d] = q[qidx(b, t, h) + d];
        Os[i][d] = dout[oidx(b, t, h) + d];
    }
    if (lid < BLK) {
        uint t = min(t0 + lid, p.T - 1u), r = p.x_off + 2u * ridx(b, h, t);
        row_lse[lid] = stats[r];
        row_d[lid] = stats[r + 1u];
        row_doc[lid] = doc_of(b, t);
    }
}
#endif

// Keys s0 .. s0 + BLK − 1 of kv head kh (clamped): k, v and the document.
void load_keys(uint b, uint kh, uint s0, uint lid)
{
    for (uint e = lid; e < BLK * HD; e += 64u) {
        uint j = e / HD, d = e % HD, s = min(s0 + j, p.T - 1u);
        Ks[j][d] = k[kidx(b, s, kh) + d];
        Vs[j][d] = v[vidx(b, s, kh) + d];
    }
    if (lid < BLK)
        key_doc[lid] = doc_of(b, min(s0 + lid, p.T - 1u));
}
