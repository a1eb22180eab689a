#version 450
// repro_sum: one pass of the reproducible sum (src/repro/repro_sum.c runs
// the passes). The sum of n floats is fixed as the pairwise tree over the
// array padded with +0 to a power of two, adjacent pairs first, plus a
// final +0 (which makes a −0 total +0, so padding to any larger power of
// two gives the same bits). Its shape depends on the element index only:
// an invocation sums an aligned run of 2^LOGC elements as a tree (a stack
// of one partial per level), the workgroup combines its invocations' runs
// as a tree in shared memory, and the next pass does the same over the
// workgroups' results. Any workgroup size and any LOGC give the same bits.
#include "repro_math.glsl"
layout(local_size_x_id = 0) in;      // a power of two
layout(constant_id = 1) const uint LOGC = 2u; // at most 10
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
// Reads x[x0 .. x0 + n), writes one partial per workgroup at y[y0 + id];
// last != 0: a single workgroup's total, plus the final +0.
layout(push_constant) uniform P { uint n, x0, y0, last; } p;
shared float s[gl_WorkGroupSize.x];

void main()
{
    uint lid = gl_LocalInvocationID.x;
    uint run = 1u << LOGC;
    uint first = (gl_WorkGroupID.x * gl_WorkGroupSize.x + lid) * run;
    precise float stack[16];
    for (uint j = 0u; j < run; j++) {
        uint i = first + j;
        precise float v = i < p.n ? x[p.x0 + i] : 0.0f;
        uint level = 0u;
        while (((j >> level) & 1u) != 0u) {
            v = stack[level] + v;
            level++;
        }
        stack[level] = v;
    }
    s[lid] = stack[LOGC];
    barrier();
    for (uint h = 1u; h < gl_WorkGroupSize.x; h <<= 1) {
        if ((lid & (2u * h - 1u)) == 0u) {
            precise float v = s[lid] + s[lid + h];
            s[lid] = v;
        }
        barrier();
    }
    if (lid == 0u) {
        precise float total = s[0];
        if (p.last != 0u)
            total = total + 0.0f;
        y[p.y0 + gl_WorkGroupID.x] = total;
    }
}
