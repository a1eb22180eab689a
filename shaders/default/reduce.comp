#version 450
// variant: sum -DSQUARE=0
// variant: sumsq -DSQUARE=1
// out[out_index + g] = sum over this workgroup's chunk of x (or x*x).
//
// Workgroup g = group0 + gl_WorkGroupID.x owns x[g*chunk, min((g+1)*chunk,
// n)), indices counted from the start of the tensor, whose element x0 is
// the first of the binding (a dispatch may cover some workgroups only,
// binding the range of x they read). Each invocation sums
// its strided share with Kahan compensation, then the workgroup adds the
// partial sums in a fixed tree, so the result depends only on n, chunk and
// the workgroup size: the same input gives the same bits. Two dispatches
// (chunks, then the partials with SQUARE=0) reduce any n; see op_reduce.c
// for the error bound.
#include "wg1d.glsl"
layout(push_constant) uniform Push { uint n; uint chunk; uint out_index; uint group0; uint x0; } p;
layout(std430, binding = 0) readonly buffer BX { float x[]; };
layout(std430, binding = 1) buffer BO { float o[]; };

shared float part[WG_MAX];

void main()
{
    uint g = p.group0 + gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    uint begin = g * p.chunk, end = min(begin + p.chunk, p.n);
    precise float s = 0.0, c = 0.0;
    for (uint i = begin + t; i < end; i += WG) {
#if SQUARE
        precise float v = x[i - p.x0] * x[i - p.x0];
#else
        precise float v = x[i - p.x0];
#endif
        precise float y = v - c;
        precise float s2 = s + y;
        c = (s2 - s) - y;
        s = s2;
    }
    part[t] = s;
    barrier();
    // WG need not be a power of two: fold the top into the largest power below.
    uint pow2 = 1u;
    while (pow2 * 2u <= WG) pow2 *= 2u;
    if (t + pow2 < WG) part[t] += part[t + pow2];
    barrier();
    for (uint h = pow2 / 2u; h > 0u; h /= 2u) {
        if (t < h) part[t] += part[t + h];
        barrier();
    }
    if (t == 0u) o[p.out_index + g] = part[0];
}
