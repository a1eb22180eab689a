#version 450
// variant: -
// variant: runs -DRUNS=1
// repro_rope: rope.comp in the reproducible mode (partial rotary as
// there: pairs (j, j + rh), j < rh, hd/2 below for the whole head): in place on x
// (rows, H, hd), one element per (row, head, j < hd/2), with the table's
// c = cos, s = sin (times sign: +1 forward, −1 backward, exact):
//   x_j ← x_j·c − x_{j+hd/2}·s,   x_{j+hd/2} ← x_{j+hd/2}·c + x_j·s
// each product and sum rounded on its own. Only the rows whose position is
// in [p0, p1) (the table bound from position p0), as rope.comp.
#define CUSTOM_PUSH
// n = rows·H·hd/2
layout(push_constant) uniform Push { uint n; uint H; uint hd; uint max_pos; float sign; uint p0, p1; uint rh; } p;
#include "elementwise.glsl"
#include "repro_math.glsl"
layout(std430, binding = 0) readonly buffer BP { int pos[]; };
layout(std430, binding = 1) readonly buffer BT { float cs[]; };
layout(std430, binding = 2) buffer BX { float x[]; };

void main()
{
    uint half_hd = p.rh;
    FOR_EACH_OF_FAMILY(i) {
        uint j = i % half_hd, h = (i / half_hd) % p.H, n = i / (half_hd * p.H);
        uint ps = uint(clamp(pos[n], 0, int(p.max_pos) - 1));
        if (ps < p.p0 || ps >= p.p1)
            continue;
        uint te = ((ps - p.p0) * half_hd + j) * 2u;
        float c = cs[te];
        precise float sn = p.sign * cs[te + 1u];
        uint base = (n * p.H + h) * p.hd;
        float a = x[base + j], b = x[base + j + half_hd];
        precise float ac = a * c;
        precise float bs = b * sn;
        precise float r0 = ac - bs;
        precise float bc = b * c;
        precise float as = a * sn;
        precise float r1 = bc + as;
        x[base + j] = r0;
        x[base + j + half_hd] = r1;
    }
}
