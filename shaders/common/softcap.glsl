// softcap: Gemma 2's soft-capping of attention scores and final logits,
// x -> c·tanh(x/c) (c = 0: none), and its slope 1 − (y/c)² at the capped
// value y. tanh is written out for its relative precision near 0, where
// (e^2x − 1)/(e^2x + 1) cancels: an odd series below 1/4, else
// (1 − e^−2|x|)/(1 + e^−2|x|) (e^−2|x| <= 0.61: little cancellation;
// exp underflows to 0 for large |x|, giving ±1 exactly).
#ifndef SOFTCAP_GLSL
#define SOFTCAP_GLSL
float tanh_precise(float x)
{
    float a = abs(x);
    if (a < 0.25) {
        float x2 = x * x;
        return x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0)))));
    }
    float e = exp(-2.0 * a);
    return sign(x) * (1.0 - e) / (1.0 + e);
}
float softcap(float x, float c)
{
    return c > 0.0 ? c * tanh_precise(x / c) : x;
}
float softcap_slope(float y, float c)
{
    return c > 0.0 ? 1.0 - (y / c) * (y / c) : 1.0;
}
#endif
