#version 450
// variant: -
// variant: sq -DSQUARE=1
// repro_sum: one pass of the reproducible sum of a vector (repro_tree.glsl;
// src/repro/repro_sum.c runs the passes): each workgroup writes the tree of
// its aligned block of gl_WorkGroupSize.x · 2^LOGC elements, the last pass
// the total plus the final +0. The sq variant (the first pass of a sum of
// squares) takes each element squared, x·x rounded on its own.
#include "repro_math.glsl"
layout(local_size_x_id = 0) in;               // a power of two
layout(constant_id = 1) const uint LOGC = 2u; // at most 10
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
// Reads x[x0 .. x0 + n), writes one partial per workgroup at y[y0 + id];
// last != 0: a single workgroup's total, plus the final +0.
layout(push_constant) uniform P { uint n, x0, y0, last; } p;
#ifdef SQUARE
float square(uint i)
{
    precise float v = x[p.x0 + i] * x[p.x0 + i];
    return v;
}
#define REPRO_TREE_LOAD(i) square(i)
#else
#define REPRO_TREE_LOAD(i) x[p.x0 + (i)]
#endif
#include "repro_tree.glsl"

void main()
{
    uint first = (gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x) << LOGC;
    precise float total = repro_tree_workgroup(repro_tree_run(first, LOGC, p.n));
    if (p.last != 0u)
        total = total + 0.0f;
    if (gl_LocalInvocationID.x == 0u)
        y[p.y0 + gl_WorkGroupID.x] = total;
}
