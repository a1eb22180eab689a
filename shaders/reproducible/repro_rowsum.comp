#version 450
// repro_rowsum: y[r] = the reproducible sum (repro_tree.glsl) of row r of
// x (rows of n floats), one workgroup per row: each invocation sums an
// aligned run of 2^log_run elements, the workgroup combines the runs, plus
// the final +0. log_run is the host's choice (gl_WorkGroupSize.x · 2^log_run
// >= n); neither it nor the workgroup size changes the bits. The template
// for the row reductions of the norms and the loss.
#include "repro_math.glsl"
layout(local_size_x_id = 0) in; // a power of two
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint rows, n, log_run; } p;
#define REPRO_TREE_LOAD(i) x[row * p.n + (i)]
uint row;
#include "repro_tree.glsl"

void main()
{
    row = gl_WorkGroupID.x;
    if (row >= p.rows)
        return;
    uint first = gl_LocalInvocationID.x << p.log_run;
    precise float total = repro_tree_workgroup(repro_tree_run(first, p.log_run, p.n));
    total = total + 0.0f;
    if (gl_LocalInvocationID.x == 0u)
        y[row] = total;
}
