#version 450
// y += a * x over n floats: a product and a sum, each rounded (precise:
// never fused into an fma), so every device gives the bits C gives.
#include "elementwise.glsl"
layout(std430, binding = 0) readonly buffer BX { float x[]; };
layout(std430, binding = 1) buffer BY { float y[]; };
void main()
{
    FOR_EACH_ELEMENT(i) {
        precise float t = p.a * x[i];
        precise float s = y[i] + t;
        y[i] = s;
    }
}
