// texel: what the texel-family row and attention kernels share (CPU
// devices, see README "Kernels per device class"). Inputs are uniform texel
// buffers read with texelFetch, which llvmpipe turns into one vector gather
// (a per-lane storage load is a loop of scalar loads there); outputs are
// storage buffers of the same element type. VEC4 = 1 reads RGBA32F views
// and works in vec4 chunks (every offset, stride and width a multiple of
// 4); VEC4 = 0 reads R32F views one float at a time.
#if VEC4
#define VT vec4
#define W 4u
#define FETCH(tex, e) texelFetch(tex, int((e) >> 2))
#define HSUM(a) ((a).x + (a).y + (a).z + (a).w)
#else
#define VT float
#define W 1u
#define FETCH(tex, e) texelFetch(tex, int(e)).x
#define HSUM(a) (a)
#endif
#define FETCH1(tex, e) texelFetch(tex, int(e)).x
