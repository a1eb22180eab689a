#version 450
// variant: nt_vec4 -DA_KMAJOR=1 -DB_KMAJOR=1 -DA_VEC4=1 -DB_VEC4=1
// variant: nt_bvec4 -DA_KMAJOR=1 -DB_KMAJOR=1 -DA_VEC4=0 -DB_VEC4=1
// variant: nt_scalar -DA_KMAJOR=1 -DB_KMAJOR=1 -DA_VEC4=0 -DB_VEC4=0
// variant: nn_vec4 -DA_KMAJOR=1 -DB_KMAJOR=0 -DA_VEC4=1 -DB_VEC4=1
// variant: nn_bvec4 -DA_KMAJOR=1 -DB_KMAJOR=0 -DA_VEC4=0 -DB_VEC4=1
// variant: nn_scalar -DA_KMAJOR=1 -DB_KMAJOR=0 -DA_VEC4=0 -DB_VEC4=0
// variant: nt_vec4_bf16 -DA_KMAJOR=1 -DB_KMAJOR=1 -DA_VEC4=1 -DB_VEC4=1 -DB_BF16=1
// variant: nt_bvec4_bf16 -DA_KMAJOR=1 -DB_KMAJOR=1 -DA_VEC4=0 -DB_VEC4=1 -DB_BF16=1
// variant: nt_scalar_bf16 -DA_KMAJOR=1 -DB_KMAJOR=1 -DA_VEC4=0 -DB_VEC4=0 -DB_BF16=1
// variant: nn_vec4_bf16 -DA_KMAJOR=1 -DB_KMAJOR=0 -DA_VEC4=1 -DB_VEC4=1 -DB_BF16=1
// variant: nn_bvec4_bf16 -DA_KMAJOR=1 -DB_KMAJOR=0 -DA_VEC4=0 -DB_VEC4=1 -DB_BF16=1
// variant: nn_scalar_bf16 -DA_KMAJOR=1 -DB_KMAJOR=0 -DA_VEC4=0 -DB_VEC4=0 -DB_BF16=1
// variant: tn_vec4 -DA_KMAJOR=0 -DB_KMAJOR=0 -DA_VEC4=1 -DB_VEC4=1
// variant: tn_bvec4 -DA_KMAJOR=0 -DB_KMAJOR=0 -DA_VEC4=0 -DB_VEC4=1
// variant: tn_scalar -DA_KMAJOR=0 -DB_KMAJOR=0 -DA_VEC4=0 -DB_VEC4=0
// variant: nt_vec4_k16 -DA_KMAJOR=1 -DB_KMAJOR=1 -DA_VEC4=1 -DB_VEC4=1 -DSTEP_K=16u
// variant: nn_vec4_k16 -DA_KMAJOR=1 -DB_KMAJOR=0 -DA_VEC4=1 -DB_VEC4=1 -DSTEP_K=16u
// variant: tn_vec4_k16 -DA_KMAJOR=0 -DB_KMAJOR=0 -DA_VEC4=1 -DB_VEC4=1 -DSTEP_K=16u
// variant: nt_vec4_q4 -DA_KMAJOR=1 -DB_KMAJOR=1 -DA_VEC4=1 -DB_VEC4=1 -DB_Q4=1
// variant: nt_bvec4_q4 -DA_KMAJOR=1 -DB_KMAJOR=1 -DA_VEC4=0 -DB_VEC4=1 -DB_Q4=1
// variant: nt_scalar_q4 -DA_KMAJOR=1 -DB_KMAJOR=1 -DA_VEC4=0 -DB_VEC4=0 -DB_Q4=1
// variant: nn_vec4_q4 -DA_KMAJOR=1 -DB_KMAJOR=0 -DA_VEC4=1 -DB_VEC4=1 -DB_Q4=1
// variant: nn_bvec4_q4 -DA_KMAJOR=1 -DB_KMAJOR=0 -DA_VEC4=0 -DB_VEC4=1 -DB_Q4=1
// variant: nn_scalar_q4 -DA_KMAJOR=1 -DB_KMAJOR=0 -DA_VEC4=0 -DB_VEC4=0 -DB_Q4=1
// C[M,N] (+)= A·B for GPUs ("tiled" family): shared-memory tiles over
// storage buffers. The three training layouts differ in which stride of an
// operand is 1, and each variant loads along that one, so the invocations
// of a subgroup read neighbouring addresses (coalesced):
//   nt  Y  = X·W^T : A = X  rows m, k contiguous (A_KMAJOR); B = W rows n, k contiguous (B_KMAJOR)
//   nn  dX = dY·W  : A = dY rows m, k contiguous (A_KMAJOR); B = W rows k, n contiguous
//   tn  dW = dY^T·X: A = dY rows k, m contiguous;            B = X rows k, n contiguous
// Operand element (row r, contiguous index c) is at base + r·ld + c.
// A_VEC4 / B_VEC4: the operand is read as vec4 (its ld, base and the
// block's contiguous extent are multiples of 4, checked by the host);
// otherwise as floats, consecutive invocations on consecutive floats.
// The loads go through fetch_a4/fetch_a/fetch_b4/fetch_b below, so a
// variant with another storage type for an operand replaces only those:
// B_BF16 (nt, nn) reads B as bf16 values (a frozen weight, model.base_dtype
// bf16), two per uint, element e in the low half of uint e/2 when e is
// even, widened by a shift, so the products are those of the fp32 variant
// on the same weights rounded to bf16, bit for bit. B_Q4 (nt, nn) reads B
// as a 4-bit weight (shaders/common/quant4.glsl; its whole buffer bound,
// the block's base an element index into it): the products of the fp32
// variant on the dequantized weight, bit for bit.
//
// Workgroup tile BT x BT of C, reduction in steps of BK = 8 (the "k16"
// variants, vec4 loads only: 16, half the barriers per product, for
// benchmarks on a GPU through VKTRAIN_TILED_BK=16), WG = (BT/(4·TV))²
// invocations each owning a (4·TV) x (4·TV) micro-tile: TV x TV groups of
// 4x4, the groups BT/TV apart, so the 16 invocations along n read 16
// consecutive vec4 of a shared row (no bank conflict) and write
// consecutive columns of C. Specialization constants (src/ops/op_matmul.c
// picks them from the device limits and the grid size):
//   large:    BT 128, TV 2 (8x8 per invocation), WG 256, 16.5 KiB shared
//   small:    BT  64, TV 1 (4x4), WG 256: grids of few large tiles
//   fallback: BT  64, TV 2 (8x8), WG  64: devices under 256 invocations
//             or 16.5 KiB of shared memory
// The defaults are the largest shared arrays (SPIRV-Cross, behind
// MoltenVK, sizes shared arrays by the defaults).
//
// Shared memory: As[k][m] and Bs[k][n], each row padded by one vec4, so
// the transposing stores of k-contiguous operands hit 32 distinct banks;
// double-buffered, so the next step's tile goes from registers to the
// other buffer while this one is read, with one barrier per step.
//
// One dispatch computes one block of the product (op_matmul.c splits a
// product whose operands exceed a storage binding): M, N, K are the
// block's sizes, a0, b0, c0 the element offsets of its first elements
// within the ranges bound for it; C's rows are ldc apart.
// Split-k (tn into a weight gradient whose grid of tiles is too small to
// fill a large GPU): workgroup z of the grid's third dimension takes the
// reduction's part [z·kpart, (z+1)·kpart) and writes its partial product
// to C from c0 + z·zc; matmul_splitk_sum.comp then adds the parts into
// the gradient in z order. kpart = K and one z otherwise.
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint BT = 128;
layout(constant_id = 2) const uint TV = 2;
layout(constant_id = 3) const bool WARP_TILES = false;
#ifdef STEP_K
#define BK STEP_K
#else
#define BK 8u
#endif
const uint NX = BT / (4u * TV);              // invocations along n (and m)
const uint SV = BT / 4u + 1u;                // vec4 per shared row, with padding
const uint TILE4 = BT * BK / 4u;             // vec4 in one operand's tile
const uint L = (TILE4 + WG - 1u) / WG;       // vec4 loaded per invocation and step

layout(push_constant) uniform Push {
    uint M, N, K, accumulate;
    uint lda, ldb, a0, b0, c0, ldc;
    uint kpart, zc;
} p;

uint k_end; // the end of this workgroup's part of the reduction

// The vec4 of a shared row (4 rows of C's tile) at which invocation t's
// group g along m starts (am), and its group h along n (bn): by default
// the groups are NX apart, t % NX along n and t / NX along m, so 32
// consecutive invocations span 2 x 16 vec4 of C's tile. WARP_TILES (large
// configuration only; VKTRAIN_TILED_WARPTILE=1, benchmarks on a GPU):
// each 32 consecutive invocations own a 32 x 64 block of C, 4 x 8 of them
// in it, whose groups are 4 and 8 vec4 apart, so a subgroup of 32 reads
// 4 vec4 of A's shared row and 8 of B's per step (128 bytes) instead of
// 2 and 16 (256 bytes).
const bool WT = WARP_TILES && BT == 128u && TV == 2u && WG == 256u;
uint am(uint t, uint g)
{
    return WT ? (t / 64u) * 8u + g * 4u + (t % 32u) / 8u : t / NX + g * NX;
}
uint bn(uint t, uint h)
{
    return WT ? ((t / 32u) % 2u) * 16u + h * 8u + t % 8u : t % NX + h * NX;
}

#if A_VEC4
layout(std430, binding = 0) readonly buffer BA { vec4 A[]; };
vec4 fetch_a4(uint i) { return A[i >> 2u]; }
#else
layout(std430, binding = 0) readonly buffer BA { float A[]; };
float fetch_a(uint i) { return A[i]; }
#endif
#ifndef B_BF16
#define B_BF16 0
#endif
#ifndef B_Q4
#define B_Q4 0
#endif
#if B_Q4
layout(std430, binding = 1) readonly buffer BB { uint B[]; };
#define Q4_WORD(i) B[i]
#define Q4_SPEC 4
#include "quant4.glsl"
vec4 fetch_b4(uint i) { return q4_value4(i); }
float fetch_b(uint i) { return q4_value(i); }
#elif B_BF16 && B_VEC4
layout(std430, binding = 1) readonly buffer BB { uvec2 B[]; };
vec4 fetch_b4(uint i)
{
    uvec2 u = B[i >> 2u];
    return vec4(uintBitsToFloat(u.x << 16u), uintBitsToFloat(u.x & 0xffff0000u), uintBitsToFloat(u.y << 16u),
                uintBitsToFloat(u.y & 0xffff0000u));
}
#elif B_BF16
layout(std430, binding = 1) readonly buffer BB { uint B[]; };
float fetch_b(uint i)
{
    uint u = B[i >> 1u];
    return uintBitsToFloat((i & 1u) != 0u ? u & 0xffff0000u : u << 16u);
}
#elif B_VEC4
layout(std430, binding = 1) readonly buffer BB { vec4 B[]; };
vec4 fetch_b4(uint i) { return B[i >> 2u]; }
#else
layout(std430, binding = 1) readonly buffer BB { float B[]; };
float fetch_b(uint i) { return B[i]; }
#endif
layout(std430, binding = 2) buffer BC { float C[]; };

shared vec4 As[2u * BK * SV];
shared vec4 Bs[2u * BK * SV];

// This step's tile elements in registers, between the global load and the
// shared store: vec4 r of ra is elements 4q..4q+3 (vec4 operands, q = the
// invocation's index + r·WG) or elements e = index + (4r+j)·WG, j = 0..3
// (float operands), in the tile's contiguous-fastest order.
vec4 ra[L], rb[L];

// Tile coordinates of element e (contiguous-fastest order) of an operand
// tile: (k, mn) within the tile.
uvec2 tile_pos(bool kmajor, uint e)
{
    return kmajor ? uvec2(e % BK, e / BK) : uvec2(e / BT, e % BT);
}

// Loads the tile of A (is_a) or B at k0, rows/columns from mn0, into
// registers; elements outside the block read as 0.
void tile_load(bool is_a, uint mn0, uint k0)
{
    bool kmajor = is_a ? A_KMAJOR != 0 : B_KMAJOR != 0, vec = is_a ? A_VEC4 != 0 : B_VEC4 != 0;
    uint mn_size = is_a ? p.M : p.N, ld = is_a ? p.lda : p.ldb, base = is_a ? p.a0 : p.b0;
    [[unroll]] for (uint r = 0u; r < L; r++) {
        vec4 v = vec4(0.0);
        [[unroll]] for (uint j = 0u; j < (vec ? 1u : 4u); j++) {
            uint e = vec ? 4u * (gl_LocalInvocationIndex + r * WG) : gl_LocalInvocationIndex + (4u * r + j) * WG;
            uvec2 km = tile_pos(kmajor, e) + uvec2(k0, mn0);
            uint row = kmajor ? km.y : km.x, col = kmajor ? km.x : km.y;
            bool in_block = e < BT * BK && km.x < k_end && km.y < mn_size;
            uint i = base + row * ld + col;
            if (in_block) {
#if A_VEC4
                if (is_a) v = fetch_a4(i);
#else
                if (is_a) v[j] = fetch_a(i);
#endif
#if B_VEC4
                if (!is_a) v = fetch_b4(i);
#else
                if (!is_a) v[j] = fetch_b(i);
#endif
            }
        }
        if (is_a)
            ra[r] = v;
        else
            rb[r] = v;
    }
}

// Stores the registers' tile into shared buffer `buf` as S[k][mn].
void tile_store(bool is_a, uint buf)
{
    bool kmajor = is_a ? A_KMAJOR != 0 : B_KMAJOR != 0, vec = is_a ? A_VEC4 != 0 : B_VEC4 != 0;
    [[unroll]] for (uint r = 0u; r < L; r++) {
        vec4 v = is_a ? ra[r] : rb[r];
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint e = vec ? 4u * (gl_LocalInvocationIndex + r * WG) + j : gl_LocalInvocationIndex + (4u * r + j) * WG;
            if (e >= BT * BK)
                break;
            uvec2 km = tile_pos(kmajor, e);
            uint at = (buf * BK + km.x) * SV + km.y / 4u;
            if (vec && !kmajor) {
                // four consecutive mn of one k: one vec4 store
                if (is_a) As[at] = v; else Bs[at] = v;
                break;
            }
            if (is_a) As[at][km.y % 4u] = v[j]; else Bs[at][km.y % 4u] = v[j];
        }
    }
}

void main()
{
#if B_Q4
    q4_init();
#endif
    uint t = gl_LocalInvocationIndex;
    uint m0 = gl_WorkGroupID.y * BT, n0 = gl_WorkGroupID.x * BT;
    vec4 acc[4u * TV][TV];
    [[unroll]] for (uint i = 0u; i < 4u * TV; i++)
        [[unroll]] for (uint h = 0u; h < TV; h++) acc[i][h] = vec4(0.0);

    uint k_begin = gl_WorkGroupID.z * p.kpart;
    k_end = min(p.K, k_begin + p.kpart);
    uint steps = (max(k_end, k_begin) - k_begin + BK - 1u) / BK;
    tile_load(true, m0, k_begin);
    tile_load(false, n0, k_begin);
    tile_store(true, 0u);
    tile_store(false, 0u);
    barrier();
    for (uint s = 0u; s < steps; s++) {
        uint cur = s & 1u;
        bool next = s + 1u < steps;
        if (next) {
            tile_load(true, m0, k_begin + (s + 1u) * BK);
            tile_load(false, n0, k_begin + (s + 1u) * BK);
        }
        [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
            uint row = (cur * BK + kk) * SV;
            vec4 a[TV], b[TV];
            [[unroll]] for (uint g = 0u; g < TV; g++) {
                a[g] = As[row + am(t, g)];
                b[g] = Bs[row + bn(t, g)];
            }
            [[unroll]] for (uint g = 0u; g < TV; g++)
                [[unroll]] for (uint i = 0u; i < 4u; i++)
                    [[unroll]] for (uint h = 0u; h < TV; h++) acc[4u * g + i][h] = fma(vec4(a[g][i]), b[h], acc[4u * g + i][h]);
        }
        if (next) {
            tile_store(true, cur ^ 1u);
            tile_store(false, cur ^ 1u);
        }
        barrier();
    }

    [[unroll]] for (uint g = 0u; g < TV; g++)
        [[unroll]] for (uint i = 0u; i < 4u; i++) {
            uint m = m0 + 4u * am(t, g) + i;
            if (m >= p.M) continue;
            [[unroll]] for (uint h = 0u; h < TV; h++)
                [[unroll]] for (uint j = 0u; j < 4u; j++) {
                    uint n = n0 + 4u * bn(t, h) + j;
                    if (n < p.N) {
                        uint o = p.c0 + gl_WorkGroupID.z * p.zc + m * p.ldc + n;
                        C[o] = p.accumulate != 0u ? C[o] + acc[4u * g + i][h][j] : acc[4u * g + i][h][j];
                    }
                }
        }
}
