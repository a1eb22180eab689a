#version 450
// Token (and learned position) embedding, one invocation per (row, channel):
//   out[n,c] = wte[tok[n],c] (+ wpe[pos[n],c] when has_pos)
// Ids are clamped into the tables: the data layer rejects out-of-range
// tokens, and the shader never reads out of bounds whatever it is given.
layout(local_size_x = 64, local_size_y = 1) in;
layout(push_constant) uniform Push { uint rows; uint C; uint V; uint P; uint has_pos; } q;
layout(std430, binding = 0) readonly buffer BT { int tok[]; };
layout(std430, binding = 1) readonly buffer BP { int pos[]; };
layout(std430, binding = 2) readonly buffer BWte { float wte[]; };
layout(std430, binding = 3) readonly buffer BWpe { float wpe[]; };
layout(std430, binding = 4) writeonly buffer BO { float o[]; };

void main()
{
    uint n = gl_GlobalInvocationID.y, c = gl_GlobalInvocationID.x;
    if (n >= q.rows || c >= q.C) return;
    uint t = uint(clamp(tok[n], 0, int(q.V) - 1));
    float v = wte[t * q.C + c];
    if (q.has_pos != 0u) v += wpe[uint(clamp(pos[n], 0, int(q.P) - 1)) * q.C + c];
    o[n * q.C + c] = v;
}
