#version 450
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
layout(std430, binding = 0) buffer BG { float g[]; };
layout(std430, binding = 1) buffer BS { float s[]; };
#define S_AT(o, l) ((((o) >> 2) * p.levels + (l)) * 4u + ((o) & 3u))

void main()
{
    uint o = gl_GlobalInvocationID.x;
    if (o >= p.n)
        return;
    precise float acc = g[o];
    uint l = 0u;
    for (; l < p.levels && ((p.j >> l) & 1u) != 0u; l++) {
        precise float t = s[S_AT(o, l)] + acc;
        acc = t;
    }
    if (l < p.levels) {
        s[S_AT(o, l)] = acc;
        g[o] = 0.0f;
    } else {
        g[o] = acc;
    }
}
