#version 450
// Embedding backward: dtable[ids[n], c] += dout[n, c] over rows n in
// [row0, row1). Used for the token table (ids = tokens) and the position
// table (ids = positions). Deterministic without float atomics: each
// table element receives its rows in row order, whatever the grid.
// Invocation x of the grid owns channel c; workgroup row y owns the table
// rows [v0 + y·vr, v0 + (y+1)·vr) within [v0, v1), so the walk over the
// rows is spread over ⌈(v1 − v0)/vr⌉ workgroup rows instead of one
// invocation per channel adding every row (every invocation still reads
// every id: one broadcast load, where a row outside its range is skipped).
// A table larger than a binding is bound in row ranges: dtable is bound
// from row v0 and this dispatch adds only the rows whose id is in [v0, v1).
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Push { uint row0; uint row1; uint C; uint V; uint v0; uint v1; uint vr; } p;
layout(std430, binding = 0) readonly buffer BI { int ids[]; };
layout(std430, binding = 1) readonly buffer BD { float dout[]; };
layout(std430, binding = 2) buffer BT { float dtable[]; };

void main()
{
    uint c = gl_GlobalInvocationID.x;
    uint lo = p.v0 + gl_WorkGroupID.y * p.vr, hi = min(lo + p.vr, p.v1);
    if (c >= p.C) return;
    for (uint n = p.row0; n < p.row1; n++) {
        uint id = uint(clamp(ids[n], 0, int(p.V) - 1));
        if (id >= lo && id < hi) dtable[(id - p.v0) * p.C + c] += dout[n * p.C + c];
    }
}
