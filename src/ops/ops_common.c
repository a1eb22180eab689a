/* ops_common: the checks and dispatch shapes the op wrappers share, the
 * split of element-wise work into ranges within the binding limits, and
 * the storage binding limit op_matmul plans for. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops_internal.h"
#include "vktrain/util.h"

void ops_check(const char *op, const char *role, const struct gpu_buffer *b, size_t bytes)
{
    if (!b)
        vkt_fatal("%s: no buffer given for %s", op, role);
    if (gpu_buffer_size(b) < bytes)
        vkt_fatal("%s: %s buffer '%s' holds %zu bytes, the shape needs %zu", op, role, gpu_buffer_name(b),
                  gpu_buffer_size(b), bytes);
}

struct gpu_kernel *ops_kernel(struct gpu *g, enum shader_id shader, int n_bind, uint32_t push_size, int wg_spec)
{
    struct gpu_kernel_desc d = {.shader = shader, .n_bindings = n_bind, .push_size = push_size};
    for (int i = 0; i < n_bind; i++)
        d.bindings[i] = GPU_BIND_STORAGE;
    if (wg_spec) {
        d.n_spec = 1;
        d.spec[0] = gpu_workgroup_1d(g);
    }
    return gpu_kernel_get(g, &d);
}

int ops_repro_runs(const struct gpu *g) { return gpu_kernel_class(g) == GPU_KERNELS_TEXEL; }

struct gpu_kernel *ops_repro_kernel(struct gpu *g, const enum shader_id *walks, int n_bind, int n_tex,
                                    uint32_t push_size)
{
    enum shader_id shader = walks[ops_repro_runs(g)];
    if (!ops_repro_runs(g) || n_tex == 0)
        return ops_kernel(g, shader, n_bind, push_size, 1);
    struct gpu_kernel_desc d = {.shader = shader, .n_bindings = n_bind, .push_size = push_size, .n_spec = 1};
    for (int i = 0; i < n_bind; i++)
        d.bindings[i] = i < n_tex ? GPU_BIND_TEXEL_F32 : GPU_BIND_STORAGE;
    d.spec[0] = gpu_workgroup_1d(g);
    return gpu_kernel_get(g, &d);
}

size_t ops_storage_limit(const struct gpu *g)
{
    return gpu_info(g)->max_storage_buffer_range;
}

void ops_dispatch_elements(struct gpu *g, struct gpu_kernel *k, const struct gpu_arg *args, const void *push,
                           size_t n, int strided)
{
    size_t wg = gpu_workgroup_1d(g), groups = (n + wg - 1) / wg;
    size_t cap = gpu_info(g)->max_workgroup_count[0];
    if (strided && cap > 4096)
        cap = 4096;
    if (!strided && groups > cap)
        vkt_fatal("kernel '%s': %zu elements need %zu workgroups, over the device limit %zu", gpu_kernel_name(k), n,
                  groups, cap);
    gpu_dispatch(g, k, args, push, (uint32_t)(groups < cap ? groups : cap), 1, 1);
}

size_t ops_gcd(size_t a, size_t b) { return b ? ops_gcd(b, a % b) : a; }

static size_t binding_limit(const struct gpu *g, const struct gpu_kernel *k, int i)
{
    return gpu_binding_limit(g, gpu_kernel_binding(k, i));
}

size_t ops_range_units(const struct gpu *g, const struct gpu_kernel *k, const struct gpu_arg *args,
                       const size_t *unit_bytes, size_t *step)
{
    int n_bind = gpu_kernel_binding_count(k);
    size_t s = 1, most = SIZE_MAX;
    for (int i = 0; i < n_bind; i++) {
        if (!unit_bytes[i])
            continue;
        size_t align = gpu_binding_alignment(g, gpu_kernel_binding(k, i));
        if (args[i].offset % align)
            vkt_fatal("kernel '%s': binding %d starts at byte %zu of buffer '%s', not a multiple of the offset "
                      "alignment %zu",
                      gpu_kernel_name(k), i, args[i].offset, gpu_buffer_name(args[i].buf), align);
        size_t a = align / ops_gcd(unit_bytes[i], align); /* units from one aligned offset to the next */
        s = s / ops_gcd(s, a) * a;
        size_t fit = binding_limit(g, k, i) / unit_bytes[i];
        if (fit < most)
            most = fit;
    }
    for (int i = 0; i < n_bind; i++)
        if (unit_bytes[i] && s * unit_bytes[i] > binding_limit(g, k, i))
            vkt_fatal("kernel '%s': binding %d (buffer '%s') needs ranges of %zu bytes at least (the smallest "
                      "step between aligned offsets), over this device's binding limit of %zu bytes",
                      gpu_kernel_name(k), i, gpu_buffer_name(args[i].buf), s * unit_bytes[i],
                      binding_limit(g, k, i));
    *step = s;
    return most - most % s;
}

struct gpu_arg ops_range_arg(const struct gpu *g, const struct gpu_kernel *k, int i, const struct gpu_arg *args,
                             size_t u0, size_t nu, size_t total, size_t unit_bytes)
{
    struct gpu_arg a = args[i];
    size_t given = a.range ? a.range : gpu_buffer_size(a.buf) - a.offset;
    if (!unit_bytes || (nu == total && given <= binding_limit(g, k, i)))
        return a;
    a.offset += u0 * unit_bytes;
    size_t left = gpu_buffer_size(a.buf) - a.offset;
    a.range = nu * unit_bytes < left ? nu * unit_bytes : left;
    return a;
}

/* ops_elements and ops_rows: ranges of at most `cap` units; per range,
 * the count (elements, or rows when unit is 1) into push when count_at is
 * set, and either a strided grid (per_group 0) or ceil(count /
 * per_group) workgroups. */
static void split(struct gpu *g, struct gpu_kernel *k, const struct gpu_arg *args, const size_t *unit_bytes,
                  void *push, int count_in_push, size_t n, size_t unit, size_t cap, size_t per_invocation,
                  size_t per_group)
{
    size_t step, most = ops_range_units(g, k, args, unit_bytes, &step);
    if (most > cap)
        most = cap - cap % step;
    if (most == 0)
        vkt_fatal("kernel '%s': %zu rows, the step between aligned offsets of its bindings, need more than the "
                  "device's %u workgroups",
                  gpu_kernel_name(k), step, gpu_info(g)->max_workgroup_count[0]);
    size_t units = (n + unit - 1) / unit;
    for (size_t u0 = 0; u0 < units; u0 += most) {
        size_t nu = units - u0 < most ? units - u0 : most;
        size_t count = u0 + nu == units ? n - u0 * unit : nu * unit;
        struct gpu_arg a[GPU_MAX_BINDINGS];
        for (int i = 0; i < gpu_kernel_binding_count(k); i++)
            a[i] = ops_range_arg(g, k, i, args, u0, nu, units, unit_bytes[i]);
        if (count_in_push) {
            uint32_t c = (uint32_t)count;
            memcpy(push, &c, sizeof c);
        }
        if (per_group)
            gpu_dispatch(g, k, a, push, (uint32_t)((count + per_group - 1) / per_group), 1, 1);
        else
            ops_dispatch_elements(g, k, a, push, (count + per_invocation - 1) / per_invocation, 1);
    }
}

void ops_elements(struct gpu *g, struct gpu_kernel *k, const struct gpu_arg *args, const size_t *unit_bytes,
                  void *push, size_t n, size_t unit, size_t per_invocation)
{
    split(g, k, args, unit_bytes, push, 1, n, unit, UINT32_MAX / unit, per_invocation, 0);
}

void ops_rows(struct gpu *g, struct gpu_kernel *k, const struct gpu_arg *args, const size_t *row_bytes, void *push,
              int count_in_push, size_t rows, size_t rows_per_group)
{
    size_t cap = (size_t)gpu_info(g)->max_workgroup_count[0] * rows_per_group;
    split(g, k, args, row_bytes, push, count_in_push, rows, 1, cap, 1, rows_per_group);
}
