#version 450
// needs: coopmat
// variant: nt_f16_vec4 -DA_KMAJOR=1 -DB_KMAJOR=1 -DELT_BF16=0 -DA_VEC4=1 -DB_VEC4=1
// variant: nt_f16_bvec4 -DA_KMAJOR=1 -DB_KMAJOR=1 -DELT_BF16=0 -DA_VEC4=0 -DB_VEC4=1
// variant: nt_f16_scalar -DA_KMAJOR=1 -DB_KMAJOR=1 -DELT_BF16=0 -DA_VEC4=0 -DB_VEC4=0
// variant: nn_f16_vec4 -DA_KMAJOR=1 -DB_KMAJOR=0 -DELT_BF16=0 -DA_VEC4=1 -DB_VEC4=1
// variant: nn_f16_bvec4 -DA_KMAJOR=1 -DB_KMAJOR=0 -DELT_BF16=0 -DA_VEC4=0 -DB_VEC4=1
// variant: nn_f16_scalar -DA_KMAJOR=1 -DB_KMAJOR=0 -DELT_BF16=0 -DA_VEC4=0 -DB_VEC4=0
// variant: tn_f16_vec4 -DA_KMAJOR=0 -DB_KMAJOR=0 -DELT_BF16=0 -DA_VEC4=1 -DB_VEC4=1
// variant: tn_f16_bvec4 -DA_KMAJOR=0 -DB_KMAJOR=0 -DELT_BF16=0 -DA_VEC4=0 -DB_VEC4=1
// variant: tn_f16_scalar -DA_KMAJOR=0 -DB_KMAJOR=0 -DELT_BF16=0 -DA_VEC4=0 -DB_VEC4=0
// variant: nt_f16_vec4_q4 -DA_KMAJOR=1 -DB_KMAJOR=1 -DELT_BF16=0 -DA_VEC4=1 -DB_VEC4=1 -DB_Q4=1
// variant: nt_f16_bvec4_q4 -DA_KMAJOR=1 -DB_KMAJOR=1 -DELT_BF16=0 -DA_VEC4=0 -DB_VEC4=1 -DB_Q4=1
// variant: nt_f16_scalar_q4 -DA_KMAJOR=1 -DB_KMAJOR=1 -DELT_BF16=0 -DA_VEC4=0 -DB_VEC4=0 -DB_Q4=1
// variant: nn_f16_vec4_q4 -DA_KMAJOR=1 -DB_KMAJOR=0 -DELT_BF16=0 -DA_VEC4=1 -DB_VEC4=1 -DB_Q4=1
// variant: nn_f16_bvec4_q4 -DA_KMAJOR=1 -DB_KMAJOR=0 -DELT_BF16=0 -DA_VEC4=0 -DB_VEC4=1 -DB_Q4=1
// variant: nn_f16_scalar_q4 -DA_KMAJOR=1 -DB_KMAJOR=0 -DELT_BF16=0 -DA_VEC4=0 -DB_VEC4=0 -DB_Q4=1
// needs: coopmat_bf16
// variant: nt_bf16_vec4 -DA_KMAJOR=1 -DB_KMAJOR=1 -DELT_BF16=1 -DA_VEC4=1 -DB_VEC4=1
// variant: nt_bf16_bvec4 -DA_KMAJOR=1 -DB_KMAJOR=1 -DELT_BF16=1 -DA_VEC4=0 -DB_VEC4=1
// variant: nt_bf16_scalar -DA_KMAJOR=1 -DB_KMAJOR=1 -DELT_BF16=1 -DA_VEC4=0 -DB_VEC4=0
// variant: nn_bf16_vec4 -DA_KMAJOR=1 -DB_KMAJOR=0 -DELT_BF16=1 -DA_VEC4=1 -DB_VEC4=1
// variant: nn_bf16_bvec4 -DA_KMAJOR=1 -DB_KMAJOR=0 -DELT_BF16=1 -DA_VEC4=0 -DB_VEC4=1
// variant: nn_bf16_scalar -DA_KMAJOR=1 -DB_KMAJOR=0 -DELT_BF16=1 -DA_VEC4=0 -DB_VEC4=0
// variant: tn_bf16_vec4 -DA_KMAJOR=0 -DB_KMAJOR=0 -DELT_BF16=1 -DA_VEC4=1 -DB_VEC4=1
// variant: tn_bf16_bvec4 -DA_KMAJOR=0 -DB_KMAJOR=0 -DELT_BF16=1 -DA_VEC4=0 -DB_VEC4=1
// variant: tn_bf16_scalar -DA_KMAJOR=0 -DB_KMAJOR=0 -DELT_BF16=1 -DA_VEC4=0 -DB_VEC4=0
// variant: nt_bf16_vec4_q4 -DA_KMAJOR=1 -DB_KMAJOR=1 -DELT_BF16=1 -DA_VEC4=1 -DB_VEC4=1 -DB_Q4=1
// variant: nt_bf16_bvec4_q4 -DA_KMAJOR=1 -DB_KMAJOR=1 -DELT_BF16=1 -DA_VEC4=0 -DB_VEC4=1 -DB_Q4=1
// variant: nt_bf16_scalar_q4 -DA_KMAJOR=1 -DB_KMAJOR=1 -DELT_BF16=1 -DA_VEC4=0 -DB_VEC4=0 -DB_Q4=1
// variant: nn_bf16_vec4_q4 -DA_KMAJOR=1 -DB_KMAJOR=0 -DELT_BF16=1 -DA_VEC4=1 -DB_VEC4=1 -DB_Q4=1
// variant: nn_bf16_bvec4_q4 -DA_KMAJOR=1 -DB_KMAJOR=0 -DELT_BF16=1 -DA_VEC4=0 -DB_VEC4=1 -DB_Q4=1
// variant: nn_bf16_scalar_q4 -DA_KMAJOR=1 -DB_KMAJOR=0 -DELT_BF16=1 -DA_VEC4=0 -DB_VEC4=0 -DB_Q4=1
// C[M,N] (+)= A·B on cooperative matrices (VK_KHR_cooperative_matrix):
// the fp32 operands are rounded to 16-bit floats (f16, or bf16 where the
// device has VK_KHR_shader_bfloat16) as their tiles go to shared memory,
// the products accumulate in fp32 matrices. A drop-in for
// matmul_tiled.comp: the same layouts, bindings and push constants (split-k
// included), so op_matmul.c dispatches either:
//   nt  Y  = X·W^T : A = X  rows m, k contiguous (A_KMAJOR); B = W rows n, k contiguous (B_KMAJOR)
//   nn  dX = dY·W  : A = dY rows m, k contiguous (A_KMAJOR); B = W rows k, n contiguous
//   tn  dW = dY^T·X: A = dY rows k, m contiguous;            B = X rows k, n contiguous
// Operand element (row r, contiguous index c) is at base + r·ld + c.
//
// A tile is stored in shared memory as it lies in global memory (rows of
// its contiguous dimension, padded by 8 elements: loads coalesce, no
// transpose), and coopMatLoad reads it row- or column-major as the layout
// needs. The workgroup tile is BM x BN = (2·RM·CM) x (2·RN·CN): 2 x 2
// subgroup tiles, each RM x RN accumulators of the device's CM x CN shape;
// the reduction goes in steps of BK = 2·CK. CM, CN, CK are specialization
// constants from the device's cooperative-matrix properties, RM and RN
// ones from op_matmul.c (2 x 2, or VKTRAIN_COOPMAT_TILE); the defaults
// are the largest, for SPIRV-Cross. WG is the workgroup's invocations,
// 4 times the largest subgroup the driver may pick (whole subgroups are
// required), so 4 subgroups or more; where the driver makes more, the
// extra ones only load (and were there fewer, each would take several
// subgroup tiles in turn).
//
// Loads: each invocation takes groups of 4 consecutive elements along an
// operand's contiguous dimension: one vec4 load where the operand's rows,
// first element and contiguous extent are whole vec4 (A_VEC4, B_VEC4,
// checked by the host; "bvec4": B alone, as in the tiled kernel), else 4
// float loads, each checked against the block's edge. The shared tiles
// are arrays of 16-bit 4-vectors, so a group is one store, and the
// matrices' offsets and strides count 4-vectors (every offset is a
// multiple of 4 elements, every row 16 bytes and more).
// Double-buffered: the next step's groups are loaded into registers (as
// fp32, rounded when stored) before this step's matrices multiply, and
// stored to the other buffer after, with one barrier per step.
//
// Outputs: a workgroup whose tile lies inside the block, where C's rows
// and the tile's first element are on 16 bytes (DIRECT: the device's
// storage bindings start on 16 bytes; C's ldc and first element multiples
// of 4 floats), stores its accumulators to C with coopMatStore, first
// adding C's values where `accumulate` (coopMatLoad needs 16-byte rows and
// pointers). Elsewhere (edges: elements outside the block load as 0)
// accumulators go through a shared staging tile per subgroup tile, which
// the subgroup's invocations write to C where in range, adding to C where
// `accumulate`, between workgroup barriers (GPU-assisted validation took
// subgroup barriers there for a race); which of the two is uniform across
// the workgroup, so its barriers are.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable
#if ELT_BF16
#extension GL_EXT_bfloat16 : require
#define ELT bfloat16_t
#define EVEC4 bf16vec4
#else
#define ELT float16_t
#define EVEC4 f16vec4
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint CM = 16;
layout(constant_id = 2) const uint CN = 16;
layout(constant_id = 3) const uint CK = 16;
layout(constant_id = 4) const uint RM = 4;
layout(constant_id = 5) const uint RN = 4;
layout(constant_id = 6) const bool DIRECT = false;
const uint BM = 2u * RM * CM, BN = 2u * RN * CN, BK = 2u * CK;
#define PAD 8u
// Rows of the shared tiles: A is BM x BK (A_KMAJOR: BM rows of BK) or
// BK rows of BM; B is BN rows of BK (B_KMAJOR) or BK rows of BN.
const uint A_OUTER = A_KMAJOR != 0 ? BM : BK, A_INNER = A_KMAJOR != 0 ? BK : BM;
const uint B_OUTER = B_KMAJOR != 0 ? BN : BK, B_INNER = B_KMAJOR != 0 ? BK : BN;
// rows in 4-vectors, and one buffer's 4-vectors
const uint A_LD4 = (A_INNER + PAD) / 4u, B_LD4 = (B_INNER + PAD) / 4u;
const uint A_BUF4 = A_OUTER * A_LD4, B_BUF4 = B_OUTER * B_LD4;
// groups of 4 elements in a tile, and per invocation
const uint A_GROUPS = A_OUTER * A_INNER / 4u, B_GROUPS = B_OUTER * B_INNER / 4u;
const uint LA = (A_GROUPS + WG - 1u) / WG, LB = (B_GROUPS + WG - 1u) / WG;
const uint L = LA > LB ? LA : LB;

layout(push_constant) uniform Push {
    uint M, N, K, accumulate;
    uint lda, ldb, a0, b0, c0, ldc;
    uint kpart, zc;
} p;

#if A_VEC4
layout(std430, binding = 0) readonly buffer BA { vec4 A4[]; };
#else
layout(std430, binding = 0) readonly buffer BA { float A[]; };
#endif
// B_Q4 (nt, nn): B is a 4-bit weight (shaders/common/quant4.glsl; its
// whole buffer bound, the block's base an element index into it), its
// values those of the dequantized fp32 weight, then rounded to the 16-bit
// type as every operand is: the bits of this kernel on that fp32 weight.
#ifndef B_Q4
#define B_Q4 0
#endif
#if B_Q4
layout(std430, binding = 1) readonly buffer BB { uint B[]; };
#define Q4_WORD(i) B[i]
#define Q4_SPEC 7
#include "quant4.glsl"
#elif B_VEC4
layout(std430, binding = 1) readonly buffer BB { vec4 B4[]; };
#else
layout(std430, binding = 1) readonly buffer BB { float B[]; };
#endif
layout(std430, binding = 2) buffer BC { float C[]; };

shared EVEC4 As[2u * A_BUF4];
shared EVEC4 Bs[2u * B_BUF4];
shared float Cs[4u * CM * CN];

// The groups in flight between a step's global loads and its shared
// stores: group r of an operand is its tile's group idx + r·WG.
vec4 ra[L], rb[L];

// The group at element `at` of A (is_a) or B, of which the first n are in
// the block (vec4 operands: 0 or 4); the rest read as 0.
vec4 fetch(bool is_a, uint at, uint n)
{
    vec4 v = vec4(0.0);
    if (is_a) {
#if A_VEC4
        if (n > 0u) v = A4[at >> 2u];
#else
        [[unroll]] for (uint j = 0u; j < 4u; j++)
            if (j < n) v[j] = A[at + j];
#endif
    } else {
#if B_Q4 && B_VEC4
        if (n > 0u) v = q4_value4(at);
#elif B_Q4
        [[unroll]] for (uint j = 0u; j < 4u; j++)
            if (j < n) v[j] = q4_value(at + j);
#elif B_VEC4
        if (n > 0u) v = B4[at >> 2u];
#else
        [[unroll]] for (uint j = 0u; j < 4u; j++)
            if (j < n) v[j] = B[at + j];
#endif
    }
    return v;
}

// Loads the tile of A (is_a) or B whose k starts at k0 and m (n) at mn0
// into registers.
void tile_load(bool is_a, uint mn0, uint k0, uint k_end)
{
    bool kmajor = is_a ? A_KMAJOR != 0 : B_KMAJOR != 0;
    uint inner = is_a ? A_INNER : B_INNER, groups = is_a ? A_GROUPS : B_GROUPS;
    uint mn_size = is_a ? p.M : p.N, ld = is_a ? p.lda : p.ldb, base = is_a ? p.a0 : p.b0;
    // rows along the outer dimension, positions along the inner one
    uint outer0 = kmajor ? mn0 : k0, outer_end = kmajor ? mn_size : k_end;
    uint inner0 = kmajor ? k0 : mn0, inner_end = kmajor ? k_end : mn_size;
    [[unroll]] for (uint r = 0u; r < (is_a ? LA : LB); r++) {
        uint q = gl_LocalInvocationIndex + r * WG;
        uint o = outer0 + 4u * q / inner, i = inner0 + 4u * q % inner;
        uint n = q < groups && o < outer_end && i < inner_end ? min(inner_end - i, 4u) : 0u;
        vec4 v = fetch(is_a, base + o * ld + i, n);
        if (is_a)
            ra[r] = v;
        else
            rb[r] = v;
    }
}

// Stores the registers' tile of A (is_a) or B, rounded, into shared buffer `buf`.
void tile_store(bool is_a, uint buf)
{
    uint inner = is_a ? A_INNER : B_INNER, groups = is_a ? A_GROUPS : B_GROUPS;
    [[unroll]] for (uint r = 0u; r < (is_a ? LA : LB); r++) {
        uint q = gl_LocalInvocationIndex + r * WG;
        if (q >= groups)
            break;
        uint o = 4u * q / inner, i4 = q % (inner / 4u);
        if (is_a)
            As[buf * A_BUF4 + o * A_LD4 + i4] = EVEC4(ra[r]);
        else
            Bs[buf * B_BUF4 + o * B_LD4 + i4] = EVEC4(rb[r]);
    }
}

// This subgroup's tile (rows sm.., columns sn..) times shared buffer `buf`.
void multiply(uint buf, uint sm, uint sn, inout coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> acc[RM][RN])
{
    [[unroll]] for (uint kk = 0u; kk < BK; kk += CK) {
        coopmat<ELT, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> a[RM];
        coopmat<ELT, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> b[RN];
        [[unroll]] for (uint i = 0u; i < RM; i++) {
            uint m = sm + i * CM;
            if (A_KMAJOR != 0)
                coopMatLoad(a[i], As, buf * A_BUF4 + m * A_LD4 + kk / 4u, A_LD4, gl_CooperativeMatrixLayoutRowMajor);
            else
                coopMatLoad(a[i], As, buf * A_BUF4 + kk * A_LD4 + m / 4u, A_LD4, gl_CooperativeMatrixLayoutColumnMajor);
        }
        [[unroll]] for (uint j = 0u; j < RN; j++) {
            uint n = sn + j * CN;
            if (B_KMAJOR != 0)
                coopMatLoad(b[j], Bs, buf * B_BUF4 + n * B_LD4 + kk / 4u, B_LD4, gl_CooperativeMatrixLayoutColumnMajor);
            else
                coopMatLoad(b[j], Bs, buf * B_BUF4 + kk * B_LD4 + n / 4u, B_LD4, gl_CooperativeMatrixLayoutRowMajor);
        }
        [[unroll]] for (uint i = 0u; i < RM; i++)
            [[unroll]] for (uint j = 0u; j < RN; j++) acc[i][j] = coopMatMulAdd(a[i], b[j], acc[i][j]);
    }
}

void main()
{
#if B_Q4
    q4_init();
#endif
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    uint k_begin = gl_WorkGroupID.z * p.kpart;
    uint k_end = min(p.K, k_begin + p.kpart);
    uint steps = (max(k_end, k_begin) - k_begin + BK - 1u) / BK;
    uint ns = gl_NumSubgroups, rounds = (4u + ns - 1u) / ns;
    for (uint r = 0u; r < rounds; r++) {
        uint t = gl_SubgroupID + r * ns; // this subgroup's tile: (t / 2, t % 2)
        bool mine = t < 4u; // (subgroup-uniform)
        uint sm = (t / 2u) * RM * CM, sn = (t % 2u) * RN * CN;
        coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> acc[RM][RN];
        [[unroll]] for (uint i = 0u; i < RM; i++)
            [[unroll]] for (uint j = 0u; j < RN; j++)
                acc[i][j] = coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(0.0);
        // step s multiplies buffer s % 2 while step s + 1's groups load
        // into registers, then stores them to the other buffer, which
        // step s - 1 multiplied before the barrier that ended it
        tile_load(true, m0, k_begin, k_end);
        tile_load(false, n0, k_begin, k_end);
        tile_store(true, 0u);
        tile_store(false, 0u);
        barrier();
        for (uint s = 0u; s < steps; s++) {
            uint cur = s & 1u;
            bool next = s + 1u < steps;
            if (next) {
                tile_load(true, m0, k_begin + (s + 1u) * BK, k_end);
                tile_load(false, n0, k_begin + (s + 1u) * BK, k_end);
            }
            if (mine)
                multiply(cur, sm, sn, acc);
            if (next) {
                tile_store(true, cur ^ 1u);
                tile_store(false, cur ^ 1u);
            }
            barrier();
        }
        uint cz = p.c0 + gl_WorkGroupID.z * p.zc;
        if (DIRECT && CN % 4u == 0u && m0 + BM <= p.M && n0 + BN <= p.N && cz % 4u == 0u && p.ldc % 4u == 0u) {
            if (mine)
                [[unroll]] for (uint i = 0u; i < RM; i++)
                    [[unroll]] for (uint j = 0u; j < RN; j++) {
                        uint o = cz + (m0 + sm + i * CM) * p.ldc + n0 + sn + j * CN;
                        if (p.accumulate != 0u) {
                            coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> c;
                            coopMatLoad(c, C, o, p.ldc, gl_CooperativeMatrixLayoutRowMajor);
                            acc[i][j] = c + acc[i][j];
                        }
                        coopMatStore(acc[i][j], C, o, p.ldc, gl_CooperativeMatrixLayoutRowMajor);
                    }
            continue;
        }
        // the staged epilogue: workgroup barriers in uniform control flow
        // (every subgroup takes them, the ones without a tile too)
        uint lane = gl_SubgroupInvocationID, stage = t * CM * CN;
        [[unroll]] for (uint i = 0u; i < RM; i++)
            [[unroll]] for (uint j = 0u; j < RN; j++) {
                if (mine)
                    coopMatStore(acc[i][j], Cs, stage, CN, gl_CooperativeMatrixLayoutRowMajor);
                barrier();
                if (mine)
                    for (uint e = lane; e < CM * CN; e += gl_SubgroupSize) {
                        uint m = m0 + sm + i * CM + e / CN, n = n0 + sn + j * CN + e % CN;
                        if (m < p.M && n < p.N) {
                            uint o = cz + m * p.ldc + n;
                            C[o] = p.accumulate != 0u ? C[o] + Cs[stage + e] : Cs[stage + e];
                        }
                    }
                barrier();
            }
    }
}
