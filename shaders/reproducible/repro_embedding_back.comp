#version 450
// variant: -
// variant: texel_vec4 -DTEXEL=1 -DVEC4=1
// variant: texel_scalar -DTEXEL=1 -DVEC4=0
// variant: texel_vec4_samples -DTEXEL=1 -DVEC4=1 -DSAMPLES=1
// repro_embedding_back: embedding_back.comp in the reproducible mode:
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
// SAMPLES (vec4): a whole micro-batch in one dispatch, rows [0, row1) of
// samples of T rows, the whole table (v0 = 0, v1 = V), and after each
// sample the push of repro_push.comp for every table row's chunk c of the
// invocation: the table's stack S4 (binding 3, RGBA32F texels, `levels`
// per group of four elements, from texel s0). One dispatch where the
// per-sample calls took two per sample (this kernel's and repro_push's),
// on lavapipe about a tenth of a millisecond each, most of it the
// dispatch: the same operations in the same order, so the same bits.
#include "texel.glsl"
layout(local_size_x = 8) in;
#if SAMPLES
layout(push_constant) uniform Push {
    uint row0; uint row1; uint C; uint V; uint v0; uint v1; uint T; uint levels; uint s0;
} p;
layout(binding = 3, rgba32f) uniform imageBuffer S4;
#else
layout(push_constant) uniform Push { uint row0; uint row1; uint C; uint V; uint v0; uint v1; } p;
#endif
layout(binding = 0) uniform samplerBuffer tdout;
layout(std430, binding = 1) readonly buffer BI { int ids[]; };
layout(std430, binding = 2) buffer BT { VT dtable[]; };

void main()
{
    uint cw = p.C / W, c = gl_GlobalInvocationID.x;
    if (c >= cw)
        return;
#if SAMPLES
    for (uint n = 0u; n < p.row1;) {
        uint end = min(p.row1, n + p.T);
#else
    {
        uint n = p.row0, end = p.row1;
#endif
        for (; n < end; n++) {
            uint id = uint(clamp(ids[n], 0, int(p.V) - 1));
            if (id >= p.v0 && id < p.v1) {
                uint e = (id - p.v0) * cw + c;
                precise VT s = dtable[e] + FETCH(tdout, n * p.C + c * W);
                dtable[e] = s;
            }
        }
#if SAMPLES
        if (end % p.T == 0u) { // sample j = end / T − 1 is complete: push it
            uint j = end / p.T - 1u, nl = min(uint(findLSB(~j)), p.levels);
            for (uint v = 0u; v < p.V; v++) {
                uint e = v * cw + c, st = p.s0 + e * p.levels;
                precise vec4 acc = dtable[e];
                for (uint l = 0u; l < nl; l++) {
                    precise vec4 t = imageLoad(S4, int(st + l)) + acc;
                    acc = t;
                }
                if (nl < p.levels) {
                    imageStore(S4, int(st + nl), acc);
                    acc = vec4(0.0f);
                }
                dtable[e] = acc;
            }
        }
#endif
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
