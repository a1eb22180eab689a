/* repro_samples: precision: reproducible's sum over the samples of a
 * micro-batch, inside each parameter gradient (docs/reproducible.md, "Sums
 * over samples"). The micro-batch runs as one batch of B = 2^L sequences
 * of T rows; a reduction over rows into a gradient (matmul tn, the column
 * sums, the embedding backward: each adds rows to the old value in row
 * order) takes each sequence's rows on their own and, after each
 * sequence, combines its value with a stack in the canonical pairwise
 * tree over the sample index: in its own loop (the texel family's matmul
 * tn, the column sums: repro_push.comp's loop in the shader) or cut here
 * at the sequences' boundaries with a repro_push dispatch after each. So
 * the micro-batch's gradient is the tree over its samples of each
 * sample's own sum, whatever B: the same bits as B batches of one
 * sequence. It records dispatches and never submits. */
#include "vktrain/gpu.h"
#include "vktrain/repro.h"
#include "vktrain/util.h"

size_t repro_stack_floats(size_t n, uint32_t levels)
{
    return (n + 3) / 4 * 4 * levels;
}

int repro_stack_texels(const struct gpu *g)
{
    return gpu_kernel_class(g) == GPU_KERNELS_TEXEL && gpu_info(g)->image_vec4;
}

void repro_push(struct gpu *g, struct gpu_buffer *grad, struct gpu_buffer *stack, size_t n, uint32_t levels, uint32_t j)
{
    if (!levels)
        return;
    if (gpu_buffer_size(grad) < n * 4 || gpu_buffer_size(stack) < repro_stack_floats(n, levels) * 4)
        vkt_fatal("repro_push: %zu elements of %u levels: the gradient '%s' (%zu bytes) or its stack '%s' (%zu bytes) "
                  "is too small",
                  n, levels, gpu_buffer_name(grad), gpu_buffer_size(grad), gpu_buffer_name(stack),
                  gpu_buffer_size(stack));
    /* CPU devices: a group of four elements per invocation, through RGBA32F
     * storage texels (n % 4 == 0) */
    int v4 = n % 4 == 0 && repro_stack_texels(g);
    struct gpu_kernel_desc d = {
        .shader = v4 ? SHADER_repro_push_vec4 : SHADER_repro_push,
        .n_bindings = 2,
        .bindings = {v4 ? GPU_BIND_IMAGE_VEC4 : GPU_BIND_STORAGE, v4 ? GPU_BIND_IMAGE_VEC4 : GPU_BIND_STORAGE},
        .push_size = 12};
    struct gpu_kernel *k = gpu_kernel_get(g, &d);
    /* Windows of elements within the workgroup count and both bindings,
     * starting at multiples of 256 elements (every offset aligned, and
     * the stack's windows at whole groups of four). */
    enum gpu_binding_kind kind = d.bindings[0];
    size_t limit = gpu_binding_limit(g, kind), align = gpu_binding_alignment(g, kind);
    size_t per = (size_t)gpu_info(g)->max_workgroup_count[0] * 64;
    if (limit / (4 * levels) < per)
        per = limit / (4 * levels);
    per -= per % 256;
    if (per == 0 || align > 1024)
        vkt_fatal("repro_push: the stack of '%s' (%u levels) does not fit the device's bindings (%zu bytes, aligned "
                  "to %zu)",
                  gpu_buffer_name(grad), levels, limit, align);
    for (size_t o0 = 0; o0 < n; o0 += per) {
        size_t m = n - o0 < per ? n - o0 : per;
        struct gpu_arg args[2] = {{grad, 1, o0 * 4, m * 4},
                                  {stack, 1, o0 * levels * 4, repro_stack_floats(m, levels) * 4}};
        uint32_t push[3] = {(uint32_t)m, levels, j};
        gpu_dispatch(g, k, args, push, (uint32_t)((m / (v4 ? 4 : 1) + 63) / 64), 1, 1);
    }
}

struct gpu_buffer *repro_sample_stack(const struct gpu *g, struct gpu_buffer *grad, uint32_t first, uint32_t rows,
                                      uint32_t *sample_rows, uint32_t *levels)
{
    uint32_t T = gpu_repro_sample_rows(g), B = gpu_repro_samples(g);
    struct gpu_buffer *stack = gpu_buffer_stack(grad);
    if (!T || B < 2 || !stack)
        return NULL;
    if ((uint64_t)first + rows > (uint64_t)T * B)
        vkt_fatal("rows [%u, %u) into '%s': past the micro-batch's %u samples of %u rows", first, first + rows,
                  gpu_buffer_name(grad), B, T);
    *sample_rows = T;
    for (*levels = 0; (1u << *levels) < B;)
        ++*levels;
    return stack;
}

void repro_param_rows(struct gpu *g, struct gpu_buffer *grad, uint32_t first, uint32_t rows, repro_rows_fn fn,
                      void *ctx)
{
    uint32_t T, levels;
    struct gpu_buffer *stack = repro_sample_stack(g, grad, first, rows, &T, &levels);
    if (!stack) {
        fn(g, ctx, 0, rows);
        return;
    }
    size_t n = gpu_buffer_size(grad) / 4;
    for (uint32_t r = 0; r < rows;) {
        uint32_t end = ((first + r) / T + 1) * T - first;
        end = end < rows ? end : rows;
        fn(g, ctx, r, end);
        if ((first + end) % T == 0)
            repro_push(g, grad, stack, n, levels, (first + end) / T - 1);
        r = end;
    }
}
