/* schedule: learning-rate schedules with linear warmup (the definition is in
 * include/vktrain/schedule.h). Owns only the arithmetic, in double; never
 * reads the config struct, never touches the device. Built with
 * -ffp-contract=off (CMakeLists.txt): with repro_cos, + − × / only, each
 * rounded on its own, for precision: reproducible. */
#include <math.h>

#include "vktrain/repro.h"
#include "vktrain/schedule.h"
#include "vktrain/util.h"

static const double PI = 3.14159265358979323846;

static double libm_cos(double x)
{
    return cos(x);
}

/* x in [0, π] */
static double math_layer_cos(double x)
{
    return (double)repro_cos((float)x);
}

static double lr_with(double (*cosine)(double), enum lr_schedule type, double base_lr, int64_t warmup_steps,
                      int64_t total_steps, double min_lr_ratio, int64_t step)
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
        return base_lr * (min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + cosine(PI * p)));
    case LR_LINEAR:
        return base_lr * (1.0 - (1.0 - min_lr_ratio) * p);
    }
    vkt_fatal("schedule: unknown schedule type %d", (int)type);
}

double schedule_lr(enum lr_schedule type, double base_lr, int64_t warmup_steps, int64_t total_steps,
                   double min_lr_ratio, int64_t step)
{
    return lr_with(libm_cos, type, base_lr, warmup_steps, total_steps, min_lr_ratio, step);
}

double schedule_lr_repro(enum lr_schedule type, double base_lr, int64_t warmup_steps, int64_t total_steps,
                         double min_lr_ratio, int64_t step)
{
    return lr_with(math_layer_cos, type, base_lr, warmup_steps, total_steps, min_lr_ratio, step);
}
