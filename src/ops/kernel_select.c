/* kernel_select: which kernel each op records (vktrain/kernel_select.h),
 * and the environment's overrides of that choice, read once. The ops
 * build the dispatches; every choice between the modes (default or
 * reproducible), the families (texel or tiled) and the variants a shape
 * or type allows is made here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"
#include "ops_texel.h"
#include "vktrain/kernel_select.h"
#include "vktrain/repro.h"
#include "vktrain/util.h"

const struct kernel_env_var kernel_env_vars[KENV_COUNT] = {
    [KENV_KERNELS] = {"VKTRAIN_KERNELS", "texel|tiled"},
    [KENV_MATMUL_INPUTS] = {"VKTRAIN_MATMUL_INPUTS", "fp32|f16|bf16"},
    [KENV_COOPMAT] = {"VKTRAIN_COOPMAT", "0|1"},
    [KENV_COOPMAT_TILE] = {"VKTRAIN_COOPMAT_TILE", "RMxRN"},
    [KENV_COOPMAT_SUBGROUPS] = {"VKTRAIN_COOPMAT_SUBGROUPS", "1|2|4|8"},
    [KENV_TILED_TILE] = {"VKTRAIN_TILED_TILE", "64|128"},
    [KENV_TILED_BK] = {"VKTRAIN_TILED_BK", "8|16"},
    [KENV_TILED_WARPTILE] = {"VKTRAIN_TILED_WARPTILE", "0|1"},
    [KENV_TILED_SPLITK] = {"VKTRAIN_TILED_SPLITK", "1..256"},
    [KENV_FLASH] = {"VKTRAIN_FLASH", "rows|block"},
    [KENV_FLASH_BLOCK_ROWS] = {"VKTRAIN_FLASH_BLOCK_ROWS", "32|16|8"},
    [KENV_FLASH_DKV] = {"VKTRAIN_FLASH_DKV", "dkv|split"},
    [KENV_ADAMW] = {"VKTRAIN_ADAMW", "torch|fused"},
    [KENV_REPRO_WIDE] = {"VKTRAIN_REPRO_WIDE", "0|1"},
    [KENV_REPRO_PAIRS] = {"VKTRAIN_REPRO_PAIRS", "0|1"},
    [KENV_REPRO_EMBED_LOOP] = {"VKTRAIN_REPRO_EMBED_LOOP", "0|1"},
    [KENV_TEXEL_ROWS_WG] = {"VKTRAIN_TEXEL_ROWS_WG", "0|1"},
    [KENV_REPRO_HD16_VEC4] = {"VKTRAIN_REPRO_HD16_VEC4", "0|1"},
};

/* the values in force (NULL: unset); owned copies */
static char *env_value[KENV_COUNT];
static int env_loaded;

/* Whether v is among what variable i takes. */
static int env_valid(int i, const char *v)
{
    const char *values = kernel_env_vars[i].values;
    if (!strcmp(values, "RMxRN")) {
        unsigned a, b;
        char x, end;
        return sscanf(v, "%u%c%u%c", &a, &x, &b, &end) == 3 && x == 'x' && a >= 1 && a <= 4 && b >= 1 && b <= 4;
    }
    const char *dots = strstr(values, "..");
    if (dots) {
        char *end;
        unsigned long n = strtoul(v, &end, 10), lo = strtoul(values, NULL, 10), hi = strtoul(dots + 2, NULL, 10);
        return *v >= '0' && *v <= '9' && !*end && n >= lo && n <= hi;
    }
    size_t len = strlen(v);
    for (const char *p = values; *p;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && !strncmp(p, v, n))
            return 1;
        p += n + (bar != NULL);
    }
    return 0;
}

static void env_store(int i, const char *v)
{
    if (v && *v && !env_valid(i, v))
        vkt_fatal("%s='%s': expected %s%s", kernel_env_vars[i].name, v,
                  strchr(kernel_env_vars[i].values, '|') ? "one of " : "", kernel_env_vars[i].values);
    free(env_value[i]);
    env_value[i] = v && *v ? vkt_strdup(v) : NULL;
}

void kernel_env_load(void)
{
    if (env_loaded)
        return;
    env_loaded = 1;
    for (int i = 0; i < KENV_COUNT; i++)
        env_store(i, getenv(kernel_env_vars[i].name));
}

const char *kernel_env(enum kernel_env_id id)
{
    kernel_env_load();
    return env_value[id];
}

int kernel_env_flag(enum kernel_env_id id, int fallback)
{
    const char *v = kernel_env(id);
    return v ? v[0] == '1' : fallback;
}

void kernel_env_set(const char *name, const char *value)
{
    kernel_env_load();
    for (int i = 0; i < KENV_COUNT; i++)
        if (!strcmp(kernel_env_vars[i].name, name)) {
            env_store(i, value);
            return;
        }
    vkt_fatal("kernel_env_set: %s is not a kernel override", name);
}

static int texel_family(const struct gpu *g)
{
    return gpu_kernel_class(g) == GPU_KERNELS_TEXEL;
}

enum kernel_path kernel_path_of(const struct gpu *g, int texel)
{
    if (gpu_reproducible(g))
        return texel ? KPATH_REPRO_TEXEL : KPATH_REPRO;
    return texel ? KPATH_TEXEL : KPATH_STORAGE;
}

struct kernel_pick kernel_pick_elementwise(const struct gpu *g, const struct kernel_set *ks)
{
    struct kernel_pick p = {.path = kernel_path_of(g, texel_family(g))};
    p.shader = p.path == KPATH_TEXEL         ? ks->texel
               : p.path == KPATH_REPRO_TEXEL ? ks->repro_texel
               : p.path == KPATH_REPRO       ? SHADER_NONE
                                             : ks->storage;
    p.walks = ks->repro;
    p.width = kernel_path_texel(p.path) ? 4 : 0;
    return p;
}

struct kernel_pick kernel_pick_bias_add(const struct gpu *g, uint32_t C)
{
    static const enum shader_id walks[2] = {SHADER_repro_elementwise_bias, SHADER_repro_elementwise_bias_runs};
    struct kernel_pick p = {.path = kernel_path_of(g, C % 4 == 0 && texel_family(g)), .walks = walks};
    p.shader = p.path == KPATH_TEXEL         ? SHADER_bias_add_texel
               : p.path == KPATH_REPRO_TEXEL ? SHADER_repro_elementwise_texel_bias
               : p.path == KPATH_REPRO       ? SHADER_NONE
                                             : SHADER_bias_add;
    p.width = kernel_path_texel(p.path) ? 4 : 0;
    return p;
}

struct kernel_pick kernel_pick_rows(const struct gpu *g, int width)
{
    struct kernel_pick p = {.path = kernel_path_of(g, width != 0), .shader = SHADER_NONE};
    p.width = p.path == KPATH_TEXEL ? width : 0;
    return p;
}

struct kernel_pick kernel_pick_colsum(const struct gpu *g, uint32_t C, int width, const enum shader_id *repro,
                                      enum shader_id storage, const enum shader_id *texel)
{
    struct kernel_pick p = {.widths = texel};
    if (gpu_reproducible(g)) {
        /* on CPU devices one invocation per column through R32F views
         * (_tex), or 4 columns per invocation through RGBA32F ones where
         * C % 4 == 0 and the sample stack takes texels (_tex4); elsewhere
         * the GPU walk */
        int tex = texel_family(g), tex4 = tex && C % 4 == 0 && repro_stack_texels(g);
        p.path = tex ? KPATH_REPRO_TEXEL : KPATH_REPRO;
        p.width = tex4 ? 4 : tex ? 1 : 0;
        p.shader = repro[tex4 ? 2 : tex ? 1 : 0];
        return p;
    }
    p.path = width ? KPATH_TEXEL : KPATH_STORAGE;
    p.width = width;
    p.shader = width ? SHADER_NONE : storage;
    return p;
}

struct kernel_pick kernel_pick_cross_entropy(const struct gpu *g, uint32_t V, size_t row_bytes)
{
    struct kernel_pick p = {.path = kernel_path_of(g, texel_family(g)), .shader = SHADER_NONE};
    if (kernel_path_repro(p.path))
        return p;
    /* The texel family reads the logits through an R32F view: one
     * invocation per row (three passes over it: 3V loop iterations) where
     * the row fits llvmpipe's loop limit, else a workgroup per row (the
     * GPT-2 vocabulary: 3V/WG iterations per invocation), except on a
     * device whose texel_rows_wg is 0 (newer lavapipe), where such rows
     * take the storage kernel. */
    int per_row = (size_t)3 * V + 1 <= ops_loop_chunk(g);
    if (ops_texel_rows_fit(g, GPU_BIND_TEXEL_F32, row_bytes) && (per_row || gpu_info(g)->texel_rows_wg)) {
        p.path = KPATH_TEXEL, p.width = 1;
        p.shader = per_row ? SHADER_cross_entropy_texel : SHADER_cross_entropy_texel_wg;
        return p;
    }
    p.path = KPATH_STORAGE;
    p.shader = SHADER_cross_entropy;
    return p;
}

struct kernel_pick kernel_pick_adamw(const struct gpu *g)
{
    static const enum shader_id walks[2] = {SHADER_repro_adamw, SHADER_repro_adamw_runs};
    struct kernel_pick p = {.path = kernel_path_of(g, texel_family(g)), .walks = walks};
    const char *variant = kernel_env(KENV_ADAMW);
    int fused = variant && !strcmp(variant, "fused");
    p.shader = p.path == KPATH_TEXEL         ? (fused ? SHADER_adamw_texel_fused : SHADER_adamw_texel_torch)
               : p.path == KPATH_REPRO_TEXEL ? SHADER_repro_adamw_vec4
               : p.path == KPATH_REPRO       ? SHADER_NONE
                                             : (fused ? SHADER_adamw_fused : SHADER_adamw_torch);
    p.width = kernel_path_texel(p.path) ? 4 : 0;
    return p;
}

enum kernel_path kernel_pick_reduce(const struct gpu *g)
{
    return kernel_path_of(g, 0);
}

struct kernel_pick kernel_pick_embedding(const struct gpu *g, int width, const struct gpu_buffer *wte,
                                         const struct gpu_buffer *wpe)
{
    static const enum shader_id widths[2][2] = {
        {SHADER_embedding_texel_fwd_scalar, SHADER_embedding_texel_fwd_vec4},
        {SHADER_repro_embedding_texel_fwd_scalar, SHADER_repro_embedding_texel_fwd_vec4}};
    static const enum shader_id walks[2] = {SHADER_repro_embedding, SHADER_repro_embedding_runs};
    int bf16 = gpu_buffer_dtype(wte) == GPU_DTYPE_BF16, repro = gpu_reproducible(g);
    if (repro && (bf16 || (wpe && gpu_buffer_dtype(wpe) != GPU_DTYPE_F32)))
        vkt_fatal("embedding: the table '%s' holds bf16 values; the reproducible mode takes fp32 tables only "
                  "(model.base_dtype: bf16 is not supported with precision: reproducible)",
                  gpu_buffer_name(bf16 ? wte : wpe));
    struct kernel_pick p = {.path = kernel_path_of(g, width != 0), .width = width, .walks = walks};
    if (width && bf16) /* bf16 tables (frozen, model.base_dtype bf16) */
        p.shader = width == 4 ? SHADER_embedding_texel_fwd_vec4_bf16 : SHADER_embedding_texel_fwd_scalar_bf16;
    else if (width)
        p.shader = SHADER_NONE, p.widths = widths[repro];
    else
        p.shader = repro ? walks[ops_repro_runs(g)] : SHADER_embedding;
    return p;
}

struct kernel_pick kernel_pick_embedding_back(const struct gpu *g, int width)
{
    static const enum shader_id widths[2][2] = {
        {SHADER_embedding_texel_back_scalar, SHADER_embedding_texel_back_vec4},
        {SHADER_repro_embedding_back_texel_scalar, SHADER_repro_embedding_back_texel_vec4}};
    int repro = gpu_reproducible(g);
    /* the reproducible storage kernel on either family (the path says
     * which family: its ranges) */
    struct kernel_pick p = {.path = kernel_path_of(g, repro ? texel_family(g) : width != 0), .width = width};
    p.widths = width ? widths[repro] : NULL;
    p.shader = width ? SHADER_NONE : repro ? SHADER_repro_embedding_back : SHADER_embedding_back;
    return p;
}

struct kernel_pick kernel_pick_rope(const struct gpu *g, int width)
{
    static const enum shader_id widths[2][2] = {{SHADER_rope_texel_scalar, SHADER_rope_texel_vec4},
                                                {SHADER_repro_rope_texel_scalar, SHADER_repro_rope_texel_vec4}};
    static const enum shader_id walks[2] = {SHADER_repro_rope, SHADER_repro_rope_runs};
    int repro = gpu_reproducible(g);
    struct kernel_pick p = {.path = kernel_path_of(g, width != 0), .width = width, .walks = walks};
    p.widths = width ? widths[repro] : NULL;
    p.shader = width || repro ? SHADER_NONE : SHADER_rope;
    return p;
}

enum kernel_path kernel_pick_matmul(const struct gpu *g)
{
    return kernel_path_of(g, 0);
}

uint32_t kernel_logits_stride(const struct gpu *g, uint32_t V)
{
    return gpu_reproducible(g) ? V : (V + 3) / 4 * 4;
}

struct kernel_attention kernel_pick_attention(const struct gpu *g)
{
    struct kernel_attention a = {.repro = gpu_reproducible(g)};
    const char *mode = kernel_env(KENV_FLASH), *rows = kernel_env(KENV_FLASH_BLOCK_ROWS);
    const char *dkv = kernel_env(KENV_FLASH_DKV);
    a.blocks = mode ? !strcmp(mode, "block") : !gpu_cpu_device(gpu_info(g));
    a.block_rows = rows ? (uint32_t)atoi(rows) : 0;
    a.dkv_split = dkv && !strcmp(dkv, "split");
    return a;
}

int kernel_attention_texel(const struct gpu *g, int repro, int fits_f32)
{
    /* The texel family's default kernels keep a step's eight key and
     * value vectors in registers (CPU devices, where a fetch costs several
     * multiply-adds): at head size 128 that was more private memory than
     * NVIDIA's compiler takes (an H200, driver 580: vkCreateComputePipelines
     * failed for fwd4_texel_vec4). Other devices take the storage kernels,
     * as the tiled family does: the same bits (see the shader). */
    return fits_f32 && (repro || gpu_cpu_device(gpu_info(g)));
}
