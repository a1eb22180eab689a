#version 450
// y = x over n floats.
#include "elementwise.glsl"
layout(std430, binding = 0) readonly buffer BX { float x[]; };
layout(std430, binding = 1) writeonly buffer BY { float y[]; };
void main() { FOR_EACH_ELEMENT(i) y[i] = x[i]; }
