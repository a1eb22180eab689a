/* schedule: learning-rate schedules with linear warmup (the definition is in
 * include/vktrain/schedule.h). Owns only the arithmetic, in double; never
 * reads the config struct, never touches the device. */
#include <math.h>

#include "vktrain/schedule.h"
#include "vktrain/util.h"

static const double PI = 3.14159265358979323846;

double schedule_lr(enum lr_schedule type, double base_lr, int64_t warmup_steps, int64_t total_steps,
                   double min_lr_ratio, int64_t step)
{
    if (step < 0)
        step = 0;
    if (warmup_steps > 0 && step < warmup_steps)
        return base_lr * (double)(step + 1) / (double)warmup_steps;
    int64_t span = total_steps - warmup_steps;
    double p = (double)(step - warmup_steps) / (double)(span > 1 ? span : 1);
    if (p > 1.0)
        p = 1.0;
    switch (type) {
    case LR_CONSTANT:
        return base_lr;
    case LR_COSINE:
        return base_lr * (min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + cos(PI * p)));
    case LR_LINEAR:
        return base_lr * (1.0 - (1.0 - min_lr_ratio) * p);
    }
    vkt_fatal("schedule_lr: unknown schedule type %d", (int)type);
}
