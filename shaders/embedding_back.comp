#version 450
// Embedding backward: dtable[ids[n], c] += dout[n, c], one invocation per
// channel c walking the rows in order. Rows sharing an id are added in row
// order, so the result is deterministic (no float atomics). Used for the
// token table (ids = tokens) and the position table (ids = positions).
// A table larger than a binding is bound in row ranges: this dispatch
// adds only the rows whose id is in [v0, v1), dtable bound from row v0.
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Push { uint row0; uint row1; uint C; uint V; uint v0; uint v1; } p; // rows [row0, row1)
layout(std430, binding = 0) readonly buffer BI { int ids[]; };
layout(std430, binding = 1) readonly buffer BD { float dout[]; };
layout(std430, binding = 2) buffer BT { float dtable[]; };

void main()
{
    uint c = gl_GlobalInvocationID.x;
    if (c >= p.C) return;
    for (uint n = p.row0; n < p.row1; n++) {
        uint id = uint(clamp(ids[n], 0, int(p.V) - 1));
        if (id >= p.v0 && id < p.v1) dtable[(id - p.v0) * p.C + c] += dout[n * p.C + c];
    }
}
