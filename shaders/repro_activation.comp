#version 450
// variant: swiglu -DOP=0
// variant: swiglu_back -DOP=1
// variant: gelu -DOP=2
// variant: gelu_back -DOP=3
// variant: swiglu_runs -DOP=0 -DRUNS=1
// variant: swiglu_back_runs -DOP=1 -DRUNS=1
// variant: gelu_runs -DOP=2 -DRUNS=1
// variant: gelu_back_runs -DOP=3 -DRUNS=1
// repro_activation: the reproducible profile's MLP activations over n
// elements, the formulas of repro_ops.glsl (σ, GELU from repro_math.glsl):
//   swiglu:      h = (g·σ(g))·u
//   swiglu_back: dg = dg + ((dh·u)·σ(g))·(1 + g·(1 − σ(g))), du = du + (dh·g)·σ(g)
//   gelu:        y = repro_gelu(x)
//   gelu_back:   dx = dx + dy·gelu'(x)   (repro_gelu_grad)
// Bindings as activation.comp: a = gate or x, b = up, c = output or dh/dy,
// d, e = the gradients.
#include "elementwise.glsl"
#include "repro_ops.glsl"
layout(std430, binding = 0) readonly buffer BA { float a[]; };
layout(std430, binding = 1) readonly buffer BB { float b[]; };
layout(std430, binding = 2) buffer BC { float c[]; };
layout(std430, binding = 3) buffer BD { float d[]; };
layout(std430, binding = 4) buffer BE { float e[]; };

void main()
{
    FOR_EACH_OF_FAMILY(i) {
#if OP == 0
        c[i] = repro_swiglu_h(a[i], b[i]);
#elif OP == 1
        float g = a[i], dh = c[i];
        d[i] = repro_swiglu_dgate(d[i], g, b[i], dh);
        e[i] = repro_swiglu_dup(e[i], g, dh);
#elif OP == 2
        c[i] = repro_gelu(a[i]);
#else
        d[i] = repro_gelu_dx(d[i], a[i], c[i]);
#endif
    }
}
