#version 450
// y[r, c] += bias[c] over (rows, C), n = rows·C; the gradient is colsum_plain.
#define CUSTOM_PUSH
layout(push_constant) uniform Push { uint n; uint C; } p;
#include "elementwise.glsl"
layout(std430, binding = 0) readonly buffer BB { float bias[]; };
layout(std430, binding = 1) buffer BY { float y[]; };
void main() { FOR_EACH_ELEMENT(i) y[i] += bias[i % p.C]; }
