#version 450
// Rotary position embedding, Hugging Face rotate_half convention, in place
// on x (rows, H, hd). Partial rotary (partial_rotary_factor): the first
// 2·rh of each head's hd rotate, in pairs (j, j + rh), the rest pass as
// they are; rh = hd/2 for the whole head, as the formulas below write it. One element per (row, head, j < hd/2):
//   a = pos·theta^(−2j/hd);  (x_j, x_{j+hd/2}) ← R(sign·a)·(x_j, x_{j+hd/2})
// sign = +1 forward; −1 backward (Rᵀ = R(−a) maps dout to dinp).
// cos/sin come from a table (max_pos, hd/2, 2) the host computes in double,
// so every device rotates by the same float angles. A table larger than a
// binding is bound in ranges of positions: this dispatch rotates the rows
// whose position is in [p0, p1), the table bound from position p0.
#define CUSTOM_PUSH
// n = rows·H·hd/2
layout(push_constant) uniform Push { uint n; uint H; uint hd; uint max_pos; float sign; uint p0, p1; uint rh; } p;
#include "elementwise.glsl"
layout(std430, binding = 0) readonly buffer BP { int pos[]; };
layout(std430, binding = 1) readonly buffer BT { vec2 cs[]; };
layout(std430, binding = 2) buffer BX { float x[]; };

void main()
{
    uint half_hd = p.rh;
    FOR_EACH_ELEMENT(i) {
        uint j = i % half_hd, h = (i / half_hd) % p.H, n = i / (half_hd * p.H);
        uint ps = uint(clamp(pos[n], 0, int(p.max_pos) - 1));
        if (ps < p.p0 || ps >= p.p1) continue;
        vec2 c = cs[(ps - p.p0) * half_hd + j];
        float sn = p.sign * c.y;
        uint base = (n * p.H + h) * p.hd;
        float a = x[base + j], b = x[base + j + half_hd];
        // precise: no FMA contraction, which compilers apply differently,
        // so rope_texel.comp gives the same bits on any device.
        precise float r0 = a * c.x - b * sn, r1 = b * c.x + a * sn;
        x[base + j] = r0;
        x[base + j + half_hd] = r1;
    }
}
