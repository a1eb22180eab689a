/* op_embedding: token and learned-position embeddings with their
 * deterministic backward, and rotary position embedding (RoPE, Hugging
 * Face rotate_half) with its cos/sin table. On CPU devices (texel family)
 * the kernels are embedding_texel.comp and rope_texel.comp: float inputs
 * through texel views (RGBA32F when the contiguous width is a multiple of
 * 4, else R32F), ids and outputs storage. The forward's tables may
 * hold bf16 values (frozen, model.base_dtype bf16, tagged by
 * gpu_buffer_set_dtype): read through bf16 views (texel) or as uints
 * (storage) and widened by a shift, the output is the fp32 kernel's on the
 * tables rounded to bf16, bit for bit.
 *
 * In the reproducible mode each op takes that mode's shader
 * (repro_embedding.comp, repro_embedding_back.comp, repro_rope.comp:
 * the same walks, every float operation rounded on its own;
 * tests/ref/ref_repro_ops.c is their C), in both kernel families; on CPU
 * devices their texel variants (repro_embedding's texel_fwd,
 * repro_embedding_back's texel, repro_rope_texel.comp: the texel kernels'
 * access patterns with the reproducible operations);
 * bf16 tables are refused. Never allocates. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops_internal.h"
#include "ops_texel.h"
#include "vktrain/kernel_select.h"
#include "vktrain/repro.h"
#include "vktrain/util.h"

/* Texel width for float buffers bound in ranges of rows of row_bytes: 4
 * (RGBA32F views) when vec4 is set and they fit, 1 (R32F), or 0 (the
 * storage kernels). */
static int texel_width(const struct gpu *g, int vec4, size_t row_bytes)
{
    return ops_texel_width(vec4, ops_texel_rows_fit(g, GPU_BIND_TEXEL_VEC4, row_bytes),
                           ops_texel_rows_fit(g, GPU_BIND_TEXEL_F32, row_bytes), 0);
}

/* The rows of a table of `rows` rows one range of binding i of k may hold
 * (all of them when the table fits); pad: with 2 bytes more for a range
 * that ends mid-uint (uint_end). */
static size_t table_rows(const struct gpu *g, struct gpu_kernel *k, const struct gpu_arg *args, int i, size_t rows,
                         size_t row_bytes, int pad)
{
    size_t ub[GPU_MAX_BINDINGS] = {0}, step;
    ub[i] = row_bytes;
    size_t n = ops_range_units(g, k, args, ub, &step);
    if (pad && n < rows && n * row_bytes + 2 > gpu_binding_limit(g, gpu_kernel_binding(k, i)))
        n -= step;
    if (n == 0)
        vkt_fatal("kernel '%s': binding %d (buffer '%s') cannot hold a range of %zu rows of %zu bytes and the "
                  "2 bytes of the bf16 padding within this device's binding limit",
                  gpu_kernel_name(k), i, gpu_buffer_name(args[i].buf), step, row_bytes);
    return min_size(rows, n);
}

/* The texel width of the forward's tables, rows of C elements of fp32 or
 * (bf16) bf16 views; 0: the storage kernel. */
static int table_width(const struct gpu *g, int bf16, uint32_t C)
{
    if (!bf16)
        return texel_width(g, C % 4 == 0, sizeof(float) * C);
    if (!gpu_info(g)->texel_bf16)
        return 0;
    return ops_texel_width(C % 4 == 0, ops_texel_rows_fit(g, GPU_BIND_TEXEL_BF16X4, 2 * (size_t)C),
                           ops_texel_rows_fit(g, GPU_BIND_TEXEL_BF16, 2 * (size_t)C), 0);
}

/* A range of bf16 table rows for the storage kernel, which reads whole
 * uints: to the end of its last 4 bytes (2 bytes past an odd number of
 * rows of odd C, padding or the next row). */
static struct gpu_arg uint_end(struct gpu_arg a)
{
    if (a.range % 4)
        a.range += 4 - a.range % 4;
    return a;
}

void op_embedding(struct gpu *g, struct gpu_buffer *tokens, struct gpu_buffer *positions, struct gpu_buffer *wte,
                  struct gpu_buffer *wpe, struct gpu_buffer *out, uint32_t rows, uint32_t C, uint32_t V, uint32_t P)
{
    /* bf16 tables (frozen, model.base_dtype bf16): both of them */
    int bf16 = gpu_buffer_dtype(wte) == GPU_DTYPE_BF16;
    size_t row = (bf16 ? 2 : sizeof(float)) * (size_t)C;
    ops_check("embedding", "tokens", tokens, sizeof(int32_t) * rows);
    ops_check("embedding", "token table", wte, row * V);
    ops_check("embedding", "output", out, sizeof(float) * rows * C);
    if (gpu_buffer_dtype(out) != GPU_DTYPE_F32)
        vkt_fatal("embedding: the output '%s' holds bf16 values; it must be fp32", gpu_buffer_name(out));
    if (wpe) {
        ops_check("embedding", "positions", positions, sizeof(int32_t) * rows);
        ops_check("embedding", "position table", wpe, row * P);
        if (gpu_buffer_dtype(wpe) != gpu_buffer_dtype(wte))
            vkt_fatal("embedding: the token table '%s' holds %s values and the position table '%s' %s ones; both "
                      "must be of one type",
                      gpu_buffer_name(wte), bf16 ? "bf16" : "fp32", gpu_buffer_name(wpe), bf16 ? "fp32" : "bf16");
    }
    for (int i = 0; i < 2; i++) {
        struct gpu_buffer *t = i ? wpe : wte;
        if (bf16 && t && gpu_buffer_size(t) % 4)
            vkt_fatal("embedding: the bf16 table '%s' has %zu bytes, not a multiple of 4 (the storage kernel reads "
                      "uints)",
                      gpu_buffer_name(t), gpu_buffer_size(t));
    }
    if (!wpe)
        P = 1;
    /* without positions, tokens and a float of wte stand in, unread */
    struct gpu_arg args[5] = {{.buf = tokens}, {.buf = wpe ? positions : tokens}, {.buf = wte},
                              {.buf = wpe ? wpe : wte, .range = wpe ? 0 : sizeof(float)}, {.buf = out, .write = 1}};
    struct {
        uint32_t n, C, V, P, has_pos, v0, v1, p0, p1;
    } push = {0, C, V, P, wpe != NULL, 0, 0, 0, 0};
    /* The bindings of each kernel: tokens, positions, wte, wpe, out. */
    int it = 0, ip = 1, iw = 2, iwp = 3, io = 4;
    int width = table_width(g, bf16, C), storage_bf16 = bf16 && !width;
    struct kernel_pick pick = kernel_pick_embedding(g, width, wte, wpe);
    struct gpu_kernel *k;
    uint32_t wg = gpu_workgroup_1d(g);
    if (width) {
        /* bindings: wte, wpe as texels, then tokens, positions, out */
        struct gpu_arg targs[5] = {args[2], args[3], args[0], args[1], args[4]};
        memcpy(args, targs, sizeof args);
        iw = 0, iwp = 1, it = 2, ip = 3;
        if (bf16) {
            enum gpu_binding_kind t = width == 4 ? GPU_BIND_TEXEL_BF16X4 : GPU_BIND_TEXEL_BF16;
            const enum gpu_binding_kind kinds[5] = {t, t, GPU_BIND_STORAGE, GPU_BIND_STORAGE, GPU_BIND_STORAGE};
            k = ops_texel_kernel(g, pick.shader, 5, kinds, sizeof push, 1, &wg);
        } else {
            k = ops_texel_variant(g, pick.widths, width, 2, 0, 5, sizeof push, 1, &wg);
        }
    } else {
        width = 1;
        struct gpu_kernel_desc d = {.shader = pick.shader, .n_bindings = 5, .push_size = sizeof push, .n_spec = 2};
        d.spec[0] = wg, d.spec[1] = (uint32_t)bf16; /* BF16: the tables hold bf16 */
        for (int i = 0; i < 5; i++)
            d.bindings[i] = GPU_BIND_STORAGE;
        k = gpu_kernel_get(g, &d);
    }
    /* Ranges of rows within the output and id bindings; of table rows
     * within the table bindings, each dispatch doing the rows whose token
     * (and position) fall in its tables' ranges. A bf16 range of the
     * storage kernel may end 2 bytes past its rows (uint_end). */
    size_t ub[5] = {0}, step;
    ub[it] = ub[ip] = sizeof(int32_t), ub[io] = sizeof(float) * C;
    size_t per_r = ops_range_units(g, k, args, ub, &step);
    size_t per_v = table_rows(g, k, args, iw, V, row, storage_bf16);
    size_t per_p = wpe ? table_rows(g, k, args, iwp, P, row, storage_bf16) : 1;
    struct gpu_arg a[5];
    for (size_t r0 = 0; r0 < rows; r0 += per_r) {
        size_t nr = min_size(per_r, rows - r0);
        for (int i = 0; i < 5; i++)
            a[i] = ops_range_arg(g, k, i, args, r0, nr, rows, ub[i]);
        push.n = (uint32_t)(nr * (C / width));
        for (size_t v0 = 0; v0 < V; v0 += per_v) {
            push.v0 = (uint32_t)v0, push.v1 = (uint32_t)min_size(V, v0 + per_v);
            a[iw] = ops_range_arg(g, k, iw, args, v0, push.v1 - v0, V, row);
            if (storage_bf16)
                a[iw] = uint_end(a[iw]);
            for (size_t p0 = 0; p0 < P; p0 += per_p) {
                push.p0 = (uint32_t)p0, push.p1 = (uint32_t)min_size(P, p0 + per_p);
                if (wpe)
                    a[iwp] = ops_range_arg(g, k, iwp, args, p0, push.p1 - p0, P, row);
                if (wpe && storage_bf16)
                    a[iwp] = uint_end(a[iwp]);
                ops_dispatch_elements(g, k, a, &push, push.n, 1);
            }
        }
    }
}

/* Table-row ranges of one embedding_back dispatch: enough workgroups to
 * fill a large GPU (with C = 768, three workgroups of channels each) while
 * every invocation still walks all the rows' ids. */
#define EMBED_BACK_RANGES 128u

/* op_embedding_backward's dispatches for rows [begin, end) of its `rows`. */
struct embed_back {
    struct gpu_kernel *k;
    struct gpu_arg args[3];
    size_t ub[3];
    uint32_t rows, C, V;
    int width;
    enum kernel_path path;
};

static void embed_back_rows(struct gpu *g, void *ctx, uint32_t begin, uint32_t end)
{
    const struct embed_back *x = ctx;
    struct gpu_kernel *k = x->k;
    const struct gpu_arg *args = x->args;
    const size_t *ub = x->ub;
    uint32_t C = x->C, V = x->V, width = (uint32_t)x->width;
    /* embedding_back.comp: the table rows of a dispatch in up to
     * EMBED_BACK_RANGES ranges, one per workgroup row; its reproducible
     * twin on CPU devices in one (each range walks every id: 128 walks
     * made it 250x slower than the texel kernel on lavapipe) */
    uint32_t max_y = gpu_info(g)->max_workgroup_count[1];
    uint32_t most = x->path == KPATH_REPRO_TEXEL ? 1 : EMBED_BACK_RANGES;
    /* Rows in ranges within the id and gradient bindings, each walked in
     * order in parts within the device's loop limit; the table in ranges
     * of ids (each dispatch adds the rows whose id is in its range). Every
     * table row gets its rows added in row order, as in one walk. */
    size_t step, per_r = ops_range_units(g, k, args, ub, &step), chunk = ops_loop_chunk(g);
    size_t per_v = table_rows(g, k, args, 2, V, sizeof(float) * C, 0);
    struct gpu_arg a[3];
    /* ranges bound from aligned rows (multiples of step), the rows before
     * `begin` in the first one skipped */
    for (size_t rr = begin - begin % step; rr < end; rr += per_r) {
        size_t nr = min_size(per_r, end - rr);
        for (int i = 0; i < 2; i++)
            a[i] = ops_range_arg(g, k, i, args, rr, nr, x->rows, ub[i]);
        for (size_t r0 = rr < begin ? begin - rr : 0; r0 < nr; r0 += chunk) {
            for (size_t v0 = 0; v0 < V; v0 += per_v) {
                /* the texel kernel reads the first 6 */
                uint32_t push[7] = {(uint32_t)r0, (uint32_t)min_size(nr, r0 + chunk), C, V, (uint32_t)v0,
                                    (uint32_t)min_size(V, v0 + per_v), 0};
                a[2] = ops_range_arg(g, k, 2, args, v0, push[5] - v0, V, sizeof(float) * C);
                if (width) {
                    gpu_dispatch(g, k, a, push, (C / width + 7) / 8, 1, 1);
                    continue;
                }
                uint32_t nv = push[5] - push[4], ranges = nv < most ? nv : most;
                ranges = ranges < max_y ? ranges : max_y;
                push[6] = (nv + ranges - 1) / ranges;
                uint32_t wg = gpu_workgroup_1d(g), gx = (C + wg - 1) / wg;
                if (gx > gpu_info(g)->max_workgroup_count[0])
                    vkt_fatal("embedding_backward: %u channels need %u workgroups, over the device limit %u", C, gx,
                              gpu_info(g)->max_workgroup_count[0]);
                gpu_dispatch(g, k, a, push, gx, (nv + push[6] - 1) / push[6], 1);
            }
        }
    }
}

/* The reproducible texel backward of a whole micro-batch with the sums
 * over samples in its loop (repro_embedding_back.comp's samples variant):
 * one dispatch where the rows, the table and its stack fit a binding each
 * and the loops the device's limit (else 0, nothing recorded: the calls
 * per sample; GPT-2's vocabulary pushed after each sample is past
 * lavapipe's). VKTRAIN_REPRO_EMBED_LOOP=0 turns it off (tests: the same
 * bits either way). */
static int embed_back_samples(struct gpu *g, const struct embed_back *x)
{
    uint32_t T, levels;
    struct gpu_buffer *stack = repro_sample_stack(g, x->args[2].buf, 0, x->rows, &T, &levels);
    if (!stack || x->width != 4 || !repro_stack_texels(g) || !kernel_env_flag(KENV_REPRO_EMBED_LOOP, 1))
        return 0;
    struct gpu_kernel_desc d = {
        .shader = SHADER_repro_embedding_back_texel_vec4_samples,
        .n_bindings = 4,
        .bindings = {GPU_BIND_TEXEL_VEC4, GPU_BIND_STORAGE, GPU_BIND_STORAGE, GPU_BIND_IMAGE_VEC4},
        .push_size = 9 * sizeof(uint32_t)};
    struct gpu_kernel *k = gpu_kernel_get(g, &d);
    size_t elements = (size_t)x->V * x->C, stack_bytes = repro_stack_floats(elements, levels) * sizeof(float);
    struct gpu_arg a[4] = {x->args[0], x->args[1], x->args[2], {stack, 1, 0, stack_bytes}};
    size_t ub[4] = {x->ub[0], x->ub[1], 0, 0}, step;
    size_t per_r = ops_range_units(g, k, a, ub, &step), chunk = ops_loop_chunk(g);
    /* (llvmpipe counts the iterations of nested loops together: rows,
     * then V per sample, and the samples, under its bound) */
    size_t iterations = (size_t)x->rows + (size_t)(x->rows / T) * ((size_t)x->V + 1) + 1;
    if (per_r < x->rows || iterations > chunk || elements * sizeof(float) > gpu_binding_limit(g, GPU_BIND_STORAGE) ||
        stack_bytes > gpu_binding_limit(g, GPU_BIND_IMAGE_VEC4))
        return 0;
    uint32_t push[9] = {0, x->rows, x->C, x->V, 0, x->V, T, levels, 0};
    gpu_dispatch(g, k, a, push, (x->C / 4 + 7) / 8, 1, 1);
    return 1;
}

void op_embedding_backward(struct gpu *g, struct gpu_buffer *ids, struct gpu_buffer *dout, struct gpu_buffer *dtable,
                           uint32_t rows, uint32_t C, uint32_t V)
{
    ops_check("embedding_backward", "ids", ids, sizeof(int32_t) * rows);
    ops_check("embedding_backward", "output gradient", dout, sizeof(float) * rows * C);
    ops_check("embedding_backward", "table gradient", dtable, sizeof(float) * V * C);
    if (gpu_buffer_dtype(dtable) != GPU_DTYPE_F32)
        vkt_fatal("embedding_backward: the table gradient '%s' holds bf16 values; it must be fp32 (a bf16 table is "
                  "frozen, with no gradient)",
                  gpu_buffer_name(dtable));
    struct gpu_arg args[3] = {{.buf = ids}, {.buf = dout}, {.buf = dtable, .write = 1}};
    size_t ub[3] = {sizeof(int32_t), sizeof(float) * C, 0};
    int width = texel_width(g, C % 4 == 0, sizeof(float) * C);
    struct kernel_pick pick = kernel_pick_embedding_back(g, width);
    struct gpu_kernel *k;
    if (width) {
        /* bindings: dout as texels, then ids, dtable; 8 column chunks per
         * workgroup, so a few groups keep every lavapipe thread busy */
        struct gpu_arg t = args[0];
        args[0] = args[1], args[1] = t;
        ub[0] = sizeof(float) * C, ub[1] = sizeof(int32_t);
        k = ops_texel_variant(g, pick.widths, width, 1, 0, 3, 6 * sizeof(uint32_t), 0, NULL);
    } else {
        k = ops_kernel(g, pick.shader, 3, 7 * sizeof(uint32_t), 1);
    }
    struct embed_back x = {k, {args[0], args[1], args[2]}, {ub[0], ub[1], ub[2]}, rows, C, V, width, pick.path};
    if (kernel_path_repro(pick.path)) { /* a parameter's gradient: summed per sample */
        if (!embed_back_samples(g, &x))
            repro_param_rows(g, dtable, 0, rows, embed_back_rows, &x);
    } else
        embed_back_rows(g, &x, 0, rows);
}

void op_rope_table(float *table, uint32_t max_pos, uint32_t rot, double theta, const struct op_rope_scaling *scaling)
{
    /* inv_freq is rounded to float first, as Hugging Face computes it; the
     * scaling is shared with the reproducible table (repro_rope_table). */
    float attention = repro_rope_attention(scaling);
    for (uint32_t j = 0; j < rot / 2; j++) {
        float inv_freq = repro_rope_scaled((float)(1.0 / pow(theta, (double)(2 * j) / rot)), j, scaling);
        for (uint32_t p = 0; p < max_pos; p++) {
            double a = (double)p * (double)inv_freq;
            table[((size_t)p * (rot / 2) + j) * 2 + 0] = (float)cos(a) * attention;
            table[((size_t)p * (rot / 2) + j) * 2 + 1] = (float)sin(a) * attention;
        }
    }
}

void op_rope(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *positions, struct gpu_buffer *table,
             uint32_t rows, uint32_t H, uint32_t hd, uint32_t rot, uint32_t max_pos, int backward)
{
    if (rot % 2 || !rot || rot > hd)
        vkt_fatal("rope: %u rotary dimensions of a head of %u (they must be even, and at most the head)", rot, hd);
    ops_check("rope", "input", x, sizeof(float) * rows * H * hd);
    ops_check("rope", "positions", positions, sizeof(int32_t) * rows);
    ops_check("rope", "cos/sin table", table, sizeof(float) * max_pos * rot);
    size_t n = (size_t)rows * H * (rot / 2), row = (size_t)H * hd * sizeof(float), table_row = rot * sizeof(float);
    struct {
        uint32_t n, H, hd, max_pos;
        float sign;
        uint32_t p0, p1, rh;
    } push = {0, H, hd, max_pos, backward ? -1.0f : 1.0f, 0, 0, rot / 2};
    /* x and the positions in ranges of rows (ops_elements), the table in
     * ranges of positions: each dispatch rotates the rows whose position
     * is in its range */
    int width = texel_width(g, rot % 8 == 0 && hd % 4 == 0, row > table_row ? row : table_row);
    struct kernel_pick pick = kernel_pick_rope(g, width);
    struct gpu_kernel *k;
    struct gpu_arg args[4];
    size_t ub[4], count = n, unit = (size_t)H * (rot / 2);
    int it; /* the table's binding */
    if (width) {
        /* bindings: table, x as texels, then positions, x (written) */
        uint32_t wg = gpu_workgroup_1d(g);
        k = ops_texel_variant(g, pick.widths, width, 2, 0, 4, sizeof push, 1, &wg);
        struct gpu_arg targs[4] = {{.buf = table}, {.buf = x}, {.buf = positions}, {.buf = x, .write = 1}};
        const size_t tub[4] = {0, row, sizeof(int32_t), row};
        memcpy(args, targs, sizeof targs), memcpy(ub, tub, sizeof tub);
        it = 0, count /= (size_t)width, unit /= (size_t)width;
    } else {
        k = kernel_path_repro(pick.path) ? ops_repro_kernel(g, pick.walks, 3, 0, sizeof push)
                                         : ops_kernel(g, pick.shader, 3, sizeof push, 1);
        struct gpu_arg sargs[3] = {{.buf = positions}, {.buf = table}, {.buf = x, .write = 1}};
        const size_t sub[3] = {sizeof(int32_t), 0, row};
        memcpy(args, sargs, sizeof sargs), memcpy(ub, sub, sizeof sub);
        it = 1;
    }
    size_t per_p = table_rows(g, k, args, it, max_pos, table_row, 0);
    struct gpu_arg a[4];
    memcpy(a, args, sizeof a);
    for (size_t p0 = 0; p0 < max_pos; p0 += per_p) {
        push.p0 = (uint32_t)p0, push.p1 = (uint32_t)min_size(max_pos, p0 + per_p);
        a[it] = ops_range_arg(g, k, it, args, p0, push.p1 - p0, max_pos, table_row);
        ops_elements(g, k, a, ub, &push, count, unit, 1);
    }
}
