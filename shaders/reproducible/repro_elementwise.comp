#version 450
// variant: add -DOP=0
// variant: scale -DOP=1
// variant: axpy -DOP=2
// variant: copy -DOP=3
// variant: bias -DOP=4
// variant: add_runs -DOP=0 -DRUNS=1
// variant: scale_runs -DOP=1 -DRUNS=1
// variant: axpy_runs -DOP=2 -DRUNS=1
// variant: copy_runs -DOP=3 -DRUNS=1
// variant: bias_runs -DOP=4 -DRUNS=1
// repro_elementwise: the reproducible mode's elementwise ops over n
// floats (op_add, op_scale, op_axpy, op_copy, op_bias_add), each a single
// correctly rounded operation per element (axpy: a product, then a sum):
//   add:   z = x + y          scale: x = x·a        axpy: y = y + a·x
//   copy:  y = x              bias:  y[i] = y[i] + x[i mod C]
// Every variant reads its inputs x (and y), then writes the output o
// (z, x or y: an in-place op binds its buffer as input and output). The
// reference is tests/ref/ref_repro_ops.c.
#define CUSTOM_PUSH
layout(push_constant) uniform Push { uint n; float a; uint C; } p;
#include "elementwise.glsl"
#include "repro_math.glsl"
#if RUNS
// The _runs variants (the texel family, CPU devices) read their inputs
// through R32F texel views, which llvmpipe loads faster than storage, and
// write the output as storage: the inputs (x, then y) at bindings 0 and
// 1, the output after them (an in-place op binds its buffer twice).
layout(binding = 0) uniform samplerBuffer TX;
#define X(i) texelFetch(TX, int(i)).x
#if OP == 0 || OP == 2 || OP == 4
layout(binding = 1) uniform samplerBuffer TY;
#define Y(i) texelFetch(TY, int(i)).x
layout(std430, binding = 2) writeonly buffer BO { float o[]; };
#else
layout(std430, binding = 1) writeonly buffer BO { float o[]; };
#endif
#else
layout(std430, binding = 0) readonly buffer BX { float x[]; };
#define X(i) x[i]
#if OP == 0 || OP == 2 || OP == 4
layout(std430, binding = 1) readonly buffer BY { float y[]; };
#define Y(i) y[i]
layout(std430, binding = 2) writeonly buffer BO { float o[]; };
#else
layout(std430, binding = 1) writeonly buffer BO { float o[]; };
#endif
#endif

void main()
{
    FOR_EACH_OF_FAMILY(i) {
#if OP == 0
        precise float s = X(i) + Y(i);
#elif OP == 1
        precise float s = X(i) * p.a;
#elif OP == 2
        precise float t = p.a * X(i);
        precise float s = Y(i) + t;
#elif OP == 3
        float s = X(i);
#else
        precise float s = Y(i) + X(i % p.C);
#endif
        o[i] = s;
    }
}
