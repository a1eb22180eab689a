/* repro_setup: the start-up of precision: reproducible (docs/reproducible.md).
 * Before the model is created (the gpu's reproducible mode is on: the
 * ops record the reproducible kernels, the model builds its RoPE table
 * and initialization without libm), the world size is checked to be a
 * power of two, and every rank runs the known-answer probe
 * (repro_probe) on its device, and the ranks exchange what each found: the
 * run stops on every rank, rank 0 printing why, when a rank's device failed
 * a case (naming the rank, the device and the cases) or when the ranks'
 * digests differ (naming the ranks: a device or a build that computes other
 * bits than the rest); otherwise rank 0 prints one line:
 *   reproducible mode: probe passed on N rank(s), digest 0x...
 * The tests simulate a failure with VKTRAIN_TEST_PROBE=fail:R (rank R's
 * first case expects other bits than its device gives, as on a device that
 * breaks it) or digest:R (rank R's digest changed, as from another build). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repro_train.h"
#include "vktrain/repro.h"

struct probe_report {
    uint64_t digest;
    int32_t failed, device_index;
    char host[64], device[256];
    char why[600];
};

/* VKTRAIN_TEST_PROBE=fail:R or digest:R: what to simulate on this rank, or 0. */
static int probe_fault(int rank)
{
    const char *v = getenv("VKTRAIN_TEST_PROBE");
    if (!v || !*v)
        return 0;
    int what = !strncmp(v, "fail:", 5) ? 'f' : !strncmp(v, "digest:", 7) ? 'd' : 0;
    if (!what)
        vkt_fatal("VKTRAIN_TEST_PROBE='%s': expected fail:RANK or digest:RANK", v);
    return atoi(strchr(v, ':') + 1) == rank ? what : 0;
}

static void probe_this_rank(struct trainer *t, struct probe_report *r)
{
    memset(r, 0, sizeof *r);
    const struct gpu_device_info *info = gpu_info(t->g);
    snprintf(r->host, sizeof r->host, "%s", t->dist->host);
    snprintf(r->device, sizeof r->device, "%s", info->name);
    r->device_index = info->index;
    int fault = probe_fault(t->dist->rank);
    struct repro_probe_case *cases = vkt_malloc(repro_probe_case_count * sizeof *cases, "probe cases");
    memcpy(cases, repro_probe_cases, repro_probe_case_count * sizeof *cases);
    if (fault == 'f')
        cases[0].expect ^= 1u;
    r->failed = repro_probe_run(t->g, cases, repro_probe_case_count, &r->digest, r->why, sizeof r->why);
    free(cases);
    if (fault == 'd')
        r->digest ^= 1u;
}

void repro_setup(struct trainer *t)
{
    int W = t->dist->world;
    if (!repro_power_of_two(W))
        train_fail(t, "precision: reproducible needs a world size that is a power of two (its sum over samples is "
                      "a tree of aligned subtrees), this run has %d ranks; run 1, 2, 4, 8, ... ranks or use "
                      "precision: fp32",
                   W);
    struct probe_report mine, *all = vkt_calloc((size_t)W, sizeof *all, "probe reports");
    probe_this_rank(t, &mine);
    dist_allgather(&mine, all, sizeof mine);

    char msg[8192];
    size_t len = 0;
    int failed = 0, differ = 0;
    for (int r = 0; r < W; r++)
        if (all[r].failed && len < sizeof msg) {
            failed++;
            len += (size_t)snprintf(msg + len, sizeof msg - len,
                                    "%sreproducible mode: the start-up probe failed on rank %d (%s, device %d: %s): "
                                    "%d case(s) gave other bits than IEEE 754: %s",
                                    len ? "\n" : "", r, all[r].host, (int)all[r].device_index, all[r].device,
                                    (int)all[r].failed, all[r].why);
        }
    for (int r = 1; r < W; r++)
        differ += all[r].digest != all[0].digest;
    if (!failed && differ) {
        len = (size_t)snprintf(msg, sizeof msg, "reproducible mode: the ranks' probe digests differ:");
        for (int r = 0; r < W && len < sizeof msg; r++)
            len +=
                (size_t)snprintf(msg + len, sizeof msg - len, "%s rank %d (%s, device %d: %s) 0x%016" PRIx64,
                                 r ? "," : "", r, all[r].host, (int)all[r].device_index, all[r].device, all[r].digest);
        if (len < sizeof msg)
            snprintf(msg + len, sizeof msg - len,
                     "; this build expects 0x%016" PRIx64 ": every rank must run the same vktrain build",
                     repro_probe_expected_digest());
    }
    if (failed || differ) {
        if (t->dist->rank == 0) {
            vkt_error_print("%s", msg);
            if (failed)
                vkt_error_print("a device that fails the probe cannot run precision: reproducible "
                                "(docs/reproducible.md, \"Which devices\"); use precision: fp32 there");
        }
        free(all);
        dist_exit(1);
    }
    if (t->dist->rank == 0)
        printf("reproducible mode: probe passed on %d rank(s), digest 0x%016" PRIx64 "\n", W, all[0].digest);
    fflush(stdout);
    free(all);
}
