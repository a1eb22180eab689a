#version 450
// needs: coopmat
// variant: nt_f16 -DA_KMAJOR=1 -DB_KMAJOR=1 -DELT_BF16=0
// variant: nn_f16 -DA_KMAJOR=1 -DB_KMAJOR=0 -DELT_BF16=0
// variant: tn_f16 -DA_KMAJOR=0 -DB_KMAJOR=0 -DELT_BF16=0
// needs: coopmat_bf16
// variant: nt_bf16 -DA_KMAJOR=1 -DB_KMAJOR=1 -DELT_BF16=1
// variant: nn_bf16 -DA_KMAJOR=1 -DB_KMAJOR=0 -DELT_BF16=1
// variant: tn_bf16 -DA_KMAJOR=0 -DB_KMAJOR=0 -DELT_BF16=1
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
// Edges: elements outside the block load as 0; accumulators go through a
// shared staging tile per subgroup tile, which the subgroup's invocations
// write to C where in range, adding to C where `accumulate`, between
// workgroup barriers (GPU-assisted validation took subgroup barriers there
// for a race).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable
#if ELT_BF16
#extension GL_EXT_bfloat16 : require
#define ELT bfloat16_t
#else
#define ELT float16_t
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint CM = 16;
layout(constant_id = 2) const uint CN = 16;
layout(constant_id = 3) const uint CK = 16;
layout(constant_id = 4) const uint RM = 4;
layout(constant_id = 5) const uint RN = 4;
const uint BM = 2u * RM * CM, BN = 2u * RN * CN, BK = 2u * CK;
#define PAD 8u
// Rows of the shared tiles: A is BM x BK (A_KMAJOR: BM rows of BK) or
// BK rows of BM; B is BN rows of BK (B_KMAJOR) or BK rows of BN.
const uint A_OUTER = A_KMAJOR != 0 ? BM : BK, A_INNER = A_KMAJOR != 0 ? BK : BM;
const uint B_OUTER = B_KMAJOR != 0 ? BN : BK, B_INNER = B_KMAJOR != 0 ? BK : BN;
const uint A_LD = A_INNER + PAD, B_LD = B_INNER + PAD;

layout(push_constant) uniform Push {
    uint M, N, K, accumulate;
    uint lda, ldb, a0, b0, c0, ldc;
    uint kpart, zc;
} p;

layout(std430, binding = 0) readonly buffer BA { float A[]; };
layout(std430, binding = 1) readonly buffer BB { float B[]; };
layout(std430, binding = 2) buffer BC { float C[]; };

shared ELT As[A_OUTER * A_LD];
shared ELT Bs[B_OUTER * B_LD];
shared float Cs[4u * CM * CN];

// Loads the tile of A (is_a) or B whose k starts at k0 and m (n) at mn0
// into shared memory, as 16-bit values; 0 outside the block.
void tile_load(bool is_a, uint mn0, uint k0, uint k_end)
{
    bool kmajor = is_a ? A_KMAJOR != 0 : B_KMAJOR != 0;
    uint outer = is_a ? A_OUTER : B_OUTER, inner = is_a ? A_INNER : B_INNER, lds = is_a ? A_LD : B_LD;
    uint mn_size = is_a ? p.M : p.N, ld = is_a ? p.lda : p.ldb, base = is_a ? p.a0 : p.b0;
    for (uint e = gl_LocalInvocationIndex; e < outer * inner; e += WG) {
        uint o = e / inner, i = e % inner;
        uint k = k0 + (kmajor ? i : o), mn = mn0 + (kmajor ? o : i);
        float v = 0.0;
        if (k < k_end && mn < mn_size) {
            uint at = base + (kmajor ? mn : k) * ld + (kmajor ? k : mn);
            v = is_a ? A[at] : B[at];
        }
        if (is_a)
            As[o * lds + i] = ELT(v);
        else
            Bs[o * lds + i] = ELT(v);
    }
}

void main()
{
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
        for (uint s = 0u; s < steps; s++) {
            uint k0 = k_begin + s * BK;
            tile_load(true, m0, k0, k_end);
            tile_load(false, n0, k0, k_end);
            barrier();
            if (mine) {
                [[unroll]] for (uint kk = 0u; kk < BK; kk += CK) {
                    coopmat<ELT, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> a[RM];
                    coopmat<ELT, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> b[RN];
                    [[unroll]] for (uint i = 0u; i < RM; i++) {
                        uint m = sm + i * CM;
                        if (A_KMAJOR != 0)
                            coopMatLoad(a[i], As, m * A_LD + kk, A_LD, gl_CooperativeMatrixLayoutRowMajor);
                        else
                            coopMatLoad(a[i], As, kk * A_LD + m, A_LD, gl_CooperativeMatrixLayoutColumnMajor);
                    }
                    [[unroll]] for (uint j = 0u; j < RN; j++) {
                        uint n = sn + j * CN;
                        if (B_KMAJOR != 0)
                            coopMatLoad(b[j], Bs, n * B_LD + kk, B_LD, gl_CooperativeMatrixLayoutColumnMajor);
                        else
                            coopMatLoad(b[j], Bs, kk * B_LD + n, B_LD, gl_CooperativeMatrixLayoutRowMajor);
                    }
                    [[unroll]] for (uint i = 0u; i < RM; i++)
                        [[unroll]] for (uint j = 0u; j < RN; j++) acc[i][j] = coopMatMulAdd(a[i], b[j], acc[i][j]);
                }
            }
            barrier();
        }
        // the epilogue: workgroup barriers in uniform control flow (every
        // subgroup takes them, the ones without a tile too)
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
                            uint o = p.c0 + gl_WorkGroupID.z * p.zc + m * p.ldc + n;
                            C[o] = p.accumulate != 0u ? C[o] + Cs[stage + e] : Cs[stage + e];
                        }
                    }
                barrier();
            }
    }
}
