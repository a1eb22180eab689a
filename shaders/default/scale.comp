#version 450
// x *= a, in place over n floats.
#include "elementwise.glsl"
layout(std430, binding = 0) buffer BX { float x[]; };
void main() { FOR_EACH_ELEMENT(i) x[i] *= p.a; }
