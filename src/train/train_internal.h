/* train_internal: the trainer's state, shared by the files of src/train. */
#ifndef VKTRAIN_TRAIN_INTERNAL_H
#define VKTRAIN_TRAIN_INTERNAL_H

#include <stdio.h>

#include "vktrain/data.h"
#include "vktrain/gpu.h"
#include "vktrain/model.h"
#include "vktrain/ops_optim.h"
#include "vktrain/train.h"

struct trainer {
    const struct config *cfg;
    const struct dist *dist;
    struct gpu *g;
    struct data data;
    struct sampler sampler;
    struct model *model;
    struct gpu_buffer **adam_m, **adam_v; /* per parameter */
    struct grad_tensor *grads;            /* every parameter gradient */
    struct gpu_buffer *norm_slots, *norm_scratch;
    int64_t step;        /* optimizer steps done */
    int64_t total_steps;
    struct data_batch *micro; /* A micro-batches of this rank */
    float *host_grads;   /* all gradients, staged for the all-reduce */
    size_t n_grads;
    int *sync_order;     /* parameters in the order their gradients complete */
    struct bucket *buckets;
    int n_buckets;
    double comm_seconds, step_seconds; /* over the run, for the summary */
    FILE *metrics;       /* rank 0 */
    double t_start;
    int64_t first_step; /* the step this process started from */
    int64_t tokens_seen;
    int profiling;      /* rank 0 is in the profile window with timestamps */
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
};
void metrics_open(struct trainer *t, int resumed);
void metrics_log(struct trainer *t, const struct step_metrics *m);
void metrics_close(struct trainer *t);

/* grad_sync.c: the backward of the step's last micro-batch with the
 * bucketed gradient all-reduce (overlapped when dist.overlap). */
void grad_sync_init(struct trainer *t);
void grad_sync_free(struct trainer *t);
void grad_sync_backward(struct trainer *t);

/* replica.c: rank 0's weights (and optimizer state) to every rank; the
 * check returns 1 when all replicas were identical, else repairs them. */
void replica_broadcast(struct trainer *t, int with_optimizer);
int replica_check(struct trainer *t);

/* profile.c: called before each step and after the last; starts the
 * `profile: true` window or closes it and prints the table. */
void profile_window(struct trainer *t);

/* checkpoint.c */
void checkpoint_save(struct trainer *t, const char *dir_name);
/* Loads the newest complete checkpoint; returns 0 if there is none. */
int checkpoint_resume(struct trainer *t);
void checkpoint_save_final(struct trainer *t);

#endif
