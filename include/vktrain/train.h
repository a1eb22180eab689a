/* train: the training run of a resolved recipe, on one process or one rank
 * of an mpirun job. The step follows the normalization contract of
 * docs/normalization.md. */
#ifndef VKTRAIN_TRAIN_H
#define VKTRAIN_TRAIN_H

#include "vktrain/config.h"
#include "vktrain/dist.h"

/* Trains cfg to the end (or from its newest checkpoint with resume: true),
 * writing metrics, checkpoints and the final model under cfg->output_dir.
 * Fatal errors end the process (and the job). Returns the exit status. */
int train_run(const struct config *cfg, const struct dist *d);
/* `vktrain train --dry-run`: prints the device memory cfg needs by category
 * against the memory available (rank 0) and returns 0, training nothing
 * and writing nothing; ends the process as train_run would when the recipe
 * does not fit. */
int train_dry_run(const struct config *cfg, const struct dist *d);

#endif
