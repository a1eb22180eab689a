#version 450
// Token (and learned position) embedding over n = rows·C outputs:
//   out[r,c] = wte[tok[r],c] (+ wpe[pos[r],c] when has_pos)
// Ids are clamped into the tables: the data layer rejects out-of-range
// tokens, and the shader never reads out of bounds whatever it is given.
// A table larger than a binding is bound in row ranges: this dispatch
// writes only the rows whose token is in [v0, v1) and position in
// [p0, p1), with wte bound from row v0 and wpe from row p0.
// BF16 (specialization constant 1): the tables hold bf16 values (frozen,
// model.base_dtype bf16), two per uint, element e in the low half of uint
// e/2 when e is even; a shift widens one to the fp32 of the same value, so
// the output is the fp32 kernel's on the tables rounded to bf16, bit for
// bit.
#define CUSTOM_PUSH
layout(push_constant) uniform Push { uint n; uint C; uint V; uint P; uint has_pos; uint v0, v1, p0, p1; } p;
#include "elementwise.glsl"
layout(constant_id = 1) const uint BF16 = 0u;
layout(std430, binding = 0) readonly buffer BT { int tok[]; };
layout(std430, binding = 1) readonly buffer BP { int pos[]; };
layout(std430, binding = 2) readonly buffer BWte { uint wte[]; };
layout(std430, binding = 3) readonly buffer BWpe { uint wpe[]; };
layout(std430, binding = 4) writeonly buffer BO { float o[]; };

// Element e of a table as fp32.
#define LOAD(t, e) \
    uintBitsToFloat(BF16 == 0u ? t[e] : ((e) & 1u) != 0u ? t[(e) >> 1] & 0xffff0000u : t[(e) >> 1] << 16)

void main()
{
    FOR_EACH_ELEMENT(i) {
        uint r = i / p.C, c = i % p.C;
        uint t = uint(clamp(tok[r], 0, int(p.V) - 1));
        uint q = p.has_pos != 0u ? uint(clamp(pos[r], 0, int(p.P) - 1)) : p.p0;
        if (t < p.v0 || t >= p.v1 || q < p.p0 || q >= p.p1) continue;
        float v = LOAD(wte, (t - p.v0) * p.C + c);
        if (p.has_pos != 0u) v += LOAD(wpe, (q - p.p0) * p.C + c);
        o[i] = v;
    }
}
