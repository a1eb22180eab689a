/* cli_train: `vktrain train --config RECIPE.yaml [key.sub=value ...]`.
 * Resolves the recipe (--print-config prints it and stops) and trains it
 * (src/train). --data-only instead times loading, tokenizing, sequencing and
 * filling every batch of one epoch, then stops (scripts/bench_data.sh);
 * --dry-run prints the device memory plan and stops.
 * It is the one place that prints config and data errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vktrain/cli.h"
#include "vktrain/config.h"
#include "vktrain/data.h"
#include "vktrain/dist.h"
#include "vktrain/train.h"
#include "vktrain/util.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: vktrain train --config RECIPE.yaml [--print-config] [--data-only] [--dry-run] "
               "[key.sub=value ...]\n"
               "  --print-config   print the resolved recipe as YAML and exit\n"
               "  --data-only      load the dataset, time it, and exit\n"
               "  --dry-run        print the device memory the run needs by category against the\n"
               "                   memory available, and exit (1 if it does not fit); trains and\n"
               "                   writes nothing\n"
               "  key.sub=value    override a recipe key; the value is YAML "
               "(optimizer.betas=[0.9,0.99])\n");
}

/* Fills every batch of epoch 0 on rank 0 of a one-process run; returns the
 * valid tokens seen, to keep the work from being optimized away. */
static int64_t fill_epoch(const struct data *d, struct sampler *s)
{
    struct data_batch b;
    int64_t n = 0;
    data_batch_init(&b, s->batch, d->cfg->model.max_seq_len);
    for (int64_t step = 0; step < s->steps_per_epoch; step++)
        for (int m = 0; m < s->accum; m++) {
            data_train_batch(d, s, step, 0, m, &b);
            n += b.n_valid;
        }
    data_batch_free(&b);
    return n;
}

static int run(const char *path, int n_over, char **over, bool print_config, bool data_only, bool dry_run)
{
    char err[2048];
    struct config cfg;
    struct dist dist;
    int training = !print_config && !data_only; /* or its dry run */
    if (training) /* from here on an error on any rank ends the whole job */
        dist_init(NULL, NULL, &dist);
    int failed = config_load(&cfg, path, n_over, over, err, sizeof err) != 0;
    if (training) {
        /* Every rank reads the same recipe: the first that failed (rank 0
         * when all did) prints the error once, and all leave together. */
        dist_check(failed, err);
    } else if (failed) {
        fprintf(stderr, "vktrain: error: %s\n", err);
        return 1;
    }
    if (print_config) {
        config_print(&cfg, stdout);
        config_free(&cfg);
        return 0;
    }
    if (training) {
        int status = dry_run ? train_dry_run(&cfg, &dist) : train_run(&cfg, &dist);
        config_free(&cfg);
        dist_finalize();
        return status;
    }
    int rc = 1;
    struct data d;
    struct sampler s = {0};
    if (data_open(&d, &cfg, err, sizeof err)) {
        fprintf(stderr, "vktrain: error: %s\n", err);
        config_free(&cfg);
        return 1;
    }
    if (sampler_init(&s, d.train.n_seq, (uint64_t)cfg.seed, cfg.dataset.shuffle, 1, cfg.gradient_accumulation_steps,
                     cfg.batch_size, err, sizeof err)) {
        fprintf(stderr, "vktrain: error: %s\n", err);
    } else {
        data_report(&d, &s);
        double t0 = vkt_now();
        int64_t valid = fill_epoch(&d, &s);
        double fill = vkt_now() - t0, total = d.load_seconds + fill;
        printf("data-only: %.1f MB read, %lld label tokens in one epoch's batches; load %.3f s, "
               "batches %.3f s: %.1f MB/s\n",
               (double)d.stats.n_bytes / 1e6, (long long)valid, d.load_seconds, fill,
               (double)d.stats.n_bytes / 1e6 / total);
        rc = 0;
    }
    sampler_free(&s);
    data_close(&d);
    config_free(&cfg);
    return rc;
}

int cli_train(int argc, char **argv)
{
    const char *path = NULL;
    bool print_config = false, data_only = false, dry_run = false;
    char **over = calloc((size_t)argc + 1, sizeof *over);
    int n_over = 0, rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            rc = 0;
            goto out;
        } else if (!strcmp(a, "--config") || !strncmp(a, "--config=", 9)) {
            if (path) {
                fprintf(stderr, "vktrain: error: --config given twice\n");
                goto out;
            }
            path = a[8] ? a + 9 : i + 1 < argc ? argv[++i] : NULL;
            if (!path || !*path) {
                fprintf(stderr, "vktrain: error: --config needs a recipe file\n");
                goto out;
            }
        } else if (!strcmp(a, "--print-config")) {
            print_config = true;
        } else if (!strcmp(a, "--data-only")) {
            data_only = true;
        } else if (!strcmp(a, "--dry-run")) {
            dry_run = true;
        } else if (a[0] == '-') {
            fprintf(stderr, "vktrain: error: unknown option '%s' for train\n", a);
            usage(stderr);
            goto out;
        } else if (strchr(a, '=')) {
            over[n_over++] = argv[i];
        } else {
            fprintf(stderr, "vktrain: error: '%s' is neither an option nor key.sub=value\n", a);
            usage(stderr);
            goto out;
        }
    }
    if (!path) {
        fprintf(stderr, "vktrain: error: train needs --config RECIPE.yaml\n");
        usage(stderr);
        goto out;
    }
    rc = run(path, n_over, over, print_config, data_only, dry_run);
out:
    free(over);
    return rc;
}
