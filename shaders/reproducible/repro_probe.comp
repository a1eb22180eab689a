#version 450
// repro_probe: the start-up known-answer check of the reproducible mode
// (src/repro/repro_probe.c holds the cases and their answers). Case i
// applies operation op to a, b, c, all `precise`, under the profile's float
// controls: 0 a+b, 1 a−b, 2 a·b, 3 a·b+c (fused, it differs), 4 (a·b)·c
// (reassociated, it differs), 5 a·b+b·c (factored, it differs), 6 (a+b)+c,
// 7 a<b, 8 a==b (1.0 or 0.0). The inputs come from a buffer, so no
// compiler can fold them.
#include "repro_math.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer BC { uvec4 cases[]; };
layout(std430, binding = 1) writeonly buffer BO { uint o[]; };
layout(push_constant) uniform P { uint n; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    uint op = cases[i].x;
    float a = uintBitsToFloat(cases[i].y), b = uintBitsToFloat(cases[i].z), c = uintBitsToFloat(cases[i].w);
    precise float r;
    if (op == 0u) {
        r = a + b;
    } else if (op == 1u) {
        r = a - b;
    } else if (op == 2u) {
        r = a * b;
    } else if (op == 3u) {
        precise float t = a * b;
        r = t + c;
    } else if (op == 4u) {
        precise float t = a * b;
        r = t * c;
    } else if (op == 5u) {
        precise float t = a * b;
        precise float u = b * c;
        r = t + u;
    } else if (op == 6u) {
        precise float t = a + b;
        r = t + c;
    } else if (op == 7u) {
        r = a < b ? 1.0f : 0.0f;
    } else {
        r = a == b ? 1.0f : 0.0f;
    }
    o[i] = floatBitsToUint(r);
}
