/* repro_adamw: the host side of the reproducible AdamW step: its float
 * scalars, computed the same way on every host (no libm but sqrt, which
 * IEEE 754 and C's Annex F require correctly rounded; β^t by repeated
 * squaring; no FMA contraction), for shaders/reproducible/repro_adamw.comp (its C
 * reference is in tests/ref). */
#include <math.h>

#include "vktrain/repro.h"

void repro_adamw_scalars(const struct op_adamw_step *s, uint32_t n, struct repro_adamw_push *p)
{
    double bc1 = 1.0 - repro_powi(s->beta1, s->t), bc2 = 1.0 - repro_powi(s->beta2, s->t);
    double lr_wd = s->lr * s->weight_decay;
    *p = (struct repro_adamw_push){
        .n = n,
        .grad_scale = (float)s->grad_scale,
        .decay = (float)(1.0 - lr_wd),
        .beta1 = (float)s->beta1,
        .one_minus_beta1 = (float)(1.0 - s->beta1),
        .beta2 = (float)s->beta2,
        .one_minus_beta2 = (float)(1.0 - s->beta2),
        .inv_bc2_sqrt = (float)(1.0 / sqrt(bc2)),
        .neg_step_size = (float)(-(s->lr / bc1)),
        .eps = (float)s->eps,
    };
}

