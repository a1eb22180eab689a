#version 450
// variant: vec4 -DVEC4=1
// variant: scalar -DVEC4=0
// repro_rope_texel: repro_rope.comp (the same table walk and operations,
// each product and sum rounded on its own) for the texel family (CPU
// devices), in the access pattern of rope_texel.comp: in place on x (rows,
// H, hd), x and the cos/sin table read through texel views, x written
// through storage; one invocation per chunk of W consecutive j < hd/2 of
// one (row, head) (VEC4: hd a multiple of 4 and the rotated 2·rh of 8),
// which reads its 2·W elements before writing them. Rows whose position is
// in [p0, p1) only. Partial rotary as rope.comp: hd/2 below is rh.
//   x_j ← x_j·c − x_{j+hd/2}·s,   x_{j+hd/2} ← x_{j+hd/2}·c + x_j·s
// with s = sign·sin (sign ±1: exact). A vec4 operation is the same
// operation on each component.
#include "texel.glsl"
#include "repro_math.glsl"
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
        if (ps < p.p0 || ps >= p.p1)
            continue;
        uint e = ((ps - p.p0) * half_hd + j) * 2u; // the (cos, sin) pair of j
#if VEC4
        vec4 t0 = texelFetch(tcs, int(e >> 2)), t1 = texelFetch(tcs, int(e >> 2) + 1);
        vec4 c = vec4(t0.x, t0.z, t1.x, t1.z);
        precise vec4 sn = p.sign * vec4(t0.y, t0.w, t1.y, t1.w);
#else
        float c = FETCH1(tcs, e);
        precise float sn = p.sign * FETCH1(tcs, e + 1u);
#endif
        uint base = (n * p.H + h) * p.hd;
        VT a = FETCH(tx, base + j), b = FETCH(tx, base + j + half_hd);
        precise VT ac = a * c;
        precise VT bs = b * sn;
        precise VT r0 = ac - bs;
        precise VT bc = b * c;
        precise VT as = a * sn;
        precise VT r1 = bc + as;
        x[(base + j) / W] = r0;
        x[(base + j + half_hd) / W] = r1;
    }
}
