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
// variant: max8_texel_vec4 -DSTAGE=0 -DTEXEL=1 -DVEC4=1 -DNR=8u
// variant: fused4_texel_vec4 -DSTAGE=6 -DTEXEL=1 -DVEC4=1 -DNR=4u
// repro_attention: the reproducible attention's forward stages (max,
// sum, acc, fused: STAGE 0, 1, 2, 6); repro_attention.glsl describes them
// all and holds what they share with the backward (repro_attention_bwd.comp).
#include "repro_attention.glsl"

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
    for (uint s = max(p.w0, key_first(b, t[0])); s < end; s++) {
        bool ok[NR], any = false;
        int ds = doc_of(b, s);
        for (uint u = 0u; u < NR; u++) {
            ok[u] = live[u] && s <= t[u] && in_window(t[u], s) && ds == d[u];
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
    // The pending subtrees at w0 come back from out's row. The walk starts
    // at the row's first key: where that is past w0, the row takes no key
    // before it, so its pending subtrees there (those loaded and those of
    // the part's keys before it) are sums of +0 leaves, +0 as set here.
    float m[NR];
    for (uint u = 0u; u < NR; u++) {
        m[u] = lse[p.l_off + r[u]];
        for (uint level = 0u; level < 32u; level++)
            stack[u][level] = 0.0f;
        for (uint level = p.wlog; level < 32u; level++)
            if (((p.w0 >> level) & 1u) != 0u)
                stack[u][level] = o[oo[u] + level - p.wlog];
    }
    for (uint s = max(p.w0, key_first(b, t[0])); s < end; s++) {
        bool ok[NR], push[NR], any = false;
        int ds = doc_of(b, s);
        for (uint u = 0u; u < NR; u++) {
            ok[u] = live[u] && s <= t[u] && in_window(t[u], s) && ds == d[u];
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
            ok[u] = (s) < end && live[u] && (s) <= t[u] && in_window(t[u], (s)) && ds == d[u];          \
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
    // cut) from the group of the first row's first key (the pending
    // subtrees before it, of +0 leaves only, are +0), one loop step each:
    // each row's eight leaves e (+0 for a key not allowed or past the
    // walk) make the tree's three lowest levels,
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
    uint g0 = p.w0 == 0u ? key_first(b, t[0]) / RK * RK : p.w0;
    for (uint u = 0u; u < NR; u++)
        for (uint level = 0u; level < 32u; level++)
            stack[u][level] = 0.0f;
    for (uint s8 = g0; s8 < end; s8 += RK) {
        bool ok[NR][RK], any = false;
        uint ks[RK];
        for (uint q = 0u; q < RK; q++) {
            ks[q] = min(s8 + q, end - 1u);
            int ds = doc_of(b, ks[q]);
            for (uint u = 0u; u < NR; u++) {
                ok[u][q] = s8 + q < end && live[u] && s8 + q <= t[u] && in_window(t[u], s8 + q) && ds == d[u];
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
    for (uint s = max(p.w0, key_first(b, t[0])); s < end; s++) {
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
#endif
