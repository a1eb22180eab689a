#version 450
// variant: sum -DSQUARE=0
// variant: sumsq -DSQUARE=1
// reduce.comp's first pass, texel family (CPU devices): x read as vec4
// through an RGBA32F texel view (the buffer holds whole vec4s), so a
// chunk's p.chunk elements (a multiple of 4) are chunk/4 texels. Each
// invocation sums its strided share of texels, component by component,
// with Kahan compensation (elements at or past n are skipped); the
// workgroup adds the partial sums in reduce.comp's fixed tree. The result
// depends only on n, chunk and the workgroup size; the error bound of
// op_reduce.c holds (it allows any order within an invocation).
#include "wg1d.glsl"
// group0 and x0 (reduce.comp's range dispatches) are 0 here: one dispatch
// over the whole of x.
layout(push_constant) uniform Push { uint n; uint chunk; uint out_index; uint group0; uint x0; } p;
layout(binding = 0) uniform samplerBuffer x;
layout(std430, binding = 1) buffer BO { float o[]; };

shared float part[WG_MAX];

void main()
{
    uint g = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    uint begin = g * p.chunk, end = min(begin + p.chunk, p.n);
    precise float s = 0.0, c = 0.0;
    for (uint j = begin / 4u + t; 4u * j < end; j += WG) {
        vec4 xv = texelFetch(x, int(j));
        for (uint k = 0u; k < 4u; k++) {
            if (4u * j + k >= end) break;
#if SQUARE
            precise float v = xv[k] * xv[k];
#else
            precise float v = xv[k];
#endif
            precise float y = v - c;
            precise float s2 = s + y;
            c = (s2 - s) - y;
            s = s2;
        }
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
