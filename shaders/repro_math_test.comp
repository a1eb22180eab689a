#version 450
// repro_math_test: applies one routine of repro_math.glsl to n inputs, for
// tests/test_repro_math.c, which compares the bits with the C build of the
// same source. fn: 0 div (a / b), 1 sqrt, 2 exp, 3 log, 4 tanh, 5 sigmoid,
// 6 gelu, 7 sin, 8 cos. Inputs and outputs are float bit patterns.
#include "repro_math.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer BA { uint a[]; };
layout(std430, binding = 1) readonly buffer BB { uint b[]; };
layout(std430, binding = 2) writeonly buffer BO { uint o[]; };
layout(push_constant) uniform P { uint n, fn, offset; } p;

void main()
{
    uint i = p.offset + gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    float x = uintBitsToFloat(a[i]);
    float r;
    switch (p.fn) {
    case 0u: r = repro_div(x, uintBitsToFloat(b[i])); break;
    case 1u: r = repro_sqrt(x); break;
    case 2u: r = repro_exp(x); break;
    case 3u: r = repro_log(x); break;
    case 4u: r = repro_tanh(x); break;
    case 5u: r = repro_sigmoid(x); break;
    case 6u: r = repro_gelu(x); break;
    case 7u: r = repro_sin(x); break;
    default: r = repro_cos(x); break;
    }
    o[i] = floatBitsToUint(r);
}
