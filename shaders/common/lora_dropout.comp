#version 450
// LoRA dropout (src/ops/op_dropout.c): over rows of `cols` floats,
//   y = x·keep·scale             (acc 0: the forward's dropped input)
//   y = y + x·keep·scale         (acc 1: the backward, x the gradient)
// with scale = 1/(1 − p) and keep = hash(key, sample, position, feature)
// ≥ threshold (= p·2^24): the hash is lowbias32 (a bijection of 32-bit
// words) chained over the counter, the C twin op_dropout_keep. Row
// row0 + i / cols of the whole tensor (this dispatch's range starts at
// row0) is position r % T of sample sample0 + r / T.
#define CUSTOM_PUSH
layout(push_constant) uniform Push {
    uint n, cols, row0, key, sample0, T, threshold;
    float scale;
    uint acc;
} p;
#include "elementwise.glsl"
layout(std430, binding = 0) readonly buffer BX { float x[]; };
layout(std430, binding = 1) buffer BY { float y[]; };

uint hash32(uint v)
{
    v ^= v >> 16;
    v *= 0x7feb352du;
    v ^= v >> 15;
    v *= 0x846ca68bu;
    v ^= v >> 16;
    return v;
}

void main()
{
    FOR_EACH_ELEMENT(i) {
        uint r = p.row0 + i / p.cols, c = i % p.cols;
        uint h = hash32(hash32(hash32(p.key ^ (p.sample0 + r / p.T)) ^ (r % p.T)) ^ c);
        precise float v = (h >> 8) >= p.threshold ? x[i] * p.scale : 0.0;
        if (p.acc != 0u) {
            precise float s = y[i] + v;
            y[i] = s;
        } else {
            y[i] = v;
        }
    }
}
