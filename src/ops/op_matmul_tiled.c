/* op_matmul_tiled: the tiled (shared-memory, GPU) matmul's choices for a
 * product, which op_matmul.c dispatches: the tile configuration for the
 * device and the grid (ops_tiled_config), and how many parts a weight
 * gradient's (tn) reduction is split into (ops_tiled_parts), whose sizing
 * op_matmul_tn_scratch shares with the dispatch; and the cooperative-
 * matrix kernel's configuration (ops_coop_config). Reads the device's
 * limits and VKTRAIN_TILED_TILE / VKTRAIN_TILED_BK /
 * VKTRAIN_TILED_WARPTILE / VKTRAIN_TILED_SPLITK /
 * VKTRAIN_COOPMAT_SUBGROUPS / VKTRAIN_COOPMAT_TILE (benchmarks, tests);
 * records nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"
#include "ops_texel.h"
#include "vktrain/kernel_select.h"
#include "vktrain/util.h"

/* Shared bytes of a configuration: 2 operands x 2 buffers x bk steps x
 * (tile + 4 floats of padding). */
static size_t tiled_shared(uint32_t tile, uint32_t bk)
{
    return (size_t)2 * 2 * bk * (tile + 4) * sizeof(float);
}
/* A grid of fewer large tiles than this leaves compute units of a large
 * GPU idle: such products use 64 x 64 tiles, or, tn into a weight
 * gradient, split-k. On an H200 (132 multiprocessors, bench_matmul with
 * each tile forced) 128 x 128 tiles were faster at grids of 384 and more
 * (nt, nn: 1.04-1.3x) and 64 x 64 at 144 and fewer (nt, nn at 96:
 * 1.1-1.3x; tn at 36-144: 1.15-2x). */
#define TILED_WIDE_GRID 256
/* Split-k (tn): parts enough for this many large tiles, each part at
 * least TILED_PART_MIN rows of the reduction, at most TILED_MAX_PARTS. On
 * an H200, tn 8192 x 3072 x 768 (144 tiles) ran at 37.0 TFLOP/s in 8
 * parts against 32.9 in 4 (what 512 tiles gave), 27.9 in none. */
#define TILED_FULL_GRID 1024
#define TILED_PART_MIN 1024
#define TILED_MAX_PARTS 16

/* The large configuration (128 x 128 tiles, 8 x 8 per invocation) where
 * the device has 256 invocations and its shared memory, and the grid is
 * wide; the small one (64 x 64, 4 x 4) for narrow grids; the fallback
 * (64 x 64, 8 x 8, 64 invocations) below those limits. Workgroups are
 * whole subgroups. */
static int tiled_big(const struct gpu_device_info *info)
{
    return info->max_workgroup_invocations >= 256 && info->shared_memory >= tiled_shared(128, 8) &&
           256 % info->subgroup_size == 0;
}
static struct ops_tiled_config tiled_choice(const struct gpu_device_info *info, const char *name, size_t rows,
                                            size_t cols, int split)
{
    int big = tiled_big(info);
    /* VKTRAIN_TILED_TILE=64 or 128 (benchmarks on a GPU: which grids the
     * large tiles leave idle) */
    const char *force = kernel_env(KENV_TILED_TILE);
    if (big && force)
        return !strcmp(force, "128") ? (struct ops_tiled_config){256, 128, 2, 8, 0}
                                     : (struct ops_tiled_config){256, 64, 1, 8, 0};
    if (big && (split || ceil_div(rows, 128) * ceil_div(cols, 128) >= TILED_WIDE_GRID))
        return (struct ops_tiled_config){256, 128, 2, 8, 0};
    if (big)
        return (struct ops_tiled_config){256, 64, 1, 8, 0};
    if (info->shared_memory < tiled_shared(64, 8))
        vkt_fatal("%s: the tiled kernel needs %zu bytes of shared memory, more than the %u bytes of %s", name,
                  tiled_shared(64, 8), info->shared_memory, info->name);
    return (struct ops_tiled_config){64, 64, 2, 8, 0};
}

/* The configuration, and its step along the reduction: 8, or
 * VKTRAIN_TILED_BK=16 (benchmarks on a GPU: half the barriers per product,
 * twice the shared memory), which the kernel's vec4 variants take (the
 * others keep 8) where the device's shared memory holds it; with
 * VKTRAIN_TILED_WARPTILE=1 (benchmarks on a GPU) the large configuration
 * maps each 32 invocations to a 32 x 64 block of the tile. */
struct ops_tiled_config ops_tiled_config(const struct gpu_device_info *info, const char *name, size_t rows, size_t cols,
                                         int split)
{
    struct ops_tiled_config c = tiled_choice(info, name, rows, cols, split);
    const char *bk = kernel_env(KENV_TILED_BK);
    if (bk && !strcmp(bk, "16")) {
        if (tiled_shared(c.tile, 16) > info->shared_memory)
            vkt_fatal("%s: steps of 16 (VKTRAIN_TILED_BK) need %zu bytes of shared memory, more than the %u of %s",
                      name, tiled_shared(c.tile, 16), info->shared_memory, info->name);
        c.bk = 16;
    }
    c.warp_tiles = kernel_env_flag(KENV_TILED_WARPTILE, 0);
    return c;
}

/* Split-k of tn on the tiled family: the number of parts of the
 * reduction (1: none) and *kpart the rows of each, for a product of
 * rows x cols outputs over red whose three operands span bytes[] of their
 * buffers (their first elements' aligned offsets included). Where the
 * device takes 128 x 128 tiles (tiled_big) and their grid is narrow
 * (< TILED_WIDE_GRID), parts enough for TILED_FULL_GRID tiles, each of at
 * least TILED_PART_MIN rows; VKTRAIN_TILED_SPLITK=N forces N parts (1:
 * none; tests and benchmarks) wherever the reduction has 8 rows per part.
 * The cooperative-matrix kernel (16-bit matmul inputs) splits the same
 * way on either family. None where the product would be split into blocks (an operand, or the
 * parts' products, over the binding limit; a part's walk over the loop
 * limit; a grid over the workgroup counts). */
uint32_t ops_tiled_parts(const struct gpu *g, size_t rows, size_t cols, size_t red, const size_t *bytes, size_t *kpart)
{
    const struct gpu_device_info *info = gpu_info(g);
    *kpart = red;
    if ((gpu_kernel_class(g) != GPU_KERNELS_TILED && gpu_matmul_inputs(g) == GPU_MATMUL_FP32) ||
        kernel_path_repro(kernel_pick_matmul(g)) ||
        !tiled_big(info))
        return 1;
    size_t grid = ceil_div(rows, 128) * ceil_div(cols, 128), parts = 1;
    const char *force = kernel_env(KENV_TILED_SPLITK);
    if (force) {
        parts = min_size(strtoul(force, NULL, 10), red / 8);
    } else if (grid < TILED_WIDE_GRID) {
        parts = min_size(min_size(ceil_div(TILED_FULL_GRID, grid), red / TILED_PART_MIN), TILED_MAX_PARTS);
    }
    parts = min_size(parts, info->max_workgroup_count[2]);
    if (parts < 2)
        return 1;
    /* each part whole steps of 8 rows of the kernel; no empty part */
    size_t part = ceil_div(ceil_div(red, parts), 8) * 8, limit = ops_storage_limit(g);
    parts = ceil_div(red, part);
    int fits = parts * rows * cols * sizeof(float) <= limit && part <= ops_loop_chunk(g) &&
               rows <= (size_t)info->max_workgroup_count[1] * 128 && cols <= (size_t)info->max_workgroup_count[0] * 128;
    for (int i = 0; i < 3; i++)
        fits = fits && bytes[i] <= limit;
    if (!fits)
        return 1;
    *kpart = part;
    return (uint32_t)parts;
}

/* Matrices per subgroup, RM x RN (the workgroup tile is 2·RM·CM x
 * 2·RN·CN): 2 x 2, or VKTRAIN_COOPMAT_TILE=RMxRN, each 1 to 4 (benchmarks
 * on a GPU: which tile suits it), where the device's shared memory holds
 * the tiles (16-bit, rows padded by 8, two buffers) and the staging. Workgroups of
 * whole subgroups of any size the driver picks, 4 or more;
 * VKTRAIN_COOPMAT_SUBGROUPS=1|2|8 (tests) makes fewer, which take the
 * subgroup tiles in turns, or more, whose extra ones only load. One step
 * of the kernel walks 2·CK of the reduction, its tile loads a loop of
 * 2·CK·(BM + BN) / WG iterations (32 more counted for the matrices' own)
 * in each of its rounds. */
struct ops_coop_config ops_coop_config(const struct gpu *g, const char *name, const uint32_t *cshape)
{
    const struct gpu_device_info *info = gpu_info(g);
    struct ops_coop_config c = {.rm_rn = {2, 2}, .walk = SIZE_MAX};
    const char *env = kernel_env(KENV_COOPMAT_TILE); /* checked: RMxRN, each 1 to 4 */
    char x;
    unsigned rm, rn;
    if (env && sscanf(env, "%u%c%u", &rm, &x, &rn) == 3)
        c.rm_rn[0] = rm, c.rm_rn[1] = rn;
    const char *sg = kernel_env(KENV_COOPMAT_SUBGROUPS);
    uint32_t subgroups = sg ? (uint32_t)atoi(sg) : 4;
    c.wg = subgroups * info->subgroup_max;
    if (c.wg > info->max_workgroup_invocations)
        vkt_fatal("%s: %u subgroups of %u exceed the device's %u invocations per workgroup", name, subgroups,
                  info->subgroup_max, info->max_workgroup_invocations);

    size_t bm = 2 * (size_t)c.rm_rn[0] * cshape[0], bn = 2 * (size_t)c.rm_rn[1] * cshape[1], bk = 2 * (size_t)cshape[2];
    size_t a = bm * (bk + 8) > bk * (bm + 8) ? bm * (bk + 8) : bk * (bm + 8);
    size_t b = bn * (bk + 8) > bk * (bn + 8) ? bn * (bk + 8) : bk * (bn + 8);
    size_t bytes = (a + b) * 2 * 2 + 4 * (size_t)cshape[0] * cshape[1] * sizeof(float); /* double-buffered */
    if (bytes > info->shared_memory)
        vkt_fatal("%s: the cooperative-matrix kernel's %u x %u matrices per subgroup need %zu bytes of shared memory, "
                  "more than the %u of %s",
                  name, c.rm_rn[0], c.rm_rn[1], bytes, info->shared_memory, info->name);
    c.tile[0] = bm, c.tile[1] = bn;

    size_t ns = c.wg / info->subgroup_size, rounds = ceil_div(4, ns ? ns : 1);
    size_t per_step = rounds * (ceil_div(bk * (bm + bn), c.wg) + 32);
    if (ops_loop_chunk(g) != UINT32_MAX)
        c.walk = ops_loop_chunk(g) / per_step * bk;
    return c;
}
