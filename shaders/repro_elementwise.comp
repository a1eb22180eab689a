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
// repro_elementwise: the reproducible profile's elementwise ops over n
// floats (op_add, op_scale, op_axpy, op_copy, op_bias_add), each a single
// correctly rounded operation per element (axpy: a product, then a sum):
//   add:   z = x + y          scale: x = x·a        axpy: y = y + a·x
//   copy:  y = x              bias:  y[i] = y[i] + x[i mod C]
// The reference is src/repro/repro_ops.c.
#define CUSTOM_PUSH
layout(push_constant) uniform Push { uint n; float a; uint C; } p;
#include "elementwise.glsl"
#include "repro_math.glsl"
#if OP == 1
layout(std430, binding = 0) buffer BX { float x[]; };
#else
layout(std430, binding = 0) readonly buffer BX { float x[]; };
#endif
#if OP == 0
layout(std430, binding = 1) readonly buffer BY { float y[]; };
layout(std430, binding = 2) writeonly buffer BZ { float z[]; };
#elif OP == 3
layout(std430, binding = 1) writeonly buffer BY { float y[]; };
#elif OP != 1
layout(std430, binding = 1) buffer BY { float y[]; };
#endif

void main()
{
    FOR_EACH_OF_FAMILY(i) {
#if OP == 0
        precise float s = x[i] + y[i];
        z[i] = s;
#elif OP == 1
        precise float s = x[i] * p.a;
        x[i] = s;
#elif OP == 2
        precise float t = p.a * x[i];
        precise float s = y[i] + t;
        y[i] = s;
#elif OP == 3
        y[i] = x[i];
#else
        precise float s = y[i] + x[i % p.C];
        y[i] = s;
#endif
    }
}
