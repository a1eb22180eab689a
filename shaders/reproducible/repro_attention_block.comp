#version 450
// variant: dkv32x32_storage_scalar -DSTAGE=0 -DHDMAX=32u -DBLK=32u
// variant: dkv64x32_storage_scalar -DSTAGE=0 -DHDMAX=64u -DBLK=32u
// variant: dkv64x16_storage_scalar -DSTAGE=0 -DHDMAX=64u -DBLK=16u
// variant: dkv128x16_storage_scalar -DSTAGE=0 -DHDMAX=128u -DBLK=16u
// variant: dkv128x8_storage_scalar -DSTAGE=0 -DHDMAX=128u -DBLK=8u
// variant: dq32x32_storage_scalar -DSTAGE=1 -DHDMAX=32u -DBLK=32u
// variant: dq64x32_storage_scalar -DSTAGE=1 -DHDMAX=64u -DBLK=32u
// variant: dq64x16_storage_scalar -DSTAGE=1 -DHDMAX=64u -DBLK=16u
// variant: dq128x16_storage_scalar -DSTAGE=1 -DHDMAX=128u -DBLK=16u
// variant: dq128x8_storage_scalar -DSTAGE=1 -DHDMAX=128u -DBLK=8u
// variant: fwd32x32_storage_scalar -DSTAGE=2 -DHDMAX=32u -DBLK=32u
// variant: fwd64x32_storage_scalar -DSTAGE=2 -DHDMAX=64u -DBLK=32u
// variant: fwd64x16_storage_scalar -DSTAGE=2 -DHDMAX=64u -DBLK=16u
// variant: fwd128x16_storage_scalar -DSTAGE=2 -DHDMAX=128u -DBLK=16u
// variant: fwd128x8_storage_scalar -DSTAGE=2 -DHDMAX=128u -DBLK=8u
// repro_attention_block: the reproducible mode's attention
// (repro_attention.comp) in flash_block.comp's blocks, for GPUs, with the
// row kernels' bits. The forward: a workgroup per b, h, block of query
// rows; two walks over the key blocks from the first row's first key's
// (key_first: its document's and window's) up to the rows' last, each
// block's keys and values in shared memory and its scores (each one
// accumulator from +0 in d order, times scale) in tiles: first the max m
// of each row, one invocation per row taking its keys in order (max_of, as
// the row kernels); then e = repro_exp(s − m) per score (+0 where not allowed),
// each row's BLK leaves summed pairwise, left + right, by its invocation
// and pushed as one subtree of the tree over the key index (a block is an
// aligned subtree of it; the keys past the row's own add +0 to sums of
// non-negative terms, as the row kernels' groups of eight do), and each
// output element one accumulator from +0 taking e·v over the allowed keys
// in order; out = repro_div(a, l), lse = m + repro_log(l).
// The backward: every score and dP is one accumulator
// from +0 in d order, P = repro_exp(s·scale − lse), dS·scale =
// (P·(dP − D))·scale as there, and each gradient element one accumulator
// from its old value taking its terms in the row kernels' order, a term
// not allowed (the key in the row's future, another document or outside
// the window) leaving it as it was (a select, not arithmetic):
//   dq  (a workgroup per b, h, block of query rows): dq += (dS·scale)·k
//       over the keys in order (the blocks in order, in a block in order),
//       the key blocks bounded as the forward's;
//   dkv (a workgroup per b, kv head, block of keys): dk += (dS·scale)·q,
//       dv += P·do over the group's heads in order and within each over the
//       query rows in order, the query blocks from the keys' own up to
//       the one of the last key's last row (query_past: its document's and
//       window's).
// The keys a block's rows see (the rows that see a block's keys) are one
// run, so every block within these bounds holds a pair that sees each
// other and every block outside none: the blocks skipped are those whose
// every term is +0 or left out, and the forward's tree starts from +0
// subtrees for them (as a key-by-key walk's pending subtrees there, sums
// of +0 leaves), so the bits are those of the whole walk, and a window of
// w keys costs O(T·w).
// Only the tiles of scores (each one entry's sum in d order) are spread
// over the invocations; the order each accumulator sees does not depend on
// the block size, the device or its subgroups. The host takes these where
// the walk is whole (w0 = 0, and w1 at least T, or group·T in dkv: as
// on GPUs, which have no loop limit); else the row kernels. No [[unroll]]:
// glslc's unrolling dropped NoContraction (repro_attention.comp, the fused walk).
#include "repro_math.glsl"
#include "attention_block.glsl"

float max_of(float a, float b) { return b > a || isnan(b) ? b : a; }

#if STAGE == 2
// The scores (q·k in d order, times scale) of the invocation's tile of
// query rows x keys s0.. into Ss.
void fwd_scores(uint lid)
{
    uint sq = lid / 8u, sk = lid % 8u;
    precise float sa[SR][SR];
    for (uint i = 0u; i < SR; i++)
        for (uint j = 0u; j < SR; j++)
            sa[i][j] = 0.0f;
    for (uint d = 0u; d < HD; d++)
        for (uint i = 0u; i < SR; i++)
            for (uint j = 0u; j < SR; j++) {
                precise float x = Qs[sq * SR + i][d] * Ks[sk * SR + j][d];
                precise float sn = sa[i][j] + x;
                sa[i][j] = sn;
            }
    for (uint i = 0u; i < SR; i++)
        for (uint j = 0u; j < SR; j++) {
            precise float sv = sa[i][j] * p.scale;
            Ss[sq * SR + i][sk * SR + j] = sv;
        }
}
#else
// dS·scale of the invocation's tile of query rows t0.. x keys s0.. into
// Ss, and in dkv P into Ps (every pair: the accumulators select).
void scores(uint t0, uint s0, uint lid)
{
    uint sq = lid / 8u, sk = lid % 8u;
    precise float sa[SR][SR], da[SR][SR];
    for (uint i = 0u; i < SR; i++)
        for (uint j = 0u; j < SR; j++) {
            sa[i][j] = 0.0f;
            da[i][j] = 0.0f;
        }
    for (uint d = 0u; d < HD; d++)
        for (uint i = 0u; i < SR; i++)
            for (uint j = 0u; j < SR; j++) {
                precise float x = Qs[sq * SR + i][d] * Ks[sk * SR + j][d];
                precise float sn = sa[i][j] + x;
                sa[i][j] = sn;
                precise float y = Os[sq * SR + i][d] * Vs[sk * SR + j][d];
                precise float dn = da[i][j] + y;
                da[i][j] = dn;
            }
    for (uint i = 0u; i < SR; i++)
        for (uint j = 0u; j < SR; j++) {
            uint qi = sq * SR + i, kj = sk * SR + j;
            precise float sv = sa[i][j] * p.scale;
            precise float dd = sv - row_lse[qi];
            precise float pr = repro_exp(dd);
            precise float diff = da[i][j] - row_d[qi];
            precise float ds = pr * diff;
            precise float dss = ds * p.scale;
            Ss[qi][kj] = dss;
#if STAGE == 0
            Ps[qi][kj] = pr;
#endif
        }
}
#endif

void main()
{
    uint nb = (p.T + BLK - 1u) / BLK, wg = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
    uint tr = lid / TD, td = lid % TD;
    precise float acc[4][DPT];
#if STAGE == 2
    if (wg >= p.B * p.H * nb)
        return; // the whole workgroup
    uint qb = wg % nb, h = (wg / nb) % p.H, b = wg / (nb * p.H), kh = h / (p.H / p.KVH), t0 = qb * BLK;
    // keys from the block of the first row's first key up to the rows' last
    uint first = key_first(b, t0) / BLK * BLK, end = min(t0 + BLK, p.T);
    for (uint e = lid; e < BLK * HD; e += 64u) {
        uint i = e / HD, d = e % HD;
        Qs[i][d] = q[qidx(b, min(t0 + i, p.T - 1u), h) + d];
    }
    if (lid < BLK) {
        row_doc[lid] = doc_of(b, min(t0 + lid, p.T - 1u));
        row_m[lid] = uintBitsToFloat(0xff800000u); // −inf: the max of no score
    }
    // the max of each row over its allowed keys, in order
    for (uint s0 = first; s0 < end; s0 += BLK) {
        barrier(); // the last block's readers are done
        load_keys(b, kh, s0, lid);
        barrier();
        fwd_scores(lid);
        barrier();
        if (lid < BLK) {
            float m = row_m[lid];
            for (uint kj = 0u; kj < BLK; kj++)
                m = allowed(t0, lid, s0, kj) ? max_of(m, Ss[lid][kj]) : m;
            row_m[lid] = m;
        }
    }
    // then the weights, their tree and the weighted values
    for (uint i = 0u; i < 4u; i++)
        for (uint c = 0u; c < DPT; c++)
            acc[i][c] = 0.0f;
    float stack[32]; // the row's pending subtrees by level (blocks of BLK keys at level 0)
    for (uint level = 0u; level < 32u; level++)
        stack[level] = 0.0f; // the subtrees of the blocks before first
    for (uint s0 = first; s0 < end; s0 += BLK) {
        barrier();
        load_keys(b, kh, s0, lid);
        barrier();
        fwd_scores(lid);
        barrier();
        {
            uint sq = lid / 8u, sk = lid % 8u;
            for (uint i = 0u; i < SR; i++)
                for (uint j = 0u; j < SR; j++) {
                    uint qi = sq * SR + i, kj = sk * SR + j;
                    precise float dd = Ss[qi][kj] - row_m[qi];
                    precise float x = repro_exp(dd);
                    bool ok = allowed(t0, qi, s0, kj);
                    Ss[qi][kj] = ok ? x : 0.0f;
                }
        }
        barrier();
        if (lid < BLK && s0 <= t0 + lid && t0 + lid < p.T) {
            // the block's leaves pairwise, then pushed at block s0 / BLK
            precise float leaf[BLK];
            for (uint kj = 0u; kj < BLK; kj++)
                leaf[kj] = Ss[lid][kj];
            for (uint w = 1u; w < BLK; w *= 2u)
                for (uint kj = 0u; kj < BLK; kj += 2u * w) {
                    precise float sum = leaf[kj] + leaf[kj + w];
                    leaf[kj] = sum;
                }
            precise float v = leaf[0];
            uint n = s0 / BLK, level = 0u;
            while (((n >> level) & 1u) != 0u) {
                precise float up = stack[level] + v;
                v = up;
                level++;
            }
            stack[level] = v;
        }
        for (uint kj = 0u; kj < BLK; kj++)
            for (uint i = 0u; i < 4u; i++) {
                uint qi = tr * 4u + i;
                bool ok = allowed(t0, qi, s0, kj);
                float e = Ss[qi][kj];
                for (uint c = 0u; c < DPT; c++) {
                    precise float x = e * Vs[kj][min(td + TD * c, HD - 1u)];
                    precise float an = acc[i][c] + x;
                    acc[i][c] = ok ? an : acc[i][c];
                }
            }
    }
    // l from each row's stack (as tree_total: the levels of the number of
    // blocks pushed, low to high, each older subtree on the left; + 0)
    if (lid < BLK && t0 + lid < p.T) {
        uint n = (t0 + lid) / BLK + 1u, low = uint(findLSB(n));
        precise float l = stack[low];
        for (uint level = low + 1u; level < 32u; level++)
            if (((n >> level) & 1u) != 0u) {
                precise float up = stack[level] + l;
                l = up;
            }
        precise float l0 = l + 0.0f;
        row_l[lid] = l0;
        precise float logl = repro_log(l0);
        precise float v = row_m[lid] + logl;
        lse[p.l_off + ridx(b, h, t0 + lid)] = v;
    }
    barrier();
    for (uint i = 0u; i < 4u; i++) {
        uint t = t0 + tr * 4u + i;
        if (t >= p.T)
            continue;
        uint oo = oidx(b, t, h);
        for (uint c = 0u; c < DPT; c++) {
            uint d = td + TD * c;
            if (d < HD) {
                precise float y = repro_div(acc[i][c], row_l[tr * 4u + i]);
                o[oo + d] = y;
            }
        }
    }
#elif STAGE == 0
    precise float acc2[4][DPT];
    if (wg >= p.B * p.KVH * nb)
        return; // the whole workgroup
    uint kb = wg % nb, kh = (wg / nb) % p.KVH, b = wg / (nb * p.KVH), s0 = kb * BLK, group = p.H / p.KVH;
    uint gk[4], gv[4];
    for (uint i = 0u; i < 4u; i++) {
        uint s = min(s0 + tr * 4u + i, p.T - 1u);
        gk[i] = kidx(b, s, kh) - p.k_off + p.g1_off, gv[i] = vidx(b, s, kh) - p.v_off + p.g2_off;
        for (uint c = 0u; c < DPT; c++) {
            uint d = min(td + TD * c, HD - 1u);
            acc[i][c] = dk[gk[i] + d];
            acc2[i][c] = dv[gv[i] + d];
        }
    }
    load_keys(b, kh, s0, lid);
    // query blocks up to the one of the block's last key's last row
    uint past = query_past(b, min(s0 + BLK - 1u, p.T - 1u));
    for (uint hh = 0u; hh < group; hh++) {
        uint h = kh * group + hh;
        for (uint t0 = s0; t0 < past; t0 += BLK) {
            barrier(); // the last block's readers are done
            load_rows(b, h, t0, lid);
            barrier();
            scores(t0, s0, lid);
            barrier();
            for (uint qi = 0u; qi < BLK; qi++)
                for (uint i = 0u; i < 4u; i++) {
                    uint kj = tr * 4u + i;
                    bool ok = allowed(t0, qi, s0, kj);
                    float dss = Ss[qi][kj], pr = Ps[qi][kj];
                    for (uint c = 0u; c < DPT; c++) {
                        uint d = min(td + TD * c, HD - 1u);
                        precise float x = dss * Qs[qi][d];
                        precise float an = acc[i][c] + x;
                        acc[i][c] = ok ? an : acc[i][c];
                        precise float y = pr * Os[qi][d];
                        precise float bn = acc2[i][c] + y;
                        acc2[i][c] = ok ? bn : acc2[i][c];
                    }
                }
        }
    }
    for (uint i = 0u; i < 4u; i++) {
        if (s0 + tr * 4u + i >= p.T)
            continue;
        for (uint c = 0u; c < DPT; c++) {
            uint d = td + TD * c;
            if (d < HD) {
                dk[gk[i] + d] = acc[i][c];
                dv[gv[i] + d] = acc2[i][c];
            }
        }
    }
#else
    if (wg >= p.B * p.H * nb)
        return; // the whole workgroup
    uint qb = wg % nb, h = (wg / nb) % p.H, b = wg / (nb * p.H), kh = h / (p.H / p.KVH), t0 = qb * BLK;
    // keys from the block of the first row's first key up to the rows'
    // last (their future is masked)
    uint first = key_first(b, t0) / BLK * BLK, end = min(t0 + BLK, p.T);
    uint go[4];
    for (uint i = 0u; i < 4u; i++) {
        go[i] = qidx(b, min(t0 + tr * 4u + i, p.T - 1u), h) - p.q_off + p.g1_off;
        for (uint c = 0u; c < DPT; c++)
            acc[i][c] = dq[go[i] + min(td + TD * c, HD - 1u)];
    }
    load_rows(b, h, t0, lid);
    for (uint s0 = first; s0 < end; s0 += BLK) {
        barrier(); // the last block's readers are done
        load_keys(b, kh, s0, lid);
        barrier();
        scores(t0, s0, lid);
        barrier();
        for (uint kj = 0u; kj < BLK; kj++)
            for (uint i = 0u; i < 4u; i++) {
                uint qi = tr * 4u + i;
                bool ok = allowed(t0, qi, s0, kj);
                float dss = Ss[qi][kj];
                for (uint c = 0u; c < DPT; c++) {
                    precise float x = dss * Ks[kj][min(td + TD * c, HD - 1u)];
                    precise float an = acc[i][c] + x;
                    acc[i][c] = ok ? an : acc[i][c];
                }
            }
    }
    for (uint i = 0u; i < 4u; i++) {
        if (t0 + tr * 4u + i >= p.T)
            continue;
        for (uint c = 0u; c < DPT; c++) {
            uint d = td + TD * c;
            if (d < HD)
                dq[go[i] + d] = acc[i][c];
        }
    }
#endif
}
