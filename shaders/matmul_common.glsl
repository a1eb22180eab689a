// matmul_common: what the texel-path matmul kernels share.
//
// The three layouts training needs, all row-major:
//   nt: Y[M,N]  (+)= X[M,K] · W[N,K]^T     (linear forward)
//   nn: dX[M,K] (+)= dY[M,N] · W[N,K]      (linear backward, input grad)
//   tn: dW[N,K] (+)= dY[M,N]^T · X[M,K]    (linear backward, weight grad)
// Inputs are read through uniform texel buffers: llvmpipe turns a texel
// fetch into one vector gather, where a per-lane storage or shared load
// becomes a loop of scalar loads (../notes/lavapipe.md). With VEC4 the
// views are RGBA32F and every contiguous dimension read as vec4 must be a
// multiple of 4; without it the views are R32F and any shape works.
// Each invocation owns 16 rows x 4 columns of the output; 8x8 invocations.
#extension GL_EXT_control_flow_attributes : enable

#define ROWS 16
layout(local_size_x = 8, local_size_y = 8) in;

// accumulate != 0: add the product to the output instead of overwriting it.
layout(push_constant) uniform Push { uint M; uint N; uint K; uint accumulate; } p;

layout(binding = 0) uniform samplerBuffer A;
layout(binding = 1) uniform samplerBuffer B;
layout(std430, binding = 2) buffer Out { float C[]; };

// Four consecutive floats (row, 4*col4 .. 4*col4+3) of a matrix with `cols`
// columns; elements past the row's end read as 0 in the scalar variant.
vec4 load4(samplerBuffer T, uint row, uint col4, uint cols)
{
#if VEC4
    return texelFetch(T, int(row * (cols >> 2) + col4));
#else
    uint c = col4 * 4u, base = row * cols;
    vec4 v;
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
        uint cj = min(c + j, cols - 1u);
        v[j] = c + j < cols ? texelFetch(T, int(base + cj)).x : 0.0;
    }
    return v;
#endif
}

void store(uint row, uint col, uint cols, float v)
{
    uint i = row * cols + col;
    C[i] = p.accumulate != 0u ? C[i] + v : v;
}
