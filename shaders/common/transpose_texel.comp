#version 450
// variant: -
// variant: shift -DSHIFT=1
// transpose_texel: Out[c, r] = In[r, c] for a block of R rows x C columns
// of In (CPU devices, the texel family; R % 4 == 0). Row r of In starts at
// float in0 + r·ldi of an RGBA32F view: a whole texel (in0 and ldi
// multiples of 4), or with SHIFT at any float, its four floats from two
// texels moved by the remainder (rows of dY that are not whole texels).
// Out, an RGBA32F storage texel view, holds column c
// as a row of R floats at texel out0 + c·ldo. Each invocation moves a 4x4
// block, four texels in and (columns past C skipped) four out.
// op_matmul's tn runs as a transpose of dY and nn on CPU devices
// (src/ops/op_matmul.c).
layout(local_size_x = 8, local_size_y = 8) in;
layout(push_constant) uniform Push { uint R4; uint C4; uint C; uint in0; uint ldi; uint out0; uint ldo; } p;
layout(binding = 0) uniform samplerBuffer In;
layout(binding = 1, rgba32f) uniform writeonly imageBuffer Out;

// The four floats of In from float f (moved, not computed); past the
// view's end the last texel again, for columns past C.
vec4 in4(uint f)
{
#if SHIFT
    uint t = f >> 2, r = f & 3u, last = uint(textureSize(In)) - 1u;
    vec4 lo = texelFetch(In, int(min(t, last))), hi = texelFetch(In, int(min(t + 1u, last)));
    return r == 0u ? lo : r == 1u ? vec4(lo.yzw, hi.x) : r == 2u ? vec4(lo.zw, hi.xy) : vec4(lo.w, hi.xyz);
#else
    return texelFetch(In, int(f >> 2));
#endif
}

void main()
{
    // x along In's columns (8 lanes read neighbouring texels of a row)
    uint c4 = gl_GlobalInvocationID.x, r4 = gl_GlobalInvocationID.y;
    if (c4 >= p.C4 || r4 >= p.R4)
        return;
    uint f = p.in0 + 4u * r4 * p.ldi + 4u * c4;
    vec4 a = in4(f), b = in4(f + p.ldi), c = in4(f + 2u * p.ldi), d = in4(f + 3u * p.ldi);
    uint o = p.out0 + 4u * c4 * p.ldo + r4;
    imageStore(Out, int(o), vec4(a.x, b.x, c.x, d.x));
    if (4u * c4 + 1u < p.C)
        imageStore(Out, int(o + p.ldo), vec4(a.y, b.y, c.y, d.y));
    if (4u * c4 + 2u < p.C)
        imageStore(Out, int(o + 2u * p.ldo), vec4(a.z, b.z, c.z, d.z));
    if (4u * c4 + 3u < p.C)
        imageStore(Out, int(o + 3u * p.ldo), vec4(a.w, b.w, c.w, d.w));
}
