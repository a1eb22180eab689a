#version 450
// variant: -
// variant: runs -DRUNS=1
// variant: texel_fwd_vec4 -DTEXEL=1 -DVEC4=1
// variant: texel_fwd_scalar -DTEXEL=1 -DVEC4=0
// repro_embedding: embedding.comp in the reproducible mode (fp32
// tables only): out[r,c] = wte[tok[r],c] (+ wpe[pos[r],c], one rounded
// sum), ids clamped into the tables, only the rows whose token is in
// [v0, v1) and position in [p0, p1) (the tables bound from rows v0, p0).
// The texel variants (CPU devices): embedding_texel.comp's forward pattern
// (the tables through texel views in chunks of W floats, n = rows·C/W)
// with the same single rounded sum per element.
#define CUSTOM_PUSH
layout(push_constant) uniform Push { uint n; uint C; uint V; uint P; uint has_pos; uint v0, v1, p0, p1; } p;
#include "elementwise.glsl"
#include "repro_math.glsl"
#if TEXEL
#include "texel.glsl"
layout(binding = 0) uniform samplerBuffer twte;
layout(binding = 1) uniform samplerBuffer twpe;
layout(std430, binding = 2) readonly buffer BT { int tok[]; };
layout(std430, binding = 3) readonly buffer BP { int pos[]; };
layout(std430, binding = 4) writeonly buffer BO { VT o[]; };

void main()
{
    uint cw = p.C / W;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        uint r = i / cw, c = (i % cw) * W;
        uint t = uint(clamp(tok[r], 0, int(p.V) - 1));
        uint q = p.has_pos != 0u ? uint(clamp(pos[r], 0, int(p.P) - 1)) : p.p0;
        if (t < p.v0 || t >= p.v1 || q < p.p0 || q >= p.p1)
            continue;
        precise VT v = FETCH(twte, (t - p.v0) * p.C + c);
        if (p.has_pos != 0u)
            v = v + FETCH(twpe, (q - p.p0) * p.C + c);
        o[i] = v;
    }
}
#else
layout(std430, binding = 0) readonly buffer BT { int tok[]; };
layout(std430, binding = 1) readonly buffer BP { int pos[]; };
layout(std430, binding = 2) readonly buffer BWte { float wte[]; };
layout(std430, binding = 3) readonly buffer BWpe { float wpe[]; };
layout(std430, binding = 4) writeonly buffer BO { float o[]; };

void main()
{
    FOR_EACH_OF_FAMILY(i) {
        uint r = i / p.C, c = i % p.C;
        uint t = uint(clamp(tok[r], 0, int(p.V) - 1));
        uint q = p.has_pos != 0u ? uint(clamp(pos[r], 0, int(p.P) - 1)) : p.p0;
        if (t < p.v0 || t >= p.v1 || q < p.p0 || q >= p.p1)
            continue;
        precise float v = wte[(t - p.v0) * p.C + c];
        if (p.has_pos != 0u)
            v = v + wpe[(q - p.p0) * p.C + c];
        o[i] = v;
    }
}
#endif
