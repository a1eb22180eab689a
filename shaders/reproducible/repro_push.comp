#version 450
// variant: -
// variant: vec4 -DVEC4=1
// repro_push: the binary counter that sums a micro-batch's samples inside
// a parameter gradient in the canonical pairwise tree (precision:
// reproducible; src/repro/repro_samples.c). Sample j's value is in g (its
// rows added to +0 in row order); each set low bit l of j is a complete
// left subtree on the stack: g = s[l] + g. Then g goes on the first free
// level and g restarts at +0 for sample j + 1, or, after the last sample
// (all `levels` bits set), stays: the micro-batch's sum. The stack holds
// groups of four elements (element o's level l at
// s[((o / 4)·levels + l)·4 + o % 4]; include/vktrain/repro.h) so a window
// of elements from a multiple of 4 binds one range of it. One invocation
// per element.
#include "repro_math.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint n; uint levels; uint j; } p;
#if VEC4
// one invocation per group of four elements (n % 4 == 0), the gradient and
// the stack as RGBA32F storage texels: llvmpipe gathers a texel for its 8
// lanes where a storage float is one scalar access per lane
layout(binding = 0, rgba32f) uniform imageBuffer g;
layout(binding = 1, rgba32f) uniform imageBuffer s;
#define FT vec4
#define G_LOAD(o) imageLoad(g, int(o))
#define G_STORE(o, v) imageStore(g, int(o), v);
#define S_LOAD(o, l) imageLoad(s, int((o) * p.levels + (l)))
#define S_STORE(o, l, v) imageStore(s, int((o) * p.levels + (l)), v);
#define UNITS (p.n / 4u)
#else
layout(std430, binding = 0) buffer BG { float g[]; };
layout(std430, binding = 1) buffer BS { float s[]; };
#define FT float
#define S_AT(o, l) ((((o) >> 2) * p.levels + (l)) * 4u + ((o) & 3u))
#define G_LOAD(o) g[o]
#define G_STORE(o, v) g[o] = v;
#define S_LOAD(o, l) s[S_AT(o, l)]
#define S_STORE(o, l, v) s[S_AT(o, l)] = v;
#define UNITS p.n
#endif

void main()
{
    uint o = gl_GlobalInvocationID.x;
    if (o >= UNITS)
        return;
    precise FT acc = G_LOAD(o);
    uint l = 0u;
    for (; l < p.levels && ((p.j >> l) & 1u) != 0u; l++) {
        precise FT t = S_LOAD(o, l) + acc;
        acc = t;
    }
    if (l < p.levels) {
        S_STORE(o, l, acc)
        G_STORE(o, FT(0.0f))
    } else {
        G_STORE(o, acc)
    }
}
