#version 450
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
// variant: dq2_texel_vec4 -DSTAGE=4 -DTEXEL=1 -DVEC4=1 -DNR=2u
// variant: dkv2_texel_vec4 -DSTAGE=5 -DTEXEL=1 -DVEC4=1 -DNR=2u
// variant: dq4_texel_vec4 -DSTAGE=4 -DTEXEL=1 -DVEC4=1 -DNR=4u
// variant: dkv4_texel_vec4 -DSTAGE=5 -DTEXEL=1 -DVEC4=1 -DNR=4u
// repro_attention_bwd: the reproducible attention's backward stages (rows,
// dq, dkv: STAGE 3, 4, 5); repro_attention.glsl describes them all and
// holds what they share with the forward (repro_attention.comp).
#include "repro_attention.glsl"

#if STAGE == 3
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
    for (uint s = max(p.w0, key_first(b, t[0])); s < end; s++) {
        bool ok[NR], any = false;
        int ds = doc_of(b, s);
        for (uint u = 0u; u < NR; u++) {
            ok[u] = live[u] && s <= t[u] && in_window(t[u], s) && ds == d[u];
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
// mode's do (flash_attention.comp), since four head vectors per row
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
        // the query rows from the first key's to the last key's last row
        uint lo = max(sr[0], p.w0 > base ? p.w0 - base : 0u), hi = min(min(p.T, p.w1 - base), query_past(b, sr[NR - 1u]));
        for (uint t = lo; t < hi; t++) {
            bool ok[NR], any = false;
            int dt = doc_of(b, t);
            for (uint u = 0u; u < NR; u++) {
                ok[u] = live[u] && t >= sr[u] && in_window(t, sr[u]) && dt == d[u];
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
