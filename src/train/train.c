/* train: the run of a recipe — set-up, the step loop, evaluation.
 *
 * One step, in the order of the normalization contract
 * (docs/normalization.md):
 *   1. every rank fills its A micro-batches and counts their valid labels;
 *      one all-reduce gives N, the valid tokens of the global batch;
 *   2. each micro-batch runs forward, the cross-entropy writes
 *      dlogits = (softmax − onehot)/N, and backward adds into the gradients:
 *      after the last micro-batch each rank holds G_r/N;
 *   3. the gradients are summed over ranks (a SUM: no 1/W anywhere), so
 *      every rank holds g = Σ_r G_r / N exactly;
 *   4. the loss sums are all-reduced once (loss = Σ ℓ / N) and the global
 *      gradient norm is taken: both are the same on every rank, so a
 *      non-finite one stops or skips the step everywhere (nonfinite.c);
 *   5. clipping and AdamW run identically on every rank; with dist.zero
 *      (ZeRO-1) step 3 is a reduce-scatter, each rank runs AdamW on the
 *      tensors it owns and the new weights are all-gathered (grad_sync.c).
 * No step divides by a per-micro-batch or per-rank count, so any (W, A, B)
 * with the same W·A·B gives the same trajectory. Steps 2 and 3 (and the
 * validation loss) are the step backend's, chosen at set-up
 * (train_internal.h): the default one below, or precision: reproducible's
 * sums in a fixed order (src/repro/repro_step.c). */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"
#include "vktrain/hfconfig.h"
#include "vktrain/ops.h"
#include "vktrain/ops_optim.h"
#include "vktrain/schedule.h"
#include "vktrain/util.h"

/* The recipe's model (with init_from, its config.json adds what the recipe
 * has no keys for: biases, rope_scaling, GPT-2's position rows) and LoRA. */
static struct model_config model_config_of(const struct config *cfg)
{
    struct model_config mc;
    char err[1024];
    if (model_config_from(&cfg->model, &mc, err, sizeof err))
        vkt_fatal("model.init_from: %s", err);
    mc.lora_rank = (uint32_t)cfg->lora.rank, mc.lora_alpha = (float)cfg->lora.alpha;
    mc.lora_dropout = (float)cfg->lora.dropout;
    mc.lora_n_targets = cfg->lora.n_targets, mc.lora_targets = (const char *const *)cfg->lora.targets;
    mc.base_bf16 = cfg->model.base_dtype != BASE_FP32; /* nf4: the embeddings and an untied head in bf16 */
    if (!mc.base_bnb4) { /* a bitsandbytes folder's quantization is its own */
        mc.base_nf4 = cfg->model.base_dtype == BASE_NF4;
        mc.base_nf4_double = cfg->model.nf4_double_quant;
    }
    return mc;
}

/* Per-parameter squared norms into t->norm_host, and their global norm.
 * With dist.zero each rank holds the sums of its own tensors only: it
 * records their norms, zeroes the others' slots, and a sum over ranks
 * (each slot is x + 0 + ... + 0 = x exactly) gives every rank the same
 * per-tensor floats, hence the same norm, as without it. */
static double global_grad_norm(struct trainer *t)
{
    int n = model_param_count(t->model);
    for (int i = 0; i < n; i++)
        if (trainer_updates(t, i))
            grad_norm_record(t->g, &t->grads[i], 1, t->norm_scratch, t->norm_slots, (uint32_t)i);
    gpu_download(t->g, t->norm_slots, 0, t->norm_host, sizeof(float) * (size_t)n);
    if (t->zero) {
        for (int i = 0; i < n; i++)
            if (!trainer_updates(t, i))
                t->norm_host[i] = 0.0f;
        dist_sum_f32(t->norm_host, (size_t)n);
    }
    return grad_norm_total(t->norm_host, n);
}

/* AdamW on the parameters this rank updates (all, or with dist.zero its
 * shard), then with dist.zero the owners' new weights sent to every rank:
 * each weight is computed once, so the replicas are identical by
 * construction. */
static void optimizer_step(struct trainer *t, double lr, double grad_scale)
{
    const struct config_optimizer *o = &t->cfg->optimizer;
    int64_t step = t->opt_steps + 1; /* Adam's t counts from 1 */
    for (int i = 0; i < model_param_count(t->model); i++) {
        struct model_param *p = model_param(t->model, i);
        struct op_adamw_step a = {
            .lr = lr,
            .beta1 = o->betas[0],
            .beta2 = o->betas[1],
            .eps = o->eps,
            .weight_decay = p->decay ? o->weight_decay : 0.0,
            .t = step,
            .grad_scale = grad_scale,
        };
        if (trainer_updates(t, i))
            op_adamw(t->g, p->w, p->grad, t->adam_m[i], t->adam_v[i], p->numel, &a);
    }
    gpu_submit(t->g);
    t->opt_steps++;
    if (t->zero) {
        double c0 = vkt_now();
        grad_sync_gather(t, 0);
        t->comm_seconds += vkt_now() - c0;
    }
}

/* The device counted `device` valid labels in this rank's micro-batches, the
 * host `host`. They differ only when a label is neither -100 nor a token id
 * below vocab_size (the cross-entropy ignores it) or the device lost work. */
static void check_label_count(struct trainer *t, double device, int64_t host)
{
    /* A float sum of ones is exact up to 2^24; above, allow its rounding. */
    double slack = host > (1 << 24) ? 1e-6 * (double)host : 0.5;
    if (fabs(device - (double)host) <= slack)
        return;
    int V = t->cfg->model.vocab_size;
    for (int m = 0; m < t->cfg->gradient_accumulation_steps; m++) {
        const struct data_batch *b = &t->micro[m];
        for (int i = 0; i < b->rows * b->T; i++) {
            int32_t l = b->labels[i];
            if (l != DATA_IGNORE && (l < 0 || l >= V))
                vkt_fatal("step %lld: micro-batch %d, row %d, position %d holds label %d, outside [0, %d) "
                          "(model.vocab_size): a label must be a token id below model.vocab_size or -100 "
                          "(ignored); the device counted %.0f valid labels, the host %lld",
                          (long long)t->step + 1, m, i / b->T, i % b->T, (int)l, V, device, (long long)host);
        }
    }
    vkt_fatal("step %lld: the device counted %.0f valid labels, the host %lld, and every label is in range: the "
              "device lost work (a driver or device fault)",
              (long long)t->step + 1, device, (long long)host);
}

/* The default backend's validation loss: the batches' loss sums on the
 * device, all-reduced. */
static double default_evaluate(struct trainer *t)
{
    int B = t->cfg->batch_size;
    int64_t n = data_val_batches(&t->data, B);
    struct data_batch *b = &t->micro[0];
    gpu_profile_phase(t->g, "eval");
    model_loss_reset(t->model);
    for (int64_t i = t->dist->rank; i < n; i += t->dist->world) {
        data_val_batch(&t->data, i, B, b);
        struct model_batch mb = trainer_model_batch(t, b, 0);
        model_forward(t->model, &mb, 0.0f);
    }
    double s[2];
    model_read_loss(t->model, &s[0], &s[1]);
    dist_sum_f64(s, 2);
    return s[1] > 0 ? s[0] / s[1] : NAN;
}

void train_fail(const struct trainer *t, const char *fmt, ...)
{
    char msg[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (t->dist->rank == 0)
        vkt_error_print("%s", msg);
    dist_exit(1);
}

static void step_time(struct step_metrics *m, double t0)
{
    m->step_ms = (vkt_now() - t0) * 1e3;
    m->tokens_per_sec = m->tokens / (m->step_ms * 1e-3);
}

/* Steps 2 and 3 of the default backend (the file's comment), and the loss
 * of the global batch: this rank's sums on the device, the loss sum
 * all-reduced (the count stays this rank's, for check_label_count). */
static void default_backward(struct trainer *t, int64_t N, double loss[2])
{
    int A = t->cfg->gradient_accumulation_steps;
    model_zero_grad(t->model);
    faults_gradient(t);
    model_loss_reset(t->model);
    for (int m = 0; m < A; m++) {
        struct data_batch *b = &t->micro[m];
        struct model_batch mb = trainer_model_batch(t, b, sampler_first(&t->sampler, t->dist->rank, m));
        gpu_profile_phase(t->g, "forward");
        model_forward(t->model, &mb, (float)(1.0 / (double)N));
        gpu_profile_phase(t->g, "backward");
        if (m + 1 < A)
            model_backward(t->model);
        else
            grad_sync_backward(t);
    }
    model_read_loss(t->model, &loss[0], &loss[1]);
    dist_sum_f64(loss, 1);
}

static void nothing(struct trainer *t) { (void)t; }
static size_t no_host_bytes(const struct trainer *t) { return (void)t, 0; }

static const struct step_backend step_backend_default = {
    .name = "default",
    .setup = nothing,
    .buffers_create = nothing,
    .buffers_destroy = nothing,
    .host_bytes = no_host_bytes,
    .init = nothing,
    .free = nothing,
    .backward = default_backward,
    .evaluate = default_evaluate,
    .lr = schedule_lr,
};

const struct step_backend *trainer_backend_for(const struct config *cfg)
{
    return cfg->precision == PRECISION_REPRODUCIBLE ? &step_backend_reproducible : &step_backend_default;
}

enum step_result { STEP_APPLIED, STEP_NO_LABELS, STEP_SKIPPED, STEP_STOPPED };

/* One step: the update is applied, or skipped for want of labels or for a
 * non-finite loss or gradient norm (nan_policy: skip); or, when a rank was
 * sent SIGINT or SIGTERM, not begun (t->stop_signal set on every rank). */
static enum step_result train_step(struct trainer *t, struct step_metrics *out)
{
    const struct config *cfg = t->cfg;
    int A = cfg->gradient_accumulation_steps;
    double t0 = vkt_now();

    /* 1. N before any backward. The same all-reduce counts the ranks that
     *    were sent a signal during the previous step (signals.c), so every
     *    rank stops here or none does. */
    int64_t local = 0;
    for (int m = 0; m < A; m++) {
        data_train_batch(&t->data, &t->sampler, t->step, t->dist->rank, m, &t->micro[m]);
        local += t->micro[m].n_valid;
    }
    faults_labels(t);
    int sig = signals_received();
    int64_t sums[3] = {local, sig == SIGINT, sig == SIGTERM};
    dist_sum_i64(sums, 3);
    if (sums[1] || sums[2]) {
        t->stop_signal = sums[1] ? SIGINT : SIGTERM;
        return STEP_STOPPED;
    }
    int64_t N = sums[0];
    if (N == 0) {
        if (t->dist->rank == 0)
            vkt_warn("step %lld: no valid label in the global batch; the optimizer step is skipped",
                     (long long)t->step + 1);
        return STEP_NO_LABELS;
    }

    /* 2. Forward and backward of every micro-batch, dlogits scaled by 1/N;
     * 3. on the last one, the buckets of finished gradients are summed over
     *    ranks while the backward goes on (grad_sync.c), and the loss sums
     *    are all-reduced. This is where the step's backend differs:
     *    precision: reproducible sums each sample's share on its own and
     *    the samples in a tree over the global sample index instead
     *    (src/repro/repro_step.c), its loss sum too. */
    double s[2];
    faults_signal(t);
    t->backend->backward(t, N, s);

    /* 4. The loss of the global batch (the device's count of valid labels
     *    checked against the host's) and the global gradient norm: both the
     *    same on every rank, so every rank takes the same branch below. */
    gpu_profile_phase(t->g, "optimizer");
    double norm = global_grad_norm(t);
    check_label_count(t, s[1], local);
    double lr = t->backend->lr(
        cfg->lr_scheduler.type, cfg->optimizer.lr, cfg->lr_scheduler.warmup_steps, t->total_steps,
        cfg->lr_scheduler.min_lr_ratio, t->opt_steps);
    *out = (struct step_metrics){
        .step = t->step + 1, .loss = s[0] / (double)N, .lr = lr, .grad_norm = norm, .tokens = (double)N};

    /* 5. Clipping and AdamW, unless the step is not finite. */
    step_time(out, t0); /* so far: the row of a step that stops the run shows it */
    if (!nonfinite_check(t, out))
        optimizer_step(t, lr, cfg->clip_grad_norm > 0 ? grad_clip_factor(norm, cfg->clip_grad_norm) : 1.0);
    step_time(out, t0);
    gpu_profile_phase(t->g, "other");
    t->step_seconds += out->step_ms * 1e-3;
    t->tokens_seen += N;
    return out->skipped ? STEP_SKIPPED : STEP_APPLIED;
}

static void banner(struct trainer *t)
{
    const struct config *cfg = t->cfg;
    const struct gpu_device_info *info = gpu_info(t->g);
    const struct model_config *mc = model_config(t->model);
    int64_t G = (int64_t)t->dist->world * cfg->gradient_accumulation_steps * cfg->batch_size;
    printf("vktrain %s: %s on %s (%s), %d rank(s)\n", VKTRAIN_VERSION, mc->arch == MODEL_LLAMA ? "llama" : "gpt2",
           info->name, info->type, t->dist->world);
    char heads[64] = "";
    if (mc->qk_norm || model_head_dim(mc) * mc->n_heads != mc->dim)
        snprintf(heads, sizeof heads, " of %u%s", model_head_dim(mc), mc->qk_norm ? " with q/k norms" : "");
    char window[160] = "";
    uint32_t full = vkt_layers_count(&mc->full_layers, mc->n_layers);
    uint32_t nope = vkt_layers_count(&mc->nope_layers, mc->n_layers);
    if (mc->sliding_window && mc->sliding_window < mc->max_seq_len && full)
        snprintf(window, sizeof window, ", sliding window %u on %u of %u layers", mc->sliding_window,
                 mc->n_layers - full, mc->n_layers);
    else if (mc->sliding_window && mc->sliding_window < mc->max_seq_len)
        snprintf(window, sizeof window, ", sliding window %u", mc->sliding_window);
    if (nope)
        snprintf(window + strlen(window), sizeof window - strlen(window), ", %u layers without RoPE", nope);
    if (mc->norm_offset)
        snprintf(window + strlen(window), sizeof window - strlen(window), ", Gemma's (1 + w) norms%s and GeGLU",
                 mc->post_norms ? " before and after" : "");
    printf("  model: %.2fM parameters, dim %u, %u layers, %u heads (%u kv)%s, hidden %u, vocab %u, context %u%s\n",
           (double)model_numel(t->model) / 1e6, mc->dim, mc->n_layers, mc->n_heads, mc->n_kv_heads, heads,
           mc->hidden_dim, mc->vocab_size, mc->max_seq_len, window);
    char base[160] = "";
    const char *emb = mc->base_bf16 ? "bf16" : "fp32";
    if (mc->base_bnb4)
        snprintf(base, sizeof base, " (its layers' matrices as the folder stores them: bitsandbytes %s%s; the "
                 "embeddings in %s)", mc->base_bnb4 == HF_BNB_FP4 ? "FP4" : "NF4",
                 mc->base_nf4_double ? " with 8-bit scales" : "", emb);
    else if (mc->base_nf4)
        snprintf(base, sizeof base, " (its layers' matrices in NF4%s, the embeddings in bf16)",
                 mc->base_nf4_double ? " with 8-bit scales" : "");
    else if (mc->base_bf16)
        snprintf(base, sizeof base, " (its matrices in bf16)");
    if (mc->lora_rank)
        printf("  lora: rank %u, alpha %g, %.3fM trained parameters (%.2f%%), the base frozen%s\n", mc->lora_rank,
               (double)mc->lora_alpha, (double)model_trained_numel(t->model) / 1e6,
               100.0 * (double)model_trained_numel(t->model) / (double)model_numel(t->model), base);
    printf("  batch: %lld sequences per step (W=%d x A=%d x B=%d), up to %lld tokens; %lld steps%s\n", (long long)G,
           t->dist->world, cfg->gradient_accumulation_steps, cfg->batch_size, (long long)G * cfg->model.max_seq_len,
           (long long)t->total_steps, t->step ? " (resumed)" : "");
    if (t->backend->banner)
        printf("  precision: %s\n", t->backend->banner);
    if (cfg->precision == PRECISION_BF16) {
        const uint32_t *cm = gpu_info(t->g)->coopmat_bf16;
        printf("  precision: bf16 (the matmuls' inputs rounded to bf16 on %u x %u x %u cooperative matrices, fp32 "
               "accumulators, master weights and optimizer)\n",
               cm[0], cm[1], cm[2]);
    }
    printf("  output: %s\n", cfg->output_dir);
    fflush(stdout);
}

/* Rank 0 prints which host and device every rank uses. */
static void print_rank_map(struct trainer *t)
{
    struct rank_info {
        char host[64], device[256];
        int index, texel;
    } mine = {0}, *all = vkt_calloc((size_t)t->dist->world, sizeof *all, "rank map");
    snprintf(mine.host, sizeof mine.host, "%s", t->dist->host);
    snprintf(mine.device, sizeof mine.device, "%s", gpu_info(t->g)->name);
    mine.index = gpu_info(t->g)->index;
    mine.texel = gpu_kernel_class(t->g) == GPU_KERNELS_TEXEL;
    if (gpu_info(t->g)->newer_lavapipe)
        vkt_warn("rank %d runs on lavapipe of %s, not the tested Mesa 22.3: Mesa 25.0 computed wrong results in "
                 "some of vktrain's texel kernels, worked around where found but not everywhere (docs/devices.md, "
                 "\"Newer Mesa\"); compare a short run against Mesa 22.3 or a GPU%s",
                 t->dist->rank, gpu_info(t->g)->driver_info,
                 mine.texel ? ", or take the storage kernels (VKTRAIN_KERNELS=tiled: right there, but 30-70x slower)"
                            : "");
    dist_allgather(&mine, all, sizeof mine);
    if (t->dist->rank == 0)
        for (int r = 0; r < t->dist->world; r++)
            printf("  rank %d: %s, device %d: %s (%s kernels)\n", r, all[r].host, all[r].index, all[r].device,
                   all[r].texel ? "texel" : "tiled");
    free(all);
}

void trainer_buffers_create(struct trainer *t)
{
    const struct config *cfg = t->cfg;
    struct model_config mc = model_config_of(cfg);
    t->model = model_create(t->g, &mc, (uint32_t)cfg->batch_size);
    grad_sync_layout(t);
    int n = model_param_count(t->model);
    t->adam_m = vkt_calloc((size_t)n, sizeof *t->adam_m, "optimizer state");
    t->adam_v = vkt_calloc((size_t)n, sizeof *t->adam_v, "optimizer state");
    enum gpu_mem_category was = gpu_memory_category(t->g, GPU_MEM_OPTIMIZER);
    for (int i = 0; i < n; i++) {
        struct model_param *p = model_param(t->model, i);
        if (!trainer_updates(t, i)) /* dist.zero: another rank's */
            continue;
        t->adam_m[i] = gpu_buffer_create(t->g, p->numel * sizeof(float), "adam m");
        t->adam_v[i] = gpu_buffer_create(t->g, p->numel * sizeof(float), "adam v");
        gpu_zero(t->g, t->adam_m[i]);
        gpu_zero(t->g, t->adam_v[i]);
    }
    gpu_memory_category(t->g, GPU_MEM_WORKSPACE);
    t->norm_slots = gpu_buffer_create(t->g, sizeof(float) * (size_t)n, "grad norm slots");
    t->grads = vkt_malloc(sizeof *t->grads * (size_t)n, "gradient list");
    for (int i = 0; i < n; i++)
        t->grads[i] = (struct grad_tensor){model_param(t->model, i)->grad, model_param(t->model, i)->numel};
    t->norm_scratch =
        gpu_buffer_create(t->g, sizeof(float) * grad_norm_scratch(t->g, t->grads, n), "grad norm scratch");
    gpu_memory_category(t->g, was);
    t->backend->buffers_create(t);
}

void trainer_buffers_destroy(struct trainer *t)
{
    t->backend->buffers_destroy(t);
    for (int i = 0; i < model_param_count(t->model); i++) {
        gpu_buffer_destroy(t->g, t->adam_m[i]);
        gpu_buffer_destroy(t->g, t->adam_v[i]);
    }
    free(t->adam_m);
    free(t->adam_v);
    free(t->grads);
    free(t->sync_order);
    free(t->sync_off);
    free(t->owner);
    gpu_buffer_destroy(t->g, t->norm_slots);
    gpu_buffer_destroy(t->g, t->norm_scratch);
    model_destroy(t->model);
}

/* t->g for the recipe's device and precision (bf16: the matmuls on the
 * device's bf16 cooperative matrices, or an error naming what is missing). */
static void trainer_gpu(struct trainer *t)
{
    const struct config *cfg = t->cfg;
    struct gpu_options opt = {.device_index = cfg->device_index,
                              .local_rank = t->dist->local_rank,
                              .quiet = 1,
                              .coopmat = cfg->precision == PRECISION_BF16};
    t->g = gpu_create(&opt);
    t->backend = trainer_backend_for(cfg);
    gpu_set_reproducible(t->g, t->backend->reproducible);
    if (cfg->precision == PRECISION_BF16) {
        const char *missing = gpu_coopmat_missing(t->g, GPU_MATMUL_BF16);
        if (missing)
            train_fail(t,
                       "precision: bf16 multiplies bf16 values on cooperative matrices, and on %s %s; use "
                       "precision: fp32",
                       gpu_info(t->g)->name, missing);
        gpu_set_matmul_inputs(t->g, GPU_MATMUL_BF16);
    }
}

static void setup(struct trainer *t)
{
    const struct config *cfg = t->cfg;
    char err[2048];
    output_dir_check(t); /* written to only once the run has started */
    trainer_gpu(t);
    t->backend->setup(t); /* before the model exists */
    memory_plan_check(t); /* before anything is allocated */
    /* Every rank reads the same data: an error in it is printed once. */
    int failed = data_open(&t->data, cfg, err, sizeof err) != 0;
    dist_check(failed, err);
    failed = sampler_init(&t->sampler, t->data.train.n_seq, (uint64_t)cfg->seed, cfg->dataset.shuffle, t->dist->world,
                          cfg->gradient_accumulation_steps, cfg->batch_size, err, sizeof err) != 0;
    dist_check(failed, err);
    t->total_steps = sampler_total_steps(&t->sampler, cfg);
    if (t->dist->rank == 0)
        data_report(&t->data, &t->sampler);

    trainer_buffers_create(t);
    if (cfg->model.init_from) {
        if (model_load(t->model, cfg->model.init_from, err, sizeof err))
            vkt_fatal("model.init_from: %s", err);
    } else {
        model_init_random(t->model, (uint64_t)cfg->seed);
    }
    if (cfg->lora.rank && cfg->model.init_from)
        model_init_adapters(t->model, (uint64_t)cfg->seed);
    if (cfg->lora.init_from && model_adapter_load(t->model, cfg->lora.init_from, err, sizeof err))
        vkt_fatal("lora.init_from: %s", err);
    t->host_flat = vkt_malloc(t->n_flat * sizeof(float), "host staging");
    t->norm_host = vkt_malloc(sizeof(float) * (size_t)model_param_count(t->model), "gradient norms");
    grad_sync_init(t);
    t->backend->init(t);
    t->micro = vkt_calloc((size_t)cfg->gradient_accumulation_steps, sizeof *t->micro, "micro-batches");
    for (int m = 0; m < cfg->gradient_accumulation_steps; m++)
        data_batch_init(&t->micro[m], cfg->batch_size, cfg->model.max_seq_len);
}

static void teardown(struct trainer *t)
{
    for (int m = 0; m < t->cfg->gradient_accumulation_steps; m++)
        data_batch_free(&t->micro[m]);
    free(t->micro);
    free(t->host_flat);
    free(t->norm_host);
    grad_sync_free(t);
    t->backend->free(t);
    trainer_buffers_destroy(t);
    sampler_free(&t->sampler);
    data_close(&t->data);
    gpu_destroy(t->g);
}

int train_dry_run(const struct config *cfg, const struct dist *d)
{
    struct trainer t = {.cfg = cfg, .dist = d};
    trainer_gpu(&t);
    memory_plan_check(&t);
    gpu_destroy(t.g);
    return 0;
}

/* The checkpoint of the step reached, unless it is on disk already (the run
 * resumed from it or saved it on the way). */
static void save_step(struct trainer *t)
{
    if (t->last_checkpoint[0] && t->saved_step == t->step)
        return;
    char name[64];
    snprintf(name, sizeof name, "step_%lld", (long long)t->step);
    checkpoint_save(t, name);
}

/* After SIGINT or SIGTERM: the checkpoint of the last finished step, then
 * 128 + the signal. Rank 0 writes while the others wait: under mpirun a
 * rank that left early would make mpirun kill rank 0 mid-write. */
static int stop_on_signal(struct trainer *t)
{
    const char *name = t->stop_signal == SIGINT ? "SIGINT" : "SIGTERM";
    if (t->step > t->first_step) {
        replica_check(t);
        save_step(t);
    }
    dist_barrier();
    if (t->dist->rank == 0) {
        metrics_close(t);
        if (t->step > t->first_step)
            printf("stopped by %s after step %lld of %lld: the checkpoint %s; resume: true continues from it\n",
                   name, (long long)t->step, (long long)t->total_steps, t->last_checkpoint);
        else
            printf("stopped by %s before the first step: nothing new to save%s%s\n", name,
                   t->last_checkpoint[0] ? "; the checkpoint " : "", t->last_checkpoint);
        fflush(stdout); /* mpirun, ending the job, may drop what comes later */
    }
    teardown(t);
    return 128 + t->stop_signal;
}

int train_run(const struct config *cfg, const struct dist *d)
{
    struct trainer t = {.cfg = cfg, .dist = d};
    signals_ignore_pipe();
    setup(&t);
    int resumed = cfg->resume && checkpoint_resume(&t);
    replica_broadcast(&t, 1); /* replicas start from rank 0's state */
    output_dir_prepare(&t);
    if (d->rank == 0)
        banner(&t);
    print_rank_map(&t);
    fflush(stdout);
    if (d->rank == 0)
        metrics_open(&t, resumed);
    t.t_start = vkt_now();
    t.first_step = t.step;
    faults_init(&t.faults);
    signals_install(d->rank, d->launched);
    while (t.step < t.total_steps) {
        profile_window(&t);
        struct step_metrics m;
        enum step_result r = train_step(&t, &m);
        if (r == STEP_STOPPED)
            return stop_on_signal(&t);
        t.step++;
        if (r == STEP_NO_LABELS)
            continue;
        int64_t s = t.step;
        if (cfg->eval_every_n_steps > 0 && (s % cfg->eval_every_n_steps == 0 || s == t.total_steps)) {
            m.val_loss = t.backend->evaluate(&t);
            m.has_val = 1;
        }
        if (d->rank == 0 &&
            (s % cfg->log_every_n_steps == 0 || s == t.total_steps || m.has_val || m.skipped || s == t.first_step + 1))
            metrics_log(&t, &m);
        if (cfg->dist.check_every > 0 && s % cfg->dist.check_every == 0)
            replica_check(&t);
        if (cfg->save_every_n_steps > 0 && s % cfg->save_every_n_steps == 0 && s != t.total_steps) {
            replica_check(&t);
            save_step(&t);
        }
        faults_after_step(&t);
    }
    profile_window(&t);
    int was_identical = replica_check(&t);
    if (d->world > 1 && d->rank == 0)
        vkt_info("replicas: identical on all %d ranks at step %lld%s", d->world, (long long)t.step,
                 was_identical ? "" : " (after the repair above)");
    save_step(&t);
    checkpoint_save_final(&t);
    if (d->rank == 0) {
        metrics_close(&t);
        printf("saved: the %s in %s (%s), the checkpoint %s, the metrics %s\n", cfg->lora.rank ? "adapter" : "model",
               cfg->output_dir,
               !cfg->lora.rank           ? "model.safetensors, config.json"
               : cfg->lora.merge_on_save ? "adapter_model.safetensors, adapter_config.json; merged/: the merged model"
                                         : "adapter_model.safetensors, adapter_config.json",
               t.last_checkpoint, t.metrics_path);
        if (d->world > 1 && t.step_seconds > 0) {
            char how[96];
            snprintf(how, sizeof how, "%d bucket(s), overlap %s", t.n_buckets, cfg->dist.overlap ? "on" : "off");
            printf("communication: %.1f%% of step time (%.1f ms per step; %s)\n",
                   100.0 * t.comm_seconds / t.step_seconds, 1e3 * t.comm_seconds / (double)(t.step - t.first_step),
                   t.backend->comm ? t.backend->comm : how);
        }
    }
    teardown(&t);
    return 0;
}
