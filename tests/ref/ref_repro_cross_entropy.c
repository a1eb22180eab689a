/* ref_repro_cross_entropy: the C reference of the reproducible
 * cross-entropy (shaders/reproducible/repro_cross_entropy.comp): the same operations in
 * the same order, the row sum by repro_sum_ref (the tree of
 * repro_tree.glsl). */
#include <stdlib.h>

#include "repro_ref.h"
#include "vktrain/util.h"

/* The larger of a and b; a NaN b wins (a NaN a stays). */
static float max_of(float a, float b)
{
    return b > a || b != b ? b : a;
}

void repro_cross_entropy_ref(float *logits, const int32_t *labels, float *row_loss, float *row_count, uint32_t rows,
                             uint32_t V, float scale)
{
    float *e = vkt_malloc((size_t)V * sizeof *e, "repro cross-entropy row");
    for (size_t r = 0; r < rows; r++) {
        float *x = logits + r * V;
        int32_t label = labels[r];
        if (label < 0 || (uint32_t)label >= V) {
            for (size_t i = 0; i < V; i++)
                x[i] = 0.0f;
            row_loss[r] = row_count[r] = 0.0f;
            continue;
        }
        float m = repro_float_of(0xff800000u);
        for (size_t i = 0; i < V; i++)
            m = max_of(m, x[i]);
        for (size_t i = 0; i < V; i++)
            e[i] = repro_exp(x[i] - m);
        float lse = m + repro_log(repro_sum_ref(e, V));
        row_loss[r] = lse - x[label];
        row_count[r] = 1.0f;
        for (size_t i = 0; i < V; i++) {
            float p = repro_exp(x[i] - lse);
            if (i == (size_t)label)
                p = p - 1.0f;
            x[i] = p * scale;
        }
    }
    free(e);
}
