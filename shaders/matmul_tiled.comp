#version 450
// C[M,N] (+)= A·B for GPUs: 64x64 output tiles staged through shared
// memory in steps of 16 along the reduction, storage buffers only.
// A(m,k) = A[m*sam + k*sak] and B(k,n) = B[k*sbk + n*sbn], so one kernel
// serves the three training layouts by strides (see src/ops/op_matmul.c):
//   nt  Y  = X·W^T : A = X  (K, 1),  B = W (1, K)
//   nn  dX = dY·W  : A = dY (N, 1),  B = W (K, 1)
//   tn  dW = dY^T·X: A = dY (1, N),  B = X (K, 1)
// One dispatch computes one block of the product (src/ops/op_matmul.c splits
// a product whose operands exceed a storage binding): M, N, K are the
// block's sizes, and a0, b0, c0 the element offsets of the block's first
// element within the ranges bound for it; C's rows are ldc apart.
// The workgroup is WG_X x WG_Y (specialization constants 0 and 1, chosen
// by the host from the device limits); each invocation computes
// (64/WG_Y) x (64/WG_X) outputs. BF16_B (specialization constant 2): B
// holds bf16 values (a frozen weight, model.base_dtype bf16), two per uint,
// element e in the low half of uint e/2 when e is even; loadB widens one
// by a shift, so the products are those of the fp32 kernel on the same
// weights rounded to bf16, bit for bit.
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x_id = 0, local_size_y_id = 1) in;
layout(constant_id = 0) const uint WG_X = 16;
layout(constant_id = 1) const uint WG_Y = 16;
layout(constant_id = 2) const uint BF16_B = 0;
#define TM 64u
#define TN 64u
#define TK 16u
const uint RM = TM / WG_Y;
const uint RN = TN / WG_X;

layout(push_constant) uniform Push {
    uint M, N, K, accumulate;
    uint sam, sak, sbk, sbn;
    uint a0, b0, c0, ldc;
} p;

layout(std430, binding = 0) readonly buffer BA { float A[]; };
layout(std430, binding = 1) readonly buffer BB { uint B[]; };
layout(std430, binding = 2) buffer BC { float C[]; };

float loadB(uint e)
{
    if (BF16_B == 0u)
        return uintBitsToFloat(B[e]);
    uint u = B[e >> 1];
    return uintBitsToFloat((e & 1u) != 0u ? u & 0xffff0000u : u << 16);
}

shared float As[TK][TM];
shared float Bs[TK][TN];

void main()
{
    uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    uint tid = ty * WG_X + tx, nthreads = WG_X * WG_Y;
    uint m0 = gl_WorkGroupID.y * TM, n0 = gl_WorkGroupID.x * TN;
    float acc[RM][RN];
    [[unroll]] for (uint i = 0u; i < RM; i++)
        [[unroll]] for (uint j = 0u; j < RN; j++) acc[i][j] = 0.0;

    for (uint k0 = 0u; k0 < p.K; k0 += TK) {
        for (uint e = tid; e < TK * TM; e += nthreads) {
            uint kk = e / TM, mm = e % TM;
            uint m = m0 + mm, k = k0 + kk;
            As[kk][mm] = (m < p.M && k < p.K) ? A[p.a0 + m * p.sam + k * p.sak] : 0.0;
        }
        for (uint e = tid; e < TK * TN; e += nthreads) {
            uint kk = e / TN, nn = e % TN;
            uint n = n0 + nn, k = k0 + kk;
            Bs[kk][nn] = (n < p.N && k < p.K) ? loadB(p.b0 + k * p.sbk + n * p.sbn) : 0.0;
        }
        barrier();
        [[unroll]] for (uint kk = 0u; kk < TK; kk++) {
            float b[RN];
            [[unroll]] for (uint j = 0u; j < RN; j++) b[j] = Bs[kk][tx + j * WG_X];
            [[unroll]] for (uint i = 0u; i < RM; i++) {
                float a = As[kk][ty + i * WG_Y];
                [[unroll]] for (uint j = 0u; j < RN; j++) acc[i][j] = fma(a, b[j], acc[i][j]);
            }
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < RM; i++) {
        uint m = m0 + ty + i * WG_Y;
        [[unroll]] for (uint j = 0u; j < RN; j++) {
            uint n = n0 + tx + j * WG_X;
            if (m < p.M && n < p.N) {
                uint o = p.c0 + m * p.ldc + n;
                C[o] = p.accumulate != 0u ? C[o] + acc[i][j] : acc[i][j];
            }
        }
    }
}
