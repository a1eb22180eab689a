/* op_dropout: LoRA's input dropout (see include/vktrain/ops.h) and its C
 * twin of the mask. The mask is a counter-based hash, lowbias32 (Chris
 * Wellons' integer hash, a bijection of 32-bit words) chained over the
 * words of the counter: the host folds (seed, step, stream) into the key,
 * the shader (shaders/common/lora_dropout.comp) folds in the sample, the position
 * and the feature; an element is kept when the top 24 bits of the result
 * are at least p·2^24. Rows go in ranges within the binding limits, each
 * dispatch told its first row. Never allocates. */
#include <math.h>

#include "ops_internal.h"
#include "vktrain/util.h"

static uint32_t hash32(uint32_t v)
{
    v ^= v >> 16;
    v *= 0x7feb352du;
    v ^= v >> 15;
    v *= 0x846ca68bu;
    v ^= v >> 16;
    return v;
}

uint32_t op_dropout_key(uint64_t seed, int64_t step, uint32_t stream)
{
    uint64_t s = (uint64_t)step;
    uint32_t h = hash32(0x9e3779b9u ^ (uint32_t)seed);
    h = hash32(h ^ (uint32_t)(seed >> 32));
    h = hash32(h ^ (uint32_t)s);
    h = hash32(h ^ (uint32_t)(s >> 32));
    return hash32(h ^ stream);
}

/* p·2^24: the kept elements are those whose 24-bit draw is at least this. */
static uint32_t threshold(float p)
{
    return (uint32_t)llround((double)p * 16777216.0);
}

int op_dropout_keep(const struct op_dropout *d, uint32_t sample, uint32_t position, uint32_t feature)
{
    uint32_t h = hash32(hash32(hash32(d->key ^ sample) ^ position) ^ feature);
    return (h >> 8) >= threshold(d->p);
}

void op_dropout(struct gpu *g, const struct op_dropout *d, struct gpu_buffer *x, struct gpu_buffer *y, uint32_t rows,
                uint32_t cols, int accumulate)
{
    size_t row = (size_t)cols * sizeof(float);
    ops_check("dropout", "input", x, rows * row);
    ops_check("dropout", "output", y, rows * row);
    if (!(d->p >= 0 && d->p < 1) || !d->T)
        vkt_fatal("dropout: rate %g outside [0, 1) or no sequence length", (double)d->p);
    struct {
        uint32_t n, cols, row0, key, sample0, T, threshold;
        float scale;
        uint32_t acc;
    } push = {
        0, cols, 0, d->key, d->sample0, d->T, threshold(d->p), (float)(1.0 / (1.0 - (double)d->p)), accumulate != 0};
    struct gpu_kernel *k = ops_kernel(g, SHADER_lora_dropout, 2, sizeof push, 1);
    struct gpu_arg args[2] = {{.buf = x}, {.buf = y, .write = 1}};
    const size_t ub[2] = {row, row};
    size_t step, per = ops_range_units(g, k, args, ub, &step);
    if (per > UINT32_MAX / cols) /* the count of a range is a uint32 */
        per = UINT32_MAX / cols - UINT32_MAX / cols % step;
    for (size_t r0 = 0; r0 < rows; r0 += per) {
        size_t nr = rows - r0 < per ? rows - r0 : per;
        struct gpu_arg a[2];
        for (int i = 0; i < 2; i++)
            a[i] = ops_range_arg(g, k, i, args, r0, nr, rows, ub[i]);
        push.n = (uint32_t)(nr * cols), push.row0 = (uint32_t)r0;
        ops_dispatch_elements(g, k, a, &push, push.n, 1);
    }
}
