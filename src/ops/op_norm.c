/* op_norm: RMSNorm, LayerNorm and the column sums that give their weight
 * and bias gradients (and a linear layer's bias gradient). Row kernels run
 * one workgroup per row; column sums one workgroup per 32 columns, whose
 * invocations sum blocks of rows added in block order (colsum.comp), so
 * every result is deterministic. On CPU devices (texel family)
 * the kernels are norm_texel.comp and colsum_texel.comp: one invocation
 * per row or column chunk, inputs through texel views. Rows go in ranges
 * where the row buffers exceed a binding or the rows the workgroup count
 * (ops_rows): the row kernels give the same bits, the column sums may
 * round differently where a range ends inside one walk.
 *
 * In the reproducible mode (kernel_pick_rows, kernel_pick_colsum) they
 * record its kernels instead (repro_norm.comp: the row sums on the fixed
 * tree of repro_tree.glsl; repro_colsum.comp: one invocation per column
 * adding the rows in row order to the old value), whose bits
 * tests/ref/ref_repro_ops.c reproduces. Never allocates. */
#include <stdio.h>

#include "ops_internal.h"
#include "ops_texel.h"
#include "vktrain/kernel_select.h"
#include "vktrain/repro.h"
#include "vktrain/util.h"

#define F sizeof(float)

struct norm_push {
    uint32_t C;
    float eps;
};
struct colsum_push {
    uint32_t row0, row1, C;
    uint32_t c0; /* colsum.comp only: its first column */
};
struct norm_texel_push {
    uint32_t rows, C;
    float eps;
};

/* Texel width for rows of C floats over these buffers: 4 (RGBA32F), 1
 * (R32F) or 0 (the storage kernels). Per-row vectors (mean, rstd) are read
 * as R32F, so every buffer must also fit an R32F view. */
static int texel_width(const struct gpu *g, uint32_t C)
{
    if ((size_t)3 * C > ops_loop_chunk(g)) /* three passes over a row */
        return 0;
    return ops_texel_width(C % 4 == 0, ops_texel_rows_fit(g, GPU_BIND_TEXEL_VEC4, F * C),
                           ops_texel_rows_fit(g, GPU_BIND_TEXEL_F32, F * C), 1);
}

/* The R32F views (the per-row statistics) among the texel bindings. */
enum {
    COLSUM_STATS = OPS_R32F(2) | OPS_R32F(3), /* colsum: dy, x, mean, rstd */
    RMSBACK_STATS = OPS_R32F(3),              /* rmsnorm backward: dy, x, w, rstd */
    LNBACK_STATS = OPS_R32F(3) | OPS_R32F(4), /* layernorm backward: dy, x, w, mean, rstd */
};

static struct gpu_kernel *texel_kernel(struct gpu *g, const enum shader_id *widths, int width, int n_tex, unsigned f32_mask,
                                       int n_bind, uint32_t push_size)
{
    return ops_texel_variant(g, widths, width, n_tex, f32_mask, n_bind, push_size, 0, NULL);
}

static uint32_t groups64(size_t n) { return (uint32_t)((n + 63) / 64); }

/* repro_norm_<variant> over rows of C floats: on GPUs (tiled family) one
 * workgroup of REPRO_WG invocations per row, each summing an aligned run
 * of 2^log_run elements; on CPU devices (texel family) the _row variant,
 * one invocation per row summing it as one run, REPRO_WG rows per
 * workgroup (llvmpipe pays about 15 us per barrier of a workgroup: the
 * workgroup kernel took 100 us per row), its n_in inputs (the leading
 * bindings) read through R32F views. The same bits either way. */
#define REPRO_WG 64u
/* repro_norm_<v>'s variants, by walk: {the group walk, _row, _row4}. */
struct repro_norm_kernels {
    const char *op;
    enum shader_id walk[3];
};
#define REPRO_NORM(v)                                                                                        \
    (&(const struct repro_norm_kernels){"repro_norm_" #v,                                                   \
                                        {SHADER_repro_norm_##v, SHADER_repro_norm_##v##_row, SHADER_repro_norm_##v##_row4}})

static void repro_rows(struct gpu *g, const struct repro_norm_kernels *ks, int n_bind, int n_in, const struct gpu_arg *args,
                       const size_t *row_bytes, uint32_t rows, uint32_t C, float eps)
{
    int per_row = gpu_kernel_class(g) == GPU_KERNELS_TEXEL;
    struct {
        uint32_t rows, C;
        float eps;
        uint32_t log_run;
    } push = {rows, C, eps, 0};
    while (((per_row ? 1u : REPRO_WG) << push.log_run) < C)
        push.log_run++;
    if (push.log_run > (per_row ? 16u : 10u))
        vkt_fatal("%s: rows of %u floats, over the reproducible kernel's %u", ks->op, C, 1u << 16);
    /* _row4 (C % 4 == 0, RGBA32F rows fit a view): the rows and the
     * weights as RGBA32F, the per-row mean and rstd (row_bytes F) R32F */
    int v4 = per_row && texel_width(g, C) == 4;
    struct gpu_kernel_desc d = {
        .shader = ks->walk[v4 ? 2 : per_row ? 1 : 0], .n_bindings = n_bind, .push_size = sizeof push, .n_spec = 1, .spec = {REPRO_WG}};
    for (int i = 0; i < n_bind; i++) /* the _row variants read the n_in inputs through texel views */
        d.bindings[i] = !per_row || i >= n_in     ? GPU_BIND_STORAGE
                        : v4 && row_bytes[i] != F ? GPU_BIND_TEXEL_VEC4
                                                  : GPU_BIND_TEXEL_F32;
    struct gpu_arg a[GPU_MAX_BINDINGS];
    for (int i = 0; i < n_bind; i++)
        a[i] = args[i], a[i].write = a[i].write && !(per_row && i < n_in);
    ops_rows(g, gpu_kernel_get(g, &d), a, row_bytes, &push, per_row, rows, per_row ? REPRO_WG : 1);
}

/* colsum's dispatches for rows [begin, end) of its `rows`. */
struct colsum_rows {
    struct gpu_kernel *k;
    struct gpu_arg args[6]; /* repro: the gradient's stack (or the gradient, unused) last */
    uint32_t rows, C;
    int repro, width;
    uint32_t seg_rows, levels; /* repro: the sums over samples (gpu_set_repro_samples), 0: none */
    uint32_t groups;           /* repro: workgroups of a dispatch (pieces: of 32 columns, in windows) */
    int pieces;                /* repro: the storage kernels, 32 columns x 8 lanes over the samples */
};

/* A kernel of 32 columns per workgroup over `groups` of them, in windows
 * within the device's workgroup count: *c0 (in push) the window's first
 * column. */
static void column_windows(struct gpu *g, struct gpu_kernel *k, const struct gpu_arg *a, const void *push, uint32_t *c0,
                           uint32_t groups)
{
    uint32_t max_groups = gpu_info(g)->max_workgroup_count[0];
    for (uint32_t g0 = 0; g0 < groups; g0 += max_groups) {
        *c0 = 32 * g0;
        gpu_dispatch(g, k, a, push, groups - g0 < max_groups ? groups - g0 : max_groups, 1, 1);
    }
}

static void colsum_rows(struct gpu *g, void *ctx, uint32_t begin, uint32_t end)
{
    struct colsum_rows *x = ctx;
    uint32_t C = x->C;
    uint32_t col_groups = (C + 31) / 32;
    /* Rows in ranges within the bindings, each walked in parts within the
     * device's loop limit, in order: the sums accumulate into out. */
    const size_t ub[6] = {F * C, F * C, F, F, 0, 0};
    int n = x->repro ? 6 : 5;
    size_t step, per = ops_range_units(g, x->k, x->args, ub, &step), chunk = ops_loop_chunk(g);
    struct gpu_arg a[6];
    /* ranges bound from aligned rows (multiples of step), the rows before
     * `begin` in the first one skipped */
    for (size_t rr = begin - begin % step; rr < end; rr += per) {
        size_t nr = end - rr < per ? end - rr : per;
        for (int i = 0; i < n; i++)
            a[i] = ops_range_arg(g, x->k, i, x->args, rr, nr, x->rows, ub[i]);
        for (size_t r0 = rr < begin ? begin - rr : 0; r0 < nr; r0 += chunk) {
            struct colsum_push push = {(uint32_t)r0, (uint32_t)(nr - r0 < chunk ? nr : r0 + chunk), C, 0};
            if (x->repro) { /* repro_colsum.comp: the range's first row of the micro-batch, for the samples */
                uint32_t rpush[7] = {push.row0, push.row1, C, x->seg_rows, (uint32_t)rr, x->levels, 0};
                if (x->pieces) /* 32 columns per workgroup, from column rpush[6] */
                    column_windows(g, x->k, a, rpush, &rpush[6], x->groups);
                else
                    gpu_dispatch(g, x->k, a, rpush, x->groups, 1, 1);
                continue;
            }
            if (x->width) {
                gpu_dispatch(g, x->k, a, &push, groups64(C / (x->width ? x->width : 1)), 1, 1);
                continue;
            }
            column_windows(g, x->k, a, &push, &push.c0, col_groups);
        }
    }
}

/* One column sum's kernels: storage, texel (by width), reproducible ({the
 * GPU walk, _tex, _tex4}). */
struct colsum_kernels {
    const char *op;
    enum shader_id storage, texel[2], repro[3];
};
#define COLSUM(m)                                                                                          \
    (&(const struct colsum_kernels){"colsum_" #m, SHADER_colsum_##m,                                       \
                                    {SHADER_colsum_texel_##m##_scalar, SHADER_colsum_texel_##m##_vec4},      \
                                    {SHADER_repro_colsum_##m, SHADER_repro_colsum_##m##_tex, SHADER_repro_colsum_##m##_tex4}})

static void colsum(struct gpu *g, const struct colsum_kernels *ks, struct gpu_buffer *dy, struct gpu_buffer *x,
                   struct gpu_buffer *mean, struct gpu_buffer *rstd, struct gpu_buffer *out, uint32_t rows,
                   uint32_t C)
{
    ops_check(ks->op, "gradient", out, F * C);
    struct gpu_arg args[5] = {{.buf = dy}, {.buf = x}, {.buf = mean}, {.buf = rstd}, {.buf = out, .write = 1}};
    struct kernel_pick pick = kernel_pick_colsum(g, C, texel_width(g, C), ks->repro, ks->storage, ks->texel);
    int repro = kernel_path_repro(pick.path), width = repro ? 0 : pick.width;
    struct gpu_kernel *k;
    /* colsum.comp: workgroups of 32 columns by wg/32 row blocks, at most
     * 1024 invocations (its shared array), whole subgroups */
    const struct gpu_device_info *info = gpu_info(g);
    uint32_t unit = info->subgroup_size > 32 ? info->subgroup_size : 32;
    uint32_t wg = info->max_workgroup_invocations < 1024 ? info->max_workgroup_invocations : 1024;
    wg = wg >= unit ? wg - wg % unit : 32;
    uint32_t groups = 0;
    if (repro) {
        /* repro_colsum.comp: on CPU devices one invocation per column, 64
         * per workgroup, the inputs through R32F views (_tex), or with
         * C % 4 == 0 dy and x as RGBA32F, 4 columns per invocation and 8
         * invocations per workgroup, so that a few columns still make
         * several workgroups for the CPU's threads (_tex4); elsewhere 32
         * columns x 8 lanes over the samples per workgroup */
        int tex = pick.path == KPATH_REPRO_TEXEL, tex4 = pick.width == 4;
        enum shader_id shader = pick.shader;
        uint32_t local = tex4 ? 8 : tex ? 64 : 32;
        struct gpu_kernel_desc d = {.shader = shader,
                                    .n_bindings = 6,
                                    .push_size = (tex ? 6 : 7) * sizeof(uint32_t),
                                    .n_spec = tex ? 1 : 0,
                                    .spec = {local}};
        for (int i = 0; i < 6; i++)
            d.bindings[i] = tex4 && i < 2    ? GPU_BIND_TEXEL_VEC4
                            : tex && i < 4   ? GPU_BIND_TEXEL_F32
                            : tex4 && i == 5 ? GPU_BIND_IMAGE_VEC4 /* the stack, a texel per 4 columns */
                                             : GPU_BIND_STORAGE;
        k = gpu_kernel_get(g, &d);
        groups = (C / (tex4 ? 4 : 1) + local - 1) / local;
    } else if (width) {
        k = texel_kernel(g, pick.widths, width, 4, COLSUM_STATS, 5, 3 * sizeof(uint32_t)); /* the texel push: 3 words */
    } else {
        struct gpu_kernel_desc d = {.shader = pick.shader, .n_bindings = 5, .push_size = sizeof(struct colsum_push),
                                    .n_spec = 1, .spec = {wg}};
        k = gpu_kernel_get(g, &d);
    }
    struct colsum_rows cr = {
        k,      {args[0], args[1], args[2], args[3], args[4], args[4]}, rows, C, repro, width, 0, 0,
        groups, pick.path == KPATH_REPRO};
    /* precision: reproducible: a parameter's gradient, summed per sample
     * in the kernel's loop (repro_colsum.comp, as repro_push.comp) */
    struct gpu_buffer *stack = repro ? repro_sample_stack(g, out, 0, rows, &cr.seg_rows, &cr.levels) : NULL;
    if (stack)
        cr.args[5] = (struct gpu_arg){.buf = stack, .write = 1};
    else
        cr.seg_rows = cr.levels = 0;
    colsum_rows(g, &cr, 0, rows);
}

void op_rmsnorm(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *w, struct gpu_buffer *y,
                struct gpu_buffer *rstd, uint32_t rows, uint32_t C, float eps)
{
    ops_check("rmsnorm", "input", x, F * rows * C);
    ops_check("rmsnorm", "weight", w, F * C);
    ops_check("rmsnorm", "output", y, F * rows * C);
    ops_check("rmsnorm", "rstd", rstd, F * rows);
    struct gpu_arg args[4] = {{.buf = x}, {.buf = w}, {.buf = y, .write = 1}, {.buf = rstd, .write = 1}};
    const size_t ub[4] = {F * C, 0, F * C, F};
    struct kernel_pick pick = kernel_pick_rows(g, texel_width(g, C));
    if (kernel_path_repro(pick.path)) {
        repro_rows(g, REPRO_NORM(rms), 4, 2, args, ub, rows, C, eps);
        return;
    }
    int width = pick.width;
    if (width) {
        struct norm_texel_push tp = {rows, C, eps};
        ops_rows(g, texel_kernel(g, SHADER_WIDTHS(norm_texel_rms), width, 2, 0, 4, sizeof tp), args, ub, &tp, 1, rows, 64);
        return;
    }
    struct norm_push push = {C, eps};
    ops_rows(g, ops_kernel(g, SHADER_rmsnorm, 4, sizeof push, 1), args, ub, &push, 0, rows, 1);
}

void op_rmsnorm_backward(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *x, struct gpu_buffer *w,
                         struct gpu_buffer *rstd, struct gpu_buffer *dx, struct gpu_buffer *dw, uint32_t rows,
                         uint32_t C)
{
    ops_check("rmsnorm_backward", "output gradient", dy, F * rows * C);
    ops_check("rmsnorm_backward", "input gradient", dx, F * rows * C);
    struct gpu_arg args[5] = {{.buf = dy}, {.buf = x}, {.buf = w}, {.buf = rstd}, {.buf = dx, .write = 1}};
    const size_t ub[5] = {F * C, F * C, 0, F, F * C};
    struct kernel_pick pick = kernel_pick_rows(g, texel_width(g, C));
    int width = pick.width;
    /* the texel and reproducible kernels read dx as an input, then write it */
    struct gpu_arg targs[6] = {args[0], args[1], args[2], args[3], {.buf = dx}, args[4]};
    const size_t tub[6] = {F * C, F * C, 0, F, F * C, F * C};
    if (kernel_path_repro(pick.path)) {
        repro_rows(g, REPRO_NORM(rmsback), 6, 5, targs, tub, rows, C, 0.0f);
    } else if (width) {
        struct norm_texel_push tp = {rows, C, 0};
        ops_rows(g, texel_kernel(g, SHADER_WIDTHS(norm_texel_rmsback), width, 5, RMSBACK_STATS, 6, sizeof tp), targs, tub, &tp, 1,
                 rows, 64);
    } else {
        uint32_t push = C;
        ops_rows(g, ops_kernel(g, SHADER_rmsnorm_back, 5, sizeof push, 1), args, ub, &push, 0, rows, 1);
    }
    colsum(g, COLSUM(rms), dy, x, rstd, rstd, dw, rows, C);
}

void op_layernorm(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *w, struct gpu_buffer *b,
                  struct gpu_buffer *y, struct gpu_buffer *mean, struct gpu_buffer *rstd, uint32_t rows, uint32_t C,
                  float eps)
{
    ops_check("layernorm", "input", x, F * rows * C);
    ops_check("layernorm", "weight", w, F * C);
    ops_check("layernorm", "bias", b, F * C);
    ops_check("layernorm", "output", y, F * rows * C);
    ops_check("layernorm", "mean", mean, F * rows);
    ops_check("layernorm", "rstd", rstd, F * rows);
    struct gpu_arg args[6] = {{.buf = x}, {.buf = w}, {.buf = b}, {.buf = y, .write = 1}, {.buf = mean, .write = 1},
                              {.buf = rstd, .write = 1}};
    const size_t ub[6] = {F * C, 0, 0, F * C, F, F};
    struct kernel_pick pick = kernel_pick_rows(g, texel_width(g, C));
    if (kernel_path_repro(pick.path)) {
        repro_rows(g, REPRO_NORM(ln), 6, 3, args, ub, rows, C, eps);
        return;
    }
    int width = pick.width;
    if (width) {
        struct norm_texel_push tp = {rows, C, eps};
        ops_rows(g, texel_kernel(g, SHADER_WIDTHS(norm_texel_ln), width, 3, 0, 6, sizeof tp), args, ub, &tp, 1, rows, 64);
        return;
    }
    struct norm_push push = {C, eps};
    ops_rows(g, ops_kernel(g, SHADER_layernorm, 6, sizeof push, 1), args, ub, &push, 0, rows, 1);
}

void op_layernorm_backward(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *x, struct gpu_buffer *w,
                           struct gpu_buffer *mean, struct gpu_buffer *rstd, struct gpu_buffer *dx,
                           struct gpu_buffer *dw, struct gpu_buffer *db, uint32_t rows, uint32_t C)
{
    ops_check("layernorm_backward", "output gradient", dy, F * rows * C);
    ops_check("layernorm_backward", "input gradient", dx, F * rows * C);
    struct gpu_arg args[6] = {{.buf = dy}, {.buf = x}, {.buf = w}, {.buf = mean}, {.buf = rstd},
                              {.buf = dx, .write = 1}};
    const size_t ub[6] = {F * C, F * C, 0, F, F, F * C};
    struct kernel_pick pick = kernel_pick_rows(g, texel_width(g, C));
    int width = pick.width;
    /* the texel and reproducible kernels read dx as an input, then write it */
    struct gpu_arg targs[7] = {args[0], args[1], args[2], args[3], args[4], {.buf = dx}, args[5]};
    const size_t tub[7] = {F * C, F * C, 0, F, F, F * C, F * C};
    if (kernel_path_repro(pick.path)) {
        repro_rows(g, REPRO_NORM(lnback), 7, 6, targs, tub, rows, C, 0.0f);
    } else if (width) {
        struct norm_texel_push tp = {rows, C, 0};
        ops_rows(g, texel_kernel(g, SHADER_WIDTHS(norm_texel_lnback), width, 6, LNBACK_STATS, 7, sizeof tp), targs, tub, &tp, 1,
                 rows, 64);
    } else {
        uint32_t push = C;
        ops_rows(g, ops_kernel(g, SHADER_layernorm_back, 6, sizeof push, 1), args, ub, &push, 0, rows, 1);
    }
    colsum(g, COLSUM(ln), dy, x, mean, rstd, dw, rows, C);
    colsum(g, COLSUM(plain), dy, dy, dy, dy, db, rows, C);
}

void op_bias_add(struct gpu *g, struct gpu_buffer *bias, struct gpu_buffer *y, uint32_t rows, uint32_t C)
{
    ops_check("bias_add", "bias", bias, F * C);
    ops_check("bias_add", "output", y, F * rows * C);
    struct gpu_arg args[2] = {{.buf = bias}, {.buf = y, .write = 1}};
    struct {
        uint32_t n, C;
    } push = {0, C};
    struct kernel_pick pick = kernel_pick_bias_add(g, C);
    if (pick.path == KPATH_REPRO) {
        /* repro_elementwise_bias: y = y + bias, rows in ranges */
        struct {
            uint32_t n;
            float unused;
            uint32_t C;
        } rpush = {0, 0.0f, C};
        struct gpu_arg rargs[3] = {{.buf = bias}, {.buf = y}, {.buf = y, .write = 1}};
        const size_t ub[3] = {0, F * C, F * C};
        ops_elements(g, ops_repro_kernel(g, pick.walks, 3, 2, sizeof rpush), rargs, ub, &rpush,
                     (size_t)rows * C, C, 1);
        return;
    }
    if (kernel_path_texel(pick.path)) {
        /* bias_add_texel.comp: vec4 chunks read through views, y written as
         * storage; in the reproducible mode repro_elementwise_texel_bias,
         * the same single add per element */
        struct gpu_arg targs[3] = {{.buf = bias}, {.buf = y}, {.buf = y, .write = 1}};
        enum gpu_binding_kind kinds[3] = {GPU_BIND_TEXEL_VEC4, GPU_BIND_TEXEL_VEC4, GPU_BIND_STORAGE};
        uint32_t wg = gpu_workgroup_1d(g);
        const size_t tub[3] = {0, F * C, F * C};
        ops_elements(g, ops_texel_kernel(g, pick.shader, 3, kinds, sizeof push, 1, &wg), targs, tub, &push,
                     (size_t)rows * C, C, 4);
        return;
    }
    const size_t ub[2] = {0, F * C}; /* y in ranges of rows */
    ops_elements(g, ops_kernel(g, pick.shader, 2, sizeof push, 1), args, ub, &push, (size_t)rows * C, C, 1);
}

void op_bias_backward(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *db, uint32_t rows, uint32_t C)
{
    ops_check("bias_backward", "output gradient", dy, F * rows * C);
    colsum(g, COLSUM(plain), dy, dy, dy, dy, db, rows, C);
}
