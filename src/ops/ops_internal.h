/* ops_internal: what the op wrappers of src/ops share: size checks that
 * name the op and the buffer, and the three dispatch shapes (one
 * invocation per element, one workgroup per row, one invocation per
 * column). Nothing outside src/ops includes this. */
#ifndef VKTRAIN_OPS_INTERNAL_H
#define VKTRAIN_OPS_INTERNAL_H

#include "vktrain/ops.h"

size_t ops_gcd(size_t a, size_t b);
static inline size_t ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}
static inline size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* The tiled matmul's specialization constants (matmul_tiled.comp):
 * invocations, tile edge, vec4 groups per micro-tile edge; and its
 * choices for a product of rows x cols outputs (op_matmul_tiled.c): the
 * configuration (split: split-k takes the large tiles), and the split-k
 * parts of a tn over red (1: none; *kpart the rows of each) whose
 * operands span bytes[3] of their buffers. */
struct ops_tiled_config {
    uint32_t wg, tile, tv;
    uint32_t bk; /* the reduction's step: 8, or 16 (VKTRAIN_TILED_BK; vec4 loads) */
    uint32_t warp_tiles; /* 1: 32 x 64 blocks per 32 invocations (VKTRAIN_TILED_WARPTILE; large tiles) */
};
struct ops_tiled_config ops_tiled_config(const struct gpu_device_info *info, const char *name, size_t rows, size_t cols,
                                         int split);
uint32_t ops_tiled_parts(const struct gpu *g, size_t rows, size_t cols, size_t red, const size_t *bytes, size_t *kpart);
/* The cooperative-matrix kernel's configuration for the device's matrix
 * shape cshape (M, N, K): its invocations, matrices per subgroup (spec
 * constants 0, 4 and 5), output tile (rows, columns) and the longest
 * reduction one dispatch may walk under the device's loop limit. */
struct ops_coop_config {
    uint32_t wg, rm_rn[2];
    size_t tile[2], walk;
};
struct ops_coop_config ops_coop_config(const struct gpu *g, const char *name, const uint32_t *cshape);

/* Fatal unless buffer b holds at least `bytes`; names op and role. */
void ops_check(const char *op, const char *role, const struct gpu_buffer *b, size_t bytes);

/* A kernel whose bindings are all storage buffers; spec[0] = the 1-D
 * workgroup size when wg_spec is set. */
struct gpu_kernel *ops_kernel(struct gpu *g, enum shader_id shader, int n_bind, uint32_t push_size, int wg_spec);

/* A module and its variant for the other walk or texel width, indexed by
 * the choice; named by token pasting, so both must exist at build time.
 * SHADER_WALKS(x): {x, x_runs} (ops_repro_kernel); SHADER_WIDTHS(x):
 * {x_scalar, x_vec4} (ops_texel_variant). */
#define SHADER_WALKS(base) ((const enum shader_id[2]){SHADER_##base, SHADER_##base##_runs})
#define SHADER_WIDTHS(base) ((const enum shader_id[2]){SHADER_##base##_scalar, SHADER_##base##_vec4})

/* The reproducible kernel of elementwise shape (spec[0] the workgroup
 * size) for the device's family, from walks = SHADER_WALKS(x): on the
 * texel family the _runs variant (FOR_EACH_RUN, as the texel kernels walk; the first n_tex
 * bindings R32F texel views, the rest storage), on the tiled family the
 * plain one (FOR_EACH_ELEMENT, storage bindings). */
struct gpu_kernel *ops_repro_kernel(struct gpu *g, const enum shader_id *walks, int n_bind, int n_tex,
                                    uint32_t push_size);
/* 1 where the reproducible kernels walk in runs (the texel family): the
 * index into SHADER_WALKS. */
int ops_repro_runs(const struct gpu *g);

/* The largest storage binding (bytes): the device's maxStorageBufferRange
 * as in force (VKTRAIN_DEVICE_LIMITS, gpu_set_limits). */
size_t ops_storage_limit(const struct gpu *g);

/* Test-only knob: op_flash_attention walks at most n keys (or query rows)
 * per dispatch, as under a small loop limit; 0 restores the device's. In
 * the reproducible mode its sum walks the largest power of two at most
 * n. */
void op_flash_attention_set_walk(uint32_t n);

/* The attention kernels (tests): -1 as the device and VKTRAIN_FLASH say, 0
 * the row kernels, 1 the block kernels (shaders/default/flash_block.comp). */
void op_flash_attention_set_block(int mode);

/* Dispatches ceil(n / WG) workgroups of gpu_workgroup_1d invocations,
 * capped at 4096 and the device's count (elementwise shaders stride over
 * the rest; a kernel that does not stride and would need more is fatal). */
void ops_dispatch_elements(struct gpu *g, struct gpu_kernel *k, const struct gpu_arg *args, const void *push,
                           size_t n, int strided);

/* Records kernel k over elements [0, n) in as few ranges as the device's
 * binding limits allow, for kernels whose element i touches only what
 * belongs to it. Elements come in units of `unit` (a vec4, a row); unit u
 * of binding i is the unit_bytes[i] bytes at args[i].offset + u ·
 * unit_bytes[i] of its buffer (unit_bytes[i] 0: every range binds args[i]
 * as given: a table, a bias). A range starts at a unit whose offset in
 * every such binding meets the alignment of its kind and binds at most
 * the storage range (or texel limit) of each; the kernel sees its range as
 * elements [0, count) from the start of its bindings, count in the first
 * uint32 of push (which is changed). Each invocation handles
 * per_invocation elements; invocations stride over the range, the grid
 * within 4096 workgroups and the device's count. An element-wise kernel
 * gives the same bits whatever the ranges. */
void ops_elements(struct gpu *g, struct gpu_kernel *k, const struct gpu_arg *args, const size_t *unit_bytes,
                  void *push, size_t n, size_t unit, size_t per_invocation);

/* The same for kernels that do not stride, over `rows` rows (unit_bytes:
 * bytes per row): each workgroup does rows_per_group rows (1: one
 * workgroup per row), so ranges also keep within the device's workgroup
 * count; the range's row count goes in push's first uint32 when
 * count_in_push is set. */
void ops_rows(struct gpu *g, struct gpu_kernel *k, const struct gpu_arg *args, const size_t *row_bytes, void *push,
              int count_in_push, size_t rows, size_t rows_per_group);

/* Binding i of kernel k restricted to units [u0, u0 + nu) of `total`,
 * unit_bytes each from args[i].offset (clamped to its buffer); args[i]
 * itself when that is all of them and it fits its binding limit. */
struct gpu_arg ops_range_arg(const struct gpu *g, const struct gpu_kernel *k, int i, const struct gpu_arg *args,
                             size_t u0, size_t nu, size_t total, size_t unit_bytes);

/* The most units of unit_bytes[i] bytes (0: not spanned; one entry per
 * binding of k) that one range of the bindings of kernel k may hold (a
 * multiple of the returned *step, the units between aligned offsets);
 * fatal, naming the kernel and binding, when not even one step fits. */
size_t ops_range_units(const struct gpu *g, const struct gpu_kernel *k, const struct gpu_arg *args,
                       const size_t *unit_bytes, size_t *step);

#endif
