/* repro_step: the step's gradient and loss sums in precision: reproducible
 * (docs/reproducible.md, "Sums over samples").
 *
 * The global batch's gradient is one tree fixed by the global sample index
 * k in [0, G), G = W·A·B, whatever the split: the canonical pairwise tree
 * of repro_sum_ref, its leaves padded with +0 to the next power of two,
 * adjacent pairs first, each node left + right as one float add. Sample k
 * is sequence k of the step's global batch: micro-batch k / (W·B) of rank
 * (k / B) mod W (sampler.c), so with W and B powers of two each rank's
 * micro-batch is an aligned subtree of B leaves, the ranks' micro-batch a
 * the aligned subtree [a·W·B, (a+1)·W·B), and the micro-batches the leaves
 * of the tree above (A padded to a power of two with +0 subtrees):
 *   - each sample runs alone (a batch of one sequence, filled on its own so
 *     its length never depends on its micro-batch) into zeroed gradients,
 *     its forward scaled by 1/N; a binary-counter stack of log2(B) gradient
 *     copies on the device combines the B samples of a micro-batch;
 *   - across ranks, each micro-batch's value goes to the host in sync
 *     order, cut into W shards of floats; an all-to-all gives each rank
 *     every rank's value of its shard, combined in the pairwise tree over
 *     the rank index; a binary-counter stack over micro-batches (host
 *     shards) carries them up; at the end the shards are all-gathered and
 *     uploaded, so every rank holds the same bits. One rank and one
 *     micro-batch never leave the device.
 * The loss: each sample's (loss sum, valid count) copied out of the model,
 * gathered on every rank and summed in double in k order; validation the
 * same per sequence in sequence order. No float is summed by MPI here.
 *
 * Built with -ffp-contract=off (CMakeLists.txt): the host adds are single
 * float adds, as the device's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"
#include "vktrain/dist.h"
#include "vktrain/ops.h"
#include "vktrain/util.h"

struct repro {
    /* device (repro_buffers_create) */
    int levels;                /* log2(batch_size): the device stack's depth */
    struct gpu_buffer **stack; /* levels x parameters: level l of parameter i at [l·n + i] */
    struct gpu_buffer **own;   /* each parameter's gradient buffer (device_push swaps them) */
    struct gpu_buffer *stats;  /* per sample of this rank's step: (loss sum, valid count) */
    int n_stats;               /* samples it holds: A·B */
    size_t slot;               /* floats per sample in it: 2, or the storage offset alignment's */
    /* host (repro_init) */
    struct data_batch sample; /* one sequence */
    int *counts;              /* floats of each rank's shard of host_flat */
    size_t shard_off;         /* where this rank's shard starts */
    float *recv;              /* world x counts[rank]: every rank's value of this rank's shard */
    int host_levels;          /* log2 of A padded to a power of two */
    float **hstack;           /* host_levels shards */
    float *stats_raw;              /* stats downloaded: n_stats slots */
    float *stats_host, *stats_all; /* 2·A·B floats; world times that */
};

static int log2_exact(int64_t n)
{
    int l = 0;
    while (((int64_t)1 << l) < n)
        l++;
    return l;
}

int repro_power_of_two(int64_t n)
{
    return n > 0 && (n & (n - 1)) == 0;
}

void repro_buffers_create(struct trainer *t)
{
    if (t->cfg->precision != PRECISION_REPRODUCIBLE)
        return;
    struct repro *r = vkt_calloc(1, sizeof *r, "reproducible step");
    t->repro = r;
    int n = model_param_count(t->model);
    r->levels = log2_exact(t->cfg->batch_size);
    r->stack = vkt_calloc((size_t)(r->levels * n) + 1, sizeof *r->stack, "gradient stack");
    r->own = vkt_calloc((size_t)n + 1, sizeof *r->own, "gradient buffers");
    for (int i = 0; i < n; i++)
        r->own[i] = model_param(t->model, i)->grad;
    enum gpu_mem_category was = gpu_memory_category(t->g, GPU_MEM_GRADIENTS);
    for (int l = 0; l < r->levels; l++)
        for (int i = 0; i < n; i++) {
            char name[160];
            snprintf(name, sizeof name, "gradient stack %d: %s", l, model_param(t->model, i)->name);
            r->stack[l * n + i] = gpu_buffer_create(t->g, model_param(t->model, i)->numel * sizeof(float), name);
        }
    gpu_memory_category(t->g, GPU_MEM_WORKSPACE);
    r->n_stats = t->cfg->gradient_accumulation_steps * t->cfg->batch_size;
    size_t align = gpu_info(t->g)->min_storage_offset_alignment / sizeof(float);
    r->slot = align > 2 ? align : 2;
    r->stats = gpu_buffer_create(t->g, sizeof(float) * r->slot * (size_t)r->n_stats, "per-sample losses");
    gpu_memory_category(t->g, was);
}

void repro_buffers_destroy(struct trainer *t)
{
    struct repro *r = t->repro;
    if (!r)
        return;
    for (int k = 0; k < r->levels * model_param_count(t->model); k++)
        gpu_buffer_destroy(t->g, r->stack[k]);
    free(r->stack);
    free(r->own);
    gpu_buffer_destroy(t->g, r->stats);
    free(r);
    t->repro = NULL;
}

size_t repro_host_bytes(const struct trainer *t)
{
    if (!t->repro)
        return 0;
    int W = t->dist->world, A = t->cfg->gradient_accumulation_steps;
    size_t shard = t->n_flat / (size_t)W + 1;
    return sizeof(float) * (shard * (size_t)(W + log2_exact(A)) +
                            (size_t)t->repro->n_stats * (2 * (size_t)(W + 1) + t->repro->slot));
}

void repro_init(struct trainer *t)
{
    struct repro *r = t->repro;
    int W = t->dist->world, rank = t->dist->rank, A = t->cfg->gradient_accumulation_steps;
    data_batch_init(&r->sample, 1, t->cfg->model.max_seq_len);
    if (t->n_flat > (size_t)INT32_MAX)
        train_fail(t, "precision: reproducible: the model's %zu trained floats are more than one MPI call of its "
                      "all-to-all moves (%d); use precision: fp32",
                   t->n_flat, INT32_MAX);
    r->counts = vkt_malloc(sizeof(int) * (size_t)W, "shard sizes");
    for (int k = 0; k < W; k++)
        r->counts[k] = (int)(t->n_flat * (size_t)(k + 1) / (size_t)W - t->n_flat * (size_t)k / (size_t)W);
    r->shard_off = t->n_flat * (size_t)rank / (size_t)W;
    size_t shard = (size_t)r->counts[rank];
    r->recv = vkt_malloc(sizeof(float) * (shard * (size_t)W + 1), "gradient shards");
    r->host_levels = log2_exact(A);
    r->hstack = vkt_calloc((size_t)r->host_levels + 1, sizeof *r->hstack, "gradient shard stack");
    for (int l = 0; l < r->host_levels; l++)
        r->hstack[l] = vkt_malloc(sizeof(float) * (shard + 1), "gradient shard stack");
    r->stats_raw = vkt_malloc(sizeof(float) * r->slot * (size_t)r->n_stats, "per-sample losses");
    r->stats_host = vkt_malloc(sizeof(float) * 2 * (size_t)r->n_stats, "per-sample losses");
    r->stats_all = vkt_malloc(sizeof(float) * 2 * (size_t)r->n_stats * (size_t)W, "per-sample losses");
}

void repro_free(struct trainer *t)
{
    struct repro *r = t->repro;
    if (!r)
        return;
    data_batch_free(&r->sample);
    free(r->counts);
    free(r->recv);
    for (int l = 0; l < r->host_levels; l++)
        free(r->hstack[l]);
    free(r->hstack);
    free(r->stats_raw);
    free(r->stats_host);
    free(r->stats_all);
}

/* Sample j (0-based) of a micro-batch is in the gradients: the device
 * stack's binary counter. Each set low bit of j is a full subtree on the
 * stack, the left sibling of what the gradients hold: grad = stack + grad
 * (op_axpy with a = 1: 1·x is exact, so one correctly rounded add; in
 * place, which op_add's z may not be). The result is pushed on the first
 * free level, except after the last sample, whose sum stays. A push swaps
 * the buffers (the parameter's gradient becomes the level's free buffer,
 * zeroed before the next sample) instead of copying; device_restore puts
 * each parameter's own buffer back. */
static void device_push(struct trainer *t, int j)
{
    struct repro *r = t->repro;
    int n = model_param_count(t->model), l = 0;
    for (; (j >> l) & 1; l++)
        for (int i = 0; i < n; i++)
            op_axpy(t->g, 1.0f, r->stack[l * n + i], model_param(t->model, i)->grad, model_param(t->model, i)->numel);
    if (l < r->levels)
        for (int i = 0; i < n; i++) {
            struct gpu_buffer *b = model_param(t->model, i)->grad;
            model_param(t->model, i)->grad = r->stack[l * n + i];
            r->stack[l * n + i] = b;
        }
}

/* After a micro-batch: its sum into each parameter's own gradient buffer
 * (r->own), which the rest of the trainer holds. The stack's levels are
 * all free then, so the buffers are swapped back and the sum copied. */
static void device_restore(struct trainer *t)
{
    struct repro *r = t->repro;
    int n = model_param_count(t->model);
    for (int i = 0; i < n; i++) {
        struct model_param *p = model_param(t->model, i);
        if (p->grad == r->own[i])
            continue;
        for (int k = i; k < r->levels * n; k += n)
            if (r->stack[k] == r->own[i])
                r->stack[k] = p->grad;
        op_copy(t->g, p->grad, r->own[i], p->numel);
        p->grad = r->own[i];
    }
}

/* x[i] = y[i] + x[i]: y is the left subtree. */
static void add_left(float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = y[i] + x[i];
}

/* x[i] = x[i] + y[i]: y is the right subtree. */
static void add_right(float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] + y[i];
}

/* Micro-batch a's subtree of this rank's shard is in r->recv: the host
 * stack's binary counter over micro-batches, as device_push. */
static void host_push(struct repro *r, int a, size_t shard)
{
    int l = 0;
    for (; (a >> l) & 1; l++)
        add_left(r->recv, r->hstack[l], shard);
    if (l < r->host_levels)
        memcpy(r->hstack[l], r->recv, shard * sizeof(float));
}

/* The micro-batch's sum over this rank's samples is in the gradients: its
 * subtree over the ranks (the all-to-all, then the pairwise tree over the
 * rank index) onto the host stack. */
static void across_ranks(struct trainer *t, int a)
{
    struct repro *r = t->repro;
    int W = t->dist->world;
    size_t shard = (size_t)r->counts[t->dist->rank];
    gpu_submit(t->g);
    double c0 = vkt_now();
    for (int i = 0; i < model_param_count(t->model); i++) {
        struct model_param *p = model_param(t->model, i);
        gpu_download(t->g, p->grad, 0, t->host_flat + t->sync_off[i], p->numel * sizeof(float));
    }
    dist_alltoall_blocks_f32(t->host_flat, r->counts, r->recv);
    for (int s = 1; s < W; s *= 2) /* node k = node k + node k + s */
        for (int k = 0; k + s < W; k += 2 * s)
            add_right(r->recv + (size_t)k * shard, r->recv + (size_t)(k + s) * shard, shard);
    host_push(r, a, shard);
    t->comm_seconds += vkt_now() - c0;
}

/* After the last micro-batch: the +0 subtrees up to the power of two, the
 * shards to every rank, and the sums to the device. */
static void finish(struct trainer *t)
{
    struct repro *r = t->repro;
    size_t shard = (size_t)r->counts[t->dist->rank];
    double c0 = vkt_now();
    for (int a = t->cfg->gradient_accumulation_steps; a < (1 << r->host_levels); a++) {
        memset(r->recv, 0, shard * sizeof(float));
        host_push(r, a, shard);
    }
    memcpy(t->host_flat + r->shard_off, r->recv, shard * sizeof(float));
    dist_allgather_blocks_f32(t->host_flat, r->counts);
    for (int i = 0; i < model_param_count(t->model); i++) {
        struct model_param *p = model_param(t->model, i);
        gpu_upload(t->g, p->grad, 0, t->host_flat + t->sync_off[i], p->numel * sizeof(float));
    }
    t->comm_seconds += vkt_now() - c0;
}

/* Sums per sample (2 floats each, `per` samples per rank, rank r's sample q
 * at global index index(q, r)) gathered to every rank and summed in double
 * in the order of the global index: out[0] loss, out[1] count. */
static void sum_in_order(struct trainer *t, const float *mine, int per, int64_t (*index)(const struct trainer *, int, int),
                         int64_t n, double out[2])
{
    struct repro *r = t->repro;
    int W = t->dist->world;
    float *all = per <= r->n_stats ? r->stats_all : vkt_malloc(sizeof(float) * 2 * (size_t)per * (size_t)W, "losses");
    dist_allgather(mine, all, sizeof(float) * 2 * (size_t)per);
    double *by_k = vkt_calloc((size_t)n * 2 + 1, sizeof(double), "losses in order");
    for (int rk = 0; rk < W; rk++)
        for (int q = 0; q < per; q++) {
            int64_t k = index(t, q, rk);
            if (k < n)
                by_k[2 * k] = all[2 * ((size_t)rk * (size_t)per + (size_t)q)],
                by_k[2 * k + 1] = all[2 * ((size_t)rk * (size_t)per + (size_t)q) + 1];
        }
    out[0] = out[1] = 0.0;
    for (int64_t k = 0; k < n; k++)
        out[0] += by_k[2 * k], out[1] += by_k[2 * k + 1];
    free(by_k);
    if (all != r->stats_all)
        free(all);
}

/* This rank's sample q = a·B + j of the step: global index (a·W + rank)·B + j. */
static int64_t train_index(const struct trainer *t, int q, int rank)
{
    int B = t->cfg->batch_size;
    return ((int64_t)(q / B) * t->dist->world + rank) * B + q % B;
}

/* This rank's validation sequence q: sequence q·W + rank. */
static int64_t val_index(const struct trainer *t, int q, int rank)
{
    return (int64_t)q * t->dist->world + rank;
}

/* One sequence of r->sample through the model; its (loss sum, count) into
 * slot q of r->stats. */
static void run_sample(struct trainer *t, float scale, uint32_t sample0, int q)
{
    struct repro *r = t->repro;
    struct data_batch *b = &r->sample;
    struct model_batch mb = trainer_model_batch(t, b, sample0);
    gpu_profile_phase(t->g, "forward");
    model_forward(t->model, &mb, scale);
    if (scale != 0.0f) {
        gpu_profile_phase(t->g, "backward");
        model_backward(t->model);
    }
    op_copy_to(t->g, model_loss_stats(t->model), r->stats, r->slot * (size_t)q, 2);
}

/* The first n slots of r->stats as 2 floats each into out. */
static void read_stats(struct trainer *t, int n, float *out)
{
    struct repro *r = t->repro;
    gpu_download(t->g, r->stats, 0, r->stats_raw, sizeof(float) * r->slot * (size_t)n);
    for (int q = 0; q < n; q++)
        out[2 * q] = r->stats_raw[r->slot * (size_t)q], out[2 * q + 1] = r->stats_raw[r->slot * (size_t)q + 1];
}

void repro_step_backward(struct trainer *t, int64_t N, double loss[2])
{
    struct repro *r = t->repro;
    int A = t->cfg->gradient_accumulation_steps, B = t->cfg->batch_size;
    int rank = t->dist->rank, host = t->dist->world > 1 || A > 1;
    float scale = (float)(1.0 / (double)N);
    for (int a = 0; a < A; a++) {
        const struct data_batch *mb = &t->micro[a];
        for (int j = 0; j < B; j++) {
            data_batch_fill(&t->data, &t->data.train, &mb->seq[j], 1, &r->sample);
            model_zero_grad(t->model);
            if (a == 0 && j == 0)
                faults_gradient(t);
            run_sample(t, scale, sampler_first(&t->sampler, rank, a) + (uint32_t)j, a * B + j);
            device_push(t, j);
        }
        device_restore(t);
        if (host)
            across_ranks(t, a);
    }
    if (host)
        finish(t);
    read_stats(t, r->n_stats, r->stats_host);
    double local = 0.0;
    for (int q = 0; q < r->n_stats; q++)
        local += r->stats_host[2 * q + 1];
    sum_in_order(t, r->stats_host, r->n_stats, train_index, (int64_t)t->dist->world * r->n_stats, loss);
    loss[1] = local;
}

double repro_evaluate(struct trainer *t)
{
    struct repro *r = t->repro;
    int W = t->dist->world, rank = t->dist->rank;
    int64_t n = data_val_batches(&t->data, 1); /* sequences */
    int per = (int)((n + W - 1) / W);
    float *mine = vkt_calloc(2 * (size_t)per + 1, sizeof(float), "validation losses");
    gpu_profile_phase(t->g, "eval");
    for (int q0 = 0; q0 < per; q0 += r->n_stats) {
        int done = 0;
        for (int q = q0; q < per && q < q0 + r->n_stats && val_index(t, q, rank) < n; q++, done++) {
            data_val_batch(&t->data, val_index(t, q, rank), 1, &r->sample);
            run_sample(t, 0.0f, 0, q - q0);
        }
        if (done)
            read_stats(t, done, mine + 2 * (size_t)q0);
    }
    double s[2];
    sum_in_order(t, mine, per, val_index, n, s);
    free(mine);
    return s[1] > 0 ? s[0] / s[1] : NAN;
}
