/* dist: the data-parallel collectives, MPI or nothing.
 *
 * Under mpirun (built with MPI) every call is a real collective over
 * MPI_COMM_WORLD; in a one-process run, or a build without MPI, the same
 * calls are no-ops, so the training step has one code path. dist_init also
 * makes vkt_fatal abort the whole job (MPI_Abort), so a failing rank never
 * hangs the others. Reductions are SUMs: nothing here ever averages. */
#ifndef VKTRAIN_DIST_H
#define VKTRAIN_DIST_H

#include <stddef.h>
#include <stdint.h>

struct dist {
    int rank, world, local_rank;
    int launched; /* started by mpirun or another MPI launcher */
    char host[64];
};

void dist_init(int *argc, char ***argv, struct dist *d);
void dist_finalize(void);
void dist_sum_f32(float *x, size_t n);
void dist_sum_f64(double *x, size_t n);
void dist_sum_i64(int64_t *x, size_t n);
void dist_bcast(void *buf, size_t bytes, int root);
/* Starts a SUM all-reduce of x in place (MPI_Iallreduce); x must stay
 * untouched until dist_wait_all, which completes every started one. */
void dist_isum_f32(float *x, size_t n);
void dist_wait_all(void);
/* Starts a SUM reduce-scatter (MPI_Ireduce_scatter): x holds the
 * world's blocks one after another, counts[r] floats for rank r; this
 * rank's summed block lands in mine (counts[rank] floats). x and mine must
 * stay untouched until dist_wait_all. */
void dist_ireduce_scatter_f32(const float *x, float *mine, const int *counts);
/* In place (MPI_Allgatherv): x holds the world's blocks one after another,
 * counts[r] floats for rank r; each rank's block is sent to all. */
void dist_allgather_blocks_f32(float *x, const int *counts);
/* All-to-all of blocks (MPI_Alltoallv): x holds the world's blocks one
 * after another, counts[r] floats for rank r (the same counts on every
 * rank); block r goes to rank r, and recv receives world blocks of
 * counts[rank] floats, rank 0's first. Without MPI recv = this rank's
 * block. */
void dist_alltoall_blocks_f32(const float *x, const int *counts, float *recv);
/* Every rank's `n` bytes at `mine` gathered on every rank into all[world*n]. */
void dist_allgather(const void *mine, void *all, size_t n);
void dist_barrier(void);
/* The lowest rank whose flag is non-zero, or -1 when no rank's is: how the
 * ranks agree on an error some or all of them met, so that one prints it. */
int dist_first_rank(int flag);
/* Ends the process with `code` after a clean MPI shutdown. Every rank must
 * call it (for an error all of them know of, e.g. a recipe error), so the
 * job ends without MPI_Abort and its noise; an error one rank meets alone
 * goes through vkt_fatal. */
_Noreturn void dist_exit(int code);
/* Collective: when `failed` on any rank, the first such rank prints its
 * `err` (vkt_error_print) and every rank leaves with dist_exit(1); else
 * returns. For errors met where every rank does the same work (reading the
 * recipe, the dataset), so the job ends with one message and no hang. */
void dist_check(int failed, const char *err);

#endif
