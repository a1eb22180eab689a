/* checkpoint: output_dir/checkpoints/step_N/ — model.safetensors and
 * config.json (Hugging Face, loadable as model.init_from), the AdamW state
 * (optimizer.safetensors: exp_avg.<name>, exp_avg_sq.<name>) and
 * train_state.json (step, data position, recipe hash). A checkpoint is
 * written into a hidden temporary directory, each file fsynced, and renamed
 * into place, so a crash never leaves a half checkpoint: resume only sees
 * complete ones. Only rank 0 writes; every rank reads on resume. */
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
#include "vktrain/util.h"

static void path_join(char *out, size_t n, const char *a, const char *b) { vkt_path(out, n, "%s/%s", a, b); }

/* Removes a directory of plain files (a temporary checkpoint left by a crash). */
static void remove_flat_dir(const char *dir)
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

static void write_optimizer(struct trainer *t, const char *path)
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
            gpu_download(t->g, k ? t->adam_v[i] : t->adam_m[i], 0, s->data, p->numel * sizeof(float));
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

/* Sequences per optimizer step, W·A·B: what a resumed run must keep. */
static int64_t global_batch(const struct trainer *t)
{
    return (int64_t)t->dist->world * t->cfg->gradient_accumulation_steps * t->cfg->batch_size;
}

static void write_state(struct trainer *t, const char *path)
{
    struct data_pos pos = sampler_pos(&t->sampler, t->step);
    char hash[32];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)config_hash(t->cfg));
    json_t *j = json_pack("{s:I, s:I, s:I, s:s, s:i, s:I, s:I}", "step", (json_int_t)t->step, "epoch",
                          (json_int_t)pos.epoch, "step_in_epoch", (json_int_t)pos.step, "recipe_hash", hash,
                          "world_size", t->dist->world, "global_batch", (json_int_t)global_batch(t),
                          "tokens_seen", (json_int_t)t->tokens_seen);
    char *text = json_dumps(j, JSON_INDENT(2));
    json_decref(j);
    size_t len = strlen(text);
    const void *bufs[1] = {text};
    char err[1024];
    int rc = ckpt_write_atomic(path, 1, bufs, &len, err, sizeof err);
    free(text);
    if (rc)
        vkt_fatal("writing the checkpoint: %s", err);
}

/* A model trained with a Hugging Face tokenizer carries its tokenizer.json,
 * so the directory is complete for generate, init_from and HF tools. */
static void copy_tokenizer(struct trainer *t, const char *dir)
{
    if (t->cfg->tokenizer.type != TOKENIZER_HF)
        return;
    char path[4096], src[4096], err[1024];
    vkt_path(path, sizeof path, "%s/tokenizer.json", dir);
    tokenizer_json_path(t->cfg->tokenizer.path, src, sizeof src); /* the path may be a model folder */
    FILE *f = fopen(src, "rb");
    if (!f)
        vkt_fatal("cannot read %s to copy it beside the model: %s", src, strerror(errno));
    size_t cap = 1 << 16, n = 0, k;
    char *buf = vkt_malloc(cap, "tokenizer.json");
    while ((k = fread(buf + n, 1, cap - n, f)) > 0)
        if ((n += k) == cap)
            buf = vkt_realloc(buf, cap *= 2, "tokenizer.json");
    fclose(f);
    const void *bufs[1] = {buf};
    if (ckpt_write_atomic(path, 1, bufs, &n, err, sizeof err))
        vkt_fatal("writing the model: %s", err);
    free(buf);
}

void checkpoint_save(struct trainer *t, const char *name)
{
    if (t->dist->rank != 0)
        return;
    char root[4096], dir[4096], tmp[4096], old[4096], p[4096], err[1024];
    path_join(root, sizeof root, t->cfg->output_dir, "checkpoints");
    path_join(dir, sizeof dir, root, name);
    vkt_path(tmp, sizeof tmp, "%s/.%s.tmp", root, name);
    vkt_path(old, sizeof old, "%s/.%s.old", root, name);
    remove_flat_dir(tmp);
    if (vkt_mkdir_p(tmp))
        vkt_fatal("cannot create %s: %s", tmp, strerror(errno));
    if (model_save(t->model, tmp, err, sizeof err))
        vkt_fatal("writing the checkpoint: %s", err);
    copy_tokenizer(t, tmp);
    path_join(p, sizeof p, tmp, "optimizer.safetensors");
    write_optimizer(t, p);
    path_join(p, sizeof p, tmp, "train_state.json");
    write_state(t, p);
    fsync_dir(tmp);
    /* A checkpoint of this step from an earlier run is replaced: moved
     * aside first, since rename cannot replace a non-empty directory. */
    remove_flat_dir(old);
    struct stat st;
    if (!stat(dir, &st) && rename(dir, old))
        vkt_fatal("cannot move the earlier %s aside: %s", dir, strerror(errno));
    if (rename(tmp, dir))
        vkt_fatal("cannot rename %s to %s: %s", tmp, dir, strerror(errno));
    fsync_dir(root);
    remove_flat_dir(old);
}

void checkpoint_save_final(struct trainer *t)
{
    if (t->dist->rank != 0)
        return;
    char err[1024];
    if (model_save(t->model, t->cfg->output_dir, err, sizeof err))
        vkt_fatal("writing the final model: %s", err);
    copy_tokenizer(t, t->cfg->output_dir);
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
            gpu_upload(t->g, k ? t->adam_v[i] : t->adam_m[i], 0, s->data, p->numel * sizeof(float));
        }
    }
    st_free(&f);
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
        vkt_fatal("resume: %s:%d: %s", p, je.line, je.text);
    json_int_t step = json_integer_value(json_object_get(j, "step"));
    json_int_t seen = json_integer_value(json_object_get(j, "tokens_seen"));
    json_int_t G = json_integer_value(json_object_get(j, "global_batch"));
    if (G != global_batch(t))
        vkt_fatal("resume: %s was trained with a global batch of %lld sequences per step; this run has "
                  "W x A x B = %d x %d x %d = %lld. Keep W x A x B (ranks x gradient_accumulation_steps x "
                  "batch_size) equal to resume",
                  p, (long long)G, t->dist->world, t->cfg->gradient_accumulation_steps, t->cfg->batch_size,
                  (long long)global_batch(t));
    const char *hash = json_string_value(json_object_get(j, "recipe_hash"));
    char want[32];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)config_hash(t->cfg));
    if (!hash || strcmp(hash, want))
        vkt_fatal("resume: %s was written by a different recipe (hash %s, this recipe %s); resume with the same "
                  "recipe, or start a new output_dir",
                  p, hash ? hash : "missing", want);
    json_decref(j);
    if (model_load(t->model, dir, err, sizeof err))
        vkt_fatal("resume: %s", err);
    path_join(p, sizeof p, dir, "optimizer.safetensors");
    read_optimizer(t, p);
    t->step = step;
    t->tokens_seen = seen;
    if (t->dist->rank == 0)
        vkt_info("resuming from %s (step %lld of %lld)", dir, (long long)step, (long long)t->total_steps);
    return 1;
}
