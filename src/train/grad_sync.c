/* grad_sync: the sum of the gradients over ranks, in buckets.
 *
 * Parameters are laid out in the order their gradients complete during
 * the backward (head, last layer ... first layer, embeddings) and cut into
 * buckets of dist.bucket_mb. On the step's last micro-batch the backward
 * runs stage by stage; while stage s runs on the device, every bucket whose
 * gradients were finished by earlier stages is copied to the host and its
 * MPI_Iallreduce (a SUM: the gradients already carry 1/N, so no factor of W
 * appears) is started. The sums are uploaded back after the last stage.
 * With dist.overlap false the same buckets are reduced after the whole
 * backward (the benchmark's baseline).
 *
 * With dist.zero (ZeRO-1) the layout is also cut into W shards of whole
 * tensors, a tensor going to the rank whose W-th of the layout holds its
 * middle. A bucket is then reduce-scattered instead (MPI_Ireduce_scatter,
 * the same SUM), each rank receiving and uploading only the sums of the
 * tensors it owns; after the owners' AdamW, grad_sync_gather all-gathers
 * the updated weights bucket by bucket (and the moments for a checkpoint).
 * Whole tensors keep op_adamw and the per-tensor norms of grad_norm.c as
 * they are, so the update matches the unsharded one bit for bit whenever
 * the summed gradients do. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"
#include "vktrain/util.h"

struct bucket {
    int first, count; /* a range of grad_sync.order */
    size_t off, n;    /* floats in the host array */
    int ready;        /* the backward stage after which it is complete */
    int started;
    int *counts; /* dist.zero: its floats in each rank's shard */
    size_t mine; /* dist.zero: where its floats of this rank's shard start in shard_host */
};

void grad_sync_layout(struct trainer *t)
{
    struct model *m = t->model;
    int n = model_param_count(m), stages = model_backward_stages(m), W = t->dist->world;
    t->sync_order = vkt_malloc(sizeof(int) * (size_t)n, "gradient order");
    t->sync_off = vkt_malloc(sizeof(size_t) * (size_t)n, "gradient offsets");
    t->owner = vkt_malloc(sizeof(int) * (size_t)n, "parameter owners");
    int k = 0;
    for (int s = 0; s < stages; s++)
        for (int i = 0; i < n; i++)
            if (model_param(m, i)->stage == s)
                t->sync_order[k++] = i;
    t->n_flat = 0;
    for (int j = 0; j < n; j++) {
        t->sync_off[t->sync_order[j]] = t->n_flat;
        t->n_flat += model_param(m, t->sync_order[j])->numel;
    }
    t->zero = t->cfg->dist.zero && W > 1;
    for (int i = 0; i < n; i++) {
        size_t middle2 = 2 * t->sync_off[i] + model_param(m, i)->numel; /* twice its middle */
        t->owner[i] = t->zero ? (int)(middle2 * (size_t)W / (2 * t->n_flat)) : -1;
    }
}

/* Where this rank's shard starts in the sync-order layout, and its floats. */
static size_t shard_range(const struct trainer *t, size_t *n)
{
    size_t lo = t->n_flat;
    *n = 0;
    for (int i = 0; i < model_param_count(t->model); i++)
        if (t->owner[i] == t->dist->rank) {
            lo = t->sync_off[i] < lo ? t->sync_off[i] : lo;
            *n += model_param(t->model, i)->numel;
        }
    return *n ? lo : 0;
}

void grad_sync_init(struct trainer *t)
{
    struct model *m = t->model;
    int n = model_param_count(m), W = t->dist->world;
    size_t cap = (size_t)t->cfg->dist.bucket_mb * (1u << 20) / sizeof(float);
    t->buckets = vkt_calloc((size_t)n, sizeof *t->buckets, "buckets");
    t->n_buckets = 0;
    for (int j = 0; j < n; j++) {
        struct model_param *p = model_param(m, t->sync_order[j]);
        struct bucket *b = &t->buckets[t->n_buckets];
        if (b->count && b->n + p->numel > cap)
            b = &t->buckets[++t->n_buckets];
        if (!b->count)
            b->first = j, b->off = t->sync_off[t->sync_order[j]];
        b->count++;
        b->n += p->numel;
        b->ready = p->stage > b->ready ? p->stage : b->ready;
    }
    t->n_buckets++;
    if (!t->zero)
        return;
    size_t shard_n, lo = shard_range(t, &shard_n);
    t->shard_host = vkt_malloc((shard_n ? shard_n : 1) * sizeof(float), "gradient shard");
    for (int k = 0; k < t->n_buckets; k++) {
        struct bucket *b = &t->buckets[k];
        b->counts = vkt_calloc((size_t)W, sizeof(int), "bucket shards");
        b->mine = 0;
        if (b->n > INT_MAX)
            vkt_fatal("dist.zero: a bucket of %zu floats (from tensor %s) is more than one MPI call moves (%d)", b->n,
                      model_param(m, t->sync_order[b->first])->name, INT_MAX);
        for (int j = b->first + b->count - 1; j >= b->first; j--) { /* down to its first float of this rank's */
            int i = t->sync_order[j];
            b->counts[t->owner[i]] += (int)model_param(m, i)->numel;
            if (t->owner[i] == t->dist->rank)
                b->mine = t->sync_off[i] - lo;
        }
    }
}

void grad_sync_free(struct trainer *t)
{
    for (int k = 0; t->zero && k < t->n_buckets; k++)
        free(t->buckets[k].counts);
    free(t->buckets);
    free(t->shard_host);
}

static void copy_bucket(struct trainer *t, struct bucket *b, int in_flight)
{
    size_t off = b->off;
    for (int j = b->first; j < b->first + b->count; j++) {
        struct model_param *p = model_param(t->model, t->sync_order[j]);
        const void *host = in_flight ? gpu_buffer_host(p->grad) : NULL;
        if (host)
            memcpy(t->host_flat + off, host, p->numel * sizeof(float));
        else
            gpu_download(t->g, p->grad, 0, t->host_flat + off, p->numel * sizeof(float));
        off += p->numel;
    }
}

/* Starts the buckets complete after `stage`. in_flight: a later stage runs
 * on the device now, so only mapped (unified) memory may be read; buckets
 * that need a device copy wait for the next call. */
static void start_ready(struct trainer *t, int stage, int in_flight)
{
    for (int i = 0; i < t->n_buckets; i++) {
        struct bucket *b = &t->buckets[i];
        if (b->started || b->ready > stage)
            continue;
        if (in_flight && !gpu_buffer_host(model_param(t->model, t->sync_order[b->first])->grad))
            continue;
        copy_bucket(t, b, in_flight);
        if (t->zero)
            dist_ireduce_scatter_f32(t->host_flat + b->off, t->shard_host + b->mine, b->counts);
        else
            dist_isum_f32(t->host_flat + b->off, b->n);
        b->started = 1;
    }
}

void grad_sync_backward(struct trainer *t)
{
    int stages = model_backward_stages(t->model);
    int overlap = t->dist->world > 1 && t->cfg->dist.overlap;
    for (int i = 0; i < t->n_buckets; i++)
        t->buckets[i].started = 0;
    for (int s = 0; s < stages; s++) {
        model_backward_stage(t->model, s);
        if (!overlap)
            continue;
        gpu_submit_async(t->g);
        double c0 = vkt_now();
        start_ready(t, s - 1, 1);
        t->comm_seconds += vkt_now() - c0;
        gpu_wait(t->g);
    }
    if (t->dist->world == 1)
        return;
    gpu_submit(t->g); /* the backward's compute is not communication */
    double c0 = vkt_now();
    start_ready(t, stages, 0);
    dist_wait_all();
    size_t shard_n, lo = shard_range(t, &shard_n);
    for (int i = 0; i < model_param_count(t->model); i++) {
        struct model_param *p = model_param(t->model, i);
        if (trainer_updates(t, i)) /* a rank needs only the sums it applies */
            gpu_upload(t->g, p->grad, 0,
                       t->zero ? t->shard_host + (t->sync_off[i] - lo) : t->host_flat + t->sync_off[i],
                       p->numel * sizeof(float));
    }
    t->comm_seconds += vkt_now() - c0;
}

void grad_sync_gather(struct trainer *t, int which)
{
    int n = model_param_count(t->model);
    for (int i = 0; i < n; i++)
        if (t->owner[i] == t->dist->rank)
            gpu_download(t->g, trainer_state(t, which, i), 0, t->host_flat + t->sync_off[i],
                         model_param(t->model, i)->numel * sizeof(float));
    for (int k = 0; k < t->n_buckets; k++)
        dist_allgather_blocks_f32(t->host_flat + t->buckets[k].off, t->buckets[k].counts);
    for (int i = 0; which == 0 && i < n; i++)
        if (t->owner[i] != t->dist->rank)
            gpu_upload(t->g, model_param(t->model, i)->w, 0, t->host_flat + t->sync_off[i],
                       model_param(t->model, i)->numel * sizeof(float));
}
