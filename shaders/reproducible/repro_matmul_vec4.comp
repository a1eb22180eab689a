#version 450
// variant: nt -DLAYOUT_NT=1
// variant: nt_bias -DLAYOUT_NT=1 -DBIAS=1
// variant: nn -DLAYOUT_NN=1
// variant: nt_img -DLAYOUT_NT=1 -DIMG_C=1
// variant: nt_bias_img -DLAYOUT_NT=1 -DBIAS=1 -DIMG_C=1
// variant: nn_img -DLAYOUT_NN=1 -DIMG_C=1
// variant: tn -DLAYOUT_TN=1
// variant: tn_seg -DLAYOUT_TN=1 -DSEGMENTS=1
// variant: nn_shift -DLAYOUT_NN=1 -DSHIFT_A=1
// variant: tn_shift -DLAYOUT_TN=1 -DSHIFT_A=1
// variant: tn_shift_seg -DLAYOUT_TN=1 -DSHIFT_A=1 -DSEGMENTS=1
// variant: tn_wide -DLAYOUT_TN=1 -DWIDE=1
// variant: nn_img_wide -DLAYOUT_NN=1 -DIMG_C=1 -DWIDE=1
// variant: tn_shift_wide -DLAYOUT_TN=1 -DSHIFT_A=1 -DWIDE=1
// variant: tn_seg_wide -DLAYOUT_TN=1 -DSEGMENTS=1 -DWIDE=1
// variant: tn_shift_seg_wide -DLAYOUT_TN=1 -DSHIFT_A=1 -DSEGMENTS=1 -DWIDE=1
// variant: tn_seg2 -DLAYOUT_TN=1 -DSEGMENTS=1 -DPAIRS=1
// variant: tn_seg2_wide -DLAYOUT_TN=1 -DSEGMENTS=1 -DPAIRS=1 -DWIDE=1
// variant: tn_shift_seg2 -DLAYOUT_TN=1 -DSHIFT_A=1 -DSEGMENTS=1 -DPAIRS=1
// variant: tn_shift_seg2_wide -DLAYOUT_TN=1 -DSHIFT_A=1 -DSEGMENTS=1 -DPAIRS=1 -DWIDE=1
// repro_matmul_vec4: the reproducible matmul for CPU devices (the texel
// family) where the operands' rows are whole RGBA32F texels: each
// invocation owns 16 rows x two vec4 of columns of C (NC below), 8x8
// invocations (a workgroup: 128 rows x 64 columns), the access pattern of
// the default texel kernels (matmul_common.glsl). The order of repro_matmul.glsl: each
// output is one component of a vec4 accumulator, and every vec4 operation
// is the same operation on each component, rounded on its own; a vec4
// fetched along k is consumed x, y, z, w in that order, so every output
// takes acc = acc + A(i,k)·B(k,j) for k = 0, 1, …, K−1.
// src/repro/repro_matmul.c picks it when, in the product's terms (strides
// and the bases a0, b0 in floats, multiples of 4):
//   nt: A(i,k) = A[a0 + i·sai + k], B(k,j) = B[b0 + k + j·sbj]; K, sai, sbj % 4 = 0
//   nn: A(i,k) = A[a0 + i·sai + k], B(k,j) = B[b0 + k·sbk + j]; K, sai, sbk % 4 = 0
//   tn: A(i,k) = A[a0 + i + k·sak], B(k,j) = B[b0 + k·sbk + j]; sak, sbk % 4 = 0
// SHIFT_A (nn and tn): A at any float offset and stride (the LM head's
// dlogits, rows of V floats): four floats from two texels, moved by the
// offset's remainder, and in nn the last K % 4 values of k one at a time;
// B and a0..b0 as above for B.
// SEGMENTS (tn, a parameter's gradient; src/repro/repro_samples.c): k runs
// over the rows of a micro-batch of samples of seg_rows rows each (0: one
// sum), this dispatch's k = 0 being row seg_first. After each sample's
// last row, each output joins the tree over samples as repro_push.comp
// does, on the stack S4 (levels floats per output in groups of four
// outputs, include/vktrain/repro.h: the invocation's four columns of a row
// are one texel of each level; N % 4 == 0; the block's first group at
// texel s0), and restarts at +0. S4 is an RGBA32F storage texel buffer:
// llvmpipe gathers a texel for its 8 lanes, where a storage buffer's vec4
// is 32 scalar accesses (1.3x faster tn over 16 samples). The variants
// without SEGMENTS have no stack and no push.
// PAIRS (with SEGMENTS, "_seg2"): samples two at a time, where the
// dispatch's rows are whole pairs (an even sample's first row to an odd
// one's last) and seg_rows % 4 == 0 (src/repro/repro_matmul.c checks):
// the even sample's sum is kept aside (a private copy) while the odd one
// is summed from +0, and the pair's sum even + odd (the tree's lowest
// level, the sum the push after the odd sample makes from the stack's
// level 0) is pushed from level 1: half the pushes, whose stack loads
// and stores (a texel per lane each on llvmpipe) cost the in-loop push
// about a third of the tn's speed over 16 samples of 128 rows (44 GFLOP/s
// against 61 without the push code, bench_matmul 2048 384 128 on
// lavapipe). The same operations in the same order, so the same bits.
// In-process alternation (bench_matmul ... tn 16 3): 1.07-1.27x faster at
// the default recipe's weight gradients, 0.94-1.11x at GPT-2's over 4
// samples of 64 rows. The pair's two loops are written out: a loop over
// the two ran no faster than the single push, nor did keeping the
// stack's lowest levels in private arrays or a workgroup per sample (z)
// with the push in a pass of its own.
// BIAS (nt, a dispatch that takes the whole of k): each output then adds
// bias[column] (binding 3, an R32F view) as it is stored, the addition
// op_bias_add's reproducible kernel would make after the product.
// IMG_C (nt, nt with BIAS, nn; "_img"): C is an RGBA32F storage texel
// buffer (binding 2; N, C's base and the offset of every stored group
// multiples of 4), each output group loaded and stored as one texel, and
// accumulate is specialization constant 0 (ACCUMULATE), so a product that
// overwrites reads no output; the output's size and base are read before
// the first branch (on llvmpipe a push constant first read inside a
// branch that not every lane takes is a per-lane gather, each time). The
// same operations, the same bits; in-process alternation on lavapipe
// (bench_matmul ... compare): nt, nt with bias and nn 1.05-1.15x.
// Rows and columns past the edge read clamped (or the rest of a texel)
// and are not stored. The row loops are spelt out by EACH_ROW (no
// [[unroll]]: see repro_matmul.glsl) so every accumulator stays a register.
#include "repro_matmul.glsl"
#if IMG_C
layout(binding = 2, rgba32f) uniform imageBuffer C4;
#endif
layout(local_size_x = 8, local_size_y = 8) in;
layout(binding = 0) uniform samplerBuffer A;
layout(binding = 1) uniform samplerBuffer B;
#if SEGMENTS
layout(binding = 3, rgba32f) uniform imageBuffer S4;
#endif
#if BIAS
layout(binding = 3) uniform samplerBuffer Bias;
#endif

#define EACH_ROW(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define EACH_C(X) X(0) X(1) X(2) X(3)

#if SHIFT_A
// The four floats of A from float f (moved, not computed: exact); past
// the view's end they repeat its last texel, for outputs not stored.
vec4 a_at(uint f, uint last)
{
    uint t = f >> 2u, r = f & 3u;
    vec4 lo = texelFetch(A, int(min(t, last))), hi = texelFetch(A, int(min(t + 1u, last)));
    return r == 0u ? lo : r == 1u ? vec4(lo.yzw, hi.x) : r == 2u ? vec4(lo.zw, hi.xy) : vec4(lo.w, hi.xyz);
}
#define A4(f) a_at(f, alast)
#else
#define A4(f) texelFetch(A, int((f) >> 2))
#endif

// NC groups of 4 columns per invocation, j0 + 32·g for g < NC (the 8
// lanes of a row of invocations read neighbouring texels of B in each): a
// workgroup takes 128 rows x 32·NC columns, and each fetch of A serves NC
// times the multiplies (NC 2 against one group, bench_matmul at the
// default recipe's sizes on lavapipe: nt, nn and tn 1.1-1.7x faster, with
// AVX-512 and with AVX2 only).
// Past N, a group reads the first group's columns and is not stored.
// (NC 4, 16x16 per invocation as the default kernels: slower at the
// default recipe's sizes, which then leave too few workgroups; measured
// again by in-process alternation, bench_matmul 2048 512 128: nt 0.74x,
// nn 0.94x, nt with bias 0.82x of NC 2.) WIDE (tn, and nn with IMG_C):
// NC 4, a workgroup 128 x 128, which src/repro/repro_matmul.c picks where
// that leaves a workgroup for each thread of the CPU device: each fetch
// of A then serves 16 columns (2048 rows, in-process alternation on
// lavapipe, this build: tn over 16 samples
// 1.1-1.8x faster at 352 x 128, 128 x 352 and GPT-2's 768 x 768, slower
// where it leaves one workgroup; nn 1.0-1.3x; nt 0.45-0.9x, not used).
#if WIDE
#define NC 4u
#define EACH_G1(X) X(0) X(1) X(2) X(3)
#define EACH_G(X, r) X(r, 0) X(r, 1) X(r, 2) X(r, 3)
#define EACH_G2(X, r, q) X(r, q, 0) X(r, q, 1) X(r, q, 2) X(r, q, 3)
#else
#define NC 2u
#define EACH_G1(X) X(0) X(1)
#define EACH_G(X, r) X(r, 0) X(r, 1)
#define EACH_G2(X, r, q) X(r, q, 0) X(r, q, 1)
#endif
#if IMG_C
layout(constant_id = 0) const uint ACCUMULATE = 0u;
#define ACC_ON (ACCUMULATE != 0u)
#else
#define ACC_ON (p.accumulate != 0u)
#endif

void main()
{
#if IMG_C
    uint m_rows = p.M, n_cols = p.N, c_base = p.c0; // (IMG_C above)
#else
#define m_rows p.M
#define n_cols p.N
#define c_base p.c0
#endif
    uint i0 = (gl_WorkGroupID.y * 8u + gl_LocalInvocationID.y) * 16u;
    uint j0 = (gl_WorkGroupID.x * 8u * NC + gl_LocalInvocationID.x) * 4u;
    if (i0 >= m_rows || j0 >= n_cols)
        return;
    // jg: group g's first column (j0 where it is past N: not stored)
    uint jg[NC];
    bool live[NC];
#define G_INIT(g)                                                                                       \
    live[g] = j0 + 32u * g < n_cols;                                                                    \
    jg[g] = live[g] ? j0 + 32u * g : j0;
    EACH_G1(G_INIT)
    precise vec4 acc[16 * NC];
#if IMG_C
#define ROW_INIT(r, g)                                                                                  \
    {                                                                                                   \
        uint ct = (c_base + min(i0 + r, m_rows - 1u) * n_cols + jg[g]) >> 2;                            \
        acc[16 * g + r] = ACC_ON && live[g] ? imageLoad(C4, int(ct)) : vec4(0.0f);                      \
    }
#else
#define ROW_INIT(r, g)                                                                                  \
    {                                                                                                   \
        uint ci = c_base + min(i0 + r, m_rows - 1u) * n_cols, jj = jg[g], nl = n_cols - 1u;             \
        acc[16 * g + r] = ACC_ON && live[g] ? vec4(C[ci + jj], C[ci + min(jj + 1u, nl)],                \
                                                   C[ci + min(jj + 2u, nl)], C[ci + min(jj + 3u, nl)])  \
                                            : vec4(0.0f);                                               \
    }
#endif
#define ROW_INIT_G(r) EACH_G(ROW_INIT, r)
    EACH_ROW(ROW_INIT_G)
#if LAYOUT_NT
    // Per 4 k: a vec4 along k of each row of A and of each column of B;
    // step q takes component q of each.
    uint ar[16], bc[4 * NC];
#define NT_AR(r) ar[r] = (p.a0 + min(i0 + r, m_rows - 1u) * p.sai) >> 2;
#define NT_BC(c, g) bc[4 * g + c] = (p.b0 + min(jg[g] + c, n_cols - 1u) * p.sbj) >> 2;
#define NT_BC_G(c) EACH_G(NT_BC, c)
    EACH_ROW(NT_AR)
    EACH_C(NT_BC_G)
    for (uint k4 = 0u; k4 < p.K >> 2; k4++) {
        vec4 b[4 * NC], a[16];
#define NT_B(c, g) b[4 * g + c] = texelFetch(B, int(bc[4 * g + c] + k4));
#define NT_B_G(c) EACH_G(NT_B, c)
#define NT_A(r) a[r] = texelFetch(A, int(ar[r] + k4));
        EACH_C(NT_B_G)
        EACH_ROW(NT_A)
#define NT_G(r, q, g)                                                                                   \
    {                                                                                                   \
        precise vec4 t = a[r].q * vec4(b[4 * g].q, b[4 * g + 1].q, b[4 * g + 2].q, b[4 * g + 3].q);     \
        acc[16 * g + r] = acc[16 * g + r] + t;                                                          \
    }
#define NT_ROW(r) EACH_G2(NT_G, r, x) EACH_G2(NT_G, r, y) EACH_G2(NT_G, r, z) EACH_G2(NT_G, r, w)
        EACH_ROW(NT_ROW)
    }
#elif LAYOUT_NN
    // Per 4 k: a vec4 along k of each row of A, the vec4 of columns of 4
    // rows of B; step q takes component q of A's and row q of B's. Each
    // row's A is fetched just before its products (one texel live, not
    // 16: nn 1.1-1.3x faster in bench_matmul's in-process alternation;
    // nt, whose loop has the same shape, was 1.0-1.4x slower that way).
    uint ar[16], alast = uint(textureSize(A)) - 1u, bt[NC], sbk = p.sbk >> 2;
#define NN_AR(r) ar[r] = p.a0 + min(i0 + r, m_rows - 1u) * p.sai;
#define NN_BT(g) bt[g] = (p.b0 + jg[g]) >> 2;
    EACH_ROW(NN_AR)
    EACH_G1(NN_BT)
    for (uint k4 = 0u; k4 < p.K >> 2; k4++) {
        vec4 b[4 * NC], a[16];
#define NN_B(q, g) b[4 * g + q] = texelFetch(B, int(bt[g] + (4u * k4 + q) * sbk));
#define NN_B_G(q) EACH_G(NN_B, q)
#define NN_A(r) a[r] = A4(ar[r] + 4u * k4);
        EACH_C(NN_B_G)
#define NN_G(r, q, g)                                                                                   \
    {                                                                                                   \
        precise vec4 t = a[r][q] * b[4 * g + q];                                                        \
        acc[16 * g + r] = acc[16 * g + r] + t;                                                          \
    }
#define NN_ROW(r) NN_A(r) EACH_G2(NN_G, r, 0) EACH_G2(NN_G, r, 1) EACH_G2(NN_G, r, 2) EACH_G2(NN_G, r, 3)
        EACH_ROW(NN_ROW)
    }
#if SHIFT_A
    // the last K % 4 values of k, in order
    for (uint k = p.K & ~3u; k < p.K; k++) {
        vec4 b[NC];
#define NN_TB(g) b[g] = texelFetch(B, int(bt[g] + k * sbk));
        EACH_G1(NN_TB)
#define NN_TAIL_G(r, g)                                                                                 \
    {                                                                                                   \
        precise vec4 t = ak * b[g];                                                                     \
        acc[16 * g + r] = acc[16 * g + r] + t;                                                          \
    }
#define NN_TAIL(r)                                                                                      \
    {                                                                                                   \
        float ak = A4(ar[r] + k).x;                                                                     \
        EACH_G(NN_TAIL_G, r)                                                                            \
    }
        EACH_ROW(NN_TAIL)
    }
#endif
#else
    // Per k: the 16 rows' A elements (4 texels along i, each clamped to
    // the row's last texel) and the vec4 of columns of B.
    uint bt[NC], sbk = p.sbk >> 2;
#define TN_BT(g) bt[g] = (p.b0 + jg[g]) >> 2;
    EACH_G1(TN_BT)
#if SHIFT_A
    // (with SHIFT_A the rows past M read on into the next k's: not stored)
    uint alast = uint(textureSize(A)) - 1u, fa = p.a0 + i0;
#define TN_A4(h, kk) A4(fa + 4u * h + (kk) * p.sak)
#else
    uint ah[4], sak = p.sak >> 2;
#define TN_AH(h) ah[h] = (p.a0 >> 2) + min((i0 >> 2) + h, (m_rows - 1u) >> 2);
    EACH_C(TN_AH)
#define TN_A4(h, kk) texelFetch(A, int(ah[h] + (kk) * sak))
#endif
    // Four k per loop step: first the B texels and the four A texels (16
    // rows) of each k, then row by row the four k in order, so a row's
    // accumulators take their four additions one after the other (the
    // order nt and nn have; k by k over all 16 rows measured 1.3x slower
    // on lavapipe, each addition likely a spill reload and store of a
    // loop-carried value); the last K % 4 one k at a time.
#define TN_G(r, g)                                                                                      \
    {                                                                                                   \
        precise vec4 t = a[r >> 2][r & 3] * b[g];                                                       \
        acc[16 * g + r] = acc[16 * g + r] + t;                                                          \
    }
#define TN_STEP(r) EACH_G(TN_G, r)
#define TN_K(kk)                                                                                        \
    {                                                                                                   \
        vec4 b[NC], a[4];                                                                               \
        for (uint g = 0u; g < NC; g++)                                                                  \
            b[g] = texelFetch(B, int(bt[g] + (kk) * sbk));                                              \
        a[0] = TN_A4(0u, kk);                                                                           \
        a[1] = TN_A4(1u, kk);                                                                           \
        a[2] = TN_A4(2u, kk);                                                                           \
        a[3] = TN_A4(3u, kk);                                                                           \
        EACH_ROW(TN_STEP)                                                                               \
    }
#define TN_U(r, u, g)                                                                                   \
    {                                                                                                   \
        precise vec4 t = a4[u][r >> 2][r & 3] * b4[g][u];                                               \
        acc[16 * g + r] = acc[16 * g + r] + t;                                                          \
    }
#define TN_RG(r, g) TN_U(r, 0, g) TN_U(r, 1, g) TN_U(r, 2, g) TN_U(r, 3, g)
#define TN_ROW4(r) EACH_G(TN_RG, r)
#define TN_K4(k4)                                                                                       \
    {                                                                                                   \
        vec4 b4[NC][4], a4[4][4];                                                                       \
        for (uint u = 0u; u < 4u; u++) {                                                                \
            for (uint g = 0u; g < NC; g++)                                                              \
                b4[g][u] = texelFetch(B, int(bt[g] + ((k4) + u) * sbk));                                \
            a4[u][0] = TN_A4(0u, (k4) + u);                                                             \
            a4[u][1] = TN_A4(1u, (k4) + u);                                                             \
            a4[u][2] = TN_A4(2u, (k4) + u);                                                             \
            a4[u][3] = TN_A4(3u, (k4) + u);                                                             \
        }                                                                                               \
        EACH_ROW(TN_ROW4)                                                                               \
    }
    // The push after sample j, repro_push.comp's loop with the levels
    // outermost (one loop, not one per output): the stack's first n
    // levels, n = the trailing 1 bits of j (at most levels), each added in
    // turn as S + acc; then, below the top, the sum stored at level n and
    // the accumulator back to +0.
#if SEGMENTS
#define TN_AT(r, g) (p.s0 + (((i0 + r) * n_cols + jg[g]) >> 2) * p.levels)
#define POP_G(r, g)                                                                                     \
    if (live[g]) {                                                                                      \
        precise vec4 s = imageLoad(S4, int(TN_AT(r, g) + l)) + acc[16 * g + r];                         \
        acc[16 * g + r] = s;                                                                            \
    }
#define POP_ROW(r)                                                                                      \
    if (i0 + r < m_rows) {                                                                              \
        EACH_G(POP_G, r)                                                                                \
    }
#define PUT_G(r, g)                                                                                     \
    if (live[g])                                                                                        \
        imageStore(S4, int(TN_AT(r, g) + n), acc[16 * g + r]);                                          \
    acc[16 * g + r] = vec4(0.0f);
#define PUT_ROW(r)                                                                                      \
    if (i0 + r < m_rows) {                                                                              \
        EACH_G(PUT_G, r)                                                                                \
    }
#endif
    uint k = 0u;
#if PAIRS
    vec4 even[16 * NC];
#define EVEN_KEEP(r, g)                                                                                 \
    even[16 * g + r] = acc[16 * g + r];                                                                 \
    acc[16 * g + r] = vec4(0.0f);
#define EVEN_KEEP_ROW(r) EACH_G(EVEN_KEEP, r)
#define PAIR_SUM(r, g)                                                                                  \
    {                                                                                                   \
        precise vec4 s = even[16 * g + r] + acc[16 * g + r];                                            \
        acc[16 * g + r] = s;                                                                            \
    }
#define PAIR_SUM_ROW(r) EACH_G(PAIR_SUM, r)
    while (k < p.K) {
        uint kb = k + p.seg_rows;
        for (; k < kb; k += 4u)
            TN_K4(k)
        EACH_ROW(EVEN_KEEP_ROW)
        kb = k + p.seg_rows;
        for (; k < kb; k += 4u)
            TN_K4(k)
        EACH_ROW(PAIR_SUM_ROW)
        // the push after the odd sample j, its level 0 done above
        uint j = (p.seg_first + k) / p.seg_rows - 1u, n = min(uint(findLSB(~j)), p.levels);
        for (uint l = 1u; l < n; l++) {
            EACH_ROW(POP_ROW)
        }
        if (n < p.levels) {
            EACH_ROW(PUT_ROW)
        }
    }
#else
    // k in pieces that end at a sample's last row (or at K).
    while (k < p.K) {
        uint kb = p.K;
#if SEGMENTS
        if (p.seg_rows != 0u)
            kb = min(p.K, k + p.seg_rows - (p.seg_first + k) % p.seg_rows);
#endif
        for (; k + 4u <= kb; k += 4u)
            TN_K4(k)
        for (; k < kb; k++)
            TN_K(k)
#if SEGMENTS
        if (p.seg_rows != 0u && (p.seg_first + kb) % p.seg_rows == 0u) {
            uint j = (p.seg_first + kb) / p.seg_rows - 1u, n = min(uint(findLSB(~j)), p.levels);
            for (uint l = 0u; l < n; l++) {
                EACH_ROW(POP_ROW)
            }
            if (n < p.levels) {
                EACH_ROW(PUT_ROW)
            }
        }
#endif
    }
#endif
#endif
#if BIAS
    vec4 bias[NC];
#define G_BIAS(g)                                                                                       \
    bias[g] = vec4(texelFetch(Bias, int(jg[g])).x, texelFetch(Bias, int(min(jg[g] + 1u, n_cols - 1u))).x,\
                   texelFetch(Bias, int(min(jg[g] + 2u, n_cols - 1u))).x,                               \
                   texelFetch(Bias, int(min(jg[g] + 3u, n_cols - 1u))).x);
    EACH_G1(G_BIAS)
#define BIASED(r, g)                                                                                    \
    {                                                                                                   \
        precise vec4 y = acc[16 * g + r] + bias[g];                                                     \
        acc[16 * g + r] = y;                                                                            \
    }
#else
#define BIASED(r, g)
#endif
#if IMG_C
#define ROW_STORE(r, g)                                                                                 \
    BIASED(r, g)                                                                                        \
    if (i0 + r < m_rows && live[g])                                                                     \
        imageStore(C4, int((c_base + (i0 + r) * n_cols + jg[g]) >> 2), acc[16 * g + r]);
#else
#define ROW_STORE(r, g)                                                                                 \
    BIASED(r, g)                                                                                        \
    if (i0 + r < m_rows && live[g])                                                                     \
        for (uint c = 0u; c < 4u; c++)                                                                  \
            if (jg[g] + c < n_cols)                                                                     \
                C[c_base + (i0 + r) * n_cols + jg[g] + c] = acc[16 * g + r][c];
#endif
#define ROW_STORE_G(r) EACH_G(ROW_STORE, r)
    EACH_ROW(ROW_STORE_G)
}
