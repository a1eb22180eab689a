#version 450
// variant: div -DFN=0
// variant: sqrt -DFN=1
// variant: exp -DFN=2
// variant: log -DFN=3
// variant: tanh -DFN=4
// variant: sigmoid -DFN=5
// variant: gelu -DFN=6
// variant: sin -DFN=7
// variant: cos -DFN=8
// variant: sqrt_fast -DFN=9
// variant: recip_fast -DFN=10
// repro_math_test: applies one routine of repro_math.glsl (the variant's
// name; div takes a / b) to n inputs, for tests/test_repro_math.c, which
// compares the bits with the C build of the same source. One routine per
// module (a CPU device runs every side of a branch, a switch's cases too).
// Inputs and outputs are float bit patterns.
#include "repro_trig.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer BA { uint a[]; };
layout(std430, binding = 1) readonly buffer BB { uint b[]; };
layout(std430, binding = 2) writeonly buffer BO { uint o[]; };
layout(push_constant) uniform P { uint n, offset; } p;

void main()
{
    uint i = p.offset + gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    float x = uintBitsToFloat(a[i]);
#if FN == 0
    float r = repro_div(x, uintBitsToFloat(b[i]));
#elif FN == 1
    float r = repro_sqrt(x);
#elif FN == 2
    float r = repro_exp(x);
#elif FN == 3
    float r = repro_log(x);
#elif FN == 4
    float r = repro_tanh(x);
#elif FN == 5
    float r = repro_sigmoid(x);
#elif FN == 6
    float r = repro_gelu(x);
#elif FN == 7
    float r = repro_sin(x);
#elif FN == 8
    float r = repro_cos(x);
#elif FN == 9
    float r = repro_sqrt_fast(x);
#else
    float r = repro_recip_fast(x);
#endif
    o[i] = floatBitsToUint(r);
}
