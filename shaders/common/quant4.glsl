// quant4: the values of a 4-bit weight (NF4 of model.base_dtype nf4, or
// NF4 or FP4 of a bitsandbytes folder) in the
// layout of include/vktrain/quant4.h: one buffer of 32-bit words, a
// header, the code, the absmax values and the nibbles. The includer
// defines Q4_WORD(i), word i of the buffer, and Q4_SPEC, the id of the
// specialization constant Q4_FLAGS (the header's flags as compile-time
// facts: a branch on a value read from the buffer costs llvmpipe both
// sides, a fetch each, 30% of the kernel's time), and calls q4_init() once
// before any other function here. An element's value is exactly
// code[q] · absmax in fp32 (`precise`: no contraction), absmax
// code8[q8] · nested + offset with double quantization (two roundings),
// then rounded to bf16 or f16 where the flags say (a bitsandbytes folder's
// dtype), as the host's q4_value computes it: a kernel on a 4-bit weight gives the
// bits of the fp32 kernel on the dequantized weight.
//
// The code is held in 16 registers and an index picked by a tree of
// selects on its 4 bits (15 selects): on llvmpipe a per-lane index into a
// table is a gather per element, slower than the selects.

// Q4_UNROLL: [[unroll]] on the constant loops below, unless the includer
// defines it empty (the reproducible kernels: no [[unroll]] there).
#ifndef Q4_UNROLL
#define Q4_UNROLL [[unroll]]
#endif

layout(constant_id = Q4_SPEC) const uint Q4_FLAGS = 0u;
uint q4_shift, q4_abs, q4_data, q4_nested, q4_code8;
float q4_offset;
float q4_c[16];

void q4_init()
{
    q4_shift = Q4_WORD(1u);
    q4_abs = Q4_WORD(3u);
    q4_data = Q4_WORD(4u);
    q4_nested = Q4_WORD(5u);
    q4_offset = uintBitsToFloat(Q4_WORD(6u));
    q4_code8 = Q4_WORD(7u);
    Q4_UNROLL for (uint i = 0u; i < 16u; i++) q4_c[i] = uintBitsToFloat(Q4_WORD(16u + i));
}

float q4_code(uint q)
{
    bool b0 = (q & 1u) != 0u, b1 = (q & 2u) != 0u, b2 = (q & 4u) != 0u, b3 = (q & 8u) != 0u;
    float l[8];
    Q4_UNROLL for (uint i = 0u; i < 8u; i++) l[i] = b0 ? q4_c[2u * i + 1u] : q4_c[2u * i];
    float m0 = b1 ? l[1] : l[0], m1 = b1 ? l[3] : l[2], m2 = b1 ? l[5] : l[4], m3 = b1 ? l[7] : l[6];
    float h0 = b2 ? m1 : m0, h1 = b2 ? m3 : m2;
    return b3 ? h1 : h0;
}

// The absmax of block b.
float q4_absmax(uint b)
{
    if ((Q4_FLAGS & 1u) == 0u)
        return uintBitsToFloat(Q4_WORD(q4_abs + b));
    uint q8 = (Q4_WORD(q4_abs + (b >> 2u)) >> ((b & 3u) << 3u)) & 0xffu;
    precise float a = uintBitsToFloat(Q4_WORD(q4_code8 + q8)) * uintBitsToFloat(Q4_WORD(q4_nested + (b >> 8u)));
    precise float s = a + q4_offset;
    return s;
}

// v (finite) rounded to nearest even: to bf16 (flag 2), or to f16 (flag
// 4: below 2^-14 to a multiple of 2^-24, f16's subnormals, else to 11
// significant bits, past 65504 to infinity).
float q4_round(float v)
{
    if ((Q4_FLAGS & 2u) != 0u) {
        uint u = floatBitsToUint(v);
        return uintBitsToFloat((u + 0x7fffu + ((u >> 16u) & 1u)) & 0xffff0000u);
    }
    if ((Q4_FLAGS & 4u) != 0u) {
        float a = abs(v);
        if (a < 6.103515625e-05) { // products by powers of two: exact (a sum with 0.5 was folded away)
            precise float r = roundEven(a * 16777216.0) * 5.9604644775390625e-08;
            return uintBitsToFloat(floatBitsToUint(r) | (floatBitsToUint(v) & 0x80000000u));
        }
        uint u = floatBitsToUint(v);
        float r = uintBitsToFloat((u + 0xfffu + ((u >> 13u) & 1u)) & 0xffffe000u);
        return abs(r) > 65504.0 ? uintBitsToFloat((u & 0x80000000u) | 0x7f800000u) : r;
    }
    return v;
}

float q4_scaled(uint q, float absmax)
{
    precise float v = q4_code(q) * absmax;
    return q4_round(v);
}

// Element e.
float q4_value(uint e)
{
    uint q = (Q4_WORD(q4_data + (e >> 3u)) >> (((e ^ 1u) & 7u) << 2u)) & 15u;
    return q4_scaled(q, q4_absmax(e >> q4_shift));
}

// Elements e .. e + 3, e a multiple of 4 (one block: blocks are at least
// 32 elements): one word's half and one absmax.
vec4 q4_value4(uint e)
{
    uint h = (Q4_WORD(q4_data + (e >> 3u)) >> ((e & 4u) << 2u)) & 0xffffu;
    float a = q4_absmax(e >> q4_shift);
    return vec4(q4_scaled((h >> 4u) & 15u, a), q4_scaled(h & 15u, a), q4_scaled((h >> 12u) & 15u, a),
                q4_scaled((h >> 8u) & 15u, a));
}
