/* op_reduce: deterministic fp32 sum and sum of squares of any length.
 *
 * Pass 1 splits x into G = min(1024, ceil(n/WG)) contiguous chunks; each
 * workgroup of WG invocations sums its chunk (Kahan per invocation, then a
 * fixed tree) into scratch[g]. Pass 2 sums the G partials the same way into
 * out[out_index]. G and WG depend only on n and the device, so the result
 * is bit-identical run to run.
 *
 * Error bound (u = 2^-24, the float rounding unit): each invocation's Kahan
 * sum errs by at most 2u·Σ|x| (+O(n u²)), each tree level by u of its
 * partial sums, squaring by u per term, so
 *   |result − exact| ≤ (4 + log2 WG + log2 G)·u·Σ|x_i|   (Σ x_i² for sumsq),
 * about 1.3e-6·Σ|x_i| at WG = 256, G = 1024. tests/test_ops.c checks it.
 *
 * Within the device's limits: G grows past 1024 when a chunk would not fit
 * one storage binding (so results change only on devices with a small
 * storage range), and pass 1 runs as several dispatches of workgroups
 * [g0, g1) within the workgroup count, each binding the range of x those
 * chunks cover; each workgroup sums the same chunk either way.
 *
 * On CPU devices (texel family) pass 1 reads x as vec4 texels
 * (reduce_texel.comp, chunks rounded up to whole texels) when x fits one
 * texel view and the groups one dispatch, with G = min(that G,
 * ceil(n / 32768)) (fewer groups, the same bound).
 *
 * In the reproducible mode (kernel_pick_reduce) both record repro_sum / repro_sumsq instead
 * (include/vktrain/repro.h: the fixed pairwise tree; sumsq squares each
 * element first), and the scratch is sized for them too. */

/* The reproducible sums' run per invocation, 2^8 elements: on lavapipe the
 * sum of squares of the 38.6M-float token table took 560 ms with runs of
 * 2^4 (workgroups' barriers), 240 ms with these. The bits do not depend
 * on it. */
#define REPRO_LOG_RUN 8
#include <stdio.h>
#include <string.h>

#include "ops_internal.h"
#include "ops_texel.h"
#include "vktrain/kernel_select.h"
#include "vktrain/repro.h"
#include "vktrain/util.h"

/* The reproducible sums' workgroup size: 1, 16 or 256 (or the device's
 * most), the first whose runs cover n, so that a short vector (a norm's
 * weight, a bias) is not walked as 65,536 floats, most of them the tree's
 * +0 padding (on lavapipe the clipping's 39 sums of squares of the default
 * recipe took 15-23 ms a step, 8 ms the default's); three sizes, three
 * pipelines per shader. */
static uint32_t repro_wg(const struct gpu *g, size_t n)
{
    uint32_t most = gpu_info(g)->max_workgroup_invocations;
    uint32_t wg = n <= ((size_t)1 << REPRO_LOG_RUN) ? 1 : n <= ((size_t)16 << REPRO_LOG_RUN) ? 16 : 256;
    while (wg > most)
        wg /= 2;
    return wg;
}

struct reduce_push {
    uint32_t n, chunk, out_index, group0, x0;
};

/* The lead-in before a chunk's first float from the aligned offset its
 * binding starts at, at most. */
static size_t lead_in(const struct gpu *g)
{
    size_t align = gpu_binding_alignment(g, GPU_BIND_STORAGE);
    return align > sizeof(float) ? align - sizeof(float) : 0;
}

size_t op_reduce_scratch(const struct gpu *g, size_t n)
{
    size_t wg = gpu_workgroup_1d(g), groups = (n + wg - 1) / wg;
    groups = groups < 1024 ? (groups ? groups : 1) : 1024;
    size_t limit = ops_storage_limit(g), fit = limit > lead_in(g) ? (limit - lead_in(g)) / sizeof(float) : 0;
    if (fit == 0)
        vkt_fatal("reduce: the storage binding limit (%zu bytes) holds no float past its alignment", limit);
    size_t need = groups * fit < n ? (n + fit - 1) / fit : groups;
    if (kernel_path_repro(kernel_pick_reduce(g))) {
        size_t repro = repro_sum_scratch(g, n, repro_wg(g, n), REPRO_LOG_RUN);
        need = repro > need ? repro : need;
    }
    return need;
}

static void reduce(struct gpu *g, const char *variant, struct gpu_buffer *x, size_t n, struct gpu_buffer *scratch,
                   struct gpu_buffer *out, uint32_t out_index)
{
    if (n == 0 || n > UINT32_MAX)
        vkt_fatal("reduce_%s: %zu elements (must be 1 .. 2^32-1)", variant, n);
    if (gpu_buffer_size(x) < n * sizeof(float))
        vkt_fatal("reduce_%s: buffer '%s' holds %zu bytes, fewer than %zu floats", variant, gpu_buffer_name(x),
                  gpu_buffer_size(x), n);
    size_t groups = op_reduce_scratch(g, n);
    if (gpu_buffer_size(scratch) < groups * sizeof(float))
        vkt_fatal("reduce_%s: scratch buffer '%s' holds %zu bytes, needs %zu", variant, gpu_buffer_name(scratch),
                  gpu_buffer_size(scratch), groups * sizeof(float));
    if (gpu_buffer_size(out) < ((size_t)out_index + 1) * sizeof(float))
        vkt_fatal("reduce_%s: output index %u is outside buffer '%s'", variant, out_index, gpu_buffer_name(out));
    uint32_t wg = gpu_workgroup_1d(g);
    int sq = !strcmp(variant, "sumsq");
    struct gpu_kernel_desc d = {.shader = sq ? SHADER_reduce_sumsq : SHADER_reduce_sum, .n_bindings = 2, .bindings = {GPU_BIND_STORAGE, GPU_BIND_STORAGE},
                                .push_size = sizeof(struct reduce_push), .n_spec = 1, .spec = {wg}};
    struct gpu_kernel *k = gpu_kernel_get(g, &d);
    size_t chunk = (n + groups - 1) / groups, limit = ops_storage_limit(g);
    size_t per = (limit - lead_in(g)) / (chunk * sizeof(float)), most = gpu_info(g)->max_workgroup_count[0];
    if (per > most)
        per = most;
    if (ops_texel_usable(g, GPU_BIND_TEXEL_VEC4, &x, 1) && groups <= most) {
        /* At least TEXEL_CHUNK floats per workgroup: on llvmpipe a
         * workgroup's barriers cost about 15 us, which at 1024 groups made
         * the sum of squares of a 2.4M-float gradient take 18 ms. */
        enum { TEXEL_CHUNK = 32768 };
        groups = (n + TEXEL_CHUNK - 1) / TEXEL_CHUNK < groups ? (n + TEXEL_CHUNK - 1) / TEXEL_CHUNK : groups;
        enum shader_id texel = sq ? SHADER_reduce_texel_sumsq : SHADER_reduce_texel_sum;
        enum gpu_binding_kind kinds[2] = {GPU_BIND_TEXEL_VEC4, GPU_BIND_STORAGE};
        struct gpu_arg a1[2] = {{.buf = x}, {.buf = scratch, .write = 1}};
        chunk = (n + groups - 1) / groups;
        struct reduce_push p1 = {(uint32_t)n, (uint32_t)((chunk + 3) / 4 * 4), 0, 0, 0};
        gpu_dispatch(g, ops_texel_kernel(g, texel, 2, kinds, sizeof p1, 1, &wg), a1, &p1, (uint32_t)groups, 1, 1);
    } else if (gpu_buffer_size(x) <= limit && groups <= per) {
        struct gpu_arg a1[2] = {{.buf = x}, {.buf = scratch, .write = 1}};
        struct reduce_push p1 = {(uint32_t)n, (uint32_t)chunk, 0, 0, 0};
        gpu_dispatch(g, k, a1, &p1, (uint32_t)groups, 1, 1);
    } else {
        size_t align = gpu_binding_alignment(g, GPU_BIND_STORAGE);
        for (size_t g0 = 0; g0 < groups; g0 += per) {
            size_t g1 = g0 + per < groups ? g0 + per : groups;
            size_t first = g0 * chunk * sizeof(float), end = (g1 * chunk < n ? g1 * chunk : n) * sizeof(float);
            size_t off = first - first % align;
            struct gpu_arg a1[2] = {{.buf = x, .offset = off, .range = end - off}, {.buf = scratch, .write = 1}};
            struct reduce_push p1 = {(uint32_t)n, (uint32_t)chunk, 0, (uint32_t)g0, (uint32_t)(off / sizeof(float))};
            gpu_dispatch(g, k, a1, &p1, (uint32_t)(g1 - g0), 1, 1);
        }
    }

    d.shader = SHADER_reduce_sum;
    struct gpu_arg a2[2] = {{.buf = scratch}, {.buf = out, .write = 1}};
    struct reduce_push p2 = {(uint32_t)groups, (uint32_t)groups, out_index, 0, 0};
    gpu_dispatch(g, gpu_kernel_get(g, &d), a2, &p2, 1, 1, 1);
}

void op_sum(struct gpu *g, struct gpu_buffer *x, size_t n, struct gpu_buffer *scratch, struct gpu_buffer *out,
            uint32_t out_index)
{
    if (kernel_path_repro(kernel_pick_reduce(g))) {
        repro_sum(g, x, n, scratch, out, out_index, repro_wg(g, n), REPRO_LOG_RUN);
        return;
    }
    reduce(g, "sum", x, n, scratch, out, out_index);
}

void op_sumsq(struct gpu *g, struct gpu_buffer *x, size_t n, struct gpu_buffer *scratch, struct gpu_buffer *out,
              uint32_t out_index)
{
    if (kernel_path_repro(kernel_pick_reduce(g))) {
        repro_sumsq(g, x, n, scratch, out, out_index, repro_wg(g, n), REPRO_LOG_RUN);
        return;
    }
    reduce(g, "sumsq", x, n, scratch, out, out_index);
}
