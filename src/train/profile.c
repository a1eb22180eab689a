/* profile: the window of `profile: true`. Rank 0 times every dispatch of
 * three steps — the second to the fourth this process runs, since the
 * first compiles the pipelines (a one-step run is profiled whole) — and,
 * when the window closes, prints each phase's kernels by share of device
 * time (gpu_profile_print). The phases are set where the trainer calls
 * the model: forward (with the loss), backward, optimizer (norm, clipping,
 * AdamW), and eval for an evaluation inside the window. Never changes what
 * a step computes; other ranks and other steps write no timestamps. */
#include "train_internal.h"
#include "vktrain/util.h"

#define PROFILE_STEPS 3

void profile_window(struct trainer *t)
{
    if (!t->cfg->profile || t->dist->rank != 0)
        return;
    /* Steps are numbered from 1; the step about to run is t->step + 1. */
    int64_t first = t->first_step + (t->total_steps - t->first_step >= 2 ? 2 : 1);
    int64_t last = first + PROFILE_STEPS - 1 < t->total_steps ? first + PROFILE_STEPS - 1 : t->total_steps;
    if (t->step == last && t->profiling) {
        gpu_profile_stop(t->g);
        const struct gpu_device_info *info = gpu_info(t->g);
        char steps[64];
        if (last > first)
            snprintf(steps, sizeof steps, "steps %lld-%lld", (long long)first, (long long)last);
        else
            snprintf(steps, sizeof steps, "step %lld", (long long)first);
        printf("profile: device time of %s on %s (%s kernels), timed per dispatch\n", steps, info->name,
               gpu_kernel_class(t->g) == GPU_KERNELS_TEXEL ? "texel" : "tiled");
        gpu_profile_print(t->g, stdout, (int)(last - first + 1), "step");
        fflush(stdout);
        t->profiling = 0;
    }
    if (t->step + 1 == first) {
        t->profiling = gpu_profile_start(t->g);
        if (!t->profiling)
            vkt_warn("profile: %s has no timestamps on its compute queue (timestampValidBits 0); training goes on "
                     "without the profile",
                     gpu_info(t->g)->name);
    }
}
