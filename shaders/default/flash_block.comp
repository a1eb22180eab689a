#version 450
#extension GL_EXT_control_flow_attributes : enable
// variant: dkv32x32_storage_scalar -DSTAGE=0 -DHDMAX=32u -DBLK=32u
// variant: dkv64x32_storage_scalar -DSTAGE=0 -DHDMAX=64u -DBLK=32u
// variant: dkv64x16_storage_scalar -DSTAGE=0 -DHDMAX=64u -DBLK=16u
// variant: dkv128x16_storage_scalar -DSTAGE=0 -DHDMAX=128u -DBLK=16u
// variant: dkv128x8_storage_scalar -DSTAGE=0 -DHDMAX=128u -DBLK=8u
// variant: dk64x16_storage_scalar -DSTAGE=0 -DHDMAX=64u -DBLK=16u -DDKV_PART=1
// variant: dv64x16_storage_scalar -DSTAGE=0 -DHDMAX=64u -DBLK=16u -DDKV_PART=2
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
// flash_block: flash attention as GPUs want it (the default mode,
// storage family), beside flash_attention.comp's one-row kernels. The same
// results to float rounding, with its sums in another order:
//   fwd (a workgroup per sequence b, head h, block of BLK query rows from
//       t0): the rows' q in shared memory; for each block of BLK keys of
//       the walk up to the rows' last, keys and values in shared memory,
//       the BLK x BLK scores (register tiles) into shared memory, then the
//       online softmax one invocation per row (the block's max, the old
//       state's factor, the weights in place of the scores), and each
//       invocation's 4 rows x DPT columns of the output rescaled and added
//       the weights times the values. It saves out = acc / l and
//       lse = m + log l, and resumes from them where the walk is cut, as
//       flash_attention.comp's forward does.
//   dkv (a workgroup per sequence b, kv head kh, block of BLK keys from
//       s0): the block's keys and values in shared memory; then for each
//       query head h of the group and each block of BLK query rows t0.. of
//       the walk (t >= s0): the rows' q, do and statistics (lse, D) in
//       shared memory, the BLK x BLK scores s = scale·q·k and dP = do·v
//       (each invocation an SR x SR tile of them, from shared memory),
//       P = exp(s − lse) and dS = P·(dP − D) where the key is allowed (its
//       past, its window, its document, the walk's rows; 0 elsewhere) into shared
//       memory, and each invocation adds P^T·do and dS^T·q into its 4 keys
//       x DPT head columns of dv and dk, kept in registers to the end:
//       dk += scale·Σ dS·q, dv += Σ P·do.
//   dq  (a workgroup per b, h, block of BLK query rows): the rows' q, do and
//       statistics once; for each block of BLK keys of the walk up to the
//       rows' last: keys and values in shared memory, dS as above, and each
//       invocation adds dS·k into its 4 rows x DPT columns of dq:
//       dq += scale·Σ dS·k.
// One row kernel per key (flash_attention.comp, dk and dv) read every query
// row's q and do from memory for every key and kept four head vectors per
// invocation: on an NVIDIA H200 the backward was 80% of a GPT-2 step. Here
// each q, do, k, v element read from memory serves BLK keys or rows, and
// the products run from shared memory in register tiles.
// The walk (query rows in dkv, keys in dq) covers [w0, w1) in one dispatch,
// as in flash_attention.comp: positions outside it get weight 0, and dq,
// dk, dv accumulate (+=), so a host may cut it anywhere (llvmpipe's loop
// limit, tests). Bindings and indices are the row kernels': q, k, v, do,
// the (lse, D) statistics, the document ids, then dq or dk and dv, all
// storage buffers of floats (any offset and stride).
// dk and dv (DKV_PART 1 and 2, at 64x16 only; VKTRAIN_FLASH_DKV=split):
// dkv's walk twice, each computing one of the two gradients (dv: P alone,
// no dP), each invocation keeping half the accumulators. An experiment
// for GPUs: on an H200 dkv took 2.35x dq's time where its operations are
// about 1.35x; if the second accumulator tile is what slows it (registers),
// the two halves run faster together than dkv.
// Variants <stage><HDMAX>x<BLK>: head sizes up to HDMAX, blocks of BLK;
// score tiles of SR = BLK / 8 (4, 2 or 1) square, accumulators of 4 rows
// x DPT = HDMAX / (256 / BLK) columns (8 at 64x32 and 128x16, else 4)
// (attention_block.glsl).
// Shared memory: BLK rows of head arrays padded to HDMAX + 1 floats (no
// two invocations of a tile's row or column on one bank; four in the
// backward, three in fwd) and BLK x BLK tiles (two in dkv, one otherwise):
// dkv at most 42,240 bytes at 64x32 and 35,456 at 128x16, within the 48 KB
// NVIDIA's drivers give a workgroup (AMD's and Intel's 64 KB); 64x16 and
// 128x8 take half that, for devices with 32 KB (lavapipe, Apple's), and
// 32x32 (heads up to 32) 25,856; fwd at most 29,824. The host takes 32
// rows at head sizes up to 32, 16 up to 64 (on an H200 64x16 ran the
// backward 1.9x faster than 64x32), 8 up to 128 (128x8 1.55x faster than
// 128x16), fewer where the shared memory is short (op_flash_attention.c,
// block_kernels).
#ifndef DKV_PART
#define DKV_PART 0 // dkv: both gradients; 1 dk, 2 dv alone
#endif
#define WANT_DK (STAGE == 0 && DKV_PART != 2)
#define WANT_DV (STAGE == 0 && DKV_PART != 1)
#include "finite.glsl"
#include "softcap.glsl"
#include "attention_block.glsl"

// Packed documents: a pair of blocks where no row sees any key (the keys'
// documents all end before the rows' begin, or start after them) adds
// nothing (its weights are all 0), and is skipped. block_live: whether the
// pair has a row and key that see each other, each invocation checking its
// SR x SR tile. Called by every invocation after the block's rows and keys
// reached shared memory and a barrier, with block_live reset to 0 before
// that barrier; ends with a barrier.
shared uint block_live;
bool block_has_pairs(uint t0, uint s0, uint lid)
{
    uint sq = lid / 8u, sk = lid % 8u;
    bool any = false;
    [[unroll]] for (uint i = 0u; i < SR; i++)
        [[unroll]] for (uint j = 0u; j < SR; j++) any = any || allowed(t0, sq * SR + i, s0, sk * SR + j);
    if (any)
        atomicOr(block_live, 1u);
    barrier();
    return block_live != 0u;
}

#if STAGE != 2
// P and dS of the invocation's tile of query rows t0.. x keys s0.. into Ps
// and Ss (0 where not allowed).
void scores(uint t0, uint s0, uint lid)
{
    uint sq = lid / 8u, sk = lid % 8u;
    float sa[SR][SR], da[SR][SR];
    [[unroll]] for (uint i = 0u; i < SR; i++)
        [[unroll]] for (uint j = 0u; j < SR; j++) sa[i][j] = 0.0, da[i][j] = 0.0;
    for (uint d = 0u; d < HD; d++) {
        float qv[SR], ov[SR], kv[SR], vv[SR];
        [[unroll]] for (uint i = 0u; i < SR; i++) qv[i] = Qs[sq * SR + i][d], ov[i] = Os[sq * SR + i][d];
        [[unroll]] for (uint j = 0u; j < SR; j++) kv[j] = Ks[sk * SR + j][d], vv[j] = Vs[sk * SR + j][d];
        [[unroll]] for (uint i = 0u; i < SR; i++)
            [[unroll]] for (uint j = 0u; j < SR; j++) {
                sa[i][j] += qv[i] * kv[j];
#if !(STAGE == 0 && DKV_PART == 2) // dv alone: no dP
                da[i][j] += ov[i] * vv[j];
#endif
            }
    }
    [[unroll]] for (uint i = 0u; i < SR; i++)
        [[unroll]] for (uint j = 0u; j < SR; j++) {
            uint qi = sq * SR + i, kj = sk * SR + j;
            bool ok = allowed(t0, qi, s0, kj);
            float sc = softcap(sa[i][j] * p.scale, p.softcap), pr = ok ? exp(sc - row_lse[qi]) : 0.0;
#if WANT_DV
            Ps[qi][kj] = pr;
#endif
#if !(STAGE == 0 && DKV_PART == 2)
            Ss[qi][kj] = ok ? pr * (da[i][j] - row_d[qi]) * softcap_slope(sc, p.softcap) : 0.0;
#endif
        }
}
#endif

void main()
{
    uint nb = (p.T + BLK - 1u) / BLK, wg = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
    uint tr = lid / TD, td = lid % TD;
    float acc[4][DPT];
#if STAGE == 0
    float acc2[4][DPT];
#endif
    [[unroll]] for (uint i = 0u; i < 4u; i++)
        [[unroll]] for (uint c = 0u; c < DPT; c++) {
            acc[i][c] = 0.0;
#if STAGE == 0
            acc2[i][c] = 0.0;
#endif
        }
#if STAGE == 2
    if (wg >= p.B * p.H * nb)
        return; // the whole workgroup
    uint qb = wg % nb, h = (wg / nb) % p.H, b = wg / (nb * p.H), kh = h / (p.H / p.KVH), t0 = qb * BLK;
    // key blocks of the walk from the first row's window up to the rows'
    // last (their future is masked)
    uint first = max(p.w0, window_first(t0)) / BLK * BLK, end = min(min(t0 + BLK, p.T), p.w1);
    if (first >= end)
        return;
    for (uint e = lid; e < BLK * HD; e += 64u) {
        uint i = e / HD, d = e % HD;
        Qs[i][d] = q[qidx(b, min(t0 + i, p.T - 1u), h) + d];
    }
    // a row resumes where an earlier part of the walk left it: m = lse,
    // l = 1, acc = out
    if (lid < BLK) {
        uint t = min(t0 + lid, p.T - 1u), r = p.l_off + ridx(b, h, t);
        bool resume = p.w0 > 0u && t0 + lid < p.T && lse[r] > NO_SCORE;
        row_m[lid] = resume ? lse[r] : NO_SCORE;
        row_l[lid] = resume ? 1.0 : 0.0;
        row_doc[lid] = doc_of(b, t);
    }
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint t = min(t0 + tr * 4u + i, p.T - 1u), r = p.l_off + ridx(b, h, t);
        bool resume = p.w0 > 0u && t0 + tr * 4u + i < p.T && lse[r] > NO_SCORE;
        [[unroll]] for (uint c = 0u; c < DPT; c++)
            acc[i][c] = resume ? o[oidx(b, t, h) + min(td + TD * c, HD - 1u)] : 0.0;
    }
    uint sq = lid / 8u, sk = lid % 8u;
    for (uint s0 = first; s0 < end; s0 += BLK) {
        barrier(); // the last block's readers are done
        if (lid == 0u)
            block_live = 0u;
        load_keys(b, kh, s0, lid);
        barrier();
        if (p.has_doc != 0u && !block_has_pairs(t0, s0, lid))
            continue;
        float sa[SR][SR];
        [[unroll]] for (uint i = 0u; i < SR; i++)
            [[unroll]] for (uint j = 0u; j < SR; j++) sa[i][j] = 0.0;
        for (uint d = 0u; d < HD; d++) {
            float qv[SR], kv[SR];
            [[unroll]] for (uint i = 0u; i < SR; i++) qv[i] = Qs[sq * SR + i][d];
            [[unroll]] for (uint j = 0u; j < SR; j++) kv[j] = Ks[sk * SR + j][d];
            [[unroll]] for (uint i = 0u; i < SR; i++)
                [[unroll]] for (uint j = 0u; j < SR; j++) sa[i][j] += qv[i] * kv[j];
        }
        [[unroll]] for (uint i = 0u; i < SR; i++)
            [[unroll]] for (uint j = 0u; j < SR; j++) Ss[sq * SR + i][sk * SR + j] = softcap(sa[i][j] * p.scale, p.softcap);
        barrier();
        // the online softmax, one invocation per row: the max over the
        // block's allowed keys, the old state's factor a (exactly 1 where
        // the max stays, 0 before any key), each key's weight in place of
        // its score (0 where not allowed)
        if (lid < BLK) {
            float mo = row_m[lid], mn = mo, le = 0.0;
            for (uint kj = 0u; kj < BLK; kj++)
                mn = allowed(t0, lid, s0, kj) ? max(mn, Ss[lid][kj]) : mn;
            float a = row_l[lid] > 0.0 ? (mn > mo ? exp(mo - mn) : 1.0) : 0.0;
            for (uint kj = 0u; kj < BLK; kj++) {
                float e = allowed(t0, lid, s0, kj) ? exp(Ss[lid][kj] - mn) : 0.0;
                Ss[lid][kj] = e;
                le += e;
            }
            row_l[lid] = row_l[lid] * a + le;
            row_m[lid] = mn;
            row_a[lid] = a;
        }
        barrier();
        float ra[4];
        [[unroll]] for (uint i = 0u; i < 4u; i++) ra[i] = row_a[tr * 4u + i];
        [[unroll]] for (uint i = 0u; i < 4u; i++)
            [[unroll]] for (uint c = 0u; c < DPT; c++) acc[i][c] *= ra[i];
        for (uint kj = 0u; kj < BLK; kj++) {
            float ev[4];
            [[unroll]] for (uint i = 0u; i < 4u; i++) ev[i] = Ss[tr * 4u + i][kj];
            [[unroll]] for (uint c = 0u; c < DPT; c++) {
                float vd = Vs[kj][min(td + TD * c, HD - 1u)];
                [[unroll]] for (uint i = 0u; i < 4u; i++) acc[i][c] += ev[i] * vd;
            }
        }
    }
    // (row_l and row_m: written before the last barrier)
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint qi = tr * 4u + i, t = t0 + qi;
        if (t >= p.T)
            continue;
        float l = row_l[qi], inv = l > 0.0 ? 1.0 / l : 0.0;
        uint oo = oidx(b, t, h);
        [[unroll]] for (uint c = 0u; c < DPT; c++) {
            uint d = td + TD * c;
            if (d < HD)
                o[oo + d] = acc[i][c] * inv;
        }
    }
    if (lid < BLK && t0 + lid < p.T) {
        float l = row_l[lid];
        lse[p.l_off + ridx(b, h, t0 + lid)] = l > 0.0 ? row_m[lid] + log(l) : NO_SCORE;
    }
#elif STAGE == 0
    if (wg >= p.B * p.KVH * nb)
        return; // the whole workgroup
    uint kb = wg % nb, kh = (wg / nb) % p.KVH, b = wg / (nb * p.KVH), s0 = kb * BLK, group = p.H / p.KVH;
    // query blocks aligned to BLK from the block's first key (its past has
    // no query row that sees it) to the last that its last key's window
    // reaches
    uint first = max(s0, p.w0 / BLK * BLK), end = min(p.w1, window_past(s0 + BLK - 1u));
    if (first >= end)
        return;
    load_keys(b, kh, s0, lid);
    for (uint hh = 0u; hh < group; hh++) {
        uint h = kh * group + hh;
        for (uint t0 = first; t0 < end; t0 += BLK) {
            barrier(); // the last block's readers are done
            if (lid == 0u)
                block_live = 0u;
            load_rows(b, h, t0, lid);
            barrier();
            if (p.has_doc != 0u && !block_has_pairs(t0, s0, lid))
                continue;
            scores(t0, s0, lid);
            barrier();
            for (uint qi = 0u; qi < BLK; qi++) {
                float pv[4], sv[4];
                [[unroll]] for (uint i = 0u; i < 4u; i++) {
#if WANT_DV
                    pv[i] = Ps[qi][tr * 4u + i];
#endif
#if WANT_DK
                    sv[i] = Ss[qi][tr * 4u + i];
#endif
                }
                [[unroll]] for (uint c = 0u; c < DPT; c++) {
                    uint d = min(td + TD * c, HD - 1u); // columns past HD: not stored
                    float qd = Qs[qi][d], od = Os[qi][d];
                    [[unroll]] for (uint i = 0u; i < 4u; i++) {
#if WANT_DK
                        acc[i][c] += sv[i] * qd;
#endif
#if WANT_DV
                        acc2[i][c] += pv[i] * od;
#endif
                    }
                }
            }
        }
    }
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint s = s0 + tr * 4u + i;
        if (s >= p.T)
            continue;
        uint gk = kidx(b, s, kh) - p.k_off + p.g1_off, gv = vidx(b, s, kh) - p.v_off + p.g2_off;
        [[unroll]] for (uint c = 0u; c < DPT; c++) {
            uint d = td + TD * c;
            if (d < HD) {
#if WANT_DK
                dk[gk + d] += p.scale * acc[i][c];
#endif
#if WANT_DV
                dv[gv + d] += acc2[i][c];
#endif
            }
        }
    }
#else
    if (wg >= p.B * p.H * nb)
        return; // the whole workgroup
    uint qb = wg % nb, h = (wg / nb) % p.H, b = wg / (nb * p.H), kh = h / (p.H / p.KVH), t0 = qb * BLK;
    // key blocks of the walk from the first row's window up to the rows'
    // last (their future is masked)
    uint first = max(p.w0, window_first(t0)) / BLK * BLK, end = min(min(t0 + BLK, p.T), p.w1);
    if (first >= end)
        return;
    load_rows(b, h, t0, lid);
    for (uint s0 = first; s0 < end; s0 += BLK) {
        barrier(); // the last block's readers are done
        if (lid == 0u)
            block_live = 0u;
        load_keys(b, kh, s0, lid);
        barrier();
        if (p.has_doc != 0u && !block_has_pairs(t0, s0, lid))
            continue;
        scores(t0, s0, lid);
        barrier();
        for (uint kj = 0u; kj < BLK; kj++) {
            float sv[4];
            [[unroll]] for (uint i = 0u; i < 4u; i++) sv[i] = Ss[tr * 4u + i][kj];
            [[unroll]] for (uint c = 0u; c < DPT; c++) {
                float kd = Ks[kj][min(td + TD * c, HD - 1u)];
                [[unroll]] for (uint i = 0u; i < 4u; i++) acc[i][c] += sv[i] * kd;
            }
        }
    }
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint t = t0 + tr * 4u + i;
        if (t >= p.T)
            continue;
        uint go = qidx(b, t, h) - p.q_off + p.g1_off;
        [[unroll]] for (uint c = 0u; c < DPT; c++) {
            uint d = td + TD * c;
            if (d < HD)
                dq[go + d] += p.scale * acc[i][c];
        }
    }
#endif
}
