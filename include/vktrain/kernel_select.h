/* kernel_select: the one place that decides which kernel an op records
 * (src/ops/kernel_select.c). An op says what it computes; the functions
 * here pick its module in the kernel table (vktrain/shaders.h) from the
 * device's set-up (its kernel family, texel or tiled, and its mode,
 * default or reproducible), the operands' shape and type, and the
 * environment's overrides.
 *
 * The overrides (docs/training.md, "Environment"; `vktrain devices` lists
 * them) are read and checked once, when the first device is enumerated or
 * set up (kernel_env_load): a wrong value stops the program there, naming
 * the variable and what it takes. Tests and benchmarks change them between
 * calls with kernel_env_set, not setenv. */
#ifndef VKTRAIN_KERNEL_SELECT_H
#define VKTRAIN_KERNEL_SELECT_H

#include <stdint.h>

#include "vktrain/gpu.h"
#include "vktrain/shaders.h"

enum kernel_env_id {
    KENV_KERNELS,
    KENV_MATMUL_INPUTS,
    KENV_COOPMAT,
    KENV_COOPMAT_TILE,
    KENV_COOPMAT_SUBGROUPS,
    KENV_TILED_TILE,
    KENV_TILED_BK,
    KENV_TILED_WARPTILE,
    KENV_TILED_SPLITK,
    KENV_FLASH,
    KENV_FLASH_BLOCK_ROWS,
    KENV_FLASH_DKV,
    KENV_ADAMW,
    KENV_REPRO_WIDE,
    KENV_REPRO_PAIRS,
    KENV_REPRO_EMBED_LOOP,
    KENV_TEXEL_ROWS_WG,
    KENV_REPRO_HD16_VEC4,
    KENV_COUNT
};

/* An override: its variable and what it takes ("a|b": one of those words;
 * "1..256": a whole number in that range; "RMxRN": two numbers 1 to 4). */
struct kernel_env_var {
    const char *name, *values;
};
extern const struct kernel_env_var kernel_env_vars[KENV_COUNT];

/* Reads and checks every override from the environment, once per process
 * (later calls do nothing); fatal on a value outside what it takes. */
void kernel_env_load(void);
/* The override's value, NULL where unset (or set empty). */
const char *kernel_env(enum kernel_env_id id);
/* A 0|1 override: its value, or fallback where unset. */
int kernel_env_flag(enum kernel_env_id id, int fallback);
/* Sets override `name` (a VKTRAIN_ variable of the table) to value, checked
 * as kernel_env_load checks it; NULL unsets it. Fatal on an unknown name. */
void kernel_env_set(const char *name, const char *value);

/* What an op records: the default mode's kernels through storage
 * buffers (the tiled family, or operands a texel view cannot hold) or
 * through texel views (the texel family), or the reproducible mode's
 * kernels, likewise. */
enum kernel_path { KPATH_STORAGE, KPATH_TEXEL, KPATH_REPRO, KPATH_REPRO_TEXEL };
static inline int kernel_path_repro(enum kernel_path p)
{
    return p == KPATH_REPRO || p == KPATH_REPRO_TEXEL;
}
static inline int kernel_path_texel(enum kernel_path p)
{
    return p == KPATH_TEXEL || p == KPATH_REPRO_TEXEL;
}

/* A pick: the path, the module (SHADER_NONE where the op's own walk
 * decides it: see each function), its texel width (4: RGBA32F views, 1:
 * R32F, 0: storage) and, for the modules that come in two widths or two
 * walks, both (widths: {scalar, vec4}; walks: {elements, runs}). */
struct kernel_pick {
    enum kernel_path path;
    enum shader_id shader;
    int width;
    const enum shader_id *widths, *walks;
};

/* An elementwise op's modules (activations, add, scale, axpy, copy): the
 * default storage and texel kernels, the reproducible texel kernel and
 * the reproducible storage kernel's walks. */
struct kernel_set {
    const char *op;
    enum shader_id storage, texel, repro_texel, repro[2];
};

/* The mode's path for an op whose texel variant applies (texel: its
 * operands fit it on a texel-family device). */
enum kernel_path kernel_path_of(const struct gpu *g, int texel);

/* elementwise ops: the texel family takes the texel kernels (the
 * reproducible one in that mode), else storage or the reproducible
 * walks. */
struct kernel_pick kernel_pick_elementwise(const struct gpu *g, const struct kernel_set *ks);
/* y += bias over rows of C: vec4 texels where C % 4 == 0 on the texel
 * family, else storage (or the reproducible walks). */
struct kernel_pick kernel_pick_bias_add(const struct gpu *g, uint32_t C);
/* a row op (norms, their backward) at texel width `width` (0: none fits):
 * the reproducible kernels take every shape (shader SHADER_NONE: they
 * pick their walk from the family). */
struct kernel_pick kernel_pick_rows(const struct gpu *g, int width);
/* the norms' column sums over C columns, given the default kernels' texel
 * width; repro[3] = {the GPU walk, _tex, _tex4}. */
struct kernel_pick kernel_pick_colsum(const struct gpu *g, uint32_t C, int width, const enum shader_id *repro,
                                      enum shader_id storage, const enum shader_id *texel);
/* the masked cross-entropy over rows of V logits (row_bytes apart). */
struct kernel_pick kernel_pick_cross_entropy(const struct gpu *g, uint32_t V, size_t row_bytes);
/* one AdamW step (VKTRAIN_ADAMW picks torch's operation order or the
 * fused one in the default mode). */
struct kernel_pick kernel_pick_adamw(const struct gpu *g);
/* the sums (op_sum, op_sumsq): the default two-pass reduce or the
 * reproducible tree. */
enum kernel_path kernel_pick_reduce(const struct gpu *g);
/* the embedding lookup, its backward and RoPE at texel width `width` (0:
 * storage): the texel kernels' widths, or the storage module (shader) or
 * the reproducible walks. The reproducible mode takes fp32 tables only
 * (fatal on a bf16 one, naming it); a bf16 table's texel kernel is the
 * shader. The backward's path is KPATH_REPRO_TEXEL on the texel family in
 * the reproducible mode at any width (its ranges follow the family). */
struct kernel_pick kernel_pick_embedding(const struct gpu *g, int width, const struct gpu_buffer *wte,
                                         const struct gpu_buffer *wpe);
struct kernel_pick kernel_pick_embedding_back(const struct gpu *g, int width);
struct kernel_pick kernel_pick_rope(const struct gpu *g, int width);
/* the matmuls: KPATH_REPRO (the reproducible mode's kernels) or
 * KPATH_STORAGE (the default ones, which pick their tiles and family in
 * op_matmul.c by the operands). */
enum kernel_path kernel_pick_matmul(const struct gpu *g);
/* Floats between rows of the logits for a vocabulary of V: rows of whole
 * texels in the default mode (the head's nn reads dlogits as vec4, nt
 * writes and the transposes read rows that start on a texel), V in the
 * reproducible mode (its kernels walk packed rows). */
uint32_t kernel_logits_stride(const struct gpu *g, uint32_t V);

/* Flash attention: the mode, the row or block kernels (VKTRAIN_FLASH,
 * else blocks on GPUs), the most rows per block (VKTRAIN_FLASH_BLOCK_ROWS,
 * 0: the variants' own) and dk, dv in two kernels (VKTRAIN_FLASH_DKV). */
struct kernel_attention {
    int repro, blocks;
    uint32_t block_rows;
    int dkv_split;
};
struct kernel_attention kernel_pick_attention(const struct gpu *g);
/* The attention's family for operands that fit R32F views (fits_f32): the
 * texel kernels in the reproducible mode and on CPU devices; else
 * storage. */
int kernel_attention_texel(const struct gpu *g, int repro, int fits_f32);

#endif
