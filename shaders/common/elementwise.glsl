// elementwise: the shape shared by the 1-D elementwise kernels. The
// workgroup size is specialization constant 0 (from the device's subgroup
// size); invocations stride over the grid so any n fits the dispatch limits.
// A shader with other push constants defines CUSTOM_PUSH and its own `p`
// with `n` first.
#if defined(RUNS) && RUNS != 0
#extension GL_KHR_shader_subgroup_basic : enable
#endif
layout(local_size_x_id = 0) in;
#ifndef CUSTOM_PUSH
layout(push_constant) uniform Push { uint n; float a; } p;
#endif

#define FOR_EACH_ELEMENT(i) \
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x)

// FOR_EACH_RUN(j, count): j over 0 .. count-1 like FOR_EACH_ELEMENT, but
// each subgroup takes one contiguous run of indices, its lanes side by
// side, run after run. For the texel kernels: llvmpipe runs a subgroup's
// whole loop before the next subgroup, and a texel fetch is a call whose
// loads the CPU's stride prefetcher cannot follow, so under a grid stride
// every step of a streaming kernel waits for memory (AdamW ran 3x slower).
// The shader enables GL_KHR_shader_subgroup_basic.
#define FOR_EACH_RUN(j, count)                                                                              \
    for (uint run_ = (gl_NumWorkGroups.x * gl_WorkGroupSize.x), per_ = ((count) + run_ - 1u) / run_,       \
              j = (gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_SubgroupID * gl_SubgroupSize) * per_ +         \
                  gl_SubgroupInvocationID,                                                                  \
              k_ = 0u;                                                                                      \
         k_ < per_ && j < (count); k_++, j += gl_SubgroupSize)

// FOR_EACH_OF_FAMILY(i): FOR_EACH_RUN(i, p.n) in a variant compiled with
// -DRUNS=1, for the texel family (CPU devices, where FOR_EACH_RUN is what
// the texel kernels use), FOR_EACH_ELEMENT(i) otherwise: kernels that
// serve both families (the reproducible ones) compile both.
#if defined(RUNS) && RUNS != 0
#define FOR_EACH_OF_FAMILY(i) FOR_EACH_RUN(i, p.n)
#else
#define FOR_EACH_OF_FAMILY(i) FOR_EACH_ELEMENT(i)
#endif
