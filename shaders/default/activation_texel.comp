#version 450
// variant: swiglu -DOP=0
// variant: swiglu_back -DOP=1
// variant: gelu -DOP=2
// variant: gelu_back -DOP=3
// variant: geglu -DOP=4
// variant: geglu_back -DOP=5
// The MLP activations of activation.comp (same formulas), texel family
// (CPU devices): inputs a, b, c read as vec4 through RGBA32F texel views
// (buffers hold whole vec4s), outputs written as vec4 to storage; the last
// n % 4 elements are done one by one so nothing past n is written. The
// backward reads the gradients it adds to (d, e) through views too (a
// storage load is a scalar load per lane and component on llvmpipe: the
// read-modify-write through storage took the SwiGLU backward 3x longer);
// each element is read, then written, by one invocation only.
// Invocations stride over the n/4 chunks.
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

#include "gelu.glsl"

// Chunk j, lanes where mask is true (all of them except in the tail).
void chunk(uint j, bvec4 mask)
{
#if OP == 0
    vec4 g = texelFetch(ta, int(j));
    vec4 r = g / (1.0 + exp(-g)) * texelFetch(tb, int(j));
    if (all(mask)) c[j] = r;
    else for (uint k = 0u; k < 4u; k++) if (mask[k]) c[j][k] = r[k];
#elif OP == 1
    vec4 g = texelFetch(ta, int(j)), s = 1.0 / (1.0 + exp(-g)), dh = texelFetch(tc, int(j));
    vec4 rd = texelFetch(td, int(j)) + dh * texelFetch(tb, int(j)) * s * (1.0 + g * (1.0 - s)),
         re = texelFetch(te, int(j)) + dh * g * s;
    if (all(mask)) { d[j] = rd; e[j] = re; }
    else for (uint k = 0u; k < 4u; k++) if (mask[k]) { d[j][k] = rd[k]; e[j][k] = re[k]; }
#elif OP == 2
    vec4 x = texelFetch(ta, int(j));
    vec4 r = x * GELU_S(x);
    if (all(mask)) c[j] = r;
    else for (uint k = 0u; k < 4u; k++) if (mask[k]) c[j][k] = r[k];
#elif OP == 3
    vec4 x = texelFetch(ta, int(j)), s = GELU_S(x);
    vec4 rd = texelFetch(td, int(j)) + texelFetch(tc, int(j)) * GELU_DS(x, s);
    if (all(mask)) d[j] = rd;
    else for (uint k = 0u; k < 4u; k++) if (mask[k]) d[j][k] = rd[k];
#elif OP == 4
    vec4 x = texelFetch(ta, int(j));
    vec4 r = x * GELU_S(x) * texelFetch(tb, int(j));
    if (all(mask)) c[j] = r;
    else for (uint k = 0u; k < 4u; k++) if (mask[k]) c[j][k] = r[k];
#else
    vec4 x = texelFetch(ta, int(j)), s = GELU_S(x), dh = texelFetch(tc, int(j));
    vec4 rd = texelFetch(td, int(j)) + dh * texelFetch(tb, int(j)) * GELU_DS(x, s),
         re = texelFetch(te, int(j)) + dh * (x * s);
    if (all(mask)) { d[j] = rd; e[j] = re; }
    else for (uint k = 0u; k < 4u; k++) if (mask[k]) { d[j][k] = rd[k]; e[j][k] = re[k]; }
#endif
}

void main()
{
    uint n4 = p.n / 4u, stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint j = gl_GlobalInvocationID.x; j < n4; j += stride) chunk(j, bvec4(true));
    if (gl_GlobalInvocationID.x == 0u && p.n % 4u != 0u) {
        uint r = p.n % 4u;
        chunk(n4, bvec4(r > 0u, r > 1u, r > 2u, false));
    }
}
