/* output_dir: what a run may find in its output_dir, and when it starts
 * writing there.
 *   - At start, before anything is loaded: a fresh run (resume: false)
 *     refuses a folder that holds an earlier run (checkpoints/step_N,
 *     metrics.jsonl, model.safetensors) unless overwrite: true, so two runs
 *     never mix in one folder; a folder that cannot be made is refused too.
 *   - Once the run has started (data read, model built, checkpoint loaded):
 *     with overwrite, the earlier run's files are removed; the folder is
 *     made and the resolved recipe saved as recipe.yaml. A failed start
 *     thus leaves nothing behind, not even an empty folder.
 * Only rank 0 looks at the disk; every rank learns its verdict. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"
#include "vktrain/util.h"

/* The files of a run that vktrain writes at the top of output_dir. */
static const char *const run_files[] = {"metrics.jsonl",
                                        "model.safetensors",
                                        "config.json",
                                        "tokenizer.json",
                                        "recipe.yaml",
                                        "model.safetensors.index.json",
                                        "adapter_model.safetensors",
                                        "adapter_config.json",
                                        "tokenizer_config.json",
                                        "special_tokens_map.json",
                                        "generation_config.json",
                                        NULL};

/* What of an earlier run the folder holds, as a list for a message; "" if
 * nothing. */
static void earlier_run(const char *out_dir, char *found, size_t n)
{
    char p[4096];
    size_t o = 0;
    found[0] = 0;
    vkt_path(p, sizeof p, "%s/checkpoints", out_dir);
    DIR *d = opendir(p);
    if (d) {
        struct dirent *e;
        long long count = 0, newest = -1, s;
        while ((e = readdir(d)))
            if (sscanf(e->d_name, "step_%lld", &s) == 1 && count++ >= 0 && s > newest)
                newest = s;
        closedir(d);
        if (count)
            o += (size_t)snprintf(found, n, "%lld checkpoint%s, the newest checkpoints/step_%lld", count,
                                  count > 1 ? "s" : "", newest);
    }
    for (int i = 0; i < 2 && o < n; i++) { /* metrics.jsonl, model.safetensors */
        vkt_path(p, sizeof p, "%s/%s", out_dir, run_files[i]);
        if (!access(p, F_OK))
            o += (size_t)snprintf(found + o, n - o, "%s%s", o ? ", " : "", run_files[i]);
    }
}

/* 0 when out_dir is a writable folder or can be made: its nearest
 * existing ancestor is a folder we may write; else -1 with why. */
static int can_make(const char *out_dir, char *why, size_t n)
{
    char p[4096];
    struct stat st;
    vkt_path(p, sizeof p, "%s", out_dir);
    while (stat(p, &st)) {
        if (errno != ENOENT && errno != ENOTDIR)
            return vkt_error(why, n, "%s: %s", p, strerror(errno));
        char *slash = strrchr(p, '/');
        if (!slash)
            snprintf(p, sizeof p, ".");
        else
            slash[slash == p] = 0; /* "/x" -> "/" */
    }
    if (!S_ISDIR(st.st_mode))
        return vkt_error(why, n, "%s is not a directory", p);
    if (access(p, W_OK | X_OK))
        return vkt_error(why, n, "%s: %s", p, strerror(errno));
    return 0;
}

void output_dir_check(struct trainer *t)
{
    const struct config *cfg = t->cfg;
    char found[1024] = "", why[4200] = "";
    int bad = 0;
    if (t->dist->rank == 0) {
        if (can_make(cfg->output_dir, why, sizeof why))
            bad = 1;
        else if (!cfg->resume && !cfg->overwrite)
            earlier_run(cfg->output_dir, found, sizeof found), bad = found[0] != 0;
    }
    if (dist_first_rank(bad) < 0)
        return;
    if (why[0])
        train_fail(t, "output_dir '%s' cannot be made: %s", cfg->output_dir, why);
    train_fail(t,
               "output_dir '%s' holds an earlier run (%s): set resume: true to continue it, overwrite: true "
               "to replace it, or choose another output_dir",
               cfg->output_dir, found);
}

/* overwrite: the earlier run's checkpoints (temporary ones too) and files. */
static void remove_earlier_run(const char *out_dir)
{
    char root[4096], p[4096];
    vkt_path(root, sizeof root, "%s/checkpoints", out_dir);
    DIR *d = opendir(root);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (!strncmp(e->d_name, "step_", 5) || !strncmp(e->d_name, ".step_", 6)) {
                vkt_path(p, sizeof p, "%s/%s", root, e->d_name);
                checkpoint_remove_dir(p);
            }
        closedir(d);
    }
    for (int i = 0; run_files[i]; i++) {
        vkt_path(p, sizeof p, "%s/%s", out_dir, run_files[i]);
        if (unlink(p) && errno != ENOENT)
            vkt_fatal("overwrite: cannot remove %s: %s", p, strerror(errno));
    }
    /* the shards of a sharded model: model-0000i-of-0000n.safetensors */
    if ((d = opendir(out_dir))) {
        struct dirent *e;
        int a, b, k;
        while ((e = readdir(d)))
            if (sscanf(e->d_name, "model-%5d-of-%5d.safetensors%n", &a, &b, &k) == 2 && !e->d_name[k]) {
                vkt_path(p, sizeof p, "%s/%s", out_dir, e->d_name);
                if (unlink(p) && errno != ENOENT)
                    vkt_fatal("overwrite: cannot remove %s: %s", p, strerror(errno));
            }
        closedir(d);
    }
}

void output_dir_prepare(struct trainer *t)
{
    const struct config *cfg = t->cfg;
    if (t->dist->rank != 0)
        return;
    char found[1024];
    earlier_run(cfg->output_dir, found, sizeof found);
    if (cfg->overwrite && found[0]) {
        vkt_info("overwrite: removing the earlier run in %s (%s)", cfg->output_dir, found);
        remove_earlier_run(cfg->output_dir);
        earlier_run(cfg->output_dir, found, sizeof found);
        if (found[0])
            vkt_fatal("overwrite: could not remove all of the earlier run in %s (%s is left)", cfg->output_dir, found);
    }
    if (vkt_mkdir_p(cfg->output_dir))
        vkt_fatal("cannot create output_dir '%s': %s", cfg->output_dir, strerror(errno));
    checkpoint_write_recipe(t, cfg->output_dir);
}
