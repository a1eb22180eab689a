#version 450
// variant: vec4 -DVEC4=1
// variant: scalar -DVEC4=0
// Rotary position embedding of rope.comp (same table, formula, partial
// rotary over the first 2·rh of each head and
// arithmetic, so the same bits), texel family (CPU devices), in place on
// x (rows, H, hd): x and the cos/sin table (max_pos, hd/2, 2) are read
// through texel views, x is written through storage. One invocation per
// chunk of W consecutive j < rh of one (row, head) (VEC4: hd a multiple
// of 4 and 2·rh of 8), striding over the n chunks; it reads its 2·W elements of x before
// writing them, and no other invocation touches them. The table in ranges
// of positions as there: rows whose position is in [p0, p1) only.
//   (x_j, x_{j+hd/2}) ← R(sign·a)·(x_j, x_{j+hd/2})
#include "texel.glsl"
layout(local_size_x_id = 0) in;
// n = rows·H·hd/2/W
layout(push_constant) uniform Push { uint n; uint H; uint hd; uint max_pos; float sign; uint p0, p1; uint rh; } p;
layout(binding = 0) uniform samplerBuffer tcs;
layout(binding = 1) uniform samplerBuffer tx;
layout(std430, binding = 2) readonly buffer BP { int pos[]; };
layout(std430, binding = 3) writeonly buffer BX { VT x[]; };

void main()
{
    uint half_hd = p.rh, hw = half_hd / W;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        uint j = (i % hw) * W, h = (i / hw) % p.H, n = i / (hw * p.H);
        uint ps = uint(clamp(pos[n], 0, int(p.max_pos) - 1));
        if (ps < p.p0 || ps >= p.p1) continue;
        uint e = ((ps - p.p0) * half_hd + j) * 2u; // the (cos, sin) pair of j
#if VEC4
        vec4 t0 = texelFetch(tcs, int(e >> 2)), t1 = texelFetch(tcs, int(e >> 2) + 1);
        vec4 cs = vec4(t0.x, t0.z, t1.x, t1.z), sn = p.sign * vec4(t0.y, t0.w, t1.y, t1.w);
#else
        float cs = FETCH1(tcs, e), sn = p.sign * FETCH1(tcs, e + 1u);
#endif
        uint base = (n * p.H + h) * p.hd;
        VT a = FETCH(tx, base + j), b = FETCH(tx, base + j + half_hd);
        precise VT r0 = a * cs - b * sn, r1 = b * cs + a * sn; // as rope.comp: no FMA
        x[(base + j) / W] = r0;
        x[(base + j + half_hd) / W] = r1;
    }
}
