/* bench_util: what the benchmark programs share. */
#ifndef VKTRAIN_BENCH_UTIL_H
#define VKTRAIN_BENCH_UTIL_H

#include <stdlib.h>

#include "vktrain/gpu.h"
#include "vktrain/util.h"

/* A device buffer of n floats spread over [-span/2, span/2) by a hash of
 * the index (no two neighbours alike, the same in every run). */
static inline struct gpu_buffer *bench_filled(struct gpu *g, size_t n, const char *name, float span)
{
    float *h = vkt_malloc(n * sizeof *h, name);
    for (size_t i = 0; i < n; i++)
        h[i] = ((float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f) * span;
    struct gpu_buffer *b = gpu_buffer_create(g, n * sizeof *h, name);
    gpu_upload(g, b, 0, h, n * sizeof *h);
    free(h);
    return b;
}

/* Timing of the dispatches recorded between bench_begin and bench_end:
 * what was recorded before is submitted first; milliseconds from
 * timestamp queries, or the wall clock where the queue has none. */
struct bench_clock {
    double t0;
    int timer;
};

static inline struct bench_clock bench_begin(struct gpu *g)
{
    gpu_submit(g);
    struct bench_clock c = {vkt_now(), 0};
    c.timer = gpu_timer_start(g);
    return c;
}

static inline double bench_end(struct gpu *g, struct bench_clock c)
{
    gpu_timer_stop(g, c.timer);
    gpu_submit(g);
    double wall = vkt_now() - c.t0, ms = gpu_timer_ms(g, c.timer);
    return ms > 0 ? ms : wall * 1e3;
}

#endif
