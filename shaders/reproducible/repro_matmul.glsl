// repro_matmul: what the reproducible matmul kernels share. C[M,N] (+)=
// A[M,K] · B[K,N] with each operand addressed through strides, so one
// kernel serves the three training layouts (src/repro/repro_matmul.c sets
// them): A(i,k) = A[a0 + i·sai + k·sak], B(k,j) = B[b0 + k·sbk + j·sbj],
// C(i,j) = C[c0 + i·N + j] (a0, b0, c0: where the operands start within
// their bindings, e.g. a block of rows of a larger matrix). A reduction longer than the device lets one
// invocation loop is cut into dispatches over consecutive ranges of k, each
// accumulating into C (a0, b0 at the range's start): the float stored and
// read back between them is the accumulator, so the bits are the same.
//
// The order is the contract, the same in every kernel family and in the C
// reference: each output has one accumulator, starting at +0 (or at C's
// value with accumulate), and takes acc = acc + A(i,k)·B(k,j) for
// k = 0, 1, …, K−1, every operation `precise`. No padding products (a
// +0 product would turn a −0 sum into +0), no split of k.
#include "repro_math.glsl"

layout(push_constant) uniform Push {
    uint M; uint N; uint K; uint accumulate;
    uint sai; uint sak; uint sbk; uint sbj; uint a0; uint b0; uint c0;
#if SEGMENTS
    // precision: reproducible's sums over samples (repro_matmul_vec4.comp)
    uint seg_rows; uint seg_first; uint levels; uint s0;
#endif
} p;
// No [[unroll]] here: spirv-opt's unroller drops NoContraction from the
// copies it makes (scripts/repro_lint.py caught it); the driver unrolls
// the small constant loops itself.
#if !IMG_C
layout(std430, binding = 2) buffer Out { float C[]; };
#endif
