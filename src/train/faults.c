/* faults: the failures the tests inject into a run at a chosen step, read
 * once from the environment (steps count from 1):
 *   VKTRAIN_KILL_AFTER_STEP=S [VKTRAIN_KILL_RANK=R]
 *       SIGKILL after step S (on rank R only when given), as a crash or a
 *       scheduler would;
 *   VKTRAIN_TEST_NAN=S[:R[:TENSOR]]
 *       a NaN in the gradient of TENSOR (a Hugging Face name; default the
 *       first parameter) on rank R (default 0) at step S, before the
 *       gradients are summed over ranks;
 *   VKTRAIN_TEST_BAD_LABEL=S
 *       rank 0's first valid label at step S set to model.vocab_size,
 *       outside the vocabulary, where no dataset can put one.
 * Owns only these hooks; unset, they do nothing. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"
#include "vktrain/util.h"

static int64_t env_step(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strtoll(v, NULL, 10) : -1;
}

void faults_init(struct faults *f)
{
    memset(f, 0, sizeof *f);
    f->kill_after = env_step("VKTRAIN_KILL_AFTER_STEP");
    const char *r = getenv("VKTRAIN_KILL_RANK");
    f->kill_rank = r && *r ? atoi(r) : -1;
    f->bad_label_step = env_step("VKTRAIN_TEST_BAD_LABEL");
    f->nan_step = -1;
    const char *nan = getenv("VKTRAIN_TEST_NAN");
    if (nan && *nan) {
        char *end;
        f->nan_step = strtoll(nan, &end, 10);
        if (*end == ':')
            f->nan_rank = (int)strtol(end + 1, &end, 10);
        if (*end == ':')
            snprintf(f->nan_tensor, sizeof f->nan_tensor, "%s", end + 1);
    }
}

void faults_gradient(struct trainer *t)
{
    const struct faults *f = &t->faults;
    if (f->nan_step != t->step + 1 || f->nan_rank != t->dist->rank)
        return;
    struct model_param *p = f->nan_tensor[0] ? model_param_find(t->model, f->nan_tensor) : model_param(t->model, 0);
    if (!p)
        vkt_fatal("VKTRAIN_TEST_NAN: the model has no tensor '%s'", f->nan_tensor);
    if (!p->grad)
        vkt_fatal("VKTRAIN_TEST_NAN: '%s' is frozen (LoRA): it has no gradient", f->nan_tensor);
    float nan = NAN;
    gpu_upload(t->g, p->grad, 0, &nan, sizeof nan);
}

void faults_labels(struct trainer *t)
{
    if (t->faults.bad_label_step != t->step + 1 || t->dist->rank != 0)
        return;
    struct data_batch *b = &t->micro[0];
    for (int i = 0; i < b->rows * b->T; i++)
        if (b->labels[i] != DATA_IGNORE) {
            b->labels[i] = t->cfg->model.vocab_size;
            return;
        }
}

void faults_after_step(const struct trainer *t)
{
    const struct faults *f = &t->faults;
    if (t->step == f->kill_after && (f->kill_rank < 0 || f->kill_rank == t->dist->rank))
        raise(SIGKILL);
}
