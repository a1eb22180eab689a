/* repro_step: the step's gradient and loss sums in precision: reproducible
 * (docs/reproducible.md, "Sums over samples").
 *
 * The global batch's gradient is one tree fixed by the global sample index
 * k in [0, G), G = W·A·B, whatever the split: the canonical pairwise tree
 * of repro_sum_ref, its leaves padded with +0 to the next power of two,
 * adjacent pairs first, each node left + right as one float add. Sample k
 * is sequence k of the step's global batch: micro-batch k / (W·B) of rank
 * (k / B) mod W (sampler.c). With W and B powers of two, each rank's
 * micro-batch is then an aligned subtree of B leaves; micro-batch a of
 * all W ranks together is the aligned subtree [a·W·B, (a+1)·W·B); and
 * the A micro-batches are the leaves of the tree above them (A padded to
 * a power of two with +0 subtrees):
 *   - a micro-batch runs as one batch into zeroed gradients, its forward
 *     scaled by 1/N; every reduction over rows into a parameter gradient
 *     adds each sample's rows to +0 in row order and combines the samples
 *     in the tree as they complete, on a stack of log2(B) floats per
 *     gradient element (gpu_set_repro_samples, src/repro/repro_samples.c):
 *     each sample's value is the one a batch of that sample alone gives;
 *   - with tied embeddings the LM head's share of the table's gradient is
 *     a gradient of its own (model_set_head_grad), summed in the same tree
 *     and added to the table's share at the end: a sample's two shares
 *     come from passes far apart, so they are two sums over every sample;
 *   - across ranks, each micro-batch's value goes to the host in sync
 *     order (the head's share last), cut into W shards of floats; an
 *     all-to-all gives each rank every rank's value of its shard, combined
 *     in the pairwise tree over the rank index; a binary-counter stack
 *     over micro-batches (host shards) carries them up; at the end the
 *     shards are all-gathered and uploaded, so every rank holds the same
 *     bits. One rank and one micro-batch never leave the device.
 * The loss: each sample's (loss sum, valid count), the reproducible sum
 * over its rows (model_sample_losses), gathered on every rank and summed
 * in double in k order; validation the same per sequence in sequence
 * order. No float is summed by MPI here.
 *
 * Built with -ffp-contract=off (CMakeLists.txt): the host adds are single
 * float adds, as the device's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "repro_train.h"
#include "vktrain/dist.h"
#include "vktrain/ops.h"
#include "vktrain/repro.h"
#include "vktrain/schedule.h"
#include "vktrain/util.h"

struct repro {
    /* device (repro_buffers_create) */
    int levels;                           /* log2(batch_size): each stack's floats per element */
    struct gpu_buffer **stack;            /* each parameter gradient's stack (NULL with levels 0) */
    struct gpu_buffer *head, *head_stack; /* tied embeddings: the LM head's share, its stack */
    int tied;                             /* the table's parameter index, or -1 */
    struct gpu_buffer *loss_b, *count_b;  /* one batch's per-sample sums */
    struct gpu_buffer *stats;             /* per micro-batch: B losses, then (from `slot`) B counts */
    int n_stats;                          /* samples of this rank's step: A·B */
    size_t slot;                          /* B rounded up to the storage offset alignment, in floats */
    /* host (repro_init) */
    size_t n_total;                /* the gradients' floats: the trainer's n_flat, then the head's */
    float *flat;                   /* one micro-batch's gradients at their sync offsets, the head last */
    int *counts;                   /* floats of each rank's shard of flat */
    size_t shard_off;              /* where this rank's shard starts */
    float *recv;                   /* world x counts[rank]: every rank's value of this rank's shard */
    int host_levels;               /* log2 of A padded to a power of two */
    float **hstack;                /* host_levels shards */
    float *stats_raw;              /* stats downloaded */
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

/* A gradient's stack over samples: levels floats per element. */
static struct gpu_buffer *stack_for(struct trainer *t, struct gpu_buffer *grad, size_t numel, const char *of)
{
    struct repro *r = t->repro;
    if (!r->levels)
        return NULL;
    char name[160];
    snprintf(name, sizeof name, "sample stack: %s", of);
    struct gpu_buffer *s =
        gpu_buffer_create(t->g, repro_stack_floats(numel, (uint32_t)r->levels) * sizeof(float), name);
    gpu_buffer_set_stack(grad, s);
    return s;
}

static void repro_buffers_create(struct trainer *t)
{
    struct repro *r = vkt_calloc(1, sizeof *r, "reproducible step");
    t->repro = r;
    int n = model_param_count(t->model), A = t->cfg->gradient_accumulation_steps, B = t->cfg->batch_size;
    r->levels = log2_exact(B);
    r->stack = vkt_calloc((size_t)n + 1, sizeof *r->stack, "gradient stacks");
    enum gpu_mem_category was = gpu_memory_category(t->g, GPU_MEM_GRADIENTS);
    for (int i = 0; i < n; i++) {
        struct model_param *p = model_param(t->model, i);
        if (p->grad)
            r->stack[i] = stack_for(t, p->grad, p->numel, p->name);
    }
    r->tied = model_tied_table(t->model);
    if (r->tied >= 0 && model_param(t->model, r->tied)->grad) {
        struct model_param *p = model_param(t->model, r->tied);
        r->head = gpu_buffer_create(t->g, p->numel * sizeof(float), "LM head's share of the table's gradient");
        r->head_stack = stack_for(t, r->head, p->numel, "LM head's share");
        model_set_head_grad(t->model, r->head);
    }
    gpu_memory_category(t->g, GPU_MEM_WORKSPACE);
    r->n_stats = A * B;
    size_t align = gpu_info(t->g)->min_storage_offset_alignment / sizeof(float);
    r->slot = align > 1 ? ((size_t)B + align - 1) / align * align : (size_t)B;
    r->loss_b = gpu_buffer_create(t->g, sizeof(float) * (size_t)B, "per-sample losses");
    r->count_b = gpu_buffer_create(t->g, sizeof(float) * (size_t)B, "per-sample counts");
    r->stats = gpu_buffer_create(t->g, sizeof(float) * 2 * r->slot * (size_t)A, "per-sample losses of the step");
    gpu_memory_category(t->g, was);
}

static void repro_buffers_destroy(struct trainer *t)
{
    struct repro *r = t->repro;
    if (!r)
        return;
    for (int i = 0; i < model_param_count(t->model); i++) {
        struct model_param *p = model_param(t->model, i);
        if (p->grad)
            gpu_buffer_set_stack(p->grad, NULL);
        gpu_buffer_destroy(t->g, r->stack[i]);
    }
    free(r->stack);
    if (r->head)
        model_set_head_grad(t->model, NULL);
    gpu_buffer_destroy(t->g, r->head);
    gpu_buffer_destroy(t->g, r->head_stack);
    gpu_buffer_destroy(t->g, r->loss_b);
    gpu_buffer_destroy(t->g, r->count_b);
    gpu_buffer_destroy(t->g, r->stats);
    free(r);
    t->repro = NULL;
}

/* The LM head's share of a tied table's gradient: its floats (0: none). */
static size_t head_floats(const struct trainer *t)
{
    return t->repro->head ? model_param(t->model, t->repro->tied)->numel : 0;
}

static size_t repro_host_bytes(const struct trainer *t)
{
    int W = t->dist->world, A = t->cfg->gradient_accumulation_steps;
    size_t total = t->n_flat + head_floats(t), shard = total / (size_t)W + 1;
    return sizeof(float) * (total + shard * (size_t)(W + log2_exact(A)) + 2 * t->repro->slot * (size_t)A +
                            2 * (size_t)t->repro->n_stats * (size_t)(W + 1));
}

static void repro_init(struct trainer *t)
{
    struct repro *r = t->repro;
    int W = t->dist->world, rank = t->dist->rank, A = t->cfg->gradient_accumulation_steps;
    r->n_total = t->n_flat + head_floats(t);
    if (r->n_total > (size_t)INT32_MAX)
        train_fail(t,
                   "precision: reproducible: the model's %zu gradient floats are more than one MPI call of its "
                   "all-to-all moves (%d); use precision: fp32",
                   r->n_total, INT32_MAX);
    r->flat = vkt_malloc(sizeof(float) * (r->n_total + 1), "gradients staged");
    r->counts = vkt_malloc(sizeof(int) * (size_t)W, "shard sizes");
    for (int k = 0; k < W; k++)
        r->counts[k] = (int)(r->n_total * (size_t)(k + 1) / (size_t)W - r->n_total * (size_t)k / (size_t)W);
    r->shard_off = r->n_total * (size_t)rank / (size_t)W;
    size_t shard = (size_t)r->counts[rank];
    r->recv = vkt_malloc(sizeof(float) * (shard * (size_t)W + 1), "gradient shards");
    r->host_levels = log2_exact(A);
    r->hstack = vkt_calloc((size_t)r->host_levels + 1, sizeof *r->hstack, "gradient shard stack");
    for (int l = 0; l < r->host_levels; l++)
        r->hstack[l] = vkt_malloc(sizeof(float) * (shard + 1), "gradient shard stack");
    r->stats_raw = vkt_malloc(sizeof(float) * 2 * r->slot * (size_t)A, "per-sample losses");
    r->stats_host = vkt_malloc(sizeof(float) * 2 * (size_t)r->n_stats, "per-sample losses");
    r->stats_all = vkt_malloc(sizeof(float) * 2 * (size_t)r->n_stats * (size_t)W, "per-sample losses");
}

static void repro_free(struct trainer *t)
{
    struct repro *r = t->repro;
    if (!r)
        return;
    free(r->flat);
    free(r->counts);
    free(r->recv);
    for (int l = 0; l < r->host_levels; l++)
        free(r->hstack[l]);
    free(r->hstack);
    free(r->stats_raw);
    free(r->stats_host);
    free(r->stats_all);
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
        gpu_download(t->g, p->grad, 0, r->flat + t->sync_off[i], p->numel * sizeof(float));
    }
    if (r->head)
        gpu_download(t->g, r->head, 0, r->flat + t->n_flat, head_floats(t) * sizeof(float));
    dist_alltoall_blocks_f32(r->flat, r->counts, r->recv);
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
    memcpy(r->flat + r->shard_off, r->recv, shard * sizeof(float));
    dist_allgather_blocks_f32(r->flat, r->counts);
    for (int i = 0; i < model_param_count(t->model); i++) {
        struct model_param *p = model_param(t->model, i);
        gpu_upload(t->g, p->grad, 0, r->flat + t->sync_off[i], p->numel * sizeof(float));
    }
    if (r->head)
        gpu_upload(t->g, r->head, 0, r->flat + t->n_flat, head_floats(t) * sizeof(float));
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

/* A batch through the model: forward (scaled by `scale`; 0: no backward)
 * and backward, each sequence's sums over rows in the tree over its
 * index; each sequence's (loss sum, count) into micro-batch slot `slot`
 * of r->stats. */
static void run_batch(struct trainer *t, const struct data_batch *b, float scale, uint32_t sample0, int slot)
{
    struct repro *r = t->repro;
    struct model_batch mb = trainer_model_batch(t, b, sample0);
    gpu_set_repro_samples(t->g, mb.T, mb.B);
    gpu_profile_phase(t->g, "forward");
    model_forward(t->model, &mb, scale);
    if (scale != 0.0f) {
        gpu_profile_phase(t->g, "backward");
        model_backward(t->model);
    }
    gpu_set_repro_samples(t->g, 0, 0);
    model_sample_losses(t->model, r->loss_b, r->count_b);
    op_copy_to(t->g, r->loss_b, r->stats, 2 * r->slot * (size_t)slot, mb.B);
    op_copy_to(t->g, r->count_b, r->stats, 2 * r->slot * (size_t)slot + r->slot, mb.B);
}

/* Micro-batch slots [0, n) of r->stats, B samples each but the last's
 * `last`, as 2 floats per sample into out. */
static void read_stats(struct trainer *t, int n, int last, float *out)
{
    struct repro *r = t->repro;
    size_t B = (size_t)t->cfg->batch_size;
    gpu_download(t->g, r->stats, 0, r->stats_raw, sizeof(float) * 2 * r->slot * (size_t)n);
    for (int a = 0; a < n; a++)
        for (size_t j = 0; j < (a + 1 < n ? B : (size_t)last); j++) {
            size_t q = (size_t)a * B + j;
            out[2 * q] = r->stats_raw[2 * r->slot * (size_t)a + j];
            out[2 * q + 1] = r->stats_raw[2 * r->slot * (size_t)a + r->slot + j];
        }
}

static void repro_step_backward(struct trainer *t, int64_t N, double loss[2])
{
    struct repro *r = t->repro;
    int A = t->cfg->gradient_accumulation_steps, B = t->cfg->batch_size;
    int rank = t->dist->rank, host = t->dist->world > 1 || A > 1;
    float scale = (float)(1.0 / (double)N);
    for (int a = 0; a < A; a++) {
        if (t->micro[a].rows != B) /* the tree's leaves are B per micro-batch */
            vkt_fatal("precision: reproducible: micro-batch %d holds %d sequences, not batch_size %d", a,
                      t->micro[a].rows, B);
        model_zero_grad(t->model);
        if (r->head)
            gpu_zero(t->g, r->head);
        if (a == 0)
            faults_gradient(t);
        run_batch(t, &t->micro[a], scale, sampler_first(&t->sampler, rank, a), a);
        if (host)
            across_ranks(t, a);
    }
    if (host)
        finish(t);
    if (r->head) /* the table's share plus the head's */
        op_axpy(t->g, 1.0f, r->head, model_param(t->model, r->tied)->grad, head_floats(t));
    read_stats(t, A, B, r->stats_host);
    double local = 0.0;
    for (int q = 0; q < r->n_stats; q++)
        local += r->stats_host[2 * q + 1];
    sum_in_order(t, r->stats_host, r->n_stats, train_index, (int64_t)t->dist->world * r->n_stats, loss);
    loss[1] = local;
}

static double repro_evaluate(struct trainer *t)
{
    int W = t->dist->world, rank = t->dist->rank, B = t->cfg->batch_size;
    int64_t n = data_val_batches(&t->data, 1); /* sequences */
    int per = (int)((n + W - 1) / W);
    float *mine = vkt_calloc(2 * (size_t)per + 1, sizeof(float), "validation losses");
    int64_t *seq = vkt_malloc(sizeof(int64_t) * (size_t)B, "validation sequences");
    struct data_batch *b = &t->micro[0];
    gpu_profile_phase(t->g, "eval");
    for (int q0 = 0; q0 < per; q0 += B) {
        int m = 0;
        for (int q = q0; q < per && q < q0 + B && val_index(t, q, rank) < n; q++)
            seq[m++] = val_index(t, q, rank);
        if (!m)
            break;
        data_batch_fill(&t->data, &t->data.val, seq, m, b);
        run_batch(t, b, 0.0f, 0, 0);
        read_stats(t, 1, m, mine + 2 * (size_t)q0);
    }
    free(seq);
    double s[2];
    sum_in_order(t, mine, per, val_index, n, s);
    free(mine);
    return s[1] > 0 ? s[0] / s[1] : NAN;
}

const struct step_backend step_backend_reproducible = {
    .name = "reproducible",
    .reproducible = 1,
    .banner = "reproducible (gradients summed per sample in a fixed tree over the global batch; "
              "docs/reproducible.md)",
    .comm = "an all-to-all per micro-batch",
    .setup = repro_setup,
    .buffers_create = repro_buffers_create,
    .buffers_destroy = repro_buffers_destroy,
    .host_bytes = repro_host_bytes,
    .init = repro_init,
    .free = repro_free,
    .backward = repro_step_backward,
    .evaluate = repro_evaluate,
    .lr = schedule_lr_repro,
};
