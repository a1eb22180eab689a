/* op_cross_entropy: the masked softmax cross-entropy fused with its
 * backward (shaders/default/cross_entropy.comp), dispatched over row ranges so a
 * logits buffer larger than a binding (the GPT-2 vocabulary over many
 * tokens) or more rows than the workgroup count still work; rows are
 * independent, so the ranges change no bit. On CPU devices (texel family)
 * the logits are read through an R32F texel view of the range: by
 * cross_entropy_texel.comp, one invocation per row, or, for rows too long
 * for llvmpipe's loop limit, by cross_entropy.comp's texel_wg variant, a
 * workgroup per row (kernel_pick_cross_entropy chooses; in the
 * reproducible mode repro_cross_entropy). Never allocates. */
#include "ops_internal.h"
#include "ops_texel.h"
#include "vktrain/kernel_select.h"
#include "vktrain/repro.h"
#include "vktrain/util.h"

struct ce_push {
    uint32_t rows, V;
    float scale;
    uint32_t ld;
    float softcap;
};

void op_cross_entropy(struct gpu *g, struct gpu_buffer *logits, struct gpu_buffer *labels,
                      struct gpu_buffer *row_loss, struct gpu_buffer *row_count, uint32_t rows, uint32_t V,
                      float scale)
{
    op_cross_entropy_at(g, logits, labels, row_loss, row_count, 0, rows, V, V, scale);
}

void op_cross_entropy_at(struct gpu *g, struct gpu_buffer *logits, struct gpu_buffer *labels,
                         struct gpu_buffer *row_loss, struct gpu_buffer *row_count, uint32_t row0, uint32_t rows,
                         uint32_t V, uint32_t ld, float scale)
{
    op_cross_entropy_capped(g, logits, labels, row_loss, row_count, row0, rows, V, ld, scale, 0);
}

void op_cross_entropy_capped(struct gpu *g, struct gpu_buffer *logits, struct gpu_buffer *labels,
                             struct gpu_buffer *row_loss, struct gpu_buffer *row_count, uint32_t row0, uint32_t rows,
                             uint32_t V, uint32_t ld, float scale, float softcap)
{
    if (ld < V)
        vkt_fatal("cross_entropy: rows of %u logits %u floats apart", V, ld);
    size_t row_bytes = (size_t)ld * sizeof(float), first = (size_t)row0 * sizeof(float);
    struct kernel_pick pick = kernel_pick_cross_entropy(g, V, row_bytes);
    if (kernel_path_repro(pick.path)) {
        if (softcap)
            vkt_fatal("cross_entropy: the reproducible kernel has no soft-capping");
        if (ld != V)
            vkt_fatal("cross_entropy: the reproducible kernel takes packed rows (%u floats apart, not %u)", V, ld);
        repro_cross_entropy(g, logits, labels, row_loss, row_count, row0, rows, V, scale);
        return;
    }
    size_t end = first + sizeof(float) * rows;
    ops_check("cross_entropy", "logits", logits, row_bytes * rows);
    ops_check("cross_entropy", "labels", labels, end);
    ops_check("cross_entropy", "row loss", row_loss, end);
    ops_check("cross_entropy", "row count", row_count, end);
    size_t align = gpu_binding_alignment(g, GPU_BIND_STORAGE);
    if (first % align)
        vkt_fatal("cross_entropy: the first row %u of the labels is not at a multiple of the storage offset "
                  "alignment (%zu bytes)",
                  row0, align);
    /* logits (and dlogits), labels, row_loss, row_count from row row0 on,
     * in ranges of rows (ops_rows) */
    struct gpu_arg lab = {.buf = labels, .offset = first, .range = end - first};
    struct gpu_arg loss = {.buf = row_loss, .write = 1, .offset = first, .range = end - first};
    struct gpu_arg count = {.buf = row_count, .write = 1, .offset = first, .range = end - first};
    struct gpu_arg x = {.buf = logits, .write = 1, .range = rows * row_bytes};
    if (softcap < 0)
        vkt_fatal("cross_entropy: softcap %g is negative", (double)softcap);
    struct ce_push push = {rows, V, scale, ld, softcap};
    if (pick.path == KPATH_TEXEL) {
        /* the logits through an R32F view: one invocation per row, or a
         * workgroup per row (cross_entropy_texel_wg) */
        int per_row = pick.shader == SHADER_cross_entropy_texel;
        enum gpu_binding_kind kinds[5] = {GPU_BIND_TEXEL_F32, GPU_BIND_STORAGE, GPU_BIND_STORAGE, GPU_BIND_STORAGE,
                                          GPU_BIND_STORAGE};
        uint32_t wg = gpu_workgroup_1d(g);
        struct gpu_kernel *k =
            ops_texel_kernel(g, pick.shader, 5, kinds, sizeof push, per_row ? 0 : 1, per_row ? NULL : &wg);
        struct gpu_arg args[5] = {{.buf = logits, .range = rows * row_bytes}, x, lab, loss, count};
        const size_t ub[5] = {row_bytes, row_bytes, sizeof(float), sizeof(float), sizeof(float)};
        ops_rows(g, k, args, ub, &push, 1, rows, per_row ? 64 : 1);
        return;
    }
    struct gpu_arg args[4] = {x, lab, loss, count};
    const size_t ub[4] = {row_bytes, sizeof(float), sizeof(float), sizeof(float)};
    ops_rows(g, ops_kernel(g, pick.shader, 4, sizeof push, 1), args, ub, &push, 1, rows, 1);
}
