// matmul_common: what the texel-path matmul kernels share.
//
// The three layouts training needs, all row-major:
//   nt: Y[M,N]  (+)= X[M,K] · W[N,K]^T     (linear forward)
//   nn: dX[M,K] (+)= dY[M,N] · W[N,K]      (linear backward, input grad)
//   tn: dW[N,K] (+)= dY[M,N]^T · X[M,K]    (linear backward, weight grad)
// Inputs are read through uniform texel buffers: llvmpipe turns a texel
// fetch into one vector gather, where a per-lane storage or shared load
// becomes a loop of scalar loads. With VEC4 the views are RGBA32F and every
// contiguous dimension read as vec4 must be a multiple of 4; without it the
// views are R32F and any shape works. SHIFT_A (with VEC4, nn and tn only)
// reads A, whose rows (N floats) need not be a multiple of 4, through an
// RGBA32F view too: four floats at any offset are two texels shifted by
// the offset's remainder (the LM head's dlogits, N = 50257 for GPT-2),
// half the fetches of four R32F reads.
//
// Each invocation owns ROWS x COLS = 16 x 16 outputs; 8x8 invocations, so a
// workgroup computes a 128 x 128 tile. On llvmpipe a texel fetch is a call
// that gathers one vec4 for each of the 8 lanes (about 30 cycles), and
// everything else lives in spilled registers, so the cost is set by the
// fetches per multiply-add and by the code size of the loop body: each
// step fetches 32 vec4 and does 1024 multiply-adds per lane, in a body of
// about 3,000 instructions, which still runs from the CPU's instruction
// caches (twice that measured 2x slower). Each output receives a 4-term
// dot product per step, so the masked update of a loop-carried value
// (llvmpipe blends every one under the loop mask) is paid once per 4.
// Texel fetch count per multiply-add is 1/32; the previous 16 x 4 kernel
// fetched 1/13 and ran at about half the speed.
//
// One dispatch computes one block of the product (src/ops/op_matmul.c
// splits a product whose output exceeds a storage binding): M, N, K are
// the block's sizes in the layout's terms, and each operand is addressed
// as element (row, col) = base + row * ld + col, where A's and B's bases
// are element offsets into their whole texel views (multiples of 4 with
// VEC4, as are lda and ldb) and C's base is an element offset into the
// storage range bound for this block.
// SPLIT (specialization constant 0) is 1 for such a block. At 0 (a
// dispatch covering the whole product, the usual case) A's and B's bases
// are 0 and their rows as wide as the block, as compile-time facts: read
// from push constants instead, the hot loops measured 7-20% slower on
// llvmpipe. Each kernel defines LDA_WHOLE and LDB_WHOLE, those widths.
#extension GL_EXT_control_flow_attributes : enable

// The reduction is walked in chunks of CHUNK steps with a barrier after
// each: llvmpipe runs a workgroup's 8 subgroups one after the other, so
// without it each would stream its whole reduction slice of the shared
// operand (up to 1.5 MiB at GPT-2's sizes) past the others; with it the
// 8 subgroups consume the same chunk (at most 256 KiB) while it is in L2.
// Invocations outside the output take part in the barriers with no work.
#define CHUNK 64u
#define ROWS 16
#define COLS 16
#define COLS4 (COLS / 4u)
layout(local_size_x = 8, local_size_y = 8) in;

// (whether the product adds into the output: ACCUMULATE below)
layout(push_constant) uniform Push {
    uint M; uint N; uint K;
    uint a0; uint lda; uint b0; uint ldb; uint c0; uint ldc;
} p;

layout(constant_id = 0) const uint SPLIT = 0u;
// ACCUMULATE (specialization constant 1): the dispatch adds the product to
// the output. A compile-time fact: where it is 0 no output is read, which
// on llvmpipe is a per-lane loop per output.
layout(constant_id = 1) const uint ACCUMULATE = 0u;
#define A0 (SPLIT != 0u ? p.a0 : 0u)
#define B0 (SPLIT != 0u ? p.b0 : 0u)
#define LDA (SPLIT != 0u ? p.lda : LDA_WHOLE)
#define LDB (SPLIT != 0u ? p.ldb : LDB_WHOLE)

layout(binding = 0) uniform samplerBuffer A;
// BF16_B (nt and nn): B, the weight, holds bf16 values (a frozen base,
// model.base_dtype bf16), read through an R32G32_UINT view (VEC4: four
// bf16 per texel, the first in the low half of .x) or an R16_UINT one. A
// bf16 is the upper half of the fp32 of the same value, so a shift widens
// it and the products are those of the fp32 kernel on the same weights
// rounded to bf16, bit for bit.
// Q4_B (nt and nn): B is a 4-bit weight (NF4 or FP4, shaders/common/
// quant4.glsl) read through an R32_UINT view of its whole buffer; its
// values are those of the dequantized fp32 weight, bit for bit. Callers
// run B_INIT() first.
#if Q4_B
layout(binding = 1) uniform usamplerBuffer B;
#define Q4_WORD(i) texelFetch(B, int(i)).x
#define Q4_SPEC 2
#include "quant4.glsl"
#define B_INIT() q4_init()
#elif BF16_B
layout(binding = 1) uniform usamplerBuffer B;
#else
layout(binding = 1) uniform samplerBuffer B;
#endif
// IMG_C (VEC4 variants, "_img"): C is an RGBA32F storage texel buffer and
// each invocation stores its outputs as whole texels (rows of C, its base
// c0 and its stride ldc are multiples of 4 floats, and so is every output
// column an invocation's texel starts on). On llvmpipe a storage buffer's
// float store is a loop over the 8 lanes with a bounds check and a spill
// of every live vector per lane, per output; an image store is one such
// loop per component of a texel, without the spills: the stores that took
// about 40% of the nt kernel's time at K = 128 (12% at K = 768) take a
// little over half that (perf samples of bench_matmul's JIT code).
#ifndef B_INIT
#define B_INIT()
#endif
#if IMG_C
layout(binding = 2, rgba32f) uniform imageBuffer C4;
#else
layout(std430, binding = 2) buffer Out { float C[]; };
#endif

// UNITS(e): e floats (a multiple of 4 with VEC4) as texels of a view;
// UNITS4(c4): c4 groups of 4 floats as texels. AUNITS, AUNITS4: the same
// for A, whose offsets stay in floats with SHIFT_A.
#if VEC4
#define UNITS(e) ((e) >> 2)
#define UNITS4(c4) (c4)
#else
#define UNITS(e) (e)
#define UNITS4(c4) (4u * (c4))
#endif

#if SHIFT_A
#define AUNITS(e) (e)
#define AUNITS4(c4) (4u * (c4))
#else
#define AUNITS(e) UNITS(e)
#define AUNITS4(c4) UNITS4(c4)
#endif

// Four consecutive floats starting at texel `at` of T, which holds column
// c of a block row of `cols` columns; in the scalar variant the floats
// past the row's end read as 0. Callers fold the operand's base offset
// into `at` once per loop step, not once per row.
vec4 load4(samplerBuffer T, uint at, uint c, uint cols)
{
#if VEC4
    return texelFetch(T, int(at));
#else
    vec4 v;
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
        uint cj = min(c + j, cols - 1u);
        v[j] = c + j < cols ? texelFetch(T, int(at + cj - c)).x : 0.0;
    }
    return v;
#endif
}

// load4 for B: the same four values, from bf16 with BF16_B, from 4 bits
// with Q4_B (`at` in elements, as a VEC4 view's texel times 4).
vec4 loadB4(uint at, uint c, uint cols)
{
#if Q4_B && VEC4
    return q4_value4(4u * at);
#elif Q4_B
    vec4 v;
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
        uint cj = min(c + j, cols - 1u);
        v[j] = c + j < cols ? q4_value(at + cj - c) : 0.0;
    }
    return v;
#elif BF16_B && VEC4
    uvec2 u = texelFetch(B, int(at)).xy;
    return vec4(uintBitsToFloat(u.x << 16), uintBitsToFloat(u.x & 0xffff0000u), uintBitsToFloat(u.y << 16),
                uintBitsToFloat(u.y & 0xffff0000u));
#elif BF16_B
    vec4 v;
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
        uint cj = min(c + j, cols - 1u);
        v[j] = c + j < cols ? uintBitsToFloat(texelFetch(B, int(at + cj - c)).x << 16) : 0.0;
    }
    return v;
#else
    return load4(B, at, c, cols);
#endif
}

// Four consecutive floats of A starting at unit `at` (a float with
// SHIFT_A, a texel otherwise), column c of a block row of `cols` columns;
// with SHIFT_A the floats past the row's end read as 0 (they belong to the
// next row) and `last` is A's last texel.
vec4 load4a(uint at, uint c, uint cols, uint last)
{
#if SHIFT_A
    uint t = at >> 2u, r = at & 3u;
    vec4 lo = texelFetch(A, int(t)), hi = texelFetch(A, int(min(t + 1u, last)));
    vec4 v = r == 0u ? lo : r == 1u ? vec4(lo.yzw, hi.x) : r == 2u ? vec4(lo.zw, hi.xy) : vec4(lo.w, hi.xyz);
    return vec4(c < cols ? v.x : 0.0, c + 1u < cols ? v.y : 0.0, c + 2u < cols ? v.z : 0.0, c + 3u < cols ? v.w : 0.0);
#else
    return load4(A, at, c, cols);
#endif
}

#if IMG_C
// Outputs of texel t of C. The caller computes t from push constants it
// read before its store loop: a push constant first read inside a branch
// that not every lane takes is a per-lane gather on llvmpipe (seen in the
// JIT code: two 8-lane gathers per store until hoisted).
void store4(int t, vec4 v) { imageStore(C4, t, ACCUMULATE != 0u ? imageLoad(C4, t) + v : v); }

// store4, then the bias b added to each stored value: two roundings, as
// the product and a separate bias pass would give.
void store4_bias(int t, vec4 v, vec4 b)
{
    precise vec4 y = ACCUMULATE != 0u ? imageLoad(C4, t) + v : v;
    precise vec4 z = y + b;
    imageStore(C4, t, z);
}
#else
// Output element i of C (from push constants read before the store loop,
// as for store4).
void store(uint i, float v) { C[i] = ACCUMULATE != 0u ? C[i] + v : v; }

// store, then the bias b added to the stored value: two roundings, as
// the product and a separate bias pass would give.
void store_bias(uint i, float v, float b)
{
    precise float y = ACCUMULATE != 0u ? C[i] + v : v;
    precise float z = y + b;
    C[i] = z;
}
#endif
