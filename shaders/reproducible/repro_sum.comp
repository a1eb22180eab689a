#version 450
// variant: -
// variant: sq -DSQUARE=1
// variant: tex -DTEX=1
// variant: sq_tex -DSQUARE=1 -DTEX=1
// repro_sum: one pass of the reproducible sum of a vector (repro_tree.glsl;
// src/repro/repro_sum.c runs the passes): each workgroup writes the tree of
// its aligned block of gl_WorkGroupSize.x · 2^LOGC elements, the last pass
// the total plus the final +0. The sq variant (the first pass of a sum of
// squares) takes each element squared, x·x rounded on its own. The _tex
// variants (a first pass on CPU devices) read x through an R32F texel
// view, which llvmpipe loads faster than storage.
#include "repro_math.glsl"
layout(local_size_x_id = 0) in;               // a power of two
layout(constant_id = 1) const uint LOGC = 2u; // at most 10
#if TEX
layout(binding = 0) uniform samplerBuffer xt;
#define X(i) texelFetch(xt, int(i)).x
#else
layout(std430, binding = 0) readonly buffer BX { float x[]; };
#define X(i) x[i]
#endif
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
// Reads x[x0 .. x0 + n), writes one partial per workgroup at y[y0 + id];
// last != 0: a single workgroup's total, plus the final +0.
layout(push_constant) uniform P { uint n, x0, y0, last; } p;
#ifdef SQUARE
float square(uint i)
{
    precise float v = X(p.x0 + i) * X(p.x0 + i);
    return v;
}
#define REPRO_TREE_LOAD(i) square(i)
#else
#define REPRO_TREE_LOAD(i) X(p.x0 + (i))
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
