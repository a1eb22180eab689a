#version 450
// variant: add -DOP=0
// variant: copy -DOP=1
// variant: scale -DOP=2
// variant: axpy -DOP=3
// add, copy, scale and axpy of add.comp, copy.comp, scale.comp and
// axpy.comp (same arithmetic, so the same bits), texel family (CPU
// devices): inputs read as vec4 through RGBA32F texel views (buffers hold
// whole vec4s), the output written as vec4 to storage; the last n % 4
// elements are done one by one so nothing past n is written. scale and
// axpy read their in/out buffer through the texel view and write it
// through storage: each element is read and written by one invocation
// only, read first. Invocations stride over the n/4 chunks.
//   add:   z = x + y        (tx, ty → z)
//   copy:  y = x            (tx → y)
//   scale: x = a·x          (tx → x)
//   axpy:  y = y + a·x      (tx, ty → y; product and sum each rounded)
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Push { uint n; float a; } p;
layout(binding = 0) uniform samplerBuffer tx;
#if OP == 0 || OP == 3
layout(binding = 1) uniform samplerBuffer ty;
layout(std430, binding = 2) writeonly buffer BO { vec4 o[]; };
#else
layout(std430, binding = 1) writeonly buffer BO { vec4 o[]; };
#endif

// Chunk j, lanes where mask is true (all of them except in the tail).
void chunk(uint j, bvec4 mask)
{
#if OP == 0
    vec4 r = texelFetch(tx, int(j)) + texelFetch(ty, int(j));
#elif OP == 1
    vec4 r = texelFetch(tx, int(j));
#elif OP == 2
    vec4 r = texelFetch(tx, int(j)) * p.a;
#else
    precise vec4 t = p.a * texelFetch(tx, int(j));
    precise vec4 r = texelFetch(ty, int(j)) + t;
#endif
    if (all(mask)) o[j] = r;
    else for (uint k = 0u; k < 4u; k++) if (mask[k]) o[j][k] = r[k];
}

void main()
{
    uint n4 = p.n / 4u, stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint j = gl_GlobalInvocationID.x; j < n4; j += stride) chunk(j, bvec4(true));
    if (gl_GlobalInvocationID.x == 0u && p.n % 4u != 0u) {
        uint r = p.n % 4u;
        chunk(n4, bvec4(r > 0u, r > 1u, r > 2u, false));
    }
}
