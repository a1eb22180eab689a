#version 450
// variant: plain -DMODE=0
// variant: rms -DMODE=1
// variant: ln -DMODE=2
// Column sums over rows, accumulated, one invocation per column c, rows
// in order (deterministic, no atomics):
//   plain: out[c] += Σ_r dy[r,c]                        (bias gradient)
//   rms:   out[c] += Σ_r dy[r,c]·x[r,c]·rstd[r]          (RMSNorm weight)
//   ln:    out[c] += Σ_r dy[r,c]·(x[r,c]−mean[r])·rstd[r] (LayerNorm weight)
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Push { uint row0; uint row1; uint C; } p; // rows [row0, row1)
layout(std430, binding = 0) readonly buffer BDY { float dy[]; };
layout(std430, binding = 1) readonly buffer BX { float x[]; };
layout(std430, binding = 2) readonly buffer BM { float mean[]; };
layout(std430, binding = 3) readonly buffer BR { float rstd[]; };
layout(std430, binding = 4) buffer BO { float o[]; };

void main()
{
    uint c = gl_GlobalInvocationID.x;
    if (c >= p.C) return;
    float s = 0.0;
    for (uint r = p.row0; r < p.row1; r++) {
        float g = dy[r * p.C + c];
#if MODE == 1
        g *= x[r * p.C + c] * rstd[r];
#elif MODE == 2
        g *= (x[r * p.C + c] - mean[r]) * rstd[r];
#endif
        s += g;
    }
    o[c] += s;
}
