/* repro_op_cross_entropy: the wrapper of shaders/reproducible/repro_cross_entropy.comp,
 * which op_cross_entropy_at records instead of its default kernels when
 * the mode is reproducible (kernel_pick_cross_entropy). One workgroup per row
 * (a power of two within the device's limits), the logits read through
 * an R32F texel view in the texel family (storage otherwise: the same
 * bits), rows in ranges as ops_rows makes them (rows are independent: the
 * ranges change no bit). Never allocates. */
#include "../ops/ops_internal.h"
#include "../ops/ops_texel.h"
#include "vktrain/repro.h"
#include "vktrain/util.h"

struct repro_ce_push {
    uint32_t rows, V;
    float scale;
    uint32_t log_run;
};

void repro_cross_entropy(struct gpu *g, struct gpu_buffer *logits, struct gpu_buffer *labels,
                         struct gpu_buffer *row_loss, struct gpu_buffer *row_count, uint32_t row0, uint32_t rows,
                         uint32_t V, float scale)
{
    const char *op = "cross_entropy (reproducible)";
    size_t row_bytes = (size_t)V * sizeof(float), first = (size_t)row0 * sizeof(float);
    size_t end = first + sizeof(float) * rows;
    ops_check(op, "logits", logits, row_bytes * rows);
    ops_check(op, "labels", labels, end);
    ops_check(op, "row loss", row_loss, end);
    ops_check(op, "row count", row_count, end);
    if (rows == 0)
        return;
    size_t align = gpu_binding_alignment(g, GPU_BIND_STORAGE);
    if (first % align)
        vkt_fatal("%s: the first row %u of the labels is not at a multiple of the storage offset alignment (%zu "
                  "bytes)",
                  op, row0, align);
    /* GPUs: 256 invocations per row. CPU devices (the texel family) run a
     * workgroup's subgroups one after the other at each barrier, so there
     * the fewest invocations whose runs stay within 2^6 elements: one
     * subgroup for V = 256. Neither changes the bits. */
    uint32_t wg = 256;
    if (gpu_kernel_class(g) == GPU_KERNELS_TEXEL) {
        wg = gpu_info(g)->subgroup_size > 1 ? gpu_info(g)->subgroup_size : 1;
        while (wg < 256 && ((size_t)wg << 6) < V)
            wg *= 2;
    }
    while (wg > gpu_info(g)->max_workgroup_invocations || wg * sizeof(float) > gpu_info(g)->shared_memory)
        wg /= 2;
    uint32_t log_run = 0;
    while (((size_t)wg << log_run) < V)
        log_run++;
    /* a run, the strided passes and the tree's carries per invocation */
    size_t loops = ((size_t)2 << log_run) + 3 * ((size_t)V / wg + 1) + 64;
    uint32_t limit = gpu_info(g)->max_loop_iterations;
    if (log_run > 10 || (limit && loops > limit))
        vkt_fatal("%s: a vocabulary of %u is over what a workgroup of %u invocations sums on %s", op, V, wg,
                  gpu_info(g)->name);
    struct repro_ce_push push = {rows, V, scale, log_run};
    struct gpu_arg x = {.buf = logits, .write = 1, .range = rows * row_bytes};
    struct gpu_arg lab = {.buf = labels, .offset = first, .range = end - first};
    struct gpu_arg loss = {.buf = row_loss, .write = 1, .offset = first, .range = end - first};
    struct gpu_arg count = {.buf = row_count, .write = 1, .offset = first, .range = end - first};
    /* (not where the device's texel_rows_wg is 0: newer lavapipe) */
    if (ops_texel_rows_fit(g, GPU_BIND_TEXEL_F32, row_bytes) && gpu_info(g)->texel_rows_wg) {
        enum gpu_binding_kind kinds[5] = {GPU_BIND_TEXEL_F32, GPU_BIND_STORAGE, GPU_BIND_STORAGE, GPU_BIND_STORAGE,
                                          GPU_BIND_STORAGE};
        struct gpu_kernel *k = ops_texel_kernel(g, SHADER_repro_cross_entropy_texel, 5, kinds, sizeof push, 1, &wg);
        struct gpu_arg args[5] = {{.buf = logits, .range = rows * row_bytes}, x, lab, loss, count};
        const size_t ub[5] = {row_bytes, row_bytes, sizeof(float), sizeof(float), sizeof(float)};
        ops_rows(g, k, args, ub, &push, 1, rows, 1);
        return;
    }
    enum gpu_binding_kind kinds[4] = {GPU_BIND_STORAGE, GPU_BIND_STORAGE, GPU_BIND_STORAGE, GPU_BIND_STORAGE};
    struct gpu_kernel *k = ops_texel_kernel(g, SHADER_repro_cross_entropy_storage, 4, kinds, sizeof push, 1, &wg);
    struct gpu_arg args[4] = {x, lab, loss, count};
    const size_t ub[4] = {row_bytes, sizeof(float), sizeof(float), sizeof(float)};
    ops_rows(g, k, args, ub, &push, 1, rows, 1);
}
