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
 *       outside the vocabulary, where no dataset can put one;
 *   VKTRAIN_KILL_IN_CHECKPOINT=POINT[:S]
 *       SIGKILL while the checkpoint of step S (default: any, so the first)
 *       is written, at POINT: `data` (in model.safetensors, after its header
 *       and first tensor), `rename` (every file written and synced, before
 *       the directory is renamed into place) or `renamed` (just after);
 *   VKTRAIN_TEST_SIGNAL=S:NAMES[:R]
 *       during step S (after its gradients are zeroed), rank R (default 0)
 *       sends itself each signal of NAMES in turn, INT or TERM separated
 *       by commas (e.g. INT,INT: a second SIGINT, which a kill from outside
 *       cannot time: signals sent together may arrive as one).
 * Owns only these hooks; unset, they do nothing. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"
#include "vktrain/safetensors.h"
#include "vktrain/util.h"

static int64_t env_step(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strtoll(v, NULL, 10) : -1;
}

static const char *const checkpoint_points[] = {"data", "rename", "renamed"}; /* enum fault_point */

static void init_checkpoint_kill(struct faults *f)
{
    f->ckpt_point = -1;
    const char *v = getenv("VKTRAIN_KILL_IN_CHECKPOINT");
    if (!v || !*v)
        return;
    size_t len = strcspn(v, ":");
    for (int i = 0; i < 3; i++)
        if (strlen(checkpoint_points[i]) == len && !strncmp(v, checkpoint_points[i], len))
            f->ckpt_point = i;
    if (f->ckpt_point < 0)
        vkt_fatal("VKTRAIN_KILL_IN_CHECKPOINT='%s': expected data, rename or renamed, then :STEP or nothing", v);
    f->ckpt_step = v[len] == ':' ? strtoll(v + len + 1, NULL, 10) : -1;
}

static void init_signal(struct faults *f)
{
    f->signal_step = -1;
    const char *v = getenv("VKTRAIN_TEST_SIGNAL");
    if (!v || !*v)
        return;
    char *end;
    f->signal_step = strtoll(v, &end, 10);
    for (char sep = ':'; *end == sep && f->n_signals < 4; sep = ',') { /* S:NAME,NAME... */
        size_t k = strcspn(end + 1, ",:");
        if (k == 3 && !strncmp(end + 1, "INT", k))
            f->signals[f->n_signals++] = SIGINT;
        else if (k == 4 && !strncmp(end + 1, "TERM", k))
            f->signals[f->n_signals++] = SIGTERM;
        else
            break;
        end += 1 + k;
    }
    if (*end == ':')
        f->signal_rank = (int)strtol(end + 1, &end, 10);
    if (!f->n_signals || *end)
        vkt_fatal("VKTRAIN_TEST_SIGNAL='%s': expected STEP:NAMES[:RANK], NAMES being INT or TERM separated by commas",
                  v);
}

void faults_init(struct faults *f)
{
    memset(f, 0, sizeof *f);
    init_checkpoint_kill(f);
    init_signal(f);
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

void faults_signal(const struct trainer *t)
{
    const struct faults *f = &t->faults;
    if (f->signal_step != t->step + 1 || f->signal_rank != t->dist->rank)
        return;
    for (int i = 0; i < f->n_signals; i++)
        raise(f->signals[i]); /* delivered before raise returns */
}

static void kill_in_write(const char *path, int chunk)
{
    (void)path;
    if (chunk >= 1) /* the header and a tensor's data are in the file */
        raise(SIGKILL);
}

void faults_checkpoint(const struct trainer *t, enum fault_point at)
{
    const struct faults *f = &t->faults;
    if ((int)at != f->ckpt_point || (f->ckpt_step >= 0 && f->ckpt_step != t->step))
        return;
    if (at == FAULT_CKPT_WRITE)
        ckpt_write_hook = kill_in_write; /* the first file written: model.safetensors */
    else
        raise(SIGKILL);
}
