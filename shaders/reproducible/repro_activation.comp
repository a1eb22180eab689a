#version 450
// variant: swiglu -DOP=0
// variant: swiglu_back -DOP=1
// variant: gelu -DOP=2
// variant: gelu_back -DOP=3
// variant: swiglu_runs -DOP=0 -DRUNS=1
// variant: swiglu_back_runs -DOP=1 -DRUNS=1
// variant: gelu_runs -DOP=2 -DRUNS=1
// variant: gelu_back_runs -DOP=3 -DRUNS=1
// repro_activation: the reproducible mode's MLP activations over n
// elements, the formulas of repro_ops.glsl (σ, GELU from repro_math.glsl):
//   swiglu:      h = (g·σ(g))·u
//   swiglu_back: dg = dg + ((dh·u)·σ(g))·(1 + g·(1 − σ(g))), du = du + (dh·g)·σ(g)
//   gelu:        y = repro_gelu(x)
//   gelu_back:   dx = dx + dy·gelu'(x)   (repro_gelu_grad)
// Bindings: the inputs a = gate or x, b = up (or x again), then the
// forward's output c, or the backward's further inputs c = dh or dy and
// d, e = the gradients, then d, e as outputs (an in-place gradient is
// bound twice). The _runs variants (the texel family) read the inputs
// through R32F texel views, the others through storage.
#include "elementwise.glsl"
#include "repro_ops.glsl"
#define BACK (OP == 1 || OP == 3)
#if RUNS
layout(binding = 0) uniform samplerBuffer TA;
layout(binding = 1) uniform samplerBuffer TB;
#define A(i) texelFetch(TA, int(i)).x
#define B(i) texelFetch(TB, int(i)).x
#if BACK
layout(binding = 2) uniform samplerBuffer TC;
layout(binding = 3) uniform samplerBuffer TD;
layout(binding = 4) uniform samplerBuffer TE;
#define C(i) texelFetch(TC, int(i)).x
#define D(i) texelFetch(TD, int(i)).x
#define E(i) texelFetch(TE, int(i)).x
#endif
#else
layout(std430, binding = 0) readonly buffer BA { float a[]; };
layout(std430, binding = 1) readonly buffer BB { float b[]; };
#define A(i) a[i]
#define B(i) b[i]
#if BACK
layout(std430, binding = 2) readonly buffer BC { float c[]; };
layout(std430, binding = 3) readonly buffer BD { float d[]; };
layout(std430, binding = 4) readonly buffer BE { float e[]; };
#define C(i) c[i]
#define D(i) d[i]
#define E(i) e[i]
#endif
#endif
#if BACK
layout(std430, binding = 5) writeonly buffer OD { float od[]; };
layout(std430, binding = 6) writeonly buffer OE { float oe[]; };
#else
layout(std430, binding = 2) writeonly buffer OC { float oc[]; };
#endif

void main()
{
    FOR_EACH_OF_FAMILY(i) {
#if OP == 0
        oc[i] = repro_swiglu_h(A(i), B(i));
#elif OP == 1
        float g = A(i), dh = C(i);
        od[i] = repro_swiglu_dgate(D(i), g, B(i), dh);
        oe[i] = repro_swiglu_dup(E(i), g, dh);
#elif OP == 2
        oc[i] = repro_gelu(A(i));
#else
        od[i] = repro_gelu_dx(D(i), A(i), C(i));
#endif
    }
}
