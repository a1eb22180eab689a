/* checkpoint: output_dir/checkpoints/step_N/ — model.safetensors and
 * config.json (Hugging Face, loadable as model.init_from), the AdamW state
 * (optimizer.safetensors: exp_avg.<name>, exp_avg_sq.<name>),
 * train_state.json (step, updates applied, the run's length, data position,
 * recipe hash) and recipe.yaml (the resolved recipe, which names the keys
 * that differ when a resume finds another recipe). A checkpoint is
 * written into a hidden temporary directory, each file fsynced, and renamed
 * into place, so a crash never leaves a half checkpoint: resume only sees
 * complete ones. Only rank 0 writes; every rank reads on resume. With
 * dist.zero the AdamW state is gathered from its owners first, so a
 * checkpoint is the same whether or not the run sharded it, and resumes
 * with any W, sharded or not. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"
#include "vktrain/safetensors.h"
#include "vktrain/schedule.h"
#include "vktrain/util.h"

static void path_join(char *out, size_t n, const char *a, const char *b) { vkt_path(out, n, "%s/%s", a, b); }

/* Removes a directory of plain files (a checkpoint, or a temporary one left
 * by a crash); what cannot be removed stays. */
void checkpoint_remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            path_join(p, sizeof p, dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* state: NULL, or with dist.zero the gathered m and v (sync-order layout,
 * grad_sync_gather) one after the other. */
static void write_optimizer(struct trainer *t, const char *path, const float *state)
{
    int n = model_param_count(t->model);
    struct st_tensor *ts = vkt_calloc(2 * (size_t)n, sizeof *ts, "optimizer tensors");
    for (int i = 0; i < n; i++) {
        struct model_param *p = model_param(t->model, i);
        for (int k = 0; k < 2; k++) {
            struct st_tensor *s = &ts[2 * i + k];
            snprintf(s->name, sizeof s->name, "%s.%s", k ? "exp_avg_sq" : "exp_avg", p->name);
            s->ndim = p->ndim;
            s->shape[0] = p->shape[0];
            s->shape[1] = p->shape[1];
            s->data = vkt_malloc(p->numel * sizeof(float), "optimizer state");
            if (state)
                memcpy(s->data, state + (size_t)k * t->n_grads + t->sync_off[i], p->numel * sizeof(float));
            else
                gpu_download(t->g, trainer_state(t, 1 + k, i), 0, s->data, p->numel * sizeof(float));
        }
    }
    char err[1024];
    int rc = st_write(path, ts, 2 * n, NULL, err, sizeof err);
    for (int i = 0; i < 2 * n; i++)
        free(ts[i].data);
    free(ts);
    if (rc)
        vkt_fatal("writing the checkpoint: %s", err);
}

/* Collective with dist.zero: the whole AdamW state on rank 0, gathered
 * from the ranks that own its shards (NULL elsewhere, and without it). */
static float *gather_optimizer(struct trainer *t)
{
    if (!t->zero)
        return NULL;
    float *state = t->dist->rank == 0 ? vkt_malloc(2 * t->n_grads * sizeof(float), "optimizer state") : NULL;
    for (int k = 0; k < 2; k++) {
        grad_sync_gather(t, 1 + k);
        if (state)
            memcpy(state + (size_t)k * t->n_grads, t->host_grads, t->n_grads * sizeof(float));
    }
    return state;
}

/* Sequences per optimizer step, W·A·B: what a resumed run must keep. */
static int64_t global_batch(const struct trainer *t)
{
    return (int64_t)t->dist->world * t->cfg->gradient_accumulation_steps * t->cfg->batch_size;
}

static void write_text(const char *path, const char *text, const char *what)
{
    size_t len = strlen(text);
    const void *bufs[1] = {text};
    char err[1024];
    if (ckpt_write_atomic(path, 1, bufs, &len, err, sizeof err))
        vkt_fatal("writing %s: %s", what, err);
}

static void write_state(struct trainer *t, const char *path)
{
    struct data_pos pos = sampler_pos(&t->sampler, t->step);
    char hash[32];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)config_hash(t->cfg));
    json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:s, s:i, s:I, s:I}", "step", (json_int_t)t->step,
                          "optimizer_steps", (json_int_t)t->opt_steps, "total_steps", (json_int_t)t->total_steps,
                          "epoch", (json_int_t)pos.epoch, "step_in_epoch", (json_int_t)pos.step, "recipe_hash", hash,
                          "world_size", t->dist->world, "global_batch", (json_int_t)global_batch(t),
                          "tokens_seen", (json_int_t)t->tokens_seen);
    char *text = json_dumps(j, JSON_INDENT(2));
    json_decref(j);
    write_text(path, text, "the checkpoint");
    free(text);
}

void checkpoint_write_recipe(const struct trainer *t, const char *dir)
{
    char path[4096], *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        vkt_fatal("cannot format the recipe: %s", strerror(errno));
    config_print(t->cfg, f);
    fclose(f);
    vkt_path(path, sizeof path, "%s/recipe.yaml", dir);
    write_text(path, text, "the recipe");
    free(text);
}

/* A whole file, NUL-terminated, in *n bytes (the NUL not counted); NULL
 * with errno when it cannot be opened. */
static char *read_whole(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, k;
    char *buf = vkt_malloc(cap + 1, path);
    *n = 0;
    while ((k = fread(buf + *n, 1, cap - *n, f)) > 0)
        if ((*n += k) == cap)
            buf = vkt_realloc(buf, (cap *= 2) + 1, path);
    fclose(f);
    buf[*n] = 0;
    return buf;
}

/* Copies src to dst atomically; a missing source is skipped unless required. */
static void copy_file(const char *src, const char *dst, int required)
{
    char err[1024];
    size_t n;
    char *buf = read_whole(src, &n);
    if (!buf && !required && errno == ENOENT)
        return;
    if (!buf)
        vkt_fatal("cannot read %s to copy it beside the model: %s", src, strerror(errno));
    const void *bufs[1] = {buf};
    if (ckpt_write_atomic(dst, 1, bufs, &n, err, sizeof err))
        vkt_fatal("writing the model: %s", err);
    free(buf);
}

/* A model trained with a Hugging Face tokenizer carries its tokenizer files
 * (tokenizer.json under that name, and tokenizer_config.json and
 * special_tokens_map.json from its folder when there) and
 * generation_config.json (from init_from's folder, else the tokenizer's),
 * so the folder is complete for generate, init_from and the Hugging Face
 * tools. */
static void copy_model_files(const struct trainer *t, const char *dir)
{
    static const char *const beside[] = {"tokenizer_config.json", "special_tokens_map.json", "generation_config.json"};
    const struct config *cfg = t->cfg;
    char src[4096], dst[4096], tok_dir[4096] = "";
    if (cfg->tokenizer.type == TOKENIZER_HF) {
        tokenizer_json_path(cfg->tokenizer.path, src, sizeof src); /* the path may be a model folder */
        vkt_path(dst, sizeof dst, "%s/tokenizer.json", dir);
        copy_file(src, dst, 1);
        char *slash = strrchr(src, '/');
        vkt_path(tok_dir, sizeof tok_dir, "%.*s", slash ? (int)(slash - src) : 1, slash ? src : ".");
    }
    for (size_t i = 0; i < sizeof beside / sizeof *beside; i++) {
        vkt_path(dst, sizeof dst, "%s/%s", dir, beside[i]);
        int from_model = cfg->model.init_from && !strcmp(beside[i], "generation_config.json") &&
                         (vkt_path(src, sizeof src, "%s/%s", cfg->model.init_from, beside[i]), !access(src, F_OK));
        if (!from_model && !tok_dir[0])
            continue;
        if (!from_model)
            vkt_path(src, sizeof src, "%s/%s", tok_dir, beside[i]);
        copy_file(src, dst, 0);
    }
}

/* The model's files in dir: weights (bf16 when final and save_dtype says
 * so; checkpoints keep the fp32 master weights), config.json (init_from's,
 * copied, else a fresh one) with the tokenizer's special ids, and the
 * tokenizer files. */
static void save_model(struct trainer *t, const char *dir, int final)
{
    const struct config *cfg = t->cfg;
    const struct tokenizer *tok = &t->data.tok;
    char source[4096], err[1024];
    if (cfg->model.init_from)
        vkt_path(source, sizeof source, "%s/config.json", cfg->model.init_from);
    struct model_save_options o = {
        .source_config = cfg->model.init_from ? source : NULL, .bos = tok->bos, .eos = tok->eos, .pad = tok->pad,
        .bf16 = final && cfg->save_dtype == SAVE_BF16, .shard_bytes = (size_t)cfg->save_shard_mb << 20,
    };
    if (model_save(t->model, dir, &o, err, sizeof err))
        vkt_fatal("writing the %s: %s", final ? "final model" : "checkpoint", err);
    copy_model_files(t, dir);
}

void checkpoint_save(struct trainer *t, const char *name)
{
    char root[4096], dir[4096], tmp[4096], old[4096], p[4096];
    path_join(root, sizeof root, t->cfg->output_dir, "checkpoints");
    path_join(dir, sizeof dir, root, name);
    snprintf(t->last_checkpoint, sizeof t->last_checkpoint, "%s", dir);
    float *state = gather_optimizer(t);
    if (t->dist->rank != 0)
        return;
    vkt_path(tmp, sizeof tmp, "%s/.%s.tmp", root, name);
    vkt_path(old, sizeof old, "%s/.%s.old", root, name);
    checkpoint_remove_dir(tmp);
    if (vkt_mkdir_p(tmp))
        vkt_fatal("cannot create %s: %s", tmp, strerror(errno));
    save_model(t, tmp, 0);
    path_join(p, sizeof p, tmp, "optimizer.safetensors");
    write_optimizer(t, p, state);
    free(state);
    path_join(p, sizeof p, tmp, "train_state.json");
    write_state(t, p);
    checkpoint_write_recipe(t, tmp);
    fsync_dir(tmp);
    /* A checkpoint of this step from an earlier run is replaced: moved
     * aside first, since rename cannot replace a non-empty directory. */
    checkpoint_remove_dir(old);
    struct stat st;
    if (!stat(dir, &st) && rename(dir, old))
        vkt_fatal("cannot move the earlier %s aside: %s", dir, strerror(errno));
    if (rename(tmp, dir))
        vkt_fatal("cannot rename %s to %s: %s", tmp, dir, strerror(errno));
    fsync_dir(root);
    checkpoint_remove_dir(old);
}

void checkpoint_save_final(struct trainer *t)
{
    if (t->dist->rank != 0)
        return;
    save_model(t, t->cfg->output_dir, 1);
}

/* The newest complete checkpoint's step, or -1. */
static long long newest(const char *root)
{
    DIR *d = opendir(root);
    if (!d)
        return -1;
    long long best = -1;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        long long n;
        char tail;
        if (sscanf(e->d_name, "step_%lld%c", &n, &tail) != 1)
            continue;
        vkt_path(p, sizeof p, "%s/%s/train_state.json", root, e->d_name);
        if (!access(p, R_OK) && n > best)
            best = n;
    }
    closedir(d);
    return best;
}

static void read_optimizer(struct trainer *t, const char *path)
{
    struct st_file f;
    char err[1024], name[160];
    if (st_read(path, &f, err, sizeof err))
        vkt_fatal("resume: %s", err);
    for (int i = 0; i < model_param_count(t->model); i++) {
        struct model_param *p = model_param(t->model, i);
        for (int k = 0; k < 2; k++) {
            snprintf(name, sizeof name, "%s.%s", k ? "exp_avg_sq" : "exp_avg", p->name);
            const struct st_tensor *s = st_find(&f, name);
            if (!s || (size_t)st_numel(s) != p->numel)
                vkt_fatal("resume: %s lacks tensor '%s' of %zu elements", path, name, p->numel);
            if (trainer_updates(t, i)) /* dist.zero: only its own shard */
                gpu_upload(t->g, trainer_state(t, 1 + k, i), 0, s->data, p->numel * sizeof(float));
        }
    }
    st_free(&f);
}

/* Names the recipe keys that differ from the checkpoint's recipe.yaml. */
static void recipe_differences(const struct trainer *t, const char *dir, char *out, size_t n)
{
    char path[4096];
    vkt_path(path, sizeof path, "%s/recipe.yaml", dir);
    size_t len;
    char *text = read_whole(path, &len);
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

int checkpoint_resume(struct trainer *t)
{
    char root[4096], dir[4096], p[4096], err[1024];
    path_join(root, sizeof root, t->cfg->output_dir, "checkpoints");
    long long n = newest(root);
    if (n < 0) {
        if (t->dist->rank == 0)
            vkt_info("resume: no checkpoint in %s; starting from step 0", root);
        return 0;
    }
    vkt_path(dir, sizeof dir, "%s/step_%lld", root, n);
    path_join(p, sizeof p, dir, "train_state.json");
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    if (!j)
        train_fail(t, "resume: %s:%d: %s", p, je.line, je.text);
    json_int_t step = json_integer_value(json_object_get(j, "step"));
    json_t *o = json_object_get(j, "optimizer_steps"), *total = json_object_get(j, "total_steps");
    json_int_t opt_steps = o ? json_integer_value(o) : step; /* older checkpoints skipped no update */
    json_int_t saved_total = total ? json_integer_value(total) : -1;
    json_int_t seen = json_integer_value(json_object_get(j, "tokens_seen"));
    json_int_t G = json_integer_value(json_object_get(j, "global_batch"));
    if (G != global_batch(t))
        train_fail(t,
                   "resume: %s was trained with a global batch of %lld sequences per step; this run has "
                   "W x A x B = %d x %d x %d = %lld. Keep W x A x B (ranks x gradient_accumulation_steps x "
                   "batch_size) equal to resume",
                   p, (long long)G, t->dist->world, t->cfg->gradient_accumulation_steps, t->cfg->batch_size,
                   (long long)global_batch(t));
    const char *hash = json_string_value(json_object_get(j, "recipe_hash"));
    char want[32];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)config_hash(t->cfg));
    if (!hash || strcmp(hash, want)) {
        char diff[4096];
        recipe_differences(t, dir, diff, sizeof diff);
        train_fail(t,
                   "resume: %s was written by a different recipe (hash %s, this recipe %s): %s. Resume with "
                   "the checkpoint's recipe (%s/recipe.yaml), or start a new output_dir",
                   p, hash ? hash : "missing", want, diff, dir);
    }
    json_decref(j);
    if (step > t->total_steps)
        train_fail(t,
                   "resume: the newest checkpoint, %s, is at step %lld, past this run's %lld steps (max_steps or "
                   "epochs); raise max_steps to continue it (its model is in %s)",
                   dir, (long long)step, (long long)t->total_steps, dir);
    if (model_load(t->model, dir, err, sizeof err))
        vkt_fatal("resume: %s", err);
    path_join(p, sizeof p, dir, "optimizer.safetensors");
    read_optimizer(t, p);
    t->step = step;
    t->opt_steps = opt_steps;
    t->tokens_seen = seen;
    snprintf(t->last_checkpoint, sizeof t->last_checkpoint, "%s", dir);
    if (t->dist->rank == 0) {
        vkt_info("resuming from %s (step %lld of %lld)", dir, (long long)step, (long long)t->total_steps);
        if (step == t->total_steps)
            vkt_info("resume: the run had already reached its last step; nothing is left to train, and its "
                     "final model is written from this checkpoint");
    }
    if (saved_total > 0 && saved_total != t->total_steps && step < t->total_steps)
        warn_schedule(t, saved_total);
    return 1;
}
