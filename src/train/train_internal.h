/* train_internal: the trainer's state, shared by the files of src/train. */
#ifndef VKTRAIN_TRAIN_INTERNAL_H
#define VKTRAIN_TRAIN_INTERNAL_H

#include <jansson.h>
#include <stdio.h>

#include "vktrain/data.h"
#include "vktrain/gpu.h"
#include "vktrain/model.h"
#include "vktrain/ops_optim.h"
#include "vktrain/train.h"
#include "vktrain/util.h"

/* faults.c: failures injected by the tests (see the file). */
enum fault_point { FAULT_CKPT_WRITE, FAULT_CKPT_RENAME, FAULT_CKPT_RENAMED };
struct faults {
    int64_t kill_after, nan_step, bad_label_step, ckpt_step, signal_step;
    int kill_rank, nan_rank, ckpt_point, signal_rank;
    int signals[4], n_signals;
    char nan_tensor[160];
};

struct trainer;

/* The step's backend: how a step's micro-batches become the global batch's
 * gradient and loss sum, and how the validation loss is summed. One is
 * chosen at set-up from the recipe's precision (trainer_backend_for) and
 * train_step calls it in one place, its steps 2 and 3. The default
 * (train.c) sums on the device and all-reduces the gradients in buckets
 * while the backward goes on (grad_sync.c); precision: reproducible
 * (src/repro/repro_step.c) sums each sample's share on its own and the
 * samples in a tree fixed by the global sample index. */
struct step_backend {
    const char *name;
    int reproducible;   /* the ops record the reproducible mode's kernels (gpu_set_reproducible) */
    const char *banner; /* what the run's banner says of it (NULL: nothing) */
    const char *comm;   /* how its ranks communicate, for the summary (NULL: the buckets) */
    /* after the device is set up, before the model exists (collective) */
    void (*setup)(struct trainer *t);
    /* its device buffers, with the trainer's, so the memory plan counts
     * them; the host memory init will take; init after grad_sync_init */
    void (*buffers_create)(struct trainer *t);
    void (*buffers_destroy)(struct trainer *t);
    size_t (*host_bytes)(const struct trainer *t);
    void (*init)(struct trainer *t);
    void (*free)(struct trainer *t);
    /* every micro-batch's forward and backward, dlogits scaled by 1/N; the
     * global batch's gradient left in the gradients, the same bits on
     * every rank; loss[0] the global loss sum, loss[1] this rank's count
     * of valid labels as the device saw it */
    void (*backward)(struct trainer *t, int64_t N, double loss[2]);
    double (*evaluate)(struct trainer *t); /* the validation loss */
    /* the learning rate of the schedule (vktrain/schedule.h) */
    double (*lr)(enum lr_schedule type, double base_lr, int64_t warmup_steps, int64_t total_steps,
                 double min_lr_ratio, int64_t step);
};
extern const struct step_backend step_backend_reproducible;
const struct step_backend *trainer_backend_for(const struct config *cfg);

struct trainer {
    const struct config *cfg;
    const struct step_backend *backend;
    const struct dist *dist;
    struct gpu *g;
    struct data data;
    struct sampler sampler;
    struct model *model;
    struct gpu_buffer **adam_m, **adam_v; /* per parameter */
    struct grad_tensor *grads;            /* every parameter gradient */
    struct gpu_buffer *norm_slots, *norm_scratch;
    int64_t step;        /* steps done (batches consumed) */
    int64_t opt_steps;   /* updates applied: AdamW's t and the schedule's step (skipped steps do not count) */
    int64_t total_steps;
    int nan_skips;       /* non-finite steps skipped in a row */
    float *norm_host;    /* per parameter: the squared norm of its gradient, this step */
    char last_checkpoint[4096]; /* written or resumed from; "" when none */
    int64_t saved_step;         /* the step of last_checkpoint */
    int stop_signal;            /* SIGINT or SIGTERM: the run stops (signals.c) */
    char metrics_path[4096];
    struct faults faults;
    struct data_batch *micro; /* A micro-batches of this rank */
    /* Every trained float on the host in sync order (sync_off): the
     * gradients staged for the all-reduce, and the weights or AdamW moments
     * gathered for the replica check, ZeRO-1 and checkpoints. */
    float *host_flat;
    size_t n_flat; /* its floats */
    int *sync_order;     /* parameters in the order their gradients complete */
    size_t *sync_off;    /* per parameter: its offset in that order's flat layout (host_flat) */
    /* dist.zero on more than one rank: each parameter's gradient sum, AdamW
     * moments and update belong to one rank, its owner; the owners' shards
     * are contiguous runs of whole tensors in sync order, rank 0 first. */
    int zero;
    int *owner;          /* per parameter: its rank, or -1 (no dist.zero): every rank */
    float *shard_host;   /* dist.zero: this rank's summed gradients, in sync order */
    struct bucket *buckets;
    int n_buckets;
    double comm_seconds, step_seconds; /* over the run, for the summary */
    FILE *metrics;       /* rank 0 */
    double t_start;
    int64_t first_step; /* the step this process started from */
    int64_t tokens_seen;
    int profiling;      /* rank 0 is in the profile window with timestamps */
    struct repro *repro; /* the reproducible backend's state (src/repro/repro_step.c), else NULL */
};

/* train.c: the run's device buffers (the model's, the AdamW moments, the
 * grad-norm scratch), created and destroyed by the same code for the memory
 * plan (in the gpu's planning mode) and for the run. */
void trainer_buffers_create(struct trainer *t);
void trainer_buffers_destroy(struct trainer *t);


/* memory_plan.c: measures the device memory of t->cfg on t->g by category,
 * prints it on rank 0 and ends the run, before anything is allocated, when
 * it does not fit, naming a batch_size or max_seq_len that would. */
void memory_plan_check(struct trainer *t);

/* metrics.c */
struct step_metrics {
    int64_t step;
    double loss, lr, grad_norm, tokens, tokens_per_sec, step_ms, val_loss;
    int has_val;
    int skipped; /* non-finite: no update was applied */
};
void metrics_open(struct trainer *t, int resumed);
void metrics_log(struct trainer *t, const struct step_metrics *m);
void metrics_close(struct trainer *t);

/* grad_sync.c: the backward of the step's last micro-batch with the
 * bucketed gradient all-reduce (overlapped when dist.overlap), or with
 * dist.zero its reduce-scatter, and the all-gather of the owners' state.
 * grad_sync_layout (from trainer_buffers_create) fills sync_order,
 * sync_off, zero and owner; grad_sync_init cuts the buckets. */
void grad_sync_layout(struct trainer *t);
void grad_sync_init(struct trainer *t);
void grad_sync_free(struct trainer *t);
void grad_sync_backward(struct trainer *t);
/* Collective (dist.zero): every rank's owned part of the weights (which =
 * 0), AdamW m (1) or v (2) gathered into host_flat in sync order on every
 * rank; for the weights each rank then uploads those it does not own. */
void grad_sync_gather(struct trainer *t, int which);

/* The model's view of a filled batch b of step t->step, whose first
 * sequence is global sample sample0 (LoRA dropout's counter). */
static inline struct model_batch trainer_model_batch(const struct trainer *t, const struct data_batch *b,
                                                     uint32_t sample0)
{
    return (struct model_batch){.B = (uint32_t)b->rows,
                                .T = (uint32_t)b->T,
                                .tokens = b->inputs,
                                .labels = b->labels,
                                .positions = b->positions,
                                .doc_ids = b->doc_ids,
                                .seed = (uint64_t)t->cfg->seed,
                                .step = t->step,
                                .sample0 = sample0};
}

/* The weights (which = 0), AdamW m (1) or v (2) of parameter i. */
static inline struct gpu_buffer *trainer_state(const struct trainer *t, int which, int i)
{
    return which == 0 ? model_param(t->model, i)->w : which == 1 ? t->adam_m[i] : t->adam_v[i];
}

/* Whether this rank updates parameter i (owns its AdamW state). */
static inline int trainer_updates(const struct trainer *t, int i)
{
    return t->owner[i] < 0 || t->owner[i] == t->dist->rank;
}


/* replica.c: rank 0's weights (and optimizer state) to every rank; the
 * check returns 1 when all replicas were identical, else repairs them. */
void replica_broadcast(struct trainer *t, int with_optimizer);
int replica_check(struct trainer *t);

/* profile.c: called before each step and after the last; starts the
 * `profile: true` window or closes it and prints the table. */
void profile_window(struct trainer *t);

/* nonfinite.c: 0 when the step's loss and gradient norm are finite; 1 when
 * it is to be skipped (nan_policy: skip), with m->skipped set; else ends
 * the run on every rank (the error printed once, the metrics row logged). */
int nonfinite_check(struct trainer *t, struct step_metrics *m);

/* signals.c: SIGINT and SIGTERM set a flag (a second SIGINT exits at
 * once); train_step agrees on it over ranks. */
/* under_launcher: started by mpirun (or another MPI launcher), whose
 * pty and pipes carry the output. */
void signals_install(int rank, int under_launcher);
/* From the run's first line of output on: a closed output pipe fails
 * writes instead of ending the run. */
void signals_ignore_pipe(void);
int signals_received(void); /* the first signal received, or 0 */

void faults_init(struct faults *f);
void faults_gradient(struct trainer *t);        /* after the gradients are zeroed */
void faults_labels(struct trainer *t);          /* after the micro-batches are filled */
void faults_after_step(const struct trainer *t); /* after a step's checkpoint */
void faults_signal(const struct trainer *t);     /* in a step */
void faults_checkpoint(const struct trainer *t, enum fault_point at); /* rank 0, in checkpoint_save */

/* An error every rank meets at the same point (a recipe or a checkpoint
 * that every rank read, a verdict every rank reached): rank 0 prints it
 * once and every rank exits with status 1, without MPI_Abort. */
_Noreturn void train_fail(const struct trainer *t, const char *fmt, ...) VKT_PRINTF(2, 3);

/* output_dir.c: at start, refuses a folder holding an earlier run (unless
 * resume or overwrite) or one that cannot be made; once started, removes
 * the earlier run (overwrite), makes the folder, saves recipe.yaml. */
void output_dir_check(struct trainer *t);
void output_dir_prepare(struct trainer *t);

/* checkpoint.c */
void checkpoint_save(struct trainer *t, const char *dir_name);
void checkpoint_save_final(struct trainer *t);
/* Sequences per optimizer step, W·A·B: what a resumed run must keep. */
int64_t checkpoint_global_batch(const struct trainer *t);
/* A whole file, NUL-terminated, in *n bytes (the NUL not counted); NULL
 * with errno when it cannot be opened. */
char *checkpoint_read_file(const char *path, size_t *n);
/* checkpoint_resume.c: loads the newest checkpoint that reads whole
 * (skipping damaged ones with a warning); returns 0 if there is none. */
int checkpoint_resume(struct trainer *t);
/* checkpoint_files.c: {name: {bytes, fnv}} of every file in dir but
 * train_state.json, read back; and the check of a dir against it (0, or -1
 * with what differs). */
json_t *checkpoint_files_describe(const char *dir);
int checkpoint_files_verify(const char *dir, const json_t *files, char *err, size_t n);
/* Removes a directory of plain files; what cannot be removed stays. */
void checkpoint_remove_dir(const char *dir);
/* The resolved recipe as dir/recipe.yaml (rank 0). */
void checkpoint_write_recipe(const struct trainer *t, const char *dir);

#endif
