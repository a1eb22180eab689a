/* op_flash_attention: causal GQA self-attention (block-causal by document)
 * without the (T,T) probabilities: the forward keeps a per-row log-sum-exp,
 * the backward recomputes the probabilities from q, k and it
 * (shaders/default/flash_attention.comp). Memory is linear in T.
 *
 * In the reproducible mode (kernel_pick_attention) the same ops record
 * shaders/reproducible/repro_attention.comp and _bwd.comp instead (repro_flash_attention and its
 * backward, include/vktrain/repro.h): exact per row, the forward in two
 * walks over the keys (max; the sum and the weighted values, fused), with
 * the same bindings and the same dispatch shapes; where the device's loop
 * limit cuts the second walk into dispatches, it is two walks (sum, then
 * values) that compute the same bits, with the sum held in the second
 * half of lse (op_flash_attention_lse_floats).
 *
 * Within the device's limits by construction: sequences are split over
 * dispatches so workgroup counts stay under maxComputeWorkGroupCount and
 * every storage binding larger than the storage range is bound as the
 * range of its sequences; the walk over keys (or query rows) is split over
 * dispatches to stay under a loop limit (llvmpipe). Never allocates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_attention.h"
#include "ops_internal.h"
#include "ops_texel.h"
#include "vktrain/kernel_select.h"
#include "vktrain/repro.h"
#include "vktrain/util.h"

/* The shader's push constants: the attention head, then where each
 * binding's slice starts (floats from its binding), the walk [w0, w1),
 * (reproducible sum) log2 of the keys in a part of its walk, and the
 * sliding window (0: none; attention_docs.glsl), Gemma 2's soft-capping
 * (0: none; softcap.glsl). */
struct flash_push {
    struct attention_push a;
    uint32_t o_off, doc_off, l_off, x_off, g1_off, g2_off, w0, w1, wlog, window;
    float softcap;
};

/* Head sizes up to this many floats keep their vectors in registers. */
#define FLASH_MAX_HD 256

static uint32_t walk_override;

void op_flash_attention_set_walk(uint32_t n) { walk_override = n; }

/* The most keys (or query rows) one invocation walks in one dispatch when
 * each costs per_step loop iterations, fixed more per invocation. */
static uint32_t walk_chunk(const struct gpu *g, uint32_t per_step, uint32_t fixed)
{
    uint32_t limit = ops_loop_chunk(g), n = limit > fixed ? (limit - fixed) / per_step : 1;
    if (walk_override && walk_override < n)
        n = walk_override;
    return n ? n : 1;
}

/* Records kernel k over sequences [0, B) and the walk [0, walk) in parts;
 * rows_per_seq invocations per sequence. */
static void flash_dispatch(struct gpu *g, const char *op, struct gpu_kernel *k, struct attention_bind *binds, int n,
                           struct flash_push *push, size_t rows_per_seq, uint32_t walk, uint32_t chunk)
{
    attention_dispatch(g, op, k, binds, n, &push->a, push, rows_per_seq, walk, chunk, &push->w0);
}

/* The attention kernels: base (flash_attention, flash_block, or the
 * reproducible repro_attention, repro_attention_bwd,
 * repro_attention_block), stage, family (texel views or storage), texel
 * width, and for the block kernels the largest head size and the rows of
 * a block: every variant of those shaders, by its constant. */
struct flash_variant {
    const char *base, *stage;
    int texel, width;
    uint32_t hd_max, rows;
    enum shader_id id;
};
static const struct flash_variant flash_variants[] = {
    {"flash_attention", "fwd", 1, 4, 0, 0, SHADER_flash_attention_fwd_texel_vec4},
    {"flash_attention", "fwd", 1, 1, 0, 0, SHADER_flash_attention_fwd_texel_scalar},
    {"flash_attention", "fwd4", 1, 4, 0, 0, SHADER_flash_attention_fwd4_texel_vec4},
    {"flash_attention", "fwd", 0, 4, 0, 0, SHADER_flash_attention_fwd_storage_vec4},
    {"flash_attention", "fwd", 0, 1, 0, 0, SHADER_flash_attention_fwd_storage_scalar},
    {"flash_attention", "rows", 1, 4, 0, 0, SHADER_flash_attention_rows_texel_vec4},
    {"flash_attention", "rows", 1, 1, 0, 0, SHADER_flash_attention_rows_texel_scalar},
    {"flash_attention", "rows", 0, 4, 0, 0, SHADER_flash_attention_rows_storage_vec4},
    {"flash_attention", "rows", 0, 1, 0, 0, SHADER_flash_attention_rows_storage_scalar},
    {"flash_attention", "dq", 1, 4, 0, 0, SHADER_flash_attention_dq_texel_vec4},
    {"flash_attention", "dq", 1, 1, 0, 0, SHADER_flash_attention_dq_texel_scalar},
    {"flash_attention", "dq2", 1, 4, 0, 0, SHADER_flash_attention_dq2_texel_vec4},
    {"flash_attention", "dq", 0, 4, 0, 0, SHADER_flash_attention_dq_storage_vec4},
    {"flash_attention", "dq", 0, 1, 0, 0, SHADER_flash_attention_dq_storage_scalar},
    {"flash_attention", "dkv", 1, 4, 0, 0, SHADER_flash_attention_dkv_texel_vec4},
    {"flash_attention", "dkv", 1, 1, 0, 0, SHADER_flash_attention_dkv_texel_scalar},
    {"flash_attention", "dkv2", 1, 4, 0, 0, SHADER_flash_attention_dkv2_texel_vec4},
    {"flash_attention", "dk", 0, 4, 0, 0, SHADER_flash_attention_dk_storage_vec4},
    {"flash_attention", "dk", 0, 1, 0, 0, SHADER_flash_attention_dk_storage_scalar},
    {"flash_attention", "dv", 0, 4, 0, 0, SHADER_flash_attention_dv_storage_vec4},
    {"flash_attention", "dv", 0, 1, 0, 0, SHADER_flash_attention_dv_storage_scalar},
    {"flash_block", "dkv", 0, 1, 32, 32, SHADER_flash_block_dkv32x32_storage_scalar},
    {"flash_block", "dkv", 0, 1, 64, 32, SHADER_flash_block_dkv64x32_storage_scalar},
    {"flash_block", "dkv", 0, 1, 64, 16, SHADER_flash_block_dkv64x16_storage_scalar},
    {"flash_block", "dkv", 0, 1, 128, 16, SHADER_flash_block_dkv128x16_storage_scalar},
    {"flash_block", "dkv", 0, 1, 128, 8, SHADER_flash_block_dkv128x8_storage_scalar},
    {"flash_block", "dk", 0, 1, 64, 16, SHADER_flash_block_dk64x16_storage_scalar},
    {"flash_block", "dv", 0, 1, 64, 16, SHADER_flash_block_dv64x16_storage_scalar},
    {"flash_block", "dq", 0, 1, 32, 32, SHADER_flash_block_dq32x32_storage_scalar},
    {"flash_block", "dq", 0, 1, 64, 32, SHADER_flash_block_dq64x32_storage_scalar},
    {"flash_block", "dq", 0, 1, 64, 16, SHADER_flash_block_dq64x16_storage_scalar},
    {"flash_block", "dq", 0, 1, 128, 16, SHADER_flash_block_dq128x16_storage_scalar},
    {"flash_block", "dq", 0, 1, 128, 8, SHADER_flash_block_dq128x8_storage_scalar},
    {"flash_block", "fwd", 0, 1, 32, 32, SHADER_flash_block_fwd32x32_storage_scalar},
    {"flash_block", "fwd", 0, 1, 64, 32, SHADER_flash_block_fwd64x32_storage_scalar},
    {"flash_block", "fwd", 0, 1, 64, 16, SHADER_flash_block_fwd64x16_storage_scalar},
    {"flash_block", "fwd", 0, 1, 128, 16, SHADER_flash_block_fwd128x16_storage_scalar},
    {"flash_block", "fwd", 0, 1, 128, 8, SHADER_flash_block_fwd128x8_storage_scalar},
    {"repro_attention", "max", 1, 4, 0, 0, SHADER_repro_attention_max_texel_vec4},
    {"repro_attention", "max", 1, 1, 0, 0, SHADER_repro_attention_max_texel_scalar},
    {"repro_attention", "max", 0, 4, 0, 0, SHADER_repro_attention_max_storage_vec4},
    {"repro_attention", "max", 0, 1, 0, 0, SHADER_repro_attention_max_storage_scalar},
    {"repro_attention", "sum", 1, 4, 0, 0, SHADER_repro_attention_sum_texel_vec4},
    {"repro_attention", "sum", 1, 1, 0, 0, SHADER_repro_attention_sum_texel_scalar},
    {"repro_attention", "sum", 0, 4, 0, 0, SHADER_repro_attention_sum_storage_vec4},
    {"repro_attention", "sum", 0, 1, 0, 0, SHADER_repro_attention_sum_storage_scalar},
    {"repro_attention", "acc", 1, 4, 0, 0, SHADER_repro_attention_acc_texel_vec4},
    {"repro_attention", "acc", 1, 1, 0, 0, SHADER_repro_attention_acc_texel_scalar},
    {"repro_attention", "acc", 0, 4, 0, 0, SHADER_repro_attention_acc_storage_vec4},
    {"repro_attention", "acc", 0, 1, 0, 0, SHADER_repro_attention_acc_storage_scalar},
    {"repro_attention", "fused", 1, 4, 0, 0, SHADER_repro_attention_fused_texel_vec4},
    {"repro_attention", "fused", 1, 1, 0, 0, SHADER_repro_attention_fused_texel_scalar},
    {"repro_attention", "fused", 0, 4, 0, 0, SHADER_repro_attention_fused_storage_vec4},
    {"repro_attention", "fused", 0, 1, 0, 0, SHADER_repro_attention_fused_storage_scalar},
    {"repro_attention", "max8", 1, 4, 0, 0, SHADER_repro_attention_max8_texel_vec4},
    {"repro_attention", "fused4", 1, 4, 0, 0, SHADER_repro_attention_fused4_texel_vec4},
    {"repro_attention_block", "dkv", 0, 1, 32, 32, SHADER_repro_attention_block_dkv32x32_storage_scalar},
    {"repro_attention_block", "dkv", 0, 1, 64, 32, SHADER_repro_attention_block_dkv64x32_storage_scalar},
    {"repro_attention_block", "dkv", 0, 1, 64, 16, SHADER_repro_attention_block_dkv64x16_storage_scalar},
    {"repro_attention_block", "dkv", 0, 1, 128, 16, SHADER_repro_attention_block_dkv128x16_storage_scalar},
    {"repro_attention_block", "dkv", 0, 1, 128, 8, SHADER_repro_attention_block_dkv128x8_storage_scalar},
    {"repro_attention_block", "dq", 0, 1, 32, 32, SHADER_repro_attention_block_dq32x32_storage_scalar},
    {"repro_attention_block", "dq", 0, 1, 64, 32, SHADER_repro_attention_block_dq64x32_storage_scalar},
    {"repro_attention_block", "dq", 0, 1, 64, 16, SHADER_repro_attention_block_dq64x16_storage_scalar},
    {"repro_attention_block", "dq", 0, 1, 128, 16, SHADER_repro_attention_block_dq128x16_storage_scalar},
    {"repro_attention_block", "dq", 0, 1, 128, 8, SHADER_repro_attention_block_dq128x8_storage_scalar},
    {"repro_attention_block", "fwd", 0, 1, 32, 32, SHADER_repro_attention_block_fwd32x32_storage_scalar},
    {"repro_attention_block", "fwd", 0, 1, 64, 32, SHADER_repro_attention_block_fwd64x32_storage_scalar},
    {"repro_attention_block", "fwd", 0, 1, 64, 16, SHADER_repro_attention_block_fwd64x16_storage_scalar},
    {"repro_attention_block", "fwd", 0, 1, 128, 16, SHADER_repro_attention_block_fwd128x16_storage_scalar},
    {"repro_attention_block", "fwd", 0, 1, 128, 8, SHADER_repro_attention_block_fwd128x8_storage_scalar},
    {"repro_attention_bwd", "rows", 1, 4, 0, 0, SHADER_repro_attention_bwd_rows_texel_vec4},
    {"repro_attention_bwd", "rows", 1, 1, 0, 0, SHADER_repro_attention_bwd_rows_texel_scalar},
    {"repro_attention_bwd", "rows", 0, 4, 0, 0, SHADER_repro_attention_bwd_rows_storage_vec4},
    {"repro_attention_bwd", "rows", 0, 1, 0, 0, SHADER_repro_attention_bwd_rows_storage_scalar},
    {"repro_attention_bwd", "dq", 1, 4, 0, 0, SHADER_repro_attention_bwd_dq_texel_vec4},
    {"repro_attention_bwd", "dq", 1, 1, 0, 0, SHADER_repro_attention_bwd_dq_texel_scalar},
    {"repro_attention_bwd", "dq", 0, 4, 0, 0, SHADER_repro_attention_bwd_dq_storage_vec4},
    {"repro_attention_bwd", "dq", 0, 1, 0, 0, SHADER_repro_attention_bwd_dq_storage_scalar},
    {"repro_attention_bwd", "dkv", 1, 4, 0, 0, SHADER_repro_attention_bwd_dkv_texel_vec4},
    {"repro_attention_bwd", "dkv", 1, 1, 0, 0, SHADER_repro_attention_bwd_dkv_texel_scalar},
    {"repro_attention_bwd", "dk", 0, 4, 0, 0, SHADER_repro_attention_bwd_dk_storage_vec4},
    {"repro_attention_bwd", "dk", 0, 1, 0, 0, SHADER_repro_attention_bwd_dk_storage_scalar},
    {"repro_attention_bwd", "dv", 0, 4, 0, 0, SHADER_repro_attention_bwd_dv_storage_vec4},
    {"repro_attention_bwd", "dv", 0, 1, 0, 0, SHADER_repro_attention_bwd_dv_storage_scalar},
    {"repro_attention_bwd", "dq2", 1, 4, 0, 0, SHADER_repro_attention_bwd_dq2_texel_vec4},
    {"repro_attention_bwd", "dkv2", 1, 4, 0, 0, SHADER_repro_attention_bwd_dkv2_texel_vec4},
    {"repro_attention_bwd", "dq4", 1, 4, 0, 0, SHADER_repro_attention_bwd_dq4_texel_vec4},
    {"repro_attention_bwd", "dkv4", 1, 4, 0, 0, SHADER_repro_attention_bwd_dkv4_texel_vec4},
};

static enum shader_id flash_shader(const char *base, const char *stage, int texel, int width, uint32_t hd_max,
                                   uint32_t rows)
{
    for (size_t i = 0; i < sizeof flash_variants / sizeof flash_variants[0]; i++) {
        const struct flash_variant *v = &flash_variants[i];
        if (!strcmp(v->base, base) && !strcmp(v->stage, stage) && v->texel == texel && v->width == width &&
            v->hd_max == hd_max && v->rows == rows)
            return v->id;
    }
    vkt_fatal("no %s kernel for stage %s (%s, width %d, block %ux%u) in shaders/", base, stage,
              texel ? "texel" : "storage", width, hd_max, rows);
}

/* The kernel of base and stage (flash_variants; hd_max x rows for the
 * block kernels, else 0 x 0): bindings 0..n_in−1 are inputs (texel views
 * in the texel family, R32F where f32_mask has the bit), the rest
 * storage. */
static struct gpu_kernel *flash_kernel(struct gpu *g, const char *base, const char *stage, uint32_t hd_max,
                                       uint32_t rows, int texel, int width, int n_in, unsigned f32_mask, int n_bind,
                                       uint32_t hd)
{
    enum shader_id shader = flash_shader(base, stage, texel, width, hd_max, rows);
    if (texel) {
        enum shader_id widths[2] = {shader, shader};
        return ops_texel_variant(g, widths, width, n_in, f32_mask, n_bind, sizeof(struct flash_push), 1,
                                 &(uint32_t){hd / (uint32_t)width});
    }
    enum gpu_binding_kind kinds[GPU_MAX_BINDINGS] = {GPU_BIND_STORAGE};
    return ops_texel_kernel(g, shader, n_bind, kinds, sizeof(struct flash_push), 1, &(uint32_t){hd / (uint32_t)width});
}

/* Whether the kernels take several rows per invocation (the texel
 * family's vec4 variants: the default's fwd4, dq2 and dkv2 stages, the
 * reproducible max8, fused4, dq2 and dkv2: rows that share each fetch of
 * the other side; the same bits, 1.2-1.5x faster on lavapipe at T = 1024
 * and 2048 with two rows, bench_attention, and the default forward 1.2x
 * faster again with four; the reproducible fused walk's pair about 1.15x
 * faster than one row once it took eight keys per step, and four rows
 * 1.1x faster again). */
static int flash_pairs(int texel, int width)
{
    return texel && width == 4;
}

/* Invocations per sequence of a walk over T rows of each of `heads` heads,
 * nr rows per invocation (the last one short where nr does not divide T). */
static size_t walk_items(uint32_t T, uint32_t heads, uint32_t nr)
{
    return (size_t)((T + nr - 1) / nr) * heads;
}

/* Attention in blocks (shaders/default/flash_block.comp): the default on GPUs
 * (not CPU devices), in the default mode's storage family, for head
 * sizes up to 128 where the device's shared memory holds the tiles (the
 * forward 13-30 KB, the backward 17-42 KB). VKTRAIN_FLASH=rows or
 * =block picks for a run (a GPU's benchmarks compare them; the tests run
 * the blocks on lavapipe); op_flash_attention_set_block (tests) overrides
 * both: -1 as the device and the variable say, 0 the row kernels, 1 the
 * blocks. */
static int block_mode = -1;

void op_flash_attention_set_block(int mode)
{
    block_mode = mode;
}

/* Shared memory of the block kernels for head sizes up to hd_max in
 * blocks of `rows`: the forward's three head arrays of rows padded by one
 * float, a rows x rows tile and five row arrays; dkv's (the larger of the
 * backward's) four head arrays, two tiles, four row arrays. */
static size_t block_shared(int fwd, uint32_t hd_max, uint32_t rows)
{
    size_t r = rows, arrays = fwd ? 3 : 4, tiles = fwd ? 1 : 2, row_arrays = fwd ? 5 : 4;
    return sizeof(float) * (arrays * r * (hd_max + 1) + tiles * r * (r + 1) + row_arrays * r);
}

/* The block kernels of a pass: flash_block.comp, or in the reproducible
 * mode repro_attention_block.comp; the variant: head sizes up to
 * hd_max, blocks of `rows`. */
struct flash_blocks {
    int repro;
    uint32_t hd_max, rows;
};

/* The block kernels for this forward (fwd) or backward, 0 where the row
 * kernels run; the reproducible ones take whole walks only. Blocks of 32
 * rows at head sizes up to 32, 16 up to 64, 8 up to 128 (the first two
 * halved where the device's shared memory is short). On an NVIDIA H200 (8 x 12
 * heads of 64, T = 1024; both modes) the 16-row blocks ran the backward
 * 1.9x and the forward 1.2x faster than 32-row ones: less shared memory
 * per workgroup (19 KB against 42) keeps more of them resident, and each
 * invocation's 4 x 4 accumulators take fewer registers than 4 x 8. At
 * heads of 128 (8 x 6) the 8-row blocks ran the backward 1.55x and the
 * forward 1.14x faster than 16-row ones (5.9 against 9.2 ms, 1.9 against
 * 2.2; the reproducible blocks 1.07x and 1.35x). */
static int block_kernels(const struct gpu *g, int repro, int texel, int fwd, uint32_t hd, struct flash_blocks *k)
{
    struct kernel_attention pick = kernel_pick_attention(g);
    int mode = block_mode >= 0 ? block_mode : pick.blocks;
    if (!mode || texel || hd > 128)
        return 0;
    k->repro = repro;
    k->hd_max = hd <= 32 ? 32 : hd <= 64 ? 64 : 128;
    /* the variants' rows run from largest down to least */
    uint32_t largest = k->hd_max == 128 ? 16 : 32, least = k->hd_max == 32 ? 32 : k->hd_max == 64 ? 16 : 8;
    uint32_t most = k->hd_max == 32 ? 32 : k->hd_max == 64 ? 16 : 8;
    /* VKTRAIN_FLASH_BLOCK_ROWS=32|16|8: at most that many rows, within
     * the variants (benchmarks) */
    uint32_t n = pick.block_rows;
    if (n)
        most = n > largest ? largest : n < least ? least : n;
    for (k->rows = most; k->rows >= least; k->rows /= 2)
        if (block_shared(fwd, k->hd_max, k->rows) <= gpu_info(g)->shared_memory)
            return 1;
    return 0;
}

/* VKTRAIN_FLASH_DKV=split: dk and dv in two kernels, at 64 x 16 blocks
 * of the default mode only (flash_block.comp's DKV_PART variants: an
 * experiment for GPUs, where dkv ran 2.35x dq's time); dkv (the default)
 * in one. */
static int dkv_split(const struct gpu *g, const struct flash_blocks *k)
{
    return kernel_pick_attention(g).dkv_split && !k->repro && k->hd_max == 64 && k->rows == 16;
}

/* Loop iterations per block of a walk: a block's loads, the scores' head
 * loop, `row_loops` loops over its rows (the reproducible kernels' counted
 * twice over: their inner loops have no [[unroll]], and a walk past
 * llvmpipe's loop limit would stop short, where the row kernels take the
 * walk in parts). */
static uint32_t block_iterations(const struct flash_blocks *k, uint32_t hd, uint32_t row_loops)
{
    return (k->rows * hd / 64 + hd + row_loops * k->rows + 2) * (k->repro ? 2 : 1);
}

/* Records stage (fwd, dq or dkv) of the block kernels k over the blocks
 * of `heads` heads of each sequence, bindings b[0..n) (the first n_in
 * read), the walk in parts of chunk. */
static void block_dispatch(struct gpu *g, const char *op, const struct flash_blocks *k, const char *stage, int n_in,
                           struct attention_bind *b, int n, struct flash_push *push, uint32_t heads, uint32_t walk,
                           uint32_t chunk)
{
    size_t blocks = (push->a.T + k->rows - 1) / k->rows;
    flash_dispatch(
        g, op, flash_kernel(g, k->repro ? "repro_attention_block" : "flash_block", stage, k->hd_max, k->rows, 0, 1,
                             n_in, 0, n, push->a.hd),
        b, n, push, heads * blocks * 64, walk, chunk);
}

/* A walk in block kernels' dispatches of whole blocks within the device's
 * loop limit, per_block loop iterations per block of `rows`, fixed more
 * (op_flash_attention_set_walk's cut, in rows, where smaller). */
static uint32_t block_chunk(const struct gpu *g, uint32_t per_block, uint32_t fixed, uint32_t rows)
{
    uint32_t limit = ops_loop_chunk(g), n = limit > fixed ? (limit - fixed) / per_block : 1;
    uint64_t chunk = (uint64_t)(n ? n : 1) * rows;
    if (walk_override && walk_override < chunk)
        chunk = walk_override;
    return chunk < UINT32_MAX ? (uint32_t)chunk : UINT32_MAX;
}

/* The backward's R32F view among q, k, v, dO and the row statistics. */
enum { BWD_STATS = OPS_R32F(4) };

/* Vector width (4 or 1) and family (*texel) for these shapes and inputs. */
static int flash_width(const struct gpu *g, int repro, const char *op, const struct attention_push *p,
                       const struct attention_bind *in, int n, int *texel)
{
    if (p->hd > FLASH_MAX_HD)
        vkt_fatal("%s: head size %u is over the %d this kernel keeps in registers", op, p->hd, FLASH_MAX_HD);
    int v4 = p->hd % 4 == 0 && p->q_off % 4 == 0 && p->k_off % 4 == 0 && p->v_off % 4 == 0 &&
             p->q_stride % 4 == 0 && p->kv_stride % 4 == 0;
    /* the reproducible kernels' head of 16 floats as R32F where the
     * device's RGBA32F reads of it were wrong (gpu_device_info) */
    if (p->hd == 16 && repro && !gpu_info(g)->repro_hd16_vec4)
        v4 = 0;
    *texel = kernel_attention_texel(g, repro, attention_texel_fits(g, GPU_BIND_TEXEL_F32, in, n));
    if (*texel)
        return ops_texel_width(v4, attention_texel_fits(g, GPU_BIND_TEXEL_VEC4, in, n), 1, 1);
    return v4 ? 4 : 1;
}

/* The push constants for shape s after the checks both directions share. */
static struct flash_push flash_begin(const char *op, const struct op_attention_shape *s, struct gpu_buffer *q,
                                     struct gpu_buffer *k, struct gpu_buffer *v, struct gpu_buffer *doc,
                                     struct gpu_buffer *lse, struct gpu_buffer *out)
{
    struct flash_push push = {.a = attention_push_of(op, s, doc != NULL),
                              .window = s->window < s->T ? s->window : 0,
                              .softcap = s->softcap};
    if (s->softcap < 0)
        vkt_fatal("%s: softcap %g is negative", op, (double)s->softcap);
    size_t F = sizeof(float), rows = (size_t)s->B * s->T * s->H;
    attention_check_views(op, &push.a, q, k, v);
    ops_check(op, "log-sum-exp", lse, F * rows);
    ops_check(op, "output", out, F * rows * s->hd);
    if (doc)
        ops_check(op, "document ids", doc, sizeof(int32_t) * s->B * s->T);
    return push;
}

/* Bindings of q, k, v (texel views or storage) at b[0..2] and of the
 * document ids at b[doc_at] (out stands in, unread, without them). */
static void bind_inputs(struct attention_bind *b, struct flash_push *push, struct gpu_buffer *q, struct gpu_buffer *k,
                        struct gpu_buffer *v, struct gpu_buffer *doc, int doc_at, struct gpu_buffer *out)
{
    struct attention_push *a = &push->a;
    attention_bind_qkv(b, a, q, k, v);
    b[doc_at] = (struct attention_bind){doc ? doc : out, 0, doc ? a->T : 0, doc ? 0 : 1, 0, &push->doc_off};
}

/* Whether the reproducible forward's fused walk (the sum and the
 * weighted values over the keys, hdc head chunks per key) takes T keys in
 * one dispatch; else it is cut. */
static int repro_fused(const struct gpu *g, uint32_t T, uint32_t hdc)
{
    return walk_chunk(g, 3 + 2 * hdc, 192) >= T;
}

/* The reproducible forward's walks, on the default forward's bindings,
 * b[6] the second half of lse where the walk is cut. */
static void repro_forward(struct gpu *g, const char *op, struct attention_bind *b, struct flash_push *push, int texel,
                          int width, struct gpu_buffer *lse)
{
    struct attention_push *a = &push->a;
    size_t rows = walk_items(a->T, a->H, 1);
    uint32_t hdc = a->hd / (uint32_t)width;
    const char *base = "repro_attention";
    /* max8's loop counts per key as if no loop over its 8 rows were
     * unrolled (an overestimate cuts the walk more often, at no other
     * cost): a walk past the device's loop limit would stop short */
    if (flash_pairs(texel, width))
        flash_dispatch(g, op, flash_kernel(g, base, "max8", 0, 0, texel, width, 3, 0, 6, a->hd), b, 6, push,
                       walk_items(a->T, a->H, 8), a->T, walk_chunk(g, 25 + 9 * hdc, 64 + 10 * hdc));
    else
        flash_dispatch(g, op, flash_kernel(g, base, "max", 0, 0, texel, width, 3, 0, 6, a->hd), b, 6, push, rows, a->T,
                       walk_chunk(g, 1 + hdc, 64 + 2 * hdc));
    if (repro_fused(g, a->T, hdc)) {
        int nr = flash_pairs(texel, width) ? 4 : 1;
        flash_dispatch(g, op, flash_kernel(g, base, nr == 4 ? "fused4" : "fused", 0, 0, texel, width, 3, 0, 6, a->hd), b, 6,
                       push, walk_items(a->T, a->H, (uint32_t)nr), a->T, a->T);
        return;
    }
    /* Cut: the sum's parts are 2^wlog keys; the subtrees pending between
     * parts (one per level from wlog up) wait in the row of out; its
     * total, l, in the second half of lse until the values' last part. */
    size_t all_rows = (size_t)a->B * rows;
    if (gpu_buffer_size(lse) < 2 * all_rows * sizeof(float))
        vkt_fatal("%s: the walk over %u keys is cut into dispatches on %s, where the log-sum-exp buffer '%s' must "
                  "hold 2 x %zu floats (op_flash_attention_lse_floats), not %zu bytes",
                  op, a->T, gpu_info(g)->name, gpu_buffer_name(lse), all_rows, gpu_buffer_size(lse));
    uint32_t part = walk_chunk(g, 3 + hdc, 192), wlog = 0, levels = 0;
    while ((2u << wlog) <= part)
        wlog++;
    while (((a->T - 1) >> (wlog + levels)) > 0)
        levels++;
    if (levels > a->hd)
        vkt_fatal("%s: %u positions need %u partial sums per row between dispatches of %u keys, over the head size %u",
                  op, a->T, levels, 1u << wlog, a->hd);
    push->wlog = wlog;
    b[6] = (struct attention_bind){lse, all_rows, rows, 0, 1, &push->x_off};
    flash_dispatch(g, op, flash_kernel(g, base, "sum", 0, 0, texel, width, 3, 0, 7, a->hd), b, 7, push, rows, a->T,
                   1u << wlog);
    flash_dispatch(g, op, flash_kernel(g, base, "acc", 0, 0, texel, width, 3, 0, 7, a->hd), b, 7, push, rows, a->T,
                   walk_chunk(g, 1 + 2 * hdc, 64));
}

size_t op_flash_attention_lse_floats(const struct gpu *g, const struct op_attention_shape *s)
{
    /* the scalar variant's walk is the longest (R32F views, any shape) */
    size_t rows = (size_t)s->B * s->H * s->T;
    return kernel_pick_attention(g).repro && !repro_fused(g, s->T, s->hd) ? 2 * rows : rows;
}

static void forward(struct gpu *g, int repro, const struct op_attention_shape *s, struct gpu_buffer *q,
                    struct gpu_buffer *k, struct gpu_buffer *v, struct gpu_buffer *doc, struct gpu_buffer *lse,
                    struct gpu_buffer *out)
{
    const char *op = repro ? "flash_attention (reproducible)" : "flash_attention";
    struct flash_push push = flash_begin(op, s, q, k, v, doc, lse, out);
    if (repro && s->softcap)
        vkt_fatal("%s: the reproducible kernels have no soft-capping", op);
    struct attention_push *a = &push.a;
    struct attention_bind b[7];
    bind_inputs(b, &push, q, k, v, doc, 3, out);
    int texel, width = flash_width(g, repro, op, a, b, 3, &texel);
    struct flash_blocks blk;
    b[4] = (struct attention_bind){lse, 0, (size_t)a->T * a->H, 0, 1, &push.l_off};
    b[5] = (struct attention_bind){out, 0, (size_t)a->T * a->H * a->hd, 0, 1, &push.o_off};
    /* in blocks: per block of query rows walking the keys (the softmax's
     * two loops and the accumulators'; the reproducible kernel walks
     * twice) */
    int blocks = block_kernels(g, repro, texel, 1, s->hd, &blk);
    uint32_t per = blocks ? block_iterations(&blk, s->hd, 3) : 0;
    uint32_t chunk = blocks ? block_chunk(g, repro ? 2 * per : per, per, blk.rows) : 0;
    if (blocks && (!repro || chunk >= a->T)) {
        block_dispatch(g, op, &blk, "fwd", 3, b, 6, &push, a->H, a->T, chunk);
    } else if (repro)
        repro_forward(g, op, b, &push, texel, width, lse);
    else {
        int pairs = flash_pairs(texel, width);
        flash_dispatch(g, op, flash_kernel(g, "flash_attention", pairs ? "fwd4" : "fwd", 0, 0, texel, width, 3, 0, 6, s->hd),
                       b, 6, &push, walk_items(a->T, a->H, pairs ? 4 : 1), a->T, walk_chunk(g, 1, 0));
    }
}

void op_flash_attention(struct gpu *g, const struct op_attention_shape *s, struct gpu_buffer *q,
                        struct gpu_buffer *k, struct gpu_buffer *v, struct gpu_buffer *doc, struct gpu_buffer *lse,
                        struct gpu_buffer *out)
{
    forward(g, kernel_pick_attention(g).repro, s, q, k, v, doc, lse, out);
}

void repro_flash_attention(struct gpu *g, const struct op_attention_shape *s, struct gpu_buffer *q,
                           struct gpu_buffer *k, struct gpu_buffer *v, struct gpu_buffer *doc, struct gpu_buffer *lse,
                           struct gpu_buffer *out)
{
    forward(g, 1, s, q, k, v, doc, lse, out);
}

static void backward(struct gpu *g, int repro, const struct op_attention_shape *s, struct gpu_buffer *q,
                     struct gpu_buffer *k, struct gpu_buffer *v, struct gpu_buffer *doc, struct gpu_buffer *out,
                     struct gpu_buffer *lse, struct gpu_buffer *dout, struct gpu_buffer *stats, struct gpu_buffer *dq,
                     struct gpu_buffer *dk, struct gpu_buffer *dv)
{
    const char *op = repro ? "flash_attention_backward (reproducible)" : "flash_attention_backward";
    const char *base = repro ? "repro_attention_bwd" : "flash_attention";
    struct flash_push push = flash_begin(op, s, q, k, v, doc, lse, out);
    if (repro && s->softcap)
        vkt_fatal("%s: the reproducible kernels have no soft-capping", op);
    struct attention_push *a = &push.a;
    size_t F = sizeof(float), rows = (size_t)s->B * s->T * s->H;
    attention_check_views(repro ? "flash_attention_backward (reproducible, gradients)"
                                : "flash_attention_backward (gradients)",
                          a, dq, dk, dv);
    ops_check(op, "row statistics", stats, 2 * F * rows);
    ops_check(op, "output gradient", dout, F * rows * s->hd);
    size_t qs = (size_t)a->T * a->q_stride, kvs = (size_t)a->T * a->kv_stride, os = (size_t)a->T * a->H * a->hd;
    size_t rs = (size_t)a->T * a->H;
    long long q_tail = (long long)a->H * a->hd - a->q_stride, kv_tail = (long long)a->KVH * a->hd - a->kv_stride;
    uint32_t q_off = a->q_off, k_off = a->k_off, v_off = a->v_off;

    /* rows: stats = (lse, D = do·out) per row */
    struct attention_bind r[4] = {
        {out, 0, os, 0, 0, &push.o_off},
        {dout, 0, os, 0, 0, &push.o_off}, /* indexed as out is */
        {lse, 0, rs, 0, 0, &push.l_off},
        {stats, 0, 2 * rs, 0, 1, &push.x_off},
    };
    /* dq per query row walking the keys, then dk, dv per key row walking
     * the query rows of every head of its group */
    struct attention_bind e[8];
    bind_inputs(e, &push, q, k, v, doc, 5, out);
    e[3] = (struct attention_bind){dout, 0, os, 0, 0, &push.o_off};
    e[4] = (struct attention_bind){stats, 0, 2 * rs, 0, 0, &push.x_off};
    struct attention_bind in[6] = {e[0], e[1], e[2], e[3], e[4], r[0]};
    int texel, width = flash_width(g, repro, op, a, in, 6, &texel);
    uint32_t hdc = s->hd / (uint32_t)width, group = a->H / a->KVH;
    flash_dispatch(g, op, flash_kernel(g, base, "rows", 0, 0, texel, width, 2, 0, 4, s->hd), r, 4, &push, rs, 1, 1);
    e[6] = (struct attention_bind){dq, q_off, qs, q_tail, 1, &push.g1_off};
    struct flash_blocks blk;
    if (block_kernels(g, repro, texel, 0, s->hd, &blk)) {
        /* dq per block of query rows walking the keys, dk and dv per block
         * of keys walking the query rows of the group's heads (the
         * reproducible walk: (head, row) as hh·T + t). The reproducible
         * blocks take a whole walk only (else the row kernels, which the
         * host may cut). */
        uint32_t per = block_iterations(&blk, s->hd, 1), kv_walk = repro ? group * a->T : a->T;
        uint32_t q_chunk = block_chunk(g, per, per, blk.rows), kv_chunk = block_chunk(g, group * per, per, blk.rows);
        if (!repro || (q_chunk >= a->T && kv_chunk >= kv_walk)) {
            block_dispatch(g, op, &blk, "dq", 5, e, 7, &push, a->H, a->T, q_chunk);
            e[7] = (struct attention_bind){dv, v_off, kvs, kv_tail, 1, &push.g2_off};
            e[6] = (struct attention_bind){dk, k_off, kvs, kv_tail, 1, &push.g1_off};
            if (dkv_split(g, &blk)) {
                block_dispatch(g, op, &blk, "dk", 5, e, 8, &push, a->KVH, kv_walk, kv_chunk);
                block_dispatch(g, op, &blk, "dv", 5, e, 8, &push, a->KVH, kv_walk, kv_chunk);
            } else {
                block_dispatch(g, op, &blk, "dkv", 5, e, 8, &push, a->KVH, kv_walk, kv_chunk);
            }
            return;
        }
    }
    /* rows per invocation: the reproducible walks four at head sizes up
     * to 32 (see repro_attention.glsl) */
    int pairs = flash_pairs(texel, width), nr = !pairs ? 1 : repro && s->hd <= 32 ? 4 : 2;
    const char *dq_stage = nr == 4 ? "dq4" : nr == 2 ? "dq2" : "dq", *dkv_stage = nr == 4 ? "dkv4" : nr == 2 ? "dkv2" : "dkv";
    flash_dispatch(g, op, flash_kernel(g, base, dq_stage, 0, 0, texel, width, 5, BWD_STATS, 7, s->hd), e, 7, &push,
                   walk_items(a->T, a->H, (uint32_t)nr), a->T,
                   repro ? walk_chunk(g, 1 + 3 * hdc, 64 + 6 * hdc) : walk_chunk(g, 1, 0));
    e[6] = (struct attention_bind){dk, k_off, kvs, kv_tail, 1, &push.g1_off};
    e[7] = (struct attention_bind){dv, v_off, kvs, kv_tail, 1, &push.g2_off};
    /* the reproducible walk is over (head of the group, query row), the
     * default one over query rows with the group's heads inside; the
     * storage kernels (GPUs) take dk and dv in two dispatches, the same
     * terms in the same order (see the shaders) */
    int parts = texel ? 1 : 2;
    for (int i = 0; i < parts; i++)
        flash_dispatch(g, op,
                       flash_kernel(g, base,
                                    pairs        ? dkv_stage
                                    : parts == 1 ? "dkv"
                                    : i == 0     ? "dk"
                                                 : "dv",
                                    0, 0, texel, width, 5, BWD_STATS, 8, s->hd),
                       e, 8, &push, walk_items(a->T, a->KVH, (uint32_t)nr), repro ? group * a->T : a->T,
                       repro ? walk_chunk(g, 2 + 4 * hdc, 64 + 8 * hdc) : walk_chunk(g, group, 0));
}

void op_flash_attention_backward(struct gpu *g, const struct op_attention_shape *s, struct gpu_buffer *q,
                                 struct gpu_buffer *k, struct gpu_buffer *v, struct gpu_buffer *doc,
                                 struct gpu_buffer *out, struct gpu_buffer *lse, struct gpu_buffer *dout,
                                 struct gpu_buffer *stats, struct gpu_buffer *dq, struct gpu_buffer *dk,
                                 struct gpu_buffer *dv)
{
    backward(g, kernel_pick_attention(g).repro, s, q, k, v, doc, out, lse, dout, stats, dq, dk, dv);
}

void repro_flash_attention_backward(struct gpu *g, const struct op_attention_shape *s, struct gpu_buffer *q,
                                    struct gpu_buffer *k, struct gpu_buffer *v, struct gpu_buffer *doc,
                                    struct gpu_buffer *out, struct gpu_buffer *lse, struct gpu_buffer *dout,
                                    struct gpu_buffer *stats, struct gpu_buffer *dq, struct gpu_buffer *dk,
                                    struct gpu_buffer *dv)
{
    backward(g, 1, s, q, k, v, doc, out, lse, dout, stats, dq, dk, dv);
}
