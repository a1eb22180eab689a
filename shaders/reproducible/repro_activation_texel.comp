#version 450
// variant: swiglu -DOP=0
// variant: swiglu_back -DOP=1
// variant: gelu -DOP=2
// variant: gelu_back -DOP=3
// repro_activation_texel: repro_activation.comp's formulas (repro_ops.glsl,
// per element) for the texel family (CPU devices), in the access pattern
// of activation_texel.comp: a, b, c read as vec4 through RGBA32F texel
// views, the outputs written as vec4 to storage (the backward reads the
// gradients it adds to through views too: each element is read and
// written by one invocation only, read first); the last n % 4 elements
// one by one. Each component takes the scalar formula: how a float is
// loaded never changes its bits.
#include "repro_ops.glsl"
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Push { uint n; float a; } p;
layout(binding = 0) uniform samplerBuffer ta;
layout(binding = 1) uniform samplerBuffer tb;
layout(binding = 2) uniform samplerBuffer tc;
layout(binding = 3) uniform samplerBuffer td;
layout(binding = 4) uniform samplerBuffer te;
layout(std430, binding = 5) writeonly buffer BC { vec4 c[]; };
layout(std430, binding = 6) writeonly buffer BD { vec4 d[]; };
layout(std430, binding = 7) writeonly buffer BE { vec4 e[]; };

// Chunk j, lanes where mask is true (all of them except in the tail).
void chunk(uint j, bvec4 mask)
{
    vec4 a = texelFetch(ta, int(j));
#if OP == 0 || OP == 2
#if OP == 0
    vec4 u = texelFetch(tb, int(j));
    vec4 r = vec4(repro_swiglu_h(a.x, u.x), repro_swiglu_h(a.y, u.y), repro_swiglu_h(a.z, u.z), repro_swiglu_h(a.w, u.w));
#else
    vec4 r = vec4(repro_gelu(a.x), repro_gelu(a.y), repro_gelu(a.z), repro_gelu(a.w));
#endif
    if (all(mask))
        c[j] = r;
    else
        for (uint k = 0u; k < 4u; k++)
            if (mask[k])
                c[j][k] = r[k];
#else
    vec4 dy = texelFetch(tc, int(j)), rd = texelFetch(td, int(j));
#if OP == 1
    vec4 u = texelFetch(tb, int(j)), re = texelFetch(te, int(j));
    for (int k = 0; k < 4; k++) {
        precise float s = repro_sigmoid(a[k]);
        rd[k] = repro_swiglu_dgate_s(rd[k], a[k], s, u[k], dy[k]);
        re[k] = repro_swiglu_dup_s(re[k], a[k], s, dy[k]);
    }
#else
    for (int k = 0; k < 4; k++)
        rd[k] = repro_gelu_dx(rd[k], a[k], dy[k]);
#endif
    if (all(mask)) {
        d[j] = rd;
#if OP == 1
        e[j] = re;
#endif
    } else
        for (uint k = 0u; k < 4u; k++)
            if (mask[k]) {
                d[j][k] = rd[k];
#if OP == 1
                e[j][k] = re[k];
#endif
            }
#endif
}

void main()
{
    uint n4 = p.n / 4u, stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint j = gl_GlobalInvocationID.x; j < n4; j += stride)
        chunk(j, bvec4(true));
    if (gl_GlobalInvocationID.x == 0u && p.n % 4u != 0u) {
        uint r = p.n % 4u;
        chunk(n4, bvec4(r > 0u, r > 1u, r > 2u, false));
    }
}
