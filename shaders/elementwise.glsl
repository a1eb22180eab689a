// elementwise: the shape shared by the 1-D elementwise kernels. The
// workgroup size is specialization constant 0 (from the device's subgroup
// size); invocations stride over the grid so any n fits the dispatch limits.
// A shader with other push constants defines CUSTOM_PUSH and its own `p`
// with `n` first.
layout(local_size_x_id = 0) in;
#ifndef CUSTOM_PUSH
layout(push_constant) uniform Push { uint n; float a; } p;
#endif

#define FOR_EACH_ELEMENT(i) \
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x)
