/* repro_sum: the reproducible mode's sum of a vector and of each row of
 * a matrix (the fixed tree of shaders/reproducible/repro_tree.glsl), on the device
 * (repro_sum.comp in passes, repro_rowsum.comp; its C reference is in
 * tests/ref). The tree depends on the element indices only, so the
 * workgroup size and the run per invocation, which are parameters here
 * for the tests, never change the bits. It records dispatches and never
 * submits. */
#include <stdio.h>
#include <stdlib.h>

#include "vktrain/gpu.h"
#include "vktrain/repro.h"
#include "vktrain/util.h"

/* The workgroup size and run: given, or 256 invocations of runs of 16
 * (within the device's workgroup limit), or for a vector's sum on CPU
 * devices (the texel family, which run a workgroup's subgroups one after
 * the other at each of its barriers) the same blocks of 4096 elements as
 * one subgroup of longer runs; smaller where a block would not fit a
 * binding. Neither changes the bits. (The row sums keep 256 invocations:
 * rows up to 2^18.) */
static void shape(const struct gpu *g, uint32_t *wg, uint32_t *log_run, int vector)
{
    uint32_t most = gpu_info(g)->max_workgroup_invocations;
    int cpu = vector && gpu_kernel_class(g) == GPU_KERNELS_TEXEL;
    if (!*wg) {
        uint32_t sub = gpu_info(g)->subgroup_size;
        *wg = cpu && sub > 0 && !(sub & (sub - 1)) && sub <= 256 ? sub : 256;
        while (*wg > most)
            *wg /= 2;
    }
    if (!*log_run)
        for (*log_run = 4; cpu && ((size_t)*wg << *log_run) < 4096 && *log_run < 10;)
            ++*log_run;
    if (*wg & (*wg - 1) || *wg > most || *log_run > 10)
        vkt_fatal("repro_sum: workgroup size %u (a power of two up to %u) or run 2^%u (at most 2^10) not possible", *wg,
                  most, *log_run);
    /* A block of the first pass within half a storage binding (only a
     * device, or a test, with a range of less than 2 MiB needs it). */
    size_t half = gpu_binding_limit(g, GPU_BIND_STORAGE) / 2;
    while (((size_t)*wg << *log_run) * 4 > half && *log_run > 0)
        (*log_run)--;
    while ((size_t)*wg * 4 > half && *wg > 1)
        *wg /= 2;
}

size_t repro_sum_scratch(const struct gpu *g, size_t n, uint32_t wg, uint32_t log_run)
{
    shape(g, &wg, &log_run, 1);
    size_t block = (size_t)wg << log_run, floats = 0;
    for (size_t m = n; m > block; m = (m + block - 1) / block)
        floats += (m + block - 1) / block;
    return floats;
}

/* The passes of repro_sum (square: the first one squares each element).
 * The first pass is cut into dispatches of whole blocks where x is over
 * one binding or the groups over the device's count: each binds x from
 * the aligned offset at or before its first block, whose trees are the
 * same. */
static void sum_passes(struct gpu *g, const char *what, struct gpu_buffer *x, size_t n, struct gpu_buffer *scratch,
                       struct gpu_buffer *out, size_t out_index, uint32_t wg, uint32_t log_run, int square)
{
    shape(g, &wg, &log_run, 1);
    size_t need = repro_sum_scratch(g, n, wg, log_run);
    if (n == 0 || gpu_buffer_size(x) < n * 4 || gpu_buffer_size(out) < (out_index + 1) * 4 ||
        (need && (!scratch || gpu_buffer_size(scratch) < need * 4)))
        vkt_fatal("%s of %zu floats: the input '%s' (%zu bytes), the output '%s' (%zu bytes, index %zu) or "
                  "the scratch (%zu bytes, needs %zu) is too small",
                  what, n, gpu_buffer_name(x), gpu_buffer_size(x), gpu_buffer_name(out), gpu_buffer_size(out),
                  out_index, scratch ? gpu_buffer_size(scratch) : 0, need * 4);
    struct gpu_kernel_desc d = {
        .shader = SHADER_repro_sum, .n_bindings = 2, .push_size = 16, .n_spec = 2, .spec = {wg, log_run}};
    struct gpu_kernel *plain = gpu_kernel_get(g, &d);
    /* the first pass: on CPU devices x through an R32F view (_tex) */
    enum gpu_binding_kind kind = gpu_kernel_class(g) == GPU_KERNELS_TEXEL ? GPU_BIND_TEXEL_F32 : GPU_BIND_STORAGE;
    int tex = kind != GPU_BIND_STORAGE;
    d.shader = square ? (tex ? SHADER_repro_sum_sq_tex : SHADER_repro_sum_sq) : tex ? SHADER_repro_sum_tex : SHADER_repro_sum;
    d.bindings[0] = kind;
    struct gpu_kernel *k = gpu_kernel_get(g, &d);
    size_t block = (size_t)wg << log_run, at = 0;
    size_t align = gpu_binding_alignment(g, kind), limit = gpu_binding_limit(g, kind);
    size_t most = gpu_info(g)->max_workgroup_count[0], fit = limit > align ? (limit - align) / (block * 4) : 0;
    if (fit < most)
        most = fit;
    if (most == 0)
        vkt_fatal("%s: a block of %zu floats is over the device's binding limit of %zu bytes", what, block, limit);
    struct gpu_buffer *in = x;
    size_t in0 = 0, m = n;
    for (int first = 1;; first = 0) {
        size_t groups = (m + block - 1) / block;
        int last = groups == 1;
        if (!first && (groups > gpu_info(g)->max_workgroup_count[0] || in0 + m > UINT32_MAX))
            vkt_fatal("%s of %zu floats: %zu workgroups of %zu, over the device's %u", what, n, groups, block,
                      gpu_info(g)->max_workgroup_count[0]);
        for (size_t g0 = 0; g0 < groups; g0 += first ? most : groups) {
            size_t ng = first && groups - g0 > most ? most : groups - g0;
            size_t byte0 = first ? g0 * block * 4 : 0, off = byte0 - byte0 % align;
            size_t count = first ? (m - g0 * block < ng * block ? m - g0 * block : ng * block) : m;
            /* the scratch bound as far as it is used, the output from the
             * aligned offset at or before its float */
            size_t out_align = gpu_binding_alignment(g, GPU_BIND_STORAGE);
            size_t out0 = out_index * 4 - out_index * 4 % out_align;
            uint32_t push[4] = {(uint32_t)count, (uint32_t)(first ? (byte0 - off) / 4 : in0),
                                (uint32_t)(last ? out_index - out0 / 4 : at + g0), (uint32_t)last};
            struct gpu_arg args[2] = {
                {in, 0, off, first ? (byte0 - off) + count * 4 : need * 4},
                {last ? out : scratch, 1, last ? out0 : 0, last ? out_index * 4 + 4 - out0 : need * 4}};
            gpu_dispatch(g, first ? k : plain, args, push, (uint32_t)ng, 1, 1);
        }
        if (last)
            return;
        in = scratch;
        in0 = at;
        at += groups;
        m = groups;
    }
}

void repro_sum(struct gpu *g, struct gpu_buffer *x, size_t n, struct gpu_buffer *scratch, struct gpu_buffer *out,
               size_t out_index, uint32_t wg, uint32_t log_run)
{
    sum_passes(g, "repro_sum", x, n, scratch, out, out_index, wg, log_run, 0);
}

void repro_sumsq(struct gpu *g, struct gpu_buffer *x, size_t n, struct gpu_buffer *scratch, struct gpu_buffer *out,
                 size_t out_index, uint32_t wg, uint32_t log_run)
{
    sum_passes(g, "repro_sumsq", x, n, scratch, out, out_index, wg, log_run, 1);
}

void repro_rowsum(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *y, uint32_t rows, uint32_t n, uint32_t wg,
                  uint32_t log_run)
{
    uint32_t run = 0;
    shape(g, &wg, &run, 0);
    if (!log_run)
        while (((size_t)wg << log_run) < n)
            log_run++;
    if (n == 0 || ((size_t)wg << log_run) < n || log_run > 10)
        vkt_fatal("repro_rowsum: rows of %u floats need a run of 2^%u elements per invocation of %u (at most 2^10)", n,
                  log_run, wg);
    if (gpu_buffer_size(x) < (size_t)rows * n * 4 || gpu_buffer_size(y) < (size_t)rows * 4)
        vkt_fatal("repro_rowsum of %u rows of %u: the input '%s' (%zu bytes) or the output '%s' (%zu bytes) is too "
                  "small",
                  rows, n, gpu_buffer_name(x), gpu_buffer_size(x), gpu_buffer_name(y), gpu_buffer_size(y));
    if (rows > gpu_info(g)->max_workgroup_count[0])
        vkt_fatal("repro_rowsum: %u rows, over the device's %u workgroups", rows, gpu_info(g)->max_workgroup_count[0]);
    struct gpu_kernel_desc d = {.shader = SHADER_repro_rowsum, .n_bindings = 2, .push_size = 12, .n_spec = 1, .spec = {wg}};
    uint32_t push[3] = {rows, n, log_run};
    struct gpu_arg args[2] = {{x, 0, 0, 0}, {y, 1, 0, 0}};
    gpu_dispatch(g, gpu_kernel_get(g, &d), args, push, rows, 1, 1);
}
