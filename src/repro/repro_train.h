/* repro_train: the files of the reproducible step backend
 * (step_backend_reproducible, src/train/train_internal.h): its start-up
 * (repro_setup.c) and its sums over samples (repro_step.c). */
#ifndef VKTRAIN_REPRO_TRAIN_H
#define VKTRAIN_REPRO_TRAIN_H

#include "../train/train_internal.h"

/* The start-up: a world size that is a power of two, else the run stops;
 * the start-up probe on every rank, their digests compared; the run stops
 * on every rank (rank 0 saying why) when a device fails or the digests
 * differ. Collective; before the model is created. */
void repro_setup(struct trainer *t);
int repro_power_of_two(int64_t n);

#endif
