#version 450
// variant: -
// variant: texel_vec4 -DTEXEL=1 -DVEC4=1
// variant: texel_scalar -DTEXEL=1 -DVEC4=0
// repro_embedding_back: embedding_back.comp in the reproducible profile:
// dtable[ids[n], c] = dtable[ids[n], c] + dout[n, c] over rows n in
// [row0, row1) in row order, each table element starting from its old
// value (so cutting the rows into calls gives the same bits). Invocation x
// owns channel c, workgroup row y the table rows [v0 + y·vr, ...) within
// [v0, v1) (dtable bound from row v0), as embedding_back.comp; the texel
// variants below take embedding_texel.comp's pattern instead.
#include "repro_math.glsl"
#if TEXEL
// The texel family (CPU devices): embedding_texel.comp's backward access
// pattern (dout through a texel view in chunks of W floats, one invocation
// per column chunk, 8 per workgroup, all table rows [v0, v1) in one
// workgroup row) with this kernel's single rounded add per element: each
// component of a vec4 chunk is one element's add, so the same bits.
#include "texel.glsl"
layout(local_size_x = 8) in;
layout(push_constant) uniform Push { uint row0; uint row1; uint C; uint V; uint v0; uint v1; } p;
layout(binding = 0) uniform samplerBuffer tdout;
layout(std430, binding = 1) readonly buffer BI { int ids[]; };
layout(std430, binding = 2) buffer BT { VT dtable[]; };

void main()
{
    uint cw = p.C / W, c = gl_GlobalInvocationID.x;
    if (c >= cw)
        return;
    for (uint n = p.row0; n < p.row1; n++) {
        uint id = uint(clamp(ids[n], 0, int(p.V) - 1));
        if (id >= p.v0 && id < p.v1) {
            uint e = (id - p.v0) * cw + c;
            precise VT s = dtable[e] + FETCH(tdout, n * p.C + c * W);
            dtable[e] = s;
        }
    }
}
#else
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Push { uint row0; uint row1; uint C; uint V; uint v0; uint v1; uint vr; } p;
layout(std430, binding = 0) readonly buffer BI { int ids[]; };
layout(std430, binding = 1) readonly buffer BD { float dout[]; };
layout(std430, binding = 2) buffer BT { float dtable[]; };

void main()
{
    uint c = gl_GlobalInvocationID.x;
    uint lo = p.v0 + gl_WorkGroupID.y * p.vr, hi = min(lo + p.vr, p.v1);
    if (c >= p.C)
        return;
    for (uint n = p.row0; n < p.row1; n++) {
        uint id = uint(clamp(ids[n], 0, int(p.V) - 1));
        if (id >= lo && id < hi) {
            uint e = (id - p.v0) * p.C + c;
            precise float s = dtable[e] + dout[n * p.C + c];
            dtable[e] = s;
        }
    }
}
#endif
