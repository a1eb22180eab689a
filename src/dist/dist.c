/* dist: MPI collectives behind a small interface (include/vktrain/dist.h).
 * MPI is initialized only when the process was started by a launcher
 * (OpenMPI's OMPI_COMM_WORLD_SIZE, or PMI/PMIx variables); a plain run never
 * touches MPI. Owns the MPI lifetime and the abort-on-fatal hook. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vktrain/dist.h"
#include "vktrain/util.h"

#ifdef VKTRAIN_HAVE_MPI
#include <mpi.h>
static int mpi_on;

static void abort_job(int code)
{
    fflush(NULL);
    MPI_Abort(MPI_COMM_WORLD, code);
    _exit(code);
}

/* MPI counts are int: move large arrays in pieces. */
#define MPI_PIECE ((size_t)1 << 28)
#endif

static int launched_by_mpi(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

void dist_init(int *argc, char ***argv, struct dist *d)
{
    memset(d, 0, sizeof *d);
    d->world = 1;
    if (gethostname(d->host, sizeof d->host - 1))
        strcpy(d->host, "localhost");
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    d->launched = launched_by_mpi();
    if (!d->launched)
        return;
#ifdef VKTRAIN_HAVE_MPI
    MPI_Init(argc, argv);
    mpi_on = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->world);
    d->local_rank = lr ? atoi(lr) : 0;
    vkt_set_rank(d->rank, d->world);
    vkt_set_exit_hook(abort_job);
#else
    (void)argc, (void)argv, (void)lr;
    if (getenv("OMPI_COMM_WORLD_SIZE") && atoi(getenv("OMPI_COMM_WORLD_SIZE")) > 1)
        vkt_fatal("started by mpirun with %s ranks, but this vktrain was built without MPI "
                  "(install libopenmpi-dev and rebuild)",
                  getenv("OMPI_COMM_WORLD_SIZE"));
#endif
}

void dist_finalize(void)
{
#ifdef VKTRAIN_HAVE_MPI
    if (mpi_on)
        MPI_Finalize();
    mpi_on = 0;
#endif
}

#ifdef VKTRAIN_HAVE_MPI
static void sum(void *x, size_t n, size_t size, MPI_Datatype t)
{
    for (size_t done = 0; done < n; done += MPI_PIECE) {
        size_t k = n - done < MPI_PIECE ? n - done : MPI_PIECE;
        MPI_Allreduce(MPI_IN_PLACE, (char *)x + done * size, (int)k, t, MPI_SUM, MPI_COMM_WORLD);
    }
}
#endif

void dist_sum_f32(float *x, size_t n)
{
#ifdef VKTRAIN_HAVE_MPI
    if (mpi_on)
        sum(x, n, sizeof *x, MPI_FLOAT);
#else
    (void)x, (void)n;
#endif
}

void dist_sum_f64(double *x, size_t n)
{
#ifdef VKTRAIN_HAVE_MPI
    if (mpi_on)
        sum(x, n, sizeof *x, MPI_DOUBLE);
#else
    (void)x, (void)n;
#endif
}

void dist_sum_i64(int64_t *x, size_t n)
{
#ifdef VKTRAIN_HAVE_MPI
    if (mpi_on)
        sum(x, n, sizeof *x, MPI_INT64_T);
#else
    (void)x, (void)n;
#endif
}

#ifdef VKTRAIN_HAVE_MPI
static MPI_Request *pending;
static int n_pending, cap_pending;

/* A slot for one more non-blocking request, completed by dist_wait_all. */
static MPI_Request *next_request(void)
{
    if (n_pending == cap_pending) {
        cap_pending = cap_pending ? 2 * cap_pending : 64;
        pending = vkt_realloc(pending, sizeof *pending * (size_t)cap_pending, "MPI requests");
    }
    return &pending[n_pending++];
}
#endif

void dist_isum_f32(float *x, size_t n)
{
#ifdef VKTRAIN_HAVE_MPI
    if (!mpi_on)
        return;
    for (size_t done = 0; done < n; done += MPI_PIECE) {
        size_t k = n - done < MPI_PIECE ? n - done : MPI_PIECE;
        MPI_Iallreduce(MPI_IN_PLACE, x + done, (int)k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, next_request());
    }
#else
    (void)x, (void)n;
#endif
}

void dist_ireduce_scatter_f32(const float *x, float *mine, const int *counts)
{
#ifdef VKTRAIN_HAVE_MPI
    if (!mpi_on)
        return;
    MPI_Ireduce_scatter(x, mine, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, next_request());
#else
    (void)x, (void)mine, (void)counts;
#endif
}

void dist_allgather_blocks_f32(float *x, const int *counts)
{
#ifdef VKTRAIN_HAVE_MPI
    if (!mpi_on)
        return;
    int world;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int *displs = vkt_malloc(sizeof(int) * (size_t)world, "MPI displacements");
    for (int r = 0, d = 0; r < world; d += counts[r++])
        displs[r] = d;
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, counts, displs, MPI_FLOAT, MPI_COMM_WORLD);
    free(displs);
#else
    (void)x, (void)counts;
#endif
}

void dist_alltoall_blocks_f32(const float *x, const int *counts, float *recv)
{
#ifdef VKTRAIN_HAVE_MPI
    if (mpi_on) {
        int world, rank;
        MPI_Comm_size(MPI_COMM_WORLD, &world);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        int *sdispls = vkt_malloc(sizeof(int) * 3 * (size_t)world, "MPI displacements");
        int *rcounts = sdispls + world, *rdispls = rcounts + world;
        for (int r = 0, d = 0; r < world; d += counts[r++])
            sdispls[r] = d;
        for (int r = 0; r < world; r++)
            rcounts[r] = counts[rank], rdispls[r] = r * counts[rank];
        MPI_Alltoallv(x, counts, sdispls, MPI_FLOAT, recv, rcounts, rdispls, MPI_FLOAT, MPI_COMM_WORLD);
        free(sdispls);
        return;
    }
#endif
    memcpy(recv, x, sizeof(float) * (size_t)counts[0]);
}

void dist_wait_all(void)
{
#ifdef VKTRAIN_HAVE_MPI
    if (n_pending)
        MPI_Waitall(n_pending, pending, MPI_STATUSES_IGNORE);
    n_pending = 0;
#endif
}

void dist_bcast(void *buf, size_t bytes, int root)
{
#ifdef VKTRAIN_HAVE_MPI
    if (mpi_on)
        for (size_t done = 0; done < bytes; done += MPI_PIECE) {
            size_t k = bytes - done < MPI_PIECE ? bytes - done : MPI_PIECE;
            MPI_Bcast((char *)buf + done, (int)k, MPI_BYTE, root, MPI_COMM_WORLD);
        }
#else
    (void)buf, (void)bytes, (void)root;
#endif
}

void dist_allgather(const void *mine, void *all, size_t n)
{
#ifdef VKTRAIN_HAVE_MPI
    if (mpi_on) {
        MPI_Allgather(mine, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE, MPI_COMM_WORLD);
        return;
    }
#endif
    memcpy(all, mine, n);
}

void dist_barrier(void)
{
#ifdef VKTRAIN_HAVE_MPI
    if (mpi_on)
        MPI_Barrier(MPI_COMM_WORLD);
#endif
}

int dist_first_rank(int flag)
{
    int world = 1;
#ifdef VKTRAIN_HAVE_MPI
    if (mpi_on)
        MPI_Comm_size(MPI_COMM_WORLD, &world);
#endif
    int *all = vkt_malloc(sizeof(int) * (size_t)world, "rank flags"), first = -1;
    dist_allgather(&flag, all, sizeof flag);
    for (int r = world - 1; r >= 0; r--)
        if (all[r])
            first = r;
    free(all);
    return first;
}

void dist_exit(int code)
{
    fflush(NULL);
    dist_finalize();
    exit(code);
}

void dist_check(int failed, const char *err)
{
    int first = dist_first_rank(failed), rank = 0;
    if (first < 0)
        return;
#ifdef VKTRAIN_HAVE_MPI
    if (mpi_on)
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#endif
    if (failed && first == rank)
        vkt_error_print("%s", err);
    dist_exit(1);
}
