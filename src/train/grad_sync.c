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
 * backward (the benchmark's baseline). */
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"
#include "vktrain/util.h"

struct bucket {
    int first, count; /* a range of grad_sync.order */
    size_t off, n;    /* floats in the host array */
    int ready;        /* the backward stage after which it is complete */
    int started;
};

void grad_sync_init(struct trainer *t)
{
    struct model *m = t->model;
    int n = model_param_count(m), stages = model_backward_stages(m);
    t->sync_order = vkt_malloc(sizeof(int) * (size_t)n, "gradient order");
    int k = 0;
    for (int s = 0; s < stages; s++)
        for (int i = 0; i < n; i++)
            if (model_param(m, i)->stage == s)
                t->sync_order[k++] = i;
    size_t cap = (size_t)t->cfg->dist.bucket_mb * (1u << 20) / sizeof(float);
    t->buckets = vkt_calloc((size_t)n, sizeof *t->buckets, "buckets");
    t->n_buckets = 0;
    size_t off = 0;
    for (int j = 0; j < n; j++) {
        struct model_param *p = model_param(m, t->sync_order[j]);
        struct bucket *b = &t->buckets[t->n_buckets];
        if (b->count && b->n + p->numel > cap)
            b = &t->buckets[++t->n_buckets];
        if (!b->count)
            b->first = j, b->off = off;
        b->count++;
        b->n += p->numel;
        b->ready = p->stage > b->ready ? p->stage : b->ready;
        off += p->numel;
    }
    t->n_buckets++;
}

void grad_sync_free(struct trainer *t)
{
    free(t->sync_order);
    free(t->buckets);
}

static void copy_bucket(struct trainer *t, struct bucket *b, int in_flight)
{
    size_t off = b->off;
    for (int j = b->first; j < b->first + b->count; j++) {
        struct model_param *p = model_param(t->model, t->sync_order[j]);
        const void *host = in_flight ? gpu_buffer_host(p->grad) : NULL;
        if (host)
            memcpy(t->host_grads + off, host, p->numel * sizeof(float));
        else
            gpu_download(t->g, p->grad, 0, t->host_grads + off, p->numel * sizeof(float));
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
        dist_isum_f32(t->host_grads + b->off, b->n);
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
    size_t off = 0;
    for (int j = 0; j < model_param_count(t->model); j++) {
        struct model_param *p = model_param(t->model, t->sync_order[j]);
        gpu_upload(t->g, p->grad, 0, t->host_grads + off, p->numel * sizeof(float));
        off += p->numel;
    }
    t->comm_seconds += vkt_now() - c0;
}
