/* gpu_profile: where the device time goes. While profiling is on, each
 * recorded dispatch gets a pair of timestamps around it; when its submit
 * has finished, the pair's difference is added to the row of (phase,
 * kernel), with the FLOPs the op declared. Owns the profile's query pool
 * (one pair per descriptor set a submit can hold, so a submit never runs
 * out) and the rows; submits only where profiling starts or stops, and
 * writes no timestamp while it is off. */
#include <stdlib.h>
#include <string.h>

#include "gpu_internal.h"
#include "vktrain/util.h"

#define PROFILE_QUERIES (2 * GPU_POOL_SETS)

/* A dispatch of the recording, waiting for its submit to finish. */
struct pending {
    const char *phase;
    const char *kernel;
    double flops;
};

struct gpu_profile {
    VkQueryPool pool;
    uint64_t tick_mask; /* timestampValidBits of the queue */
    struct pending pending[GPU_POOL_SETS];
    uint32_t n_pending; /* dispatches recorded since the last collect */
    double next_flops;
    uint64_t ticks[PROFILE_QUERIES];
    struct gpu_profile_row *rows;
    int n_rows, cap_rows;
};

int gpu_profile_start(struct gpu *g)
{
    if (!g->timestamps_ok)
        return 0;
    gpu_submit(g); /* earlier work is not profiled */
    if (!g->prof) {
        struct gpu_profile *p = vkt_calloc(1, sizeof *p, "profile");
        uint32_t n = 0;
        vkGetPhysicalDeviceQueueFamilyProperties(g->phys, &n, NULL);
        VkQueueFamilyProperties *qf = vkt_calloc(n, sizeof *qf, "queue families");
        vkGetPhysicalDeviceQueueFamilyProperties(g->phys, &n, qf);
        uint32_t bits = qf[g->queue_family].timestampValidBits;
        free(qf);
        p->tick_mask = bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
        VkQueryPoolCreateInfo ci = {
            .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
            .queryType = VK_QUERY_TYPE_TIMESTAMP,
            .queryCount = PROFILE_QUERIES,
        };
        VK_CHECK(vkCreateQueryPool(g->device, &ci, NULL, &p->pool), "creating the profile's timestamp pool");
        g->prof = p;
    }
    g->prof->n_rows = 0;
    g->prof->next_flops = 0;
    g->profiling = 1;
    return 1;
}

void gpu_profile_stop(struct gpu *g)
{
    gpu_submit(g);
    g->profiling = 0;
}

void gpu_profile_phase(struct gpu *g, const char *phase)
{
    g->profile_phase = phase;
}

void gpu_profile_flops(struct gpu *g, double flops)
{
    if (g->profiling)
        g->prof->next_flops += flops;
}

void gpu_profile_begin(struct gpu *g, const struct gpu_kernel *k)
{
    struct gpu_profile *p = g->prof;
    /* gpu_dispatch submits when the descriptor pool or the queries are
     * full, so a recording never holds more dispatches than GPU_POOL_SETS. */
    if (p->n_pending == 0)
        vkCmdResetQueryPool(g->cmd, p->pool, 0, PROFILE_QUERIES);
    p->pending[p->n_pending] = (struct pending){
        .phase = g->profile_phase ? g->profile_phase : "other",
        .kernel = k->shader,
        .flops = p->next_flops,
    };
    p->next_flops = 0;
    vkCmdWriteTimestamp(g->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p->pool, 2 * p->n_pending);
}

int gpu_profile_full(const struct gpu *g)
{
    return g->prof->n_pending == GPU_POOL_SETS;
}

void gpu_profile_end(struct gpu *g)
{
    struct gpu_profile *p = g->prof;
    vkCmdWriteTimestamp(g->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p->pool, 2 * p->n_pending + 1);
    p->n_pending++;
}

static struct gpu_profile_row *row_of(struct gpu_profile *p, const char *phase, const char *kernel)
{
    for (int i = 0; i < p->n_rows; i++)
        if (p->rows[i].kernel == kernel && !strcmp(p->rows[i].phase, phase))
            return &p->rows[i];
    if (p->n_rows == p->cap_rows) {
        p->cap_rows = p->cap_rows ? 2 * p->cap_rows : 32;
        p->rows = vkt_realloc(p->rows, sizeof *p->rows * (size_t)p->cap_rows, "profile rows");
    }
    struct gpu_profile_row *r = &p->rows[p->n_rows++];
    *r = (struct gpu_profile_row){.phase = phase, .kernel = kernel};
    return r;
}

void gpu_profile_collect(struct gpu *g)
{
    struct gpu_profile *p = g->prof;
    if (!p || p->n_pending == 0)
        return;
    VK_CHECK(vkGetQueryPoolResults(g->device, p->pool, 0, 2 * p->n_pending, sizeof(uint64_t) * 2 * p->n_pending,
                                   p->ticks, sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
             "reading the profile's %u timestamp pairs", p->n_pending);
    for (uint32_t i = 0; i < p->n_pending; i++) {
        const struct pending *d = &p->pending[i];
        struct gpu_profile_row *r = row_of(p, d->phase, d->kernel);
        uint64_t ticks = (p->ticks[2 * i + 1] - p->ticks[2 * i]) & p->tick_mask;
        r->ms += (double)ticks * g->timestamp_period * 1e-6;
        r->flops += d->flops;
        r->dispatches++;
    }
    p->n_pending = 0;
}

void gpu_profile_destroy(struct gpu *g)
{
    if (!g->prof)
        return;
    vkDestroyQueryPool(g->device, g->prof->pool, NULL);
    free(g->prof->rows);
    free(g->prof);
    g->prof = NULL;
}

int gpu_profile_rows(const struct gpu *g, const struct gpu_profile_row **rows)
{
    *rows = g->prof ? g->prof->rows : NULL;
    return g->prof ? g->prof->n_rows : 0;
}

/* A row and the place of its phase's first row: the table's sort keys. */
struct ranked {
    const struct gpu_profile_row *row;
    int phase_order;
};

static int by_phase_then_time(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->phase_order != y->phase_order)
        return x->phase_order - y->phase_order;
    return (x->row->ms < y->row->ms) - (x->row->ms > y->row->ms);
}

static void print_line(FILE *f, const char *phase, const char *kernel, double ms, double total, double calls,
                       double flops, int repeats)
{
    fprintf(f, "  %-10s %-32s %6.1f%% %10.2f %10.0f", phase, kernel, total > 0 ? 100.0 * ms / total : 0.0, ms / repeats,
            calls / repeats);
    if (flops > 0 && ms > 0) {
        double gflops = flops / (ms * 1e-3) * 1e-9;
        /* Three significant figures below 100, so a slow kernel (a GPU
         * kernel family on a loaded CPU device) never shows as 0.0. */
        fprintf(f, gflops < 100 ? " %9.3g" : " %9.1f", gflops);
    }
    fputc('\n', f);
}

void gpu_profile_print(const struct gpu *g, FILE *f, int repeats, const char *unit)
{
    const struct gpu_profile_row *rows;
    int n = gpu_profile_rows(g, &rows);
    struct ranked *r = vkt_malloc(sizeof *r * (size_t)(n ? n : 1), "profile table");
    double total = 0, calls = 0, counted_ms = 0, counted_flops = 0, counted_calls = 0;
    for (int i = 0; i < n; i++) {
        r[i].row = &rows[i];
        r[i].phase_order = i;
        for (int j = 0; j < i; j++)
            if (!strcmp(rows[j].phase, rows[i].phase)) {
                r[i].phase_order = j;
                break;
            }
        total += rows[i].ms;
        calls += (double)rows[i].dispatches;
        if (rows[i].flops > 0)
            counted_ms += rows[i].ms, counted_flops += rows[i].flops, counted_calls += (double)rows[i].dispatches;
    }
    qsort(r, (size_t)n, sizeof *r, by_phase_then_time);
    char ms_unit[32], calls_unit[32];
    snprintf(ms_unit, sizeof ms_unit, "ms/%s", unit);
    snprintf(calls_unit, sizeof calls_unit, "calls/%s", unit);
    fprintf(f, "  %-10s %-32s %7s %10s %10s %9s\n", "phase", "kernel", "share", ms_unit, calls_unit, "GFLOP/s");
    for (int i = 0; i < n; i++) {
        if (i == 0 || r[i].phase_order != r[i - 1].phase_order) {
            double phase_ms = 0, phase_calls = 0;
            for (int j = i; j < n && r[j].phase_order == r[i].phase_order; j++)
                phase_ms += r[j].row->ms, phase_calls += (double)r[j].row->dispatches;
            print_line(f, r[i].row->phase, "(all)", phase_ms, total, phase_calls, 0, repeats);
        }
        print_line(f, r[i].row->phase, r[i].row->kernel, r[i].row->ms, total, (double)r[i].row->dispatches,
                   r[i].row->flops, repeats);
    }
    print_line(f, "total", "(all)", total, total, calls, 0, repeats);
    if (counted_ms > 0)
        print_line(f, "total", "(kernels with FLOP counts)", counted_ms, total, counted_calls, counted_flops, repeats);
    free(r);
}
