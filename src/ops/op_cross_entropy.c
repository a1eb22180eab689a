/* op_cross_entropy: the masked softmax cross-entropy fused with its
 * backward (shaders/cross_entropy.comp), dispatched over row ranges so a
 * logits buffer larger than maxStorageBufferRange (the GPT-2 vocabulary
 * over many tokens) still works. On CPU devices (texel family) the kernel
 * is cross_entropy_texel.comp: one invocation per row, logits read through
 * an R32F texel view of the whole buffer. Never allocates. */
#include "ops_internal.h"
#include "ops_texel.h"
#include "vktrain/util.h"

struct ce_push {
    uint32_t V, rows;
    float scale;
    uint32_t label0;
};

void op_cross_entropy(struct gpu *g, struct gpu_buffer *logits, struct gpu_buffer *labels,
                      struct gpu_buffer *row_loss, struct gpu_buffer *row_count, uint32_t rows, uint32_t V,
                      float scale)
{
    op_cross_entropy_at(g, logits, labels, row_loss, row_count, 0, rows, V, scale);
}

void op_cross_entropy_at(struct gpu *g, struct gpu_buffer *logits, struct gpu_buffer *labels,
                         struct gpu_buffer *row_loss, struct gpu_buffer *row_count, uint32_t row0, uint32_t rows,
                         uint32_t V, float scale)
{
    size_t row_bytes = (size_t)V * sizeof(float), first = (size_t)row0 * sizeof(float);
    size_t end = first + sizeof(float) * rows;
    ops_check("cross_entropy", "logits", logits, row_bytes * rows);
    ops_check("cross_entropy", "labels", labels, end);
    ops_check("cross_entropy", "row loss", row_loss, end);
    ops_check("cross_entropy", "row count", row_count, end);
    const struct gpu_device_info *info = gpu_info(g);
    /* Rows per range: within the binding limit, starting at aligned offsets. */
    size_t align = info->min_storage_offset_alignment ? info->min_storage_offset_alignment : 1;
    if (first % align)
        vkt_fatal("cross_entropy: the first row %u of the labels is not at a multiple of the storage offset "
                  "alignment (%zu bytes)",
                  row0, align);
    /* labels, row_loss, row_count from row row0 on */
    struct gpu_arg lab = {.buf = labels, .offset = first, .range = end - first};
    struct gpu_arg loss = {.buf = row_loss, .write = 1, .offset = first, .range = end - first};
    struct gpu_arg count = {.buf = row_count, .write = 1, .offset = first, .range = end - first};
    size_t step = align / ops_gcd(row_bytes, align);
    size_t per = info->max_storage_buffer_range / row_bytes;
    per -= per % step;
    if (per == 0)
        vkt_fatal("cross_entropy: one row of %u logits exceeds maxStorageBufferRange (%u bytes)", V,
                  info->max_storage_buffer_range);
    if (per > info->max_workgroup_count[0])
        per = info->max_workgroup_count[0] - info->max_workgroup_count[0] % step;
    struct gpu_buffer *in[1] = {logits};
    /* three passes over a row: 3V loop iterations per invocation */
    if ((size_t)3 * V + 1 <= ops_loop_chunk(g) && ops_texel_usable(g, GPU_BIND_TEXEL_F32, in, 1)) {
        enum gpu_binding_kind kinds[5] = {GPU_BIND_TEXEL_F32, GPU_BIND_STORAGE, GPU_BIND_STORAGE, GPU_BIND_STORAGE,
                                          GPU_BIND_STORAGE};
        struct gpu_kernel *k = ops_texel_kernel(g, "cross_entropy_texel", 5, kinds, sizeof(struct ce_push), 0, NULL);
        for (size_t r0 = 0; r0 < rows; r0 += per) {
            size_t n = rows - r0 < per ? rows - r0 : per;
            struct gpu_arg args[5] = {
                {.buf = logits},
                {.buf = logits, .write = 1, .offset = r0 * row_bytes, .range = n * row_bytes}, lab, loss, count,
            };
            struct ce_push push = {V, (uint32_t)n, scale, (uint32_t)r0};
            gpu_dispatch(g, k, args, &push, (uint32_t)((n + 63) / 64), 1, 1);
        }
        return;
    }
    struct gpu_kernel *k = ops_kernel(g, "cross_entropy", 4, sizeof(struct ce_push), 1);
    for (size_t r0 = 0; r0 < rows; r0 += per) {
        size_t n = rows - r0 < per ? rows - r0 : per;
        struct gpu_arg args[4] = {
            {.buf = logits, .write = 1, .offset = r0 * row_bytes, .range = n * row_bytes}, lab, loss, count,
        };
        struct ce_push push = {V, (uint32_t)n, scale, (uint32_t)r0};
        gpu_dispatch(g, k, args, &push, (uint32_t)n, 1, 1);
    }
}
