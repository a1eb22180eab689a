/* memory_plan: the device memory a recipe needs, by category, before any
 * of it is allocated.
 *
 * The figures come from the trainer's own buffer creation
 * (trainer_buffers_create) run in the gpu's planning mode, so the plan is
 * what the run allocates, byte for byte. Rank 0 prints it; every rank
 * refuses to start when its plan exceeds the memory its device offers, or
 * one buffer exceeds what one allocation may hold, naming the figures and
 * the largest batch_size or max_seq_len that would fit (found by planning
 * again with the smaller value) and whether activation checkpointing would. It never allocates
 * device memory and never writes a file. */
#include <stdio.h>
#include <string.h>

#include "train_internal.h"
#include "vktrain/util.h"

struct plan {
    struct gpu_memory_stats dev; /* the run's buffers only */
    uint64_t host;               /* the host copy of every gradient */
};

static void plan_measure(struct gpu *g, const struct config *cfg, const struct dist *d, struct plan *out)
{
    struct trainer t = {.cfg = cfg, .dist = d, .g = g, .backend = trainer_backend_for(cfg)};
    struct gpu_memory_stats before;
    gpu_memory_stats(g, &before);
    gpu_memory_plan(g, 1);
    trainer_buffers_create(&t);
    gpu_memory_stats(g, &out->dev);
    out->host = t.n_flat * sizeof(float);
    for (int i = 0; t.zero && i < model_param_count(t.model); i++)
        if (trainer_updates(&t, i)) /* the reduce-scatter's shard */
            out->host += model_param(t.model, i)->numel * sizeof(float);
    out->host += t.backend->host_bytes(&t);
    trainer_buffers_destroy(&t);
    gpu_memory_plan(g, 0);
    for (int c = 0; c < GPU_MEM_CATEGORIES; c++)
        out->dev.bytes[c] -= before.bytes[c];
    out->dev.total -= before.total;
}

static int plan_fits(const struct gpu *g, const struct plan *p, uint64_t avail)
{
    uint64_t cap = gpu_info(g)->max_allocation_size;
    return p->dev.total <= avail && (!cap || p->dev.largest <= cap);
}

static void set_batch_size(struct config *c, int v)
{
    c->batch_size = v;
}
static void set_max_seq_len(struct config *c, int v)
{
    c->model.max_seq_len = v;
}

/* The largest value below `above` that fits when set() puts it in a copy
 * of cfg, or 0 if not even 1 does. A plan grows with batch_size and with
 * max_seq_len, so a bisection finds it. */
static int largest_fit(struct gpu *g, const struct config *cfg, const struct dist *d, uint64_t avail,
                       void (*set)(struct config *, int), int above)
{
    int lo = 0, hi = above;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        struct config c = *cfg;
        struct plan p;
        set(&c, mid);
        plan_measure(g, &c, d, &p);
        if (plan_fits(g, &p, avail))
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static const char *bytes_text(uint64_t n, char *buf, size_t len)
{
    if (n >= (uint64_t)1 << 30)
        snprintf(buf, len, "%.2f GiB", (double)n / (double)(1u << 30));
    else if (n >= (uint64_t)1 << 20)
        snprintf(buf, len, "%.1f MiB", (double)n / (double)(1u << 20));
    else
        snprintf(buf, len, "%.1f KiB", (double)n / 1024.0);
    return buf;
}

static void plan_print(const struct trainer *t, const struct plan *p, uint64_t avail, const char *source)
{
    const struct gpu_device_info *info = gpu_info(t->g);
    char a[32], b[32];
    printf("memory plan (per rank, device %d: %s; blocks of %s):\n", info->index, info->name,
           bytes_text(gpu_memory_block_size(t->g), a, sizeof a));
    for (int c = 0; c < GPU_MEM_CATEGORIES; c++) {
        printf("  %-16s %12s", gpu_memory_category_name((enum gpu_mem_category)c),
               bytes_text(p->dev.bytes[c], a, sizeof a));
        if (c == GPU_MEM_ACTIVATIONS)
            printf("  (one micro-batch: batch_size %d x max_seq_len %d)", t->cfg->batch_size,
                   t->cfg->model.max_seq_len);
        if (c == GPU_MEM_GRADIENTS && t->cfg->precision == PRECISION_REPRODUCIBLE)
            printf("  (precision: reproducible: the gradients and log2(batch_size) floats per element for the sum "
                   "over samples)");
        if (c == GPU_MEM_OPTIMIZER && t->cfg->dist.zero && t->dist->world > 1)
            printf("  (dist.zero: rank %d's shard of %d)", t->dist->rank, t->dist->world);
        printf("\n");
    }
    printf("  %-16s %12s  of %s available (%s)\n", "total", bytes_text(p->dev.total, a, sizeof a),
           bytes_text(avail, b, sizeof b), source);
    printf("  %-16s %12s  (%s)\n", "host memory", bytes_text(p->host, a, sizeof a),
           t->cfg->precision == PRECISION_REPRODUCIBLE ? "gradients staged for the all-to-all, the ranks' shards and "
                                                         "the stack over micro-batches"
           : t->cfg->dist.zero && t->dist->world > 1   ? "gradients staged for the reduce-scatter, and the shard's sums"
           : t->dist->world > 1                        ? "gradients staged for the all-reduce"
                                                       : "staging for checkpoints");
    fflush(stdout);
}

static void plan_refuse(const struct trainer *t, const struct plan *p, uint64_t avail, const char *source)
{
    const struct config *cfg = t->cfg;
    char need[32], have[32], fixed[32], hint[256];
    int batch = largest_fit(t->g, cfg, t->dist, avail, set_batch_size, cfg->batch_size);
    if (cfg->precision == PRECISION_REPRODUCIBLE) /* it needs a power of two; a smaller batch fits too */
        while (batch & (batch - 1))
            batch &= batch - 1;
    int seq = largest_fit(t->g, cfg, t->dist, avail, set_max_seq_len, cfg->model.max_seq_len);
    uint64_t weights =
        p->dev.bytes[GPU_MEM_PARAMETERS] + p->dev.bytes[GPU_MEM_GRADIENTS] + p->dev.bytes[GPU_MEM_OPTIMIZER];
    if (batch && seq)
        snprintf(hint, sizeof hint, "batch_size %d would fit, or max_seq_len %d", batch, seq);
    else if (batch)
        snprintf(hint, sizeof hint, "batch_size %d would fit", batch);
    else if (seq)
        snprintf(hint, sizeof hint, "max_seq_len %d would fit", seq);
    else
        snprintf(hint, sizeof hint,
                 "no smaller batch_size or max_seq_len fits; parameters, gradients and "
                 "optimizer state need %s",
                 bytes_text(weights, fixed, sizeof fixed));
    if (!cfg->model.activation_checkpointing) {
        struct config c = *cfg;
        struct plan ck;
        c.model.activation_checkpointing = true;
        plan_measure(t->g, &c, t->dist, &ck);
        if (plan_fits(t->g, &ck, avail)) {
            size_t n = strlen(hint);
            snprintf(hint + n, sizeof hint - n, "%s model.activation_checkpointing: true would fit as it is",
                     batch || seq ? ", or" : "; but");
        }
    }
    if (p->dev.total <= avail)
        vkt_fatal("device memory: buffer '%s' of the recipe needs %s, more than one allocation may hold on this "
                  "device (maxMemoryAllocationSize %s); %s",
                  p->dev.largest_name, bytes_text(p->dev.largest, need, sizeof need),
                  bytes_text(gpu_info(t->g)->max_allocation_size, have, sizeof have), hint);
    vkt_fatal("device memory: the recipe needs %s on each rank (activations %s for batch_size %d x max_seq_len %d) "
              "but %s is available (%s); %s",
              bytes_text(p->dev.total, need, sizeof need),
              bytes_text(p->dev.bytes[GPU_MEM_ACTIVATIONS], fixed, sizeof fixed), cfg->batch_size,
              cfg->model.max_seq_len, bytes_text(avail, have, sizeof have), source, hint);
}

void memory_plan_check(struct trainer *t)
{
    struct plan p;
    char source[160];
    plan_measure(t->g, t->cfg, t->dist, &p);
    uint64_t avail = gpu_memory_available(t->g, source, sizeof source);
    if (t->dist->rank == 0)
        plan_print(t, &p, avail, source);
    if (!plan_fits(t->g, &p, avail))
        plan_refuse(t, &p, avail, source);
}
