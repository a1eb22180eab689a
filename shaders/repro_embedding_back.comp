#version 450
// repro_embedding_back: embedding_back.comp in the reproducible profile:
// dtable[ids[n], c] = dtable[ids[n], c] + dout[n, c] over rows n in
// [row0, row1) in row order, each table element starting from its old
// value (so cutting the rows into calls gives the same bits). Invocation x
// owns channel c, workgroup row y the table rows [v0 + y·vr, ...) within
// [v0, v1) (dtable bound from row v0), as embedding_back.comp.
#include "repro_math.glsl"
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
