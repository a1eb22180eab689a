#version 450
// z = x + y, elementwise over n floats (z may alias neither input).
#include "elementwise.glsl"
layout(std430, binding = 0) readonly buffer BX { float x[]; };
layout(std430, binding = 1) readonly buffer BY { float y[]; };
layout(std430, binding = 2) writeonly buffer BZ { float z[]; };
void main() { FOR_EACH_ELEMENT(i) z[i] = x[i] + y[i]; }
