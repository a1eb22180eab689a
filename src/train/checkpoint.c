/* checkpoint: output_dir/checkpoints/step_N/ — model.safetensors and
 * config.json (Hugging Face, loadable as model.init_from), or with LoRA
 * adapter_model.safetensors and adapter_config.json (PEFT), the AdamW state
 * (optimizer.safetensors: exp_avg.<name>, exp_avg_sq.<name>),
 * train_state.json (step, updates applied, the run's length, data position,
 * recipe hash, and the size and checksum of every other file) and
 * recipe.yaml (the resolved recipe, which names the keys that differ when a
 * resume finds another recipe). A checkpoint is written into a hidden
 * temporary directory (.step_N.tmp), each file fsynced, and renamed into
 * place, so a crash never leaves a half checkpoint: resume only sees
 * complete ones (checkpoint_resume.c). Only rank 0 writes. With
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
#include "vktrain/util.h"

static void path_join(char *out, size_t n, const char *a, const char *b)
{
    vkt_path(out, n, "%s/%s", a, b);
}

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

struct optimizer_fill {
    struct trainer *t;
    const float *state;
};

/* Tensor j of the optimizer file: m (k = 0) or v (1) of parameter j / 2,
 * made as it is written, so the host never holds the whole state. */
static void optimizer_fill(void *ctx, int j, float *buf)
{
    struct optimizer_fill *f = ctx;
    struct trainer *t = f->t;
    int i = j / 2, k = j % 2;
    size_t bytes = model_param(t->model, i)->numel * sizeof(float);
    if (f->state)
        memcpy(buf, f->state + (size_t)k * t->n_flat + t->sync_off[i], bytes);
    else
        gpu_download(t->g, trainer_state(t, 1 + k, i), 0, buf, bytes);
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
        }
    }
    char err[1024];
    struct optimizer_fill fill = {t, state};
    int rc = st_write_fill(path, ts, 2 * n, NULL, 0, optimizer_fill, &fill, err, sizeof err);
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
    float *state = t->dist->rank == 0 ? vkt_malloc(2 * t->n_flat * sizeof(float), "optimizer state") : NULL;
    for (int k = 0; k < 2; k++) {
        grad_sync_gather(t, 1 + k);
        if (state)
            memcpy(state + (size_t)k * t->n_flat, t->host_flat, t->n_flat * sizeof(float));
    }
    return state;
}

int64_t checkpoint_global_batch(const struct trainer *t)
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

/* train_state.json; `files` (taken) lists the checkpoint's other files. */
static void write_state(struct trainer *t, const char *path, json_t *files)
{
    struct data_pos pos = sampler_pos(&t->sampler, t->step);
    char hash[32];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)config_hash(t->cfg));
    json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:s, s:i, s:I, s:I, s:o}", "step", (json_int_t)t->step,
                          "optimizer_steps", (json_int_t)t->opt_steps, "total_steps", (json_int_t)t->total_steps,
                          "epoch", (json_int_t)pos.epoch, "step_in_epoch", (json_int_t)pos.step, "recipe_hash", hash,
                          "world_size", t->dist->world, "global_batch", (json_int_t)checkpoint_global_batch(t),
                          "tokens_seen", (json_int_t)t->tokens_seen, "files", files);
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

char *checkpoint_read_file(const char *path, size_t *n)
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
    char *buf = checkpoint_read_file(src, &n);
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
        .source_config = cfg->model.init_from ? source : NULL,
        .bos = tok->bos,
        .eos = tok->eos,
        .pad = tok->pad,
        .bf16 = final && cfg->save_dtype == SAVE_BF16,
        .shard_bytes = (size_t)cfg->save_shard_mb << 20,
    };
    if (!cfg->lora.rank) {
        if (model_save(t->model, dir, &o, err, sizeof err))
            vkt_fatal("writing the %s: %s", final ? "final model" : "checkpoint", err);
        copy_model_files(t, dir);
        return;
    }
    /* LoRA: the adapter alone (the base is model.init_from's, or the
     * seed's), and at the end with merge_on_save the merged model in
     * dir/merged (a folder holding adapter_config.json is an adapter to
     * transformers, so the two cannot share one). */
    if (model_adapter_save(t->model, dir, cfg->model.init_from, err, sizeof err))
        vkt_fatal("writing the %s: %s", final ? "adapter" : "checkpoint", err);
    copy_model_files(t, dir);
    if (final && cfg->lora.merge_on_save) {
        char merged[4096];
        vkt_path(merged, sizeof merged, "%s/merged", dir);
        o.merged = 1;
        if (vkt_mkdir_p(merged))
            vkt_fatal("cannot create %s: %s", merged, strerror(errno));
        if (model_save(t->model, merged, &o, err, sizeof err))
            vkt_fatal("writing the merged model: %s", err);
        copy_model_files(t, merged);
    }
}

void checkpoint_save(struct trainer *t, const char *name)
{
    char root[4096], dir[4096], tmp[4096], old[4096], p[4096];
    path_join(root, sizeof root, t->cfg->output_dir, "checkpoints");
    path_join(dir, sizeof dir, root, name);
    snprintf(t->last_checkpoint, sizeof t->last_checkpoint, "%s", dir);
    t->saved_step = t->step;
    float *state = gather_optimizer(t);
    if (t->dist->rank != 0)
        return;
    vkt_path(tmp, sizeof tmp, "%s/.%s.tmp", root, name);
    vkt_path(old, sizeof old, "%s/.%s.old", root, name);
    checkpoint_remove_dir(tmp);
    if (vkt_mkdir_p(tmp))
        vkt_fatal("cannot create %s: %s", tmp, strerror(errno));
    faults_checkpoint(t, FAULT_CKPT_WRITE);
    save_model(t, tmp, 0);
    path_join(p, sizeof p, tmp, "optimizer.safetensors");
    write_optimizer(t, p, state);
    free(state);
    checkpoint_write_recipe(t, tmp);
    /* Last, with the sizes and checksums of the files above, read back. */
    path_join(p, sizeof p, tmp, "train_state.json");
    write_state(t, p, checkpoint_files_describe(tmp));
    fsync_dir(tmp);
    faults_checkpoint(t, FAULT_CKPT_RENAME);
    /* A checkpoint of this step from an earlier run is replaced: moved
     * aside first, since rename cannot replace a non-empty directory (a
     * crash in between leaves .step_N.old, which resume moves back). */
    checkpoint_remove_dir(old);
    struct stat st;
    if (!stat(dir, &st) && rename(dir, old))
        vkt_fatal("cannot move the earlier %s aside: %s", dir, strerror(errno));
    if (rename(tmp, dir))
        vkt_fatal("cannot rename %s to %s: %s", tmp, dir, strerror(errno));
    faults_checkpoint(t, FAULT_CKPT_RENAMED);
    fsync_dir(root);
    checkpoint_remove_dir(old);
}

void checkpoint_save_final(struct trainer *t)
{
    if (t->dist->rank != 0)
        return;
    save_model(t, t->cfg->output_dir, 1);
}
