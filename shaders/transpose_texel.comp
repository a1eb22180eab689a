#version 450
// variant: -
// transpose_texel: Out[c, r] = In[r, c] for a block of R rows x C columns
// of In (CPU devices, the texel family; R % 4 == 0 and C % 4 == 0). In is
// read through an RGBA32F view (row r's columns c..c+3 are one texel, at
// in0 + r·ldi texels), Out written through an RGBA32F storage texel view
// (column c as a row of R floats, texels out0 + c·ldo + r/4). Each
// invocation moves a 4x4 block: four texels in, four out. op_matmul's tn
// runs as transposes and nt on CPU devices (src/ops/op_matmul.c).
layout(local_size_x = 8, local_size_y = 8) in;
layout(push_constant) uniform Push { uint R4; uint C4; uint in0; uint ldi; uint out0; uint ldo; } p;
layout(binding = 0) uniform samplerBuffer In;
layout(binding = 1, rgba32f) uniform writeonly imageBuffer Out;

void main()
{
    // x along In's columns (8 lanes read neighbouring texels of a row)
    uint c4 = gl_GlobalInvocationID.x, r4 = gl_GlobalInvocationID.y;
    if (c4 >= p.C4 || r4 >= p.R4)
        return;
    uint at = p.in0 + 4u * r4 * p.ldi + c4;
    vec4 a = texelFetch(In, int(at)), b = texelFetch(In, int(at + p.ldi)), c = texelFetch(In, int(at + 2u * p.ldi)),
         d = texelFetch(In, int(at + 3u * p.ldi));
    uint o = p.out0 + 4u * c4 * p.ldo + r4;
    imageStore(Out, int(o), vec4(a.x, b.x, c.x, d.x));
    imageStore(Out, int(o + p.ldo), vec4(a.y, b.y, c.y, d.y));
    imageStore(Out, int(o + 2u * p.ldo), vec4(a.z, b.z, c.z, d.z));
    imageStore(Out, int(o + 3u * p.ldo), vec4(a.w, b.w, c.w, d.w));
}
