/* replica: keeps the ranks' model replicas identical.
 *
 * Ranks may run different devices (a mixed-vendor cluster) whose float
 * results differ in the last bits, so replicas can drift even though every
 * rank applies the same summed gradients. Every dist.check_every steps and
 * before every checkpoint, each rank hashes its weights per tensor; if any
 * rank differs from rank 0, rank 0 reports which ranks and tensors and how
 * far (max |Δ|), and broadcasts its weights and optimizer state to all. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"
#include "vktrain/util.h"

static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* All weights (state 0), Adam m (1) or v (2) to or from t->host_flat. */
static void stage_state(struct trainer *t, int which, int upload)
{
    size_t off = 0;
    for (int i = 0; i < model_param_count(t->model); i++) {
        struct model_param *p = model_param(t->model, i);
        struct gpu_buffer *b = trainer_state(t, which, i);
        if (upload)
            gpu_upload(t->g, b, 0, t->host_flat + off, p->numel * sizeof(float));
        else
            gpu_download(t->g, b, 0, t->host_flat + off, p->numel * sizeof(float));
        off += p->numel;
    }
}

void replica_broadcast(struct trainer *t, int with_optimizer)
{
    if (t->dist->world == 1)
        return;
    /* With dist.zero each rank holds only its shard of the optimizer state,
     * which no other rank ever computes: only the weights are sent. */
    for (int which = 0; which < (with_optimizer && !t->zero ? 3 : 1); which++) {
        stage_state(t, which, 0);
        dist_bcast(t->host_flat, t->n_flat * sizeof(float), 0);
        stage_state(t, which, 1);
    }
}

int replica_check(struct trainer *t)
{
    const struct dist *d = t->dist;
    if (d->world == 1)
        return 1;
    int n = model_param_count(t->model);
    size_t W = (size_t)d->world;
    uint64_t *mine = vkt_malloc(sizeof *mine * (size_t)n, "checksums");
    uint64_t *all = vkt_malloc(sizeof *all * (size_t)n * W, "checksums");
    stage_state(t, 0, 0);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t k = model_param(t->model, i)->numel;
        mine[i] = fnv1a(t->host_flat + off, k * sizeof(float));
        off += k;
    }
    dist_allgather(mine, all, sizeof *mine * (size_t)n);
    int same = 1;
    for (size_t r = 1; r < W; r++)
        same &= !memcmp(all, all + r * (size_t)n, sizeof *all * (size_t)n);
    if (same) {
        free(mine), free(all);
        return 1;
    }
    /* How far each rank is from rank 0, per tensor, before the repair. */
    float *own = vkt_malloc(t->n_flat * sizeof(float), "own weights");
    memcpy(own, t->host_flat, t->n_flat * sizeof(float));
    dist_bcast(t->host_flat, t->n_flat * sizeof(float), 0);
    double *diff = vkt_malloc(sizeof *diff * (size_t)n, "replica differences");
    double *diffs = vkt_malloc(sizeof *diffs * (size_t)n * W, "replica differences");
    off = 0;
    for (int i = 0; i < n; i++) {
        size_t k = model_param(t->model, i)->numel;
        diff[i] = 0;
        for (size_t j = 0; j < k; j++)
            diff[i] = fmax(diff[i], fabs((double)own[off + j] - (double)t->host_flat[off + j]));
        off += k;
    }
    dist_allgather(diff, diffs, sizeof *diff * (size_t)n);
    if (d->rank == 0)
        for (size_t r = 1; r < W; r++) {
            int bad = 0, worst = 0;
            for (int i = 0; i < n; i++)
                if (all[r * (size_t)n + (size_t)i] != all[i]) {
                    bad++;
                    if (diffs[r * (size_t)n + (size_t)i] > diffs[r * (size_t)n + (size_t)worst])
                        worst = i;
                }
            if (bad)
                vkt_warn("replica check after step %lld: rank %zu differs from rank 0 in %d of %d tensors "
                         "(largest: %s, max |diff| %.3g); repaired by broadcasting rank 0's weights%s",
                         (long long)t->step, r, bad, n, model_param(t->model, worst)->name,
                         diffs[r * (size_t)n + (size_t)worst], t->zero ? "" : " and optimizer state");
        }
    stage_state(t, 0, 1);
    replica_broadcast(t, 1);
    free(own), free(diff), free(diffs), free(mine), free(all);
    return 0;
}
