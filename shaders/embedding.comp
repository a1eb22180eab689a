#version 450
// Token (and learned position) embedding over n = rows·C outputs:
//   out[r,c] = wte[tok[r],c] (+ wpe[pos[r],c] when has_pos)
// Ids are clamped into the tables: the data layer rejects out-of-range
// tokens, and the shader never reads out of bounds whatever it is given.
#define CUSTOM_PUSH
layout(push_constant) uniform Push { uint n; uint C; uint V; uint P; uint has_pos; } p;
#include "elementwise.glsl"
layout(std430, binding = 0) readonly buffer BT { int tok[]; };
layout(std430, binding = 1) readonly buffer BP { int pos[]; };
layout(std430, binding = 2) readonly buffer BWte { float wte[]; };
layout(std430, binding = 3) readonly buffer BWpe { float wpe[]; };
layout(std430, binding = 4) writeonly buffer BO { float o[]; };

void main()
{
    FOR_EACH_ELEMENT(i) {
        uint r = i / p.C, c = i % p.C;
        uint t = uint(clamp(tok[r], 0, int(p.V) - 1));
        float v = wte[t * p.C + c];
        if (p.has_pos != 0u) v += wpe[uint(clamp(pos[r], 0, int(p.P) - 1)) * p.C + c];
        o[i] = v;
    }
}
