#version 450
// variant: add -DOP=0
// variant: copy -DOP=1
// variant: scale -DOP=2
// variant: axpy -DOP=3
// variant: bias -DOP=4
// repro_elementwise_texel: repro_elementwise.comp's add, copy, scale and
// axpy for the texel family (CPU devices), in the access pattern of
// elementwise_texel.comp: inputs read as vec4 through RGBA32F texel views,
// the output written as vec4 to storage (scale and axpy read their in/out
// buffer through the view and write it through storage: each element is
// read and written by one invocation only, read first); the last n % 4
// elements one by one. Each subgroup takes a run of consecutive chunks
// (FOR_EACH_RUN: llvmpipe's prefetcher follows it, not a grid stride).
// The same single rounded operation per element as
// repro_elementwise.comp (a vec4 operation is one per component; how a
// float is loaded never changes its bits):
//   add:   z = x + y        copy:  y = x
//   scale: x = x·a          axpy:  y = y + a·x (a product, then a sum)
//   bias:  y[r, c] = y[r, c] + x[c] (x the bias: C % 4 == 0, so chunk j
//          of y takes bias texel j mod C/4; n = rows·C)
#define RUNS 1
#define CUSTOM_PUSH
#if OP == 4
layout(push_constant) uniform Push { uint n; uint C; } p;
#else
layout(push_constant) uniform Push { uint n; float a; } p;
#endif
#include "elementwise.glsl"
#include "repro_math.glsl"
layout(binding = 0) uniform samplerBuffer tx;
#if OP == 0 || OP == 3 || OP == 4
layout(binding = 1) uniform samplerBuffer ty;
layout(std430, binding = 2) writeonly buffer BO { vec4 o[]; };
#else
layout(std430, binding = 1) writeonly buffer BO { vec4 o[]; };
#endif

// Chunk j, lanes where mask is true (all of them except in the tail).
// (bias: m is j's texel of the bias, j mod C/4)
void chunk(uint j, uint m, bvec4 mask)
{
#if OP == 0
    precise vec4 r = texelFetch(tx, int(j)) + texelFetch(ty, int(j));
#elif OP == 1
    vec4 r = texelFetch(tx, int(j));
#elif OP == 2
    precise vec4 r = texelFetch(tx, int(j)) * p.a;
#elif OP == 3
    precise vec4 t = p.a * texelFetch(tx, int(j));
    precise vec4 r = texelFetch(ty, int(j)) + t;
#else
    precise vec4 r = texelFetch(ty, int(j)) + texelFetch(tx, int(m));
#endif
    if (all(mask))
        o[j] = r;
    else
        for (uint k = 0u; k < 4u; k++)
            if (mask[k])
                o[j][k] = r[k];
}

void main()
{
    uint n4 = p.n / 4u;
#if OP == 4
    // the bias texel kept beside j as j advances (a CPU device divides lane
    // by lane: one remainder per invocation, not per step)
    uint c4 = p.C / 4u, m = 0u, sm = gl_SubgroupSize % c4;
    bool started = false;
    FOR_EACH_RUN(j, n4) {
        if (!started)
            m = j % c4, started = true;
        chunk(j, m, bvec4(true));
        m += sm;
        m = m >= c4 ? m - c4 : m;
    }
    uint tail = n4 % c4;
#else
    FOR_EACH_RUN(j, n4)
        chunk(j, 0u, bvec4(true));
    uint tail = 0u;
#endif
    if (gl_GlobalInvocationID.x == 0u && p.n % 4u != 0u) {
        uint r = p.n % 4u;
        chunk(n4, tail, bvec4(r > 0u, r > 1u, r > 2u, false));
    }
}
