#version 450
// variant: fwd_vec4 -DVEC4=1 -DBACK=0
// variant: fwd_scalar -DVEC4=0 -DBACK=0
// variant: fwd_vec4_bf16 -DVEC4=1 -DBACK=0 -DBF16=1
// variant: fwd_scalar_bf16 -DVEC4=0 -DBACK=0 -DBF16=1
// variant: back_vec4 -DVEC4=1 -DBACK=1
// variant: back_scalar -DVEC4=0 -DBACK=1
// Token (and learned position) embedding and its backward, texel family
// (CPU devices): embedding.comp and embedding_back.comp (same arithmetic,
// so the same bits) with the float tables and gradients read through
// texel views in chunks of W floats (C a multiple of 4 for VEC4). Ids stay
// int storage buffers; ids are clamped into the tables as there.
//   fwd:  out[r,c] = wte[tok[r],c] (+ wpe[pos[r],c] when has_pos), one
//         invocation per chunk of a row, striding over the n chunks.
//   back: dtable[ids[r],c] += dout[r,c], one invocation per column chunk
//         walking rows [row0, row1) in order (deterministic, no atomics).
//         dtable is read and written through storage: a row's id may come
//         back, and the walk must see its own earlier sums.
// Tables larger than a binding are bound in row ranges as there: a
// dispatch handles the ids in [v0, v1) (and positions in [p0, p1)), the
// table bound from that row.
// BF16 (fwd): the tables hold bf16 values (frozen, model.base_dtype bf16),
// read through R32G32_UINT views (VEC4: four bf16 per texel, the first in
// the low half of .x) or R16_UINT ones; a shift widens each to the fp32 of
// the same value, so the output is the fp32 kernel's on the tables rounded
// to bf16, bit for bit.
#include "texel.glsl"
#ifndef BF16
#define BF16 0
#endif
#if BACK == 0
layout(local_size_x_id = 0) in;
// n = rows·C/W
layout(push_constant) uniform Push { uint n; uint C; uint V; uint P; uint has_pos; uint v0, v1, p0, p1; } p;
#if BF16
layout(binding = 0) uniform usamplerBuffer twte;
layout(binding = 1) uniform usamplerBuffer twpe;
#if VEC4
vec4 widen4(uvec2 u)
{
    return vec4(uintBitsToFloat(u.x << 16), uintBitsToFloat(u.x & 0xffff0000u), uintBitsToFloat(u.y << 16),
                uintBitsToFloat(u.y & 0xffff0000u));
}
#define TFETCH(tex, e) widen4(texelFetch(tex, int((e) >> 2)).xy)
#else
#define TFETCH(tex, e) uintBitsToFloat(texelFetch(tex, int(e)).x << 16)
#endif
#else
layout(binding = 0) uniform samplerBuffer twte;
layout(binding = 1) uniform samplerBuffer twpe;
#define TFETCH FETCH
#endif
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
        if (t < p.v0 || t >= p.v1 || q < p.p0 || q >= p.p1) continue;
        VT v = TFETCH(twte, (t - p.v0) * p.C + c);
        if (p.has_pos != 0u) v += TFETCH(twpe, (q - p.p0) * p.C + c);
        o[i] = v;
    }
}
#else
layout(local_size_x = 8) in;
layout(push_constant) uniform Push { uint row0; uint row1; uint C; uint V; uint v0; uint v1; } p; // rows [row0, row1)
layout(binding = 0) uniform samplerBuffer tdout;
layout(std430, binding = 1) readonly buffer BI { int ids[]; };
layout(std430, binding = 2) buffer BT { VT dtable[]; };

void main()
{
    uint cw = p.C / W, c = gl_GlobalInvocationID.x;
    if (c >= cw) return;
    for (uint n = p.row0; n < p.row1; n++) {
        uint id = uint(clamp(ids[n], 0, int(p.V) - 1));
        if (id >= p.v0 && id < p.v1) dtable[(id - p.v0) * cw + c] += FETCH(tdout, n * p.C + c * W);
    }
}
#endif
