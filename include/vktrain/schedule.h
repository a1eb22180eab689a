/* schedule: the learning rate of each optimizer step (recipe key
 * lr_scheduler: type constant | cosine | linear, warmup_steps,
 * min_lr_ratio). A pure function of its arguments, so a resumed run gets the
 * same rates.
 *
 * Definition. step counts optimizer steps from 0 (the first step is 0; it
 * is torch's state['step'] − 1), W = warmup_steps, S = total_steps (the
 * number of optimizer steps in the whole run), r = min_lr_ratio, lr =
 * base_lr:
 *   warmup, step < W:  lr·(step + 1)/W          (every type; the last warmup
 *                                                step runs at lr)
 *   after warmup, p = clamp((step − W)/max(1, S − W), 0, 1):
 *     constant:        lr
 *     cosine:          lr·(r + (1 − r)·0.5·(1 + cos(π·p)))
 *     linear:          lr·(1 − (1 − r)·p)
 * So step W runs at lr (p = 0) and the decay follows Hugging Face's
 * get_cosine/linear_schedule_with_warmup (with min_lr_ratio); the last step
 * S − 1 has p = (S − 1 − W)/(S − W), just above the floor r·lr, which steps
 * past S reach and keep. */
#ifndef VKTRAIN_SCHEDULE_H
#define VKTRAIN_SCHEDULE_H

#include <stdint.h>

#include "vktrain/config.h"

double schedule_lr(enum lr_schedule type, double base_lr, int64_t warmup_steps, int64_t total_steps,
                   double min_lr_ratio, int64_t step);
/* The same with the math layer's cosine (repro_cos, within 4 ULP of cos in
 * float) instead of libm's, for precision: reproducible: the same bits on
 * every host; within 1e-6·base_lr of schedule_lr. */
double schedule_lr_repro(enum lr_schedule type, double base_lr, int64_t warmup_steps, int64_t total_steps,
                         double min_lr_ratio, int64_t step);

#endif
