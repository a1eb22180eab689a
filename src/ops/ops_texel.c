/* ops_texel: see ops_texel.h. */
#include "ops_internal.h"
#include "ops_texel.h"

int ops_texel_usable(const struct gpu *g, enum gpu_binding_kind kind, struct gpu_buffer *const *bufs, int n)
{
    if (gpu_kernel_class(g) != GPU_KERNELS_TEXEL)
        return 0;
    size_t limit = gpu_texel_limit(g, kind);
    for (int i = 0; i < n; i++)
        if (bufs[i] && gpu_buffer_size(bufs[i]) > limit)
            return 0;
    return 1;
}

int ops_texel_rows_fit(const struct gpu *g, enum gpu_binding_kind kind, size_t row_bytes)
{
    size_t align = gpu_binding_alignment(g, kind);
    return gpu_kernel_class(g) == GPU_KERNELS_TEXEL &&
           align / ops_gcd(align, row_bytes) * row_bytes <= gpu_texel_limit(g, kind);
}

int ops_texel_width(int vec4_shape, int vec4_fits, int f32_fits, int f32_always)
{
    if (f32_always && !f32_fits)
        return 0;
    if (vec4_shape && vec4_fits)
        return 4;
    return f32_fits ? 1 : 0;
}

struct gpu_kernel *ops_texel_kernel(struct gpu *g, enum shader_id shader, int n_bind,
                                    const enum gpu_binding_kind *kinds, uint32_t push_size, int n_spec,
                                    const uint32_t *spec)
{
    struct gpu_kernel_desc d = {.shader = shader, .n_bindings = n_bind, .push_size = push_size, .n_spec = n_spec};
    for (int i = 0; i < n_bind; i++)
        d.bindings[i] = kinds[i];
    for (int i = 0; i < n_spec; i++)
        d.spec[i] = spec[i];
    return gpu_kernel_get(g, &d);
}

uint32_t ops_loop_chunk(const struct gpu *g)
{
    uint32_t limit = gpu_info(g)->max_loop_iterations;
    return limit ? limit - limit / 16 : UINT32_MAX;
}

struct gpu_kernel *ops_texel_variant(struct gpu *g, const enum shader_id *widths, int width, int n_tex, unsigned f32_mask,
                                     int n_bind, uint32_t push_size, int n_spec, const uint32_t *spec)
{
    enum gpu_binding_kind kinds[GPU_MAX_BINDINGS];
    for (int i = 0; i < n_bind; i++)
        kinds[i] = i >= n_tex                             ? GPU_BIND_STORAGE
                   : width == 4 && !(f32_mask & (1u << i)) ? GPU_BIND_TEXEL_VEC4
                                                           : GPU_BIND_TEXEL_F32;
    return ops_texel_kernel(g, widths[width == 4], n_bind, kinds, push_size, n_spec, spec);
}
