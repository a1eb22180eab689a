// rows: one workgroup per row, WG invocations (wg1d.glsl), and workgroup reductions in a fixed
// tree order so results are deterministic. Call row_sum/row_max from
// uniform control flow: every invocation of the workgroup must reach them.
#include "wg1d.glsl"

shared float row_scratch[WG_MAX];

float row_reduce(float v, bool is_max)
{
    uint t = gl_LocalInvocationID.x;
    barrier();
    row_scratch[t] = v;
    barrier();
    uint pow2 = 1u;
    while (pow2 * 2u <= WG) pow2 *= 2u;
    if (t + pow2 < WG)
        row_scratch[t] = is_max ? max(row_scratch[t], row_scratch[t + pow2]) : row_scratch[t] + row_scratch[t + pow2];
    barrier();
    for (uint h = pow2 / 2u; h > 0u; h /= 2u) {
        if (t < h)
            row_scratch[t] = is_max ? max(row_scratch[t], row_scratch[t + h]) : row_scratch[t] + row_scratch[t + h];
        barrier();
    }
    float r = row_scratch[0];
    barrier();
    return r;
}

float row_sum(float v) { return row_reduce(v, false); }
float row_max(float v) { return row_reduce(v, true); }
