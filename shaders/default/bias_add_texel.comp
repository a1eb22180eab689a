#version 450
// bias_add.comp, texel family (CPU devices): y[r, c] += bias[c] in vec4
// chunks, bias and y read through RGBA32F texel views, y written as vec4
// to storage (the same buffer: each chunk read, then written, by one
// invocation). C % 4 == 0, so a chunk never straddles two rows and the
// chunk j of y adds the bias texel j % (C/4) (n = rows·C, a multiple of 4).
#extension GL_KHR_shader_subgroup_basic : enable
#define CUSTOM_PUSH
layout(push_constant) uniform Push { uint n; uint C; } p;
#include "elementwise.glsl"
layout(binding = 0) uniform samplerBuffer bias;
layout(binding = 1) uniform samplerBuffer ty;
layout(std430, binding = 2) writeonly buffer BY { vec4 y[]; };

void main()
{
    uint n4 = p.n / 4u, C4 = p.C / 4u;
    FOR_EACH_RUN(j, n4) y[j] = texelFetch(ty, int(j)) + texelFetch(bias, int(j % C4));
}
