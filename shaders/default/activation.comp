#version 450
// variant: swiglu -DOP=0
// variant: swiglu_back -DOP=1
// variant: gelu -DOP=2
// variant: gelu_back -DOP=3
// variant: geglu -DOP=4
// variant: geglu_back -DOP=5
// The MLP activations, elementwise over n:
//   swiglu:      h = silu(g)·u, silu(g) = g·σ(g)
//   swiglu_back: dg += dh·u·σ(g)·(1 + g·(1 − σ(g))),  du += dh·silu(g)
//   gelu:        y = 0.5·x·(1 + tanh(k·(x + 0.044715·x³))), k = √(2/π)
//   gelu_back:   dx += dy·gelu'(x)   (both computed as in gelu.glsl)
//   geglu:       h = gelu(g)·u (Gemma's MLP)
//   geglu_back:  dg += dh·u·gelu'(g),  du += dh·gelu(g)
// Bindings: a = gate or x, b = up (or unused), c = output or dh/dy, d/e = grads.
#include "elementwise.glsl"
layout(std430, binding = 0) readonly buffer BA { float a[]; };
layout(std430, binding = 1) readonly buffer BB { float b[]; };
layout(std430, binding = 2) buffer BC { float c[]; };
layout(std430, binding = 3) buffer BD { float d[]; };
layout(std430, binding = 4) buffer BE { float e[]; };

#include "gelu.glsl"

void main()
{
    FOR_EACH_ELEMENT(i) {
#if OP == 0
        float g = a[i];
        c[i] = g / (1.0 + exp(-g)) * b[i];
#elif OP == 1
        float g = a[i], s = 1.0 / (1.0 + exp(-g)), dh = c[i];
        d[i] += dh * b[i] * s * (1.0 + g * (1.0 - s));
        e[i] += dh * g * s;
#elif OP == 2
        float x = a[i];
        c[i] = x * GELU_S(x);
#elif OP == 3
        float x = a[i], s = GELU_S(x);
        d[i] += c[i] * GELU_DS(x, s);
#elif OP == 4
        float x = a[i];
        c[i] = x * GELU_S(x) * b[i];
#else
        float x = a[i], s = GELU_S(x), dh = c[i];
        d[i] += dh * b[i] * GELU_DS(x, s);
        e[i] += dh * (x * s);
#endif
    }
}
