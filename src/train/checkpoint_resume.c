/* checkpoint_resume: `resume: true` — the run goes on from the newest
 * checkpoint in output_dir/checkpoints that can be read whole.
 *   - A checkpoint that cannot (a train_state.json that does not parse or
 *     lacks a field, a file whose size or checksum differs from what
 *     train_state.json recorded, a tensor file that does not load) is
 *     skipped with a warning saying what is wrong, and the next older one
 *     is tried; when none is left the run stops with an error.
 *   - One that reads well but does not fit this run (another recipe or
 *     global batch, a step past max_steps) is an error: falling back to an
 *     older one would hide it.
 *   - What an interrupted write left (checkpoint.c): .step_N.tmp is
 *     removed; .step_N.old, the earlier copy of a checkpoint being
 *     replaced, is moved back when step_N is missing.
 * Every rank reads the checkpoint and the ranks agree on each verdict;
 * rank 0 alone checks the checksums and tidies the folder. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"
#include "vktrain/safetensors.h"
#include "vktrain/schedule.h"
#include "vktrain/util.h"

static int is_dir(const char *path)
{
    struct stat st;
    return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/* Rank 0: the leftovers of an interrupted write. */
static void tidy(const char *root)
{
    DIR *d = opendir(root);
    if (!d)
        return;
    struct dirent *e;
    char p[4096], dir[4096];
    while ((e = readdir(d))) {
        long long n;
        char tail[8];
        if (sscanf(e->d_name, ".step_%lld.%7s", &n, tail) != 2)
            continue;
        vkt_path(p, sizeof p, "%s/%s", root, e->d_name);
        vkt_path(dir, sizeof dir, "%s/step_%lld", root, n);
        if (!strcmp(tail, "old") && !is_dir(dir) && !rename(p, dir)) {
            vkt_info("resume: moved %s back to %s (a checkpoint write was interrupted while replacing it)", p, dir);
        } else if (!strcmp(tail, "tmp") || !strcmp(tail, "old")) {
            vkt_info("resume: removing %s, left by an interrupted checkpoint write", p);
            checkpoint_remove_dir(p);
        }
    }
    closedir(d);
}

static int newest_first(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x < y) - (x > y);
}

/* The steps of the step_N directories, newest first, in *steps; how many. */
static int list_checkpoints(const char *root, long long **steps)
{
    *steps = NULL;
    DIR *d = opendir(root);
    if (!d)
        return 0;
    int n = 0, cap = 0;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        long long s;
        char tail;
        vkt_path(p, sizeof p, "%s/%s", root, e->d_name);
        if (sscanf(e->d_name, "step_%lld%c", &s, &tail) != 1 || !is_dir(p))
            continue;
        if (n == cap)
            *steps = vkt_realloc(*steps, sizeof **steps * (size_t)(cap = cap ? 2 * cap : 16), "checkpoint list");
        (*steps)[n++] = s;
    }
    closedir(d);
    if (n)
        qsort(*steps, (size_t)n, sizeof **steps, newest_first);
    return n;
}

struct saved_state {
    json_t *root; /* owns the rest */
    json_int_t step, opt_steps, total, seen, global_batch;
    const char *hash;
    json_t *files; /* NULL in checkpoints of an older vktrain */
};

/* dir/train_state.json; 0, or -1 with why. */
static int read_state(const char *dir, struct saved_state *s, char *err, size_t n)
{
    char p[4096];
    vkt_path(p, sizeof p, "%s/train_state.json", dir);
    memset(s, 0, sizeof *s);
    json_error_t je;
    if (access(p, F_OK))
        return vkt_error(err, n, "%s: %s", p, strerror(errno));
    if (!(s->root = json_load_file(p, 0, &je)))
        return vkt_error(err, n, "%s:%d: %s", p, je.line, je.text);
    static const char *const need[] = {"step", "global_batch"};
    for (size_t i = 0; i < sizeof need / sizeof *need; i++)
        if (!json_is_integer(json_object_get(s->root, need[i])))
            return vkt_error(err, n, "%s has no integer \"%s\"", p, need[i]);
    s->step = json_integer_value(json_object_get(s->root, "step"));
    s->global_batch = json_integer_value(json_object_get(s->root, "global_batch"));
    s->seen = json_integer_value(json_object_get(s->root, "tokens_seen")); /* 0 when absent */
    json_t *o = json_object_get(s->root, "optimizer_steps"), *total = json_object_get(s->root, "total_steps");
    s->opt_steps = o ? json_integer_value(o) : s->step; /* older checkpoints skipped no update */
    s->total = total ? json_integer_value(total) : -1;
    s->hash = json_string_value(json_object_get(s->root, "recipe_hash"));
    s->files = json_object_get(s->root, "files");
    if (s->files && !json_is_object(s->files))
        return vkt_error(err, n, "%s: \"files\" is not an object", p);
    return 0;
}

static int read_optimizer(struct trainer *t, const char *path, char *err, size_t n)
{
    struct st_file f;
    char name[160];
    if (st_read(path, &f, err, n))
        return -1;
    int rc = 0;
    for (int i = 0; i < model_param_count(t->model) && !rc; i++) {
        struct model_param *p = model_param(t->model, i);
        for (int k = 0; k < 2 && !rc; k++) {
            snprintf(name, sizeof name, "%s.%s", k ? "exp_avg_sq" : "exp_avg", p->name);
            const struct st_tensor *s = st_find(&f, name);
            if (!s || (size_t)st_numel(s) != p->numel)
                rc = vkt_error(err, n, "%s lacks tensor '%s' of %zu elements", path, name, p->numel);
            else if (trainer_updates(t, i)) /* dist.zero: only its own shard */
                gpu_upload(t->g, trainer_state(t, 1 + k, i), 0, s->data, p->numel * sizeof(float));
        }
    }
    st_free(&f);
    return rc;
}

/* Names the recipe keys that differ from the checkpoint's recipe.yaml. */
static void recipe_differences(const struct trainer *t, const char *dir, char *out, size_t n)
{
    char path[4096];
    vkt_path(path, sizeof path, "%s/recipe.yaml", dir);
    size_t len;
    char *text = checkpoint_read_file(path, &len);
    if (!text) {
        snprintf(out, n, "the checkpoint has no recipe.yaml to compare with (written by an older vktrain)");
        return;
    }
    char diff[3072];
    int count = config_diff(t->cfg, text, diff, sizeof diff);
    free(text);
    if (count)
        snprintf(out, n, "%d key%s differ%s (checkpoint -> this run): %s", count, count > 1 ? "s" : "",
                 count > 1 ? "" : "s", diff);
    else
        snprintf(out, n, "no key of its recipe.yaml differs in its printed value");
}

/* A readable checkpoint that this run cannot continue ends the run. */
static void check_fits(const struct trainer *t, const char *dir, const struct saved_state *s)
{
    if (s->global_batch != checkpoint_global_batch(t))
        train_fail(t,
                   "resume: %s was trained with a global batch of %lld sequences per step; this run has "
                   "W x A x B = %d x %d x %d = %lld. Keep W x A x B (ranks x gradient_accumulation_steps x "
                   "batch_size) equal to resume",
                   dir, (long long)s->global_batch, t->dist->world, t->cfg->gradient_accumulation_steps,
                   t->cfg->batch_size, (long long)checkpoint_global_batch(t));
    char want[32];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)config_hash(t->cfg));
    if (!s->hash || strcmp(s->hash, want)) {
        char diff[4096];
        recipe_differences(t, dir, diff, sizeof diff);
        train_fail(t,
                   "resume: %s/train_state.json was written by a different recipe (hash %s, this recipe %s): %s. "
                   "Resume with the checkpoint's recipe (%s/recipe.yaml), or start a new output_dir",
                   dir, s->hash ? s->hash : "missing", want, diff, dir);
    }
    if (s->step > t->total_steps)
        train_fail(t,
                   "resume: the newest checkpoint, %s, is at step %lld, past this run's %lld steps (max_steps or "
                   "epochs); raise max_steps to continue it (its model is in %s)",
                   dir, (long long)s->step, (long long)t->total_steps, dir);
}

/* The lr of the next step under this run's schedule and the checkpoint's. */
static void warn_schedule(const struct trainer *t, int64_t saved_total)
{
    const struct config *c = t->cfg;
    double lr_now = schedule_lr(c->lr_scheduler.type, c->optimizer.lr, c->lr_scheduler.warmup_steps,
                                t->total_steps, c->lr_scheduler.min_lr_ratio, t->opt_steps);
    double lr_then = schedule_lr(c->lr_scheduler.type, c->optimizer.lr, c->lr_scheduler.warmup_steps, saved_total,
                                 c->lr_scheduler.min_lr_ratio, t->opt_steps);
    if (t->dist->rank == 0 && lr_now != lr_then)
        vkt_warn("resume: this run has %lld steps, the checkpoint's run had %lld: the learning-rate schedule "
                 "now spans %lld steps, so step %lld runs at lr %.3g where the earlier one would give %.3g",
                 (long long)t->total_steps, (long long)saved_total, (long long)t->total_steps,
                 (long long)t->step + 1, lr_now, lr_then);
}

/* 1 when some rank failed: the first one says why, naming what comes next. */
static int damaged(const struct trainer *t, int failed, const char *why, const long long *steps, int i, int n)
{
    int first = dist_first_rank(failed);
    if (first < 0)
        return 0;
    if (first == t->dist->rank) {
        if (i + 1 < n)
            vkt_warn("resume: skipping checkpoints/step_%lld, which cannot be read: %s; trying the one before, "
                     "checkpoints/step_%lld",
                     steps[i], why, steps[i + 1]);
        else
            vkt_warn("resume: skipping checkpoints/step_%lld, which cannot be read: %s", steps[i], why);
    }
    return 1;
}

int checkpoint_resume(struct trainer *t)
{
    char root[4096], dir[4096], p[4096], why[4096];
    vkt_path(root, sizeof root, "%s/checkpoints", t->cfg->output_dir);
    if (t->dist->rank == 0)
        tidy(root);
    dist_barrier(); /* every rank lists what rank 0 left */
    long long *steps;
    int n = list_checkpoints(root, &steps);
    if (n == 0) {
        if (t->dist->rank == 0)
            vkt_info("resume: no checkpoint in %s; starting from step 0", root);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        vkt_path(dir, sizeof dir, "%s/step_%lld", root, steps[i]);
        struct saved_state s;
        int failed = read_state(dir, &s, why, sizeof why) != 0;
        if (!failed && t->dist->rank == 0 && s.files)
            failed = checkpoint_files_verify(dir, s.files, why, sizeof why) != 0;
        if (damaged(t, failed, why, steps, i, n)) {
            json_decref(s.root);
            continue;
        }
        check_fits(t, dir, &s);
        vkt_path(p, sizeof p, "%s/optimizer.safetensors", dir);
        failed = (t->cfg->lora.rank ? model_adapter_load(t->model, dir, why, sizeof why)
                                    : model_load(t->model, dir, why, sizeof why)) ||
                 read_optimizer(t, p, why, sizeof why);
        if (damaged(t, failed, why, steps, i, n)) {
            json_decref(s.root);
            continue;
        }
        t->step = s.step;
        t->opt_steps = s.opt_steps;
        t->tokens_seen = s.seen;
        t->saved_step = s.step;
        snprintf(t->last_checkpoint, sizeof t->last_checkpoint, "%s", dir);
        if (t->dist->rank == 0) {
            vkt_info("resuming from %s (step %lld of %lld)", dir, (long long)s.step, (long long)t->total_steps);
            if (s.step == t->total_steps)
                vkt_info("resume: the run had already reached its last step; nothing is left to train, and its "
                         "final model is written from this checkpoint");
        }
        if (s.total > 0 && s.total != t->total_steps && s.step < t->total_steps)
            warn_schedule(t, s.total);
        json_decref(s.root);
        free(steps);
        return 1;
    }
    free(steps);
    train_fail(t,
               "resume: none of the %d checkpoint%s in %s can be read (the warnings above say why); "
               "start over with overwrite: true, or restore a checkpoint",
               n, n > 1 ? "s" : "", root);
}
