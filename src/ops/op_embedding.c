/* op_embedding: token and learned-position embeddings with their
 * deterministic backward, and rotary position embedding (RoPE, Hugging
 * Face rotate_half) with its cos/sin table. On CPU devices (texel family)
 * the kernels are embedding_texel.comp and rope_texel.comp: float inputs
 * through texel views (RGBA32F when the contiguous width is a multiple of
 * 4, else R32F), ids and outputs storage. Never allocates. */
#include <math.h>

#include "ops_internal.h"
#include "ops_texel.h"
#include "vktrain/util.h"

/* Texel width over these float buffers: 4 (RGBA32F views) when vec4 is
 * set and they fit, 1 (R32F), or 0 (the storage kernels). */
static int texel_width(const struct gpu *g, int vec4, struct gpu_buffer *const *bufs, int n)
{
    if (vec4 && ops_texel_usable(g, GPU_BIND_TEXEL_VEC4, bufs, n))
        return 4;
    return ops_texel_usable(g, GPU_BIND_TEXEL_F32, bufs, n) ? 1 : 0;
}

void op_embedding(struct gpu *g, struct gpu_buffer *tokens, struct gpu_buffer *positions, struct gpu_buffer *wte,
                  struct gpu_buffer *wpe, struct gpu_buffer *out, uint32_t rows, uint32_t C, uint32_t V, uint32_t P)
{
    ops_check("embedding", "tokens", tokens, sizeof(int32_t) * rows);
    ops_check("embedding", "token table", wte, sizeof(float) * V * C);
    ops_check("embedding", "output", out, sizeof(float) * rows * C);
    if (wpe) {
        ops_check("embedding", "positions", positions, sizeof(int32_t) * rows);
        ops_check("embedding", "position table", wpe, sizeof(float) * P * C);
    }
    struct gpu_arg args[5] = {{.buf = tokens}, {.buf = wpe ? positions : tokens}, {.buf = wte},
                              {.buf = wpe ? wpe : wte}, {.buf = out, .write = 1}};
    uint32_t push[5] = {rows * C, C, V, wpe ? P : 1, wpe != NULL};
    struct gpu_buffer *in[2] = {wte, wpe};
    int width = texel_width(g, C % 4 == 0, in, 2);
    if (width) {
        /* bindings: wte, wpe as texels, then tokens, positions, out */
        struct gpu_arg targs[5] = {args[2], args[3], args[0], args[1], args[4]};
        uint32_t wg = gpu_workgroup_1d(g);
        push[0] = rows * (C / width);
        ops_dispatch_elements(g, ops_texel_variant(g, "embedding_texel_fwd", width, 2, 0, 5, sizeof push, 1, &wg),
                              targs, push, push[0], 1);
        return;
    }
    ops_dispatch_elements(g, ops_kernel(g, "embedding", 5, sizeof push, 1), args, push, (size_t)rows * C, 1);
}

void op_embedding_backward(struct gpu *g, struct gpu_buffer *ids, struct gpu_buffer *dout,
                           struct gpu_buffer *dtable, uint32_t rows, uint32_t C, uint32_t V)
{
    ops_check("embedding_backward", "ids", ids, sizeof(int32_t) * rows);
    ops_check("embedding_backward", "output gradient", dout, sizeof(float) * rows * C);
    ops_check("embedding_backward", "table gradient", dtable, sizeof(float) * V * C);
    struct gpu_arg args[3] = {{.buf = ids}, {.buf = dout}, {.buf = dtable, .write = 1}};
    int width = texel_width(g, C % 4 == 0, &dout, 1);
    struct gpu_kernel *k;
    if (width) {
        /* bindings: dout as texels, then ids, dtable; 8 column chunks per
         * workgroup, so a few groups keep every lavapipe thread busy */
        struct gpu_arg t = args[0];
        args[0] = args[1], args[1] = t;
        k = ops_texel_variant(g, "embedding_texel_back", width, 1, 0, 3, 4 * sizeof(uint32_t), 0, NULL);
    } else {
        k = ops_kernel(g, "embedding_back", 3, 4 * sizeof(uint32_t), 1);
    }
    /* Rows in ranges within the device's loop limit, in order. */
    uint32_t chunk = ops_loop_chunk(g);
    for (uint32_t r0 = 0; r0 < rows; r0 += chunk) {
        uint32_t push[4] = {r0, rows - r0 < chunk ? rows : r0 + chunk, C, V};
        if (width)
            gpu_dispatch(g, k, args, push, (C / width + 7) / 8, 1, 1);
        else
            ops_dispatch_elements(g, k, args, push, C, 0);
    }
}

/* One frequency after scaling, in float as transformers computes it. */
static float rope_scaled(float inv_freq, const struct op_rope_scaling *s)
{
    if (!s || s->type == OP_ROPE_DEFAULT)
        return inv_freq;
    float factor = (float)s->factor;
    if (s->type == OP_ROPE_LINEAR)
        return inv_freq / factor;
    float old = (float)s->original_max, lo = (float)s->low_freq_factor, hi = (float)s->high_freq_factor;
    float wavelen = 2.0f * 3.14159265358979323846f / inv_freq;
    if (wavelen > old / lo) /* low frequency: scaled */
        return inv_freq / factor;
    if (wavelen < old / hi) /* high frequency: kept */
        return inv_freq;
    float smooth = (old / wavelen - lo) / (hi - lo);
    return (1.0f - smooth) * inv_freq / factor + smooth * inv_freq;
}

void op_rope_table(float *table, uint32_t max_pos, uint32_t hd, double theta, const struct op_rope_scaling *scaling)
{
    /* inv_freq is rounded to float first, as Hugging Face computes it. */
    for (uint32_t j = 0; j < hd / 2; j++) {
        float inv_freq = rope_scaled((float)(1.0 / pow(theta, (double)(2 * j) / hd)), scaling);
        for (uint32_t p = 0; p < max_pos; p++) {
            double a = (double)p * (double)inv_freq;
            table[((size_t)p * (hd / 2) + j) * 2 + 0] = (float)cos(a);
            table[((size_t)p * (hd / 2) + j) * 2 + 1] = (float)sin(a);
        }
    }
}

void op_rope(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *positions, struct gpu_buffer *table,
             uint32_t rows, uint32_t H, uint32_t hd, uint32_t max_pos, int backward)
{
    if (hd % 2)
        vkt_fatal("rope: head dimension %u is odd", hd);
    ops_check("rope", "input", x, sizeof(float) * rows * H * hd);
    ops_check("rope", "positions", positions, sizeof(int32_t) * rows);
    ops_check("rope", "cos/sin table", table, sizeof(float) * max_pos * hd);
    struct gpu_arg args[3] = {{.buf = positions}, {.buf = table}, {.buf = x, .write = 1}};
    size_t n = (size_t)rows * H * (hd / 2);
    struct {
        uint32_t n, H, hd, max_pos;
        float sign;
    } push = {(uint32_t)n, H, hd, max_pos, backward ? -1.0f : 1.0f};
    struct gpu_buffer *in[2] = {table, x};
    int width = texel_width(g, hd % 8 == 0, in, 2);
    if (width) {
        /* bindings: table, x as texels, then positions, x (written) */
        struct gpu_arg targs[4] = {{.buf = table}, {.buf = x}, {.buf = positions}, {.buf = x, .write = 1}};
        uint32_t wg = gpu_workgroup_1d(g);
        push.n = (uint32_t)(n / width);
        ops_dispatch_elements(g, ops_texel_variant(g, "rope_texel", width, 2, 0, 4, sizeof push, 1, &wg), targs,
                              &push, push.n, 1);
        return;
    }
    ops_dispatch_elements(g, ops_kernel(g, "rope", 3, sizeof push, 1), args, &push, n, 1);
}
