/* ops_common: the checks and dispatch shapes the op wrappers share, and
 * the storage binding limit op_matmul plans for (with its test knob). */
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

struct gpu_kernel *ops_kernel(struct gpu *g, const char *shader, int n_bind, uint32_t push_size, int wg_spec)
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

static size_t storage_limit_override;

void ops_set_storage_limit(size_t bytes)
{
    storage_limit_override = bytes;
}

size_t ops_storage_limit(const struct gpu *g)
{
    size_t dev = gpu_info(g)->max_storage_buffer_range;
    return storage_limit_override && storage_limit_override < dev ? storage_limit_override : dev;
}

void ops_dispatch_elements(struct gpu *g, struct gpu_kernel *k, const struct gpu_arg *args, const void *push,
                           size_t n, int strided)
{
    size_t wg = gpu_workgroup_1d(g), groups = (n + wg - 1) / wg;
    size_t cap = strided ? 4096 : gpu_info(g)->max_workgroup_count[0];
    if (!strided && groups > cap)
        vkt_fatal("%zu elements need %zu workgroups, over the device limit %zu", n, groups, cap);
    gpu_dispatch(g, k, args, push, (uint32_t)(groups < cap ? groups : cap), 1, 1);
}
