/* nonfinite: a step whose loss or gradient norm is not finite (NaN or
 * infinite). Both are reduced over ranks before they are checked (the loss
 * sums are all-reduced, the norm is taken of the summed gradients), so every
 * rank reaches the same verdict at the same step and takes the same branch:
 *   nan_policy stop: the run ends before the optimizer touches anything,
 *       naming the step, the first parameter (in the model's table order)
 *       whose gradient has a non-finite norm, and the last checkpoint,
 *       which is left as it was;
 *   nan_policy skip: the step's update is not applied: weights, the AdamW
 *       moments, AdamW's step counter and the schedule stay as they were (as
 *       in torch when optimizer.step is not called); one more non-finite
 *       step after nan_max_skips skipped in a row ends the run as stop does.
 * Owns the verdict and its messages; never modifies a tensor. */
#include <math.h>
#include <stdio.h>

#include "train_internal.h"
#include "vktrain/util.h"

static void describe(struct trainer *t, const struct step_metrics *m, char *out, size_t n)
{
    int first = -1;
    for (int i = 0; i < model_param_count(t->model) && first < 0; i++)
        if (!isfinite(t->norm_host[i]))
            first = i;
    /* fabs: printf writes a NaN with its sign bit as "-nan" */
    int k = snprintf(out, n, "step %lld: the loss is %g and the gradient norm %g", (long long)m->step,
                     isnan(m->loss) ? fabs(m->loss) : m->loss, isnan(m->grad_norm) ? fabs(m->grad_norm) : m->grad_norm);
    if (k > 0 && (size_t)k < n) {
        if (first >= 0)
            snprintf(out + k, n - (size_t)k, " (the first gradient with a non-finite norm: %s)",
                     model_param(t->model, first)->name);
        else
            snprintf(out + k, n - (size_t)k, " (every gradient has a finite norm)");
    }
}

static void where_to_resume(const struct trainer *t, char *out, size_t n)
{
    if (t->last_checkpoint[0])
        snprintf(out, n,
                 "the last checkpoint, %s, is intact: resume: true continues from it (with nan_policy: skip "
                 "such steps are skipped; a lower optimizer.lr or a clip_grad_norm may avoid them)",
                 t->last_checkpoint);
    else
        snprintf(out, n,
                 "no checkpoint was written before it (save_every_n_steps: %lld); a lower optimizer.lr or a "
                 "clip_grad_norm may avoid such steps, nan_policy: skip skips them",
                 (long long)t->cfg->save_every_n_steps);
}

int nonfinite_check(struct trainer *t, struct step_metrics *m)
{
    if (isfinite(m->loss) && isfinite(m->grad_norm)) {
        t->nan_skips = 0;
        return 0;
    }
    const struct config *cfg = t->cfg;
    int rank0 = t->dist->rank == 0;
    char what[1024], resume[5120];
    describe(t, m, what, sizeof what);
    m->skipped = 1;
    if (cfg->nan_policy == NAN_SKIP && t->nan_skips < cfg->nan_max_skips) {
        t->nan_skips++;
        if (rank0)
            vkt_warn("%s; its update is skipped (nan_policy: skip; %d in a row, at most %d)", what, t->nan_skips,
                     cfg->nan_max_skips);
        return 1;
    }
    where_to_resume(t, resume, sizeof resume);
    if (rank0) {
        metrics_log(t, m);
        metrics_close(t);
    }
    if (cfg->nan_policy == NAN_SKIP)
        train_fail(t, "%s, after %d steps in a row were skipped (nan_max_skips: %d); the run stops, and %s", what,
                   t->nan_skips, cfg->nan_max_skips, resume);
    train_fail(t, "%s; the run stops with nothing of this step applied (nan_policy: stop), and %s", what, resume);
}
