/* op_matmul: the three matmul layouts of a linear layer. Picks the kernel
 * per device class: texel kernels (vec4 views when the contiguous
 * dimensions are multiples of 4, scalar views otherwise) on CPU drivers,
 * the shared-memory tiled kernel on GPUs, in a variant per layout and
 * operand alignment, with tile sizes for the device and the grid
 * (ops_tiled_config, op_matmul_tiled.c).
 *
 * A product is one dispatch unless an operand bound as a storage buffer
 * exceeds the binding limit (maxStorageBufferRange, 128 MiB on lavapipe:
 * the 50304 x 768 LM head, its gradient, the logits of >= 667 tokens) or
 * the grid exceeds the workgroup count limit. Then it is split into blocks
 * of output rows, output columns and (tiled kernel only, whose inputs are
 * storage buffers too) the reduction; each block is one dispatch whose
 * storage bindings are ranges starting at aligned offsets, and blocks
 * after the first along the reduction accumulate. The texel kernels are
 * specialized for blocks (SPLIT = 1), so the one-dispatch case keeps its
 * unsplit inner loops. On a device with a loop limit (llvmpipe ends a loop
 * after 65,535 iterations) a reduction too long for one invocation's walk
 * is split into accumulating blocks as well.
 *
 * The weight operand of nt and nn (W) may hold bf16 values (a frozen base
 * with model.base_dtype bf16, tagged by gpu_buffer_set_dtype): the kernels
 * then read it through bf16 views (texel) or as uints (tiled) and widen
 * each value to fp32 by a shift, so they compute exactly what the fp32
 * kernels compute on the same weights rounded to bf16. It may also be a
 * 4-bit weight (GPU_DTYPE_Q4, include/vktrain/quant4.h), bound whole (its
 * header and scales lead its nibbles) and read by the "q4" variants of
 * the texel, tiled and cooperative-matrix kernels: the bits of those
 * kernels on the dequantized fp32 weight (a bf16 weight keeps the texel
 * or tiled kernels under f16 or bf16 matmul inputs).
 *
 * On the texel family a tn into a weight gradient of at least 512 x 512
 * (the LM head's included) runs as a transpose of dY into the gpu's matmul
 * scratch and nn on it (tn_transposed; op_matmul_tn_scratch sizes the
 * scratch), where the caller provided one.
 *
 * With f16 or bf16 matmul inputs (gpu_set_matmul_inputs: precision bf16,
 * VKTRAIN_MATMUL_INPUTS) products of fp32 operands run on the device's
 * cooperative matrices (shaders/default/matmul_coopmat.comp) in both families: the
 * tiled kernel's interface, blocks and split-k, with the device's matrix
 * shape (tiles of 4 x 4 of them) and a walk bounded by llvmpipe's loop
 * limit. A bf16 weight keeps its own kernels.
 *
 * In the reproducible mode (kernel_pick_matmul) every layout records
 * repro_matmul_at instead (include/vktrain/repro.h: one accumulator per
 * output in k order, fp32 operands only). Never allocates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"
#include "ops_texel.h"
#include "vktrain/kernel_select.h"
#include "vktrain/repro.h"
#include "vktrain/util.h"

enum layout { NT, NN, TN };
/* The dimensions of a product C[ROW, COL] = sum over RED of A·B. */
enum dim { ROW, COL, RED };

/* An operand as a row-major matrix: its rows run along `outer`, its
 * contiguous elements along `inner`, rows `ld` elements apart (ld is the
 * full size of `inner`, which is never bound partially by rows), its first
 * element `off` elements into its buffer. */
struct operand {
    enum dim outer, inner;
    uint32_t ld;
    size_t off;
};

struct matmul_push_texel { /* accumulate: the kernel's spec constant 1 */
    uint32_t M, N, K;
    uint32_t a0, lda, b0, ldb, c0, ldc;
};
struct matmul_push_tiled {
    uint32_t M, N, K, accumulate;
    uint32_t lda, ldb, a0, b0, c0, ldc;
    uint32_t kpart, zc; /* split-k: each z's reduction range and output offset */
};

/* First element of operand o's block that starts at s[], and the number of
 * elements from there to the block's last element for block sizes n[]. */
static size_t block_first(const struct operand *o, const size_t *s)
{
    return o->off + s[o->outer] * o->ld + s[o->inner];
}
static size_t block_extent(const struct operand *o, const size_t *n)
{
    return (n[o->outer] - 1) * o->ld + n[o->inner];
}

/* The storage binding of operand o's block, of elements of `elem` bytes:
 * from the aligned offset at or before its first element to its last (to
 * the end of its last 4 bytes, which a bf16 operand's kernel reads as a
 * uint); *base = the first element's index within the binding. */
static struct gpu_arg storage_arg(struct gpu_buffer *b, int write, const struct operand *o, const size_t *s,
                                  const size_t *n, size_t align, size_t elem, uint32_t *base)
{
    size_t first = block_first(o, s) * elem;
    size_t end = first + block_extent(o, n) * elem;
    end += (4 - end % 4) % 4;
    size_t off = first - first % align;
    *base = (uint32_t)((first - off) / elem);
    return (struct gpu_arg){.buf = b, .write = write, .offset = off, .range = end - off};
}

/* The RGBA32F storage texel view of output block c (fp32, its first
 * element on a texel), from the view-aligned offset at or before that
 * element; *base = the element's index within the view. */
static struct gpu_arg image_arg(struct gpu *g, struct gpu_buffer *b, const struct operand *o, const size_t *s,
                                const size_t *n, uint32_t *base)
{
    return storage_arg(b, 1, o, s, n, gpu_image_vec4_alignment(g), sizeof(float), base);
}

static int tn_transposed(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *x, struct gpu_buffer *dw, uint32_t M,
                         uint32_t N, uint32_t K, int accumulate, const size_t *off, uint32_t lda);

/* The alignment of a storage binding's offset, at least a float's. */
static size_t storage_align(const struct gpu_device_info *info)
{
    return info->min_storage_offset_alignment > 4 ? info->min_storage_offset_alignment : 4;
}

/* Split-k on the tiled kernel k: the product of operands o of bufs[]
 * (one block of size[]) as `parts` partial products over kpart rows of
 * the reduction each, into `scratch` (need bytes) in one dispatch, then
 * added into the output in part order (matmul_splitk_sum.comp). */
static void splitk(struct gpu *g, struct gpu_kernel *k, struct gpu_buffer **bufs, const struct operand *o,
                   const size_t *size, const size_t *tile, uint32_t parts, size_t kpart, struct gpu_buffer *scratch,
                   size_t need, int accumulate)
{
    const struct gpu_device_info *info = gpu_info(g);
    size_t align = storage_align(info);
    const size_t s[3] = {0, 0, 0};
    uint32_t outputs = (uint32_t)(size[ROW] * size[COL]);
    struct matmul_push_tiled p = {.M = (uint32_t)size[ROW],
                                  .N = (uint32_t)size[COL],
                                  .K = (uint32_t)size[RED],
                                  .lda = o[0].ld,
                                  .ldb = o[1].ld,
                                  .ldc = (uint32_t)size[COL],
                                  .kpart = (uint32_t)kpart,
                                  .zc = outputs};
    struct gpu_arg args[3] = {storage_arg(bufs[0], 0, &o[0], s, size, align, sizeof(float), &p.a0),
                              storage_arg(bufs[1], 0, &o[1], s, size, align, sizeof(float), &p.b0),
                              {.buf = scratch, .write = 1, .range = need}};
    gpu_dispatch(g, k, args, &p, (uint32_t)ceil_div(size[COL], tile[COL]), (uint32_t)ceil_div(size[ROW], tile[ROW]),
                 parts);

    struct gpu_kernel_desc d = {.shader = SHADER_matmul_splitk_sum,
                                .n_bindings = 2,
                                .bindings = {GPU_BIND_STORAGE, GPU_BIND_STORAGE},
                                .push_size = 7 * sizeof(uint32_t)};
    uint32_t gx = (uint32_t)min_size(ceil_div(outputs, 256), info->max_workgroup_count[0]);
    uint32_t push[7] = {p.M, p.N, o[2].ld, 0, parts, (uint32_t) !!accumulate, gx * 256};
    struct gpu_arg sum[2] = {{.buf = scratch, .range = need},
                             storage_arg(bufs[2], 1, &o[2], s, size, align, sizeof(float), &push[3])};
    gpu_dispatch(g, gpu_kernel_get(g, &d), sum, push, gx, 1, 1);
}

/* The matmul kernels: family, layout, loads (vec4, bvec4: B alone as
 * vec4, shift, scalar), the variant's extra (bf16 weight, fused bias, k16
 * tiles, or the cooperative matrices' f16 or bf16 inputs) and img (the
 * output an RGBA32F storage texel view): every variant, by its constant. */
enum matmul_family { MATMUL_TEXEL, MATMUL_COOPMAT, MATMUL_TILED };
static const struct matmul_variant {
    enum matmul_family family;
    enum layout layout;
    const char *loads, *extra;
    int img;
    enum shader_id id;
} matmul_variants[] = {
    {MATMUL_COOPMAT, NT, "vec4", "f16", 0, SHADER_matmul_coopmat_nt_f16_vec4},
    {MATMUL_COOPMAT, NT, "bvec4", "f16", 0, SHADER_matmul_coopmat_nt_f16_bvec4},
    {MATMUL_COOPMAT, NT, "scalar", "f16", 0, SHADER_matmul_coopmat_nt_f16_scalar},
    {MATMUL_COOPMAT, NN, "vec4", "f16", 0, SHADER_matmul_coopmat_nn_f16_vec4},
    {MATMUL_COOPMAT, NN, "bvec4", "f16", 0, SHADER_matmul_coopmat_nn_f16_bvec4},
    {MATMUL_COOPMAT, NN, "scalar", "f16", 0, SHADER_matmul_coopmat_nn_f16_scalar},
    {MATMUL_COOPMAT, TN, "vec4", "f16", 0, SHADER_matmul_coopmat_tn_f16_vec4},
    {MATMUL_COOPMAT, TN, "bvec4", "f16", 0, SHADER_matmul_coopmat_tn_f16_bvec4},
    {MATMUL_COOPMAT, TN, "scalar", "f16", 0, SHADER_matmul_coopmat_tn_f16_scalar},
    {MATMUL_COOPMAT, NT, "vec4", "bf16", 0, SHADER_matmul_coopmat_nt_bf16_vec4},
    {MATMUL_COOPMAT, NT, "bvec4", "bf16", 0, SHADER_matmul_coopmat_nt_bf16_bvec4},
    {MATMUL_COOPMAT, NT, "scalar", "bf16", 0, SHADER_matmul_coopmat_nt_bf16_scalar},
    {MATMUL_COOPMAT, NN, "vec4", "bf16", 0, SHADER_matmul_coopmat_nn_bf16_vec4},
    {MATMUL_COOPMAT, NN, "bvec4", "bf16", 0, SHADER_matmul_coopmat_nn_bf16_bvec4},
    {MATMUL_COOPMAT, NN, "scalar", "bf16", 0, SHADER_matmul_coopmat_nn_bf16_scalar},
    {MATMUL_COOPMAT, TN, "vec4", "bf16", 0, SHADER_matmul_coopmat_tn_bf16_vec4},
    {MATMUL_COOPMAT, TN, "bvec4", "bf16", 0, SHADER_matmul_coopmat_tn_bf16_bvec4},
    {MATMUL_COOPMAT, TN, "scalar", "bf16", 0, SHADER_matmul_coopmat_tn_bf16_scalar},
    {MATMUL_COOPMAT, NT, "vec4", "f16_q4", 0, SHADER_matmul_coopmat_nt_f16_vec4_q4},
    {MATMUL_COOPMAT, NT, "bvec4", "f16_q4", 0, SHADER_matmul_coopmat_nt_f16_bvec4_q4},
    {MATMUL_COOPMAT, NT, "scalar", "f16_q4", 0, SHADER_matmul_coopmat_nt_f16_scalar_q4},
    {MATMUL_COOPMAT, NN, "vec4", "f16_q4", 0, SHADER_matmul_coopmat_nn_f16_vec4_q4},
    {MATMUL_COOPMAT, NN, "bvec4", "f16_q4", 0, SHADER_matmul_coopmat_nn_f16_bvec4_q4},
    {MATMUL_COOPMAT, NN, "scalar", "f16_q4", 0, SHADER_matmul_coopmat_nn_f16_scalar_q4},
    {MATMUL_COOPMAT, NT, "vec4", "bf16_q4", 0, SHADER_matmul_coopmat_nt_bf16_vec4_q4},
    {MATMUL_COOPMAT, NT, "bvec4", "bf16_q4", 0, SHADER_matmul_coopmat_nt_bf16_bvec4_q4},
    {MATMUL_COOPMAT, NT, "scalar", "bf16_q4", 0, SHADER_matmul_coopmat_nt_bf16_scalar_q4},
    {MATMUL_COOPMAT, NN, "vec4", "bf16_q4", 0, SHADER_matmul_coopmat_nn_bf16_vec4_q4},
    {MATMUL_COOPMAT, NN, "bvec4", "bf16_q4", 0, SHADER_matmul_coopmat_nn_bf16_bvec4_q4},
    {MATMUL_COOPMAT, NN, "scalar", "bf16_q4", 0, SHADER_matmul_coopmat_nn_bf16_scalar_q4},
    {MATMUL_TEXEL, NN, "vec4", "", 0, SHADER_matmul_nn_vec4},
    {MATMUL_TEXEL, NN, "shift", "", 0, SHADER_matmul_nn_shift},
    {MATMUL_TEXEL, NN, "scalar", "", 0, SHADER_matmul_nn_scalar},
    {MATMUL_TEXEL, NN, "vec4", "bf16", 0, SHADER_matmul_nn_vec4_bf16},
    {MATMUL_TEXEL, NN, "shift", "bf16", 0, SHADER_matmul_nn_shift_bf16},
    {MATMUL_TEXEL, NN, "scalar", "bf16", 0, SHADER_matmul_nn_scalar_bf16},
    {MATMUL_TEXEL, NN, "vec4", "q4", 0, SHADER_matmul_nn_vec4_q4},
    {MATMUL_TEXEL, NN, "shift", "q4", 0, SHADER_matmul_nn_shift_q4},
    {MATMUL_TEXEL, NN, "scalar", "q4", 0, SHADER_matmul_nn_scalar_q4},
    {MATMUL_TEXEL, NN, "vec4", "q4", 1, SHADER_matmul_nn_vec4_q4_img},
    {MATMUL_TEXEL, NN, "shift", "q4", 1, SHADER_matmul_nn_shift_q4_img},
    {MATMUL_TEXEL, NN, "vec4", "", 1, SHADER_matmul_nn_vec4_img},
    {MATMUL_TEXEL, NN, "shift", "", 1, SHADER_matmul_nn_shift_img},
    {MATMUL_TEXEL, NN, "vec4", "bf16", 1, SHADER_matmul_nn_vec4_bf16_img},
    {MATMUL_TEXEL, NN, "shift", "bf16", 1, SHADER_matmul_nn_shift_bf16_img},
    {MATMUL_TEXEL, NT, "vec4", "", 0, SHADER_matmul_nt_vec4},
    {MATMUL_TEXEL, NT, "scalar", "", 0, SHADER_matmul_nt_scalar},
    {MATMUL_TEXEL, NT, "vec4", "bf16", 0, SHADER_matmul_nt_vec4_bf16},
    {MATMUL_TEXEL, NT, "scalar", "bf16", 0, SHADER_matmul_nt_scalar_bf16},
    {MATMUL_TEXEL, NT, "vec4", "q4", 0, SHADER_matmul_nt_vec4_q4},
    {MATMUL_TEXEL, NT, "scalar", "q4", 0, SHADER_matmul_nt_scalar_q4},
    {MATMUL_TEXEL, NT, "vec4", "q4", 1, SHADER_matmul_nt_vec4_q4_img},
    {MATMUL_TEXEL, NT, "vec4", "bias", 0, SHADER_matmul_nt_vec4_bias},
    {MATMUL_TEXEL, NT, "scalar", "bias", 0, SHADER_matmul_nt_scalar_bias},
    {MATMUL_TEXEL, NT, "vec4", "", 1, SHADER_matmul_nt_vec4_img},
    {MATMUL_TEXEL, NT, "vec4", "bf16", 1, SHADER_matmul_nt_vec4_bf16_img},
    {MATMUL_TEXEL, NT, "vec4", "bias", 1, SHADER_matmul_nt_vec4_bias_img},
    {MATMUL_TILED, NT, "vec4", "", 0, SHADER_matmul_tiled_nt_vec4},
    {MATMUL_TILED, NT, "bvec4", "", 0, SHADER_matmul_tiled_nt_bvec4},
    {MATMUL_TILED, NT, "scalar", "", 0, SHADER_matmul_tiled_nt_scalar},
    {MATMUL_TILED, NN, "vec4", "", 0, SHADER_matmul_tiled_nn_vec4},
    {MATMUL_TILED, NN, "bvec4", "", 0, SHADER_matmul_tiled_nn_bvec4},
    {MATMUL_TILED, NN, "scalar", "", 0, SHADER_matmul_tiled_nn_scalar},
    {MATMUL_TILED, NT, "vec4", "bf16", 0, SHADER_matmul_tiled_nt_vec4_bf16},
    {MATMUL_TILED, NT, "bvec4", "bf16", 0, SHADER_matmul_tiled_nt_bvec4_bf16},
    {MATMUL_TILED, NT, "scalar", "bf16", 0, SHADER_matmul_tiled_nt_scalar_bf16},
    {MATMUL_TILED, NN, "vec4", "bf16", 0, SHADER_matmul_tiled_nn_vec4_bf16},
    {MATMUL_TILED, NN, "bvec4", "bf16", 0, SHADER_matmul_tiled_nn_bvec4_bf16},
    {MATMUL_TILED, NN, "scalar", "bf16", 0, SHADER_matmul_tiled_nn_scalar_bf16},
    {MATMUL_TILED, NT, "vec4", "q4", 0, SHADER_matmul_tiled_nt_vec4_q4},
    {MATMUL_TILED, NT, "bvec4", "q4", 0, SHADER_matmul_tiled_nt_bvec4_q4},
    {MATMUL_TILED, NT, "scalar", "q4", 0, SHADER_matmul_tiled_nt_scalar_q4},
    {MATMUL_TILED, NN, "vec4", "q4", 0, SHADER_matmul_tiled_nn_vec4_q4},
    {MATMUL_TILED, NN, "bvec4", "q4", 0, SHADER_matmul_tiled_nn_bvec4_q4},
    {MATMUL_TILED, NN, "scalar", "q4", 0, SHADER_matmul_tiled_nn_scalar_q4},
    {MATMUL_TILED, TN, "vec4", "", 0, SHADER_matmul_tiled_tn_vec4},
    {MATMUL_TILED, TN, "bvec4", "", 0, SHADER_matmul_tiled_tn_bvec4},
    {MATMUL_TILED, TN, "scalar", "", 0, SHADER_matmul_tiled_tn_scalar},
    {MATMUL_TILED, NT, "vec4", "k16", 0, SHADER_matmul_tiled_nt_vec4_k16},
    {MATMUL_TILED, NN, "vec4", "k16", 0, SHADER_matmul_tiled_nn_vec4_k16},
    {MATMUL_TILED, TN, "vec4", "k16", 0, SHADER_matmul_tiled_tn_vec4_k16},
    {MATMUL_TEXEL, TN, "vec4", "", 0, SHADER_matmul_tn_vec4},
    {MATMUL_TEXEL, TN, "shift", "", 0, SHADER_matmul_tn_shift},
    {MATMUL_TEXEL, TN, "scalar", "", 0, SHADER_matmul_tn_scalar},
    {MATMUL_TEXEL, TN, "vec4", "", 1, SHADER_matmul_tn_vec4_img},
    {MATMUL_TEXEL, TN, "shift", "", 1, SHADER_matmul_tn_shift_img},
};

static enum shader_id matmul_shader(enum matmul_family f, enum layout l, const char *loads, const char *extra, int img)
{
    for (size_t i = 0; i < sizeof matmul_variants / sizeof matmul_variants[0]; i++) {
        const struct matmul_variant *v = &matmul_variants[i];
        if (v->family == f && v->layout == l && !strcmp(v->loads, loads) && !strcmp(v->extra, extra) && v->img == img)
            return v->id;
    }
    static const char *const fam[] = {"texel", "cooperative-matrix", "tiled"}, *const lay[] = {"nt", "nn", "tn"};
    vkt_fatal("no %s matmul kernel for %s with %s loads%s%s%s in shaders/", fam[f], lay[l], loads, *extra ? ", " : "",
              extra, img ? ", image output" : "");
}

/* a, b are the inputs, c the output; (M, N, K) as in ops.h for the layout;
 * off[] their first elements (NULL: 0); ld[] their row strides in
 * elements (NULL or 0: packed rows). bias (nt on packed operands, else
 * NULL): added to the outputs as they are stored where the product is one
 * dispatch of a texel kernel on fp32 operands; returns whether it was. */
static int matmul(struct gpu *g, enum layout l, struct gpu_buffer *a, struct gpu_buffer *b, struct gpu_buffer *c,
                  uint32_t M, uint32_t N, uint32_t K, int accumulate, const size_t *off, const uint32_t *ld,
                  struct gpu_buffer *bias)
{
    static const char *names[] = {"matmul_nt", "matmul_nn", "matmul_tn"};
    static const char *roles[] = {"first input", "second input", "output"};
    if (M == 0 || N == 0 || K == 0)
        vkt_fatal("%s: empty shape M=%u N=%u K=%u", names[l], M, N, K);
    const uint32_t packed[3] = {l == NT ? K : N, K, l == NT ? N : K}; /* the operands' row widths */
    uint32_t lds[3];
    for (int i = 0; i < 3; i++) {
        lds[i] = ld && ld[i] ? ld[i] : packed[i];
        if (lds[i] < packed[i])
            vkt_fatal("%s: the %s has rows %u elements apart, fewer than its %u columns", names[l], roles[i], lds[i],
                      packed[i]);
    }
    enum gpu_matmul_inputs inputs = gpu_matmul_inputs(g);
    int reproducible = kernel_path_repro(kernel_pick_matmul(g));
    if (l == TN && !reproducible && inputs == GPU_MATMUL_FP32 &&
        tn_transposed(g, a, b, c, M, N, K, accumulate, off, lds[0]))
        return 0;
    gpu_profile_flops(g, 2.0 * M * N * K); /* the profile's GFLOP/s; all on the first dispatch if split */
    if (bias && reproducible && repro_matmul_nt_bias(g, a, b, bias, c, M, N, K, accumulate))
        return 1;
    if (reproducible) {
        static const enum repro_layout repro[] = {[NT] = REPRO_NT, [NN] = REPRO_NN, [TN] = REPRO_TN};
        if (lds[0] != packed[0] || lds[1] != packed[1] || lds[2] != packed[2])
            vkt_fatal("%s: the reproducible kernels take operands of packed rows", names[l]);
        if (l == TN) /* a parameter's gradient: summed per sample (repro_param_rows) */
            repro_matmul_grad(g, a, b, c, M, N, K, accumulate, off);
        else
            repro_matmul_at(g, repro[l], a, b, c, M, N, K, accumulate, off);
        return 0;
    }
    /* C[rows, cols] = sum over red; operands A, B, C as matrices. */
    const size_t size[3] = {l == TN ? N : M, l == NT ? N : K, l == NT ? K : l == NN ? N : M};
    struct operand opd[3][3] = {
        [NT] = {{ROW, RED, K}, {COL, RED, K}, {ROW, COL, N}}, /* X[M,K], W[N,K], Y[M,N] */
        [NN] = {{ROW, RED, N}, {RED, COL, K}, {ROW, COL, K}}, /* dY[M,N], W[N,K], dX[M,K] */
        [TN] = {{RED, ROW, N}, {RED, COL, K}, {ROW, COL, K}}, /* dY[M,N], X[M,K], dW[N,K] */
    };
    struct operand *o = opd[l];
    struct gpu_buffer *bufs[3] = {a, b, c};
    int bf16 = gpu_buffer_dtype(b) == GPU_DTYPE_BF16, q4 = gpu_buffer_dtype(b) == GPU_DTYPE_Q4;
    for (int i = 0; i < 3; i++)
        if (gpu_buffer_dtype(bufs[i]) != GPU_DTYPE_F32 && !(i == 1 && l != TN))
            vkt_fatal("%s: the %s '%s' holds %s values; only the weight of nt and nn may", names[l], roles[i],
                      gpu_buffer_name(bufs[i]), gpu_buffer_dtype(bufs[i]) == GPU_DTYPE_BF16 ? "bf16" : "4-bit");
    if (bf16 && gpu_buffer_size(b) % 4)
        vkt_fatal("%s: the bf16 weight '%s' has %zu bytes, not a multiple of 4 (the tiled kernel reads uints)",
                  names[l], gpu_buffer_name(b), gpu_buffer_size(b));
    const size_t elem[3] = {sizeof(float), bf16 ? 2 : sizeof(float), sizeof(float)}; /* a 4-bit weight's: below */
    size_t bytes[3], end[3]; /* an operand's bytes; its end in its buffer */
    for (int i = 0; i < 3; i++) {
        o[i].off = off ? off[i] : 0;
        o[i].ld = lds[i];
        bytes[i] = size[o[i].outer] * o[i].ld * elem[i];
        end[i] = o[i].off * elem[i] + bytes[i];
        if (!(i == 1 && q4)) /* a 4-bit weight counts as its fp32 self (below) */
            ops_check(names[l], roles[i], bufs[i], end[i]);
    }
    /* A 4-bit weight is bound whole (its header, code and scales lead its
     * nibbles), and the product is cut into the blocks, and given the
     * family, of the same product on the dequantized fp32 weight (bytes
     * and end as if it were one): the same sums in the same order, so the
     * same bits. */

    const struct gpu_device_info *info = gpu_info(g);

    /* vec4 views: A's and B's rows are whole texels; shift: B's are, A is
     * read at any float offset (nn and tn, A = dY of N columns). nn reads
     * A as whole texels also where its rows are N floats padded to a
     * multiple of 4 (lda >= that; the pad holds zeros: ops.h), as the
     * kernel's packed width in a whole dispatch (matmul_nn.comp). */
    uint32_t a_cols = packed[0], a_whole = l == NN && o[0].ld >= (a_cols + 3) / 4 * 4 ? (a_cols + 3) / 4 * 4 : a_cols;
    int b4 = K % 4 == 0 && o[1].ld % 4 == 0 && o[1].off % 4 == 0,
        a4 = a_whole % 4 == 0 && o[0].ld % 4 == 0 && o[0].off % 4 == 0;
    int shift = b4 && !a4 && l != NT, aligned = (a4 && b4) || shift;
    enum gpu_binding_kind tf = aligned ? GPU_BIND_TEXEL_VEC4 : GPU_BIND_TEXEL_F32;
    enum gpu_binding_kind tk[2] = {tf, q4        ? GPU_BIND_TEXEL_U32
                                       : !bf16   ? tf
                                       : aligned ? GPU_BIND_TEXEL_BF16X4
                                                 : GPU_BIND_TEXEL_BF16};
    size_t tlimit[2] = {gpu_texel_limit(g, tk[0]), gpu_texel_limit(g, q4 ? tf : tk[1])};
    /* f16 or bf16 inputs: the cooperative-matrix kernel (fp32 operands
     * only), in the tiled kernel's place and with its interface */
    const uint32_t *cshape = inputs == GPU_MATMUL_BF16 ? info->coopmat_bf16 : info->coopmat_f16;
    int coop = inputs != GPU_MATMUL_FP32 && !bf16;
    int texel = !coop && gpu_kernel_class(g) == GPU_KERNELS_TEXEL && end[0] <= tlimit[0] && end[1] <= tlimit[1] &&
                (!bf16 || info->texel_bf16);
    if (q4 && (texel ? gpu_buffer_size(b) > gpu_texel_limit(g, GPU_BIND_TEXEL_U32)
                     : gpu_buffer_size(b) > ops_storage_limit(g)))
        vkt_fatal("%s: the 4-bit weight '%s' (%zu bytes) exceeds the %s limit (%zu bytes); it is bound whole", names[l],
                  gpu_buffer_name(b), gpu_buffer_size(b), texel ? "texel view" : "storage binding",
                  texel ? gpu_texel_limit(g, GPU_BIND_TEXEL_U32) : ops_storage_limit(g));

    /* Block sizes: every storage binding fits the limit with up to align-4
     * bytes of lead-in before its aligned offset (and 2 bytes after a bf16
     * block's end); rows and columns are whole tiles (or multiples of 4,
     * which vec4 views need) when split. */
    size_t align = storage_align(info);
    size_t limit = ops_storage_limit(g), lead = align - 4 + (bf16 ? 2 : 0);
    /* split-k (tn, tiled family): one block in all, the parts' partial
     * products in the gpu's matmul scratch (op_matmul_tn_scratch) */
    size_t kpart = size[RED], spans[3] = {bytes[0] + lead, bytes[1] + lead, bytes[2] + lead};
    uint32_t parts = l == TN && !texel ? ops_tiled_parts(g, size[ROW], size[COL], size[RED], spans, &kpart) : 1;
    struct gpu_buffer *scratch = gpu_matmul_scratch(g);
    size_t need = (size_t)parts * size[ROW] * size[COL] * sizeof(float);
    if (parts > 1 && (!scratch || need > gpu_buffer_size(scratch)))
        parts = 1, kpart = size[RED];
    struct ops_tiled_config tc = {0, 128, 0, 8, 0};
    if (!texel && !coop)
        tc = ops_tiled_config(info, names[l], size[ROW], size[COL], parts > 1);
    size_t tile[2] = {tc.tile, tc.tile};
    struct ops_coop_config cc = {0};
    if (coop) {
        cc = ops_coop_config(g, names[l], cshape);
        tile[ROW] = cc.tile[0], tile[COL] = cc.tile[1];
        if (kpart > cc.walk)
            parts = 1, kpart = size[RED];
    }
    size_t cap[3] = {min_size(size[ROW], (size_t)info->max_workgroup_count[1] * tile[ROW]),
                     min_size(size[COL], (size_t)info->max_workgroup_count[0] * tile[COL]), size[RED]};
    for (int i = texel ? 2 : 0; i < 3; i++) {
        if (bytes[i] <= limit)
            continue;
        size_t fit = limit > lead ? (limit - lead) / (o[i].ld * elem[i]) : 0;
        if (fit == 0)
            vkt_fatal("%s: one row of the %s '%s' (%u floats) exceeds the storage binding limit (%zu bytes)", names[l],
                      roles[i], gpu_buffer_name(bufs[i]), o[i].ld, limit);
        cap[o[i].outer] = min_size(cap[o[i].outer], fit);
    }
    /* One invocation walks the whole reduction of its block: the texel
     * kernels 4 elements (tn: tokens) per loop iteration, the tiled kernel
     * 8 (its inner loops have constant counts and unroll); it is counted
     * as 1, which leaves a margin of 8 iterations per step. */
    size_t per_iteration = texel ? 4 : 1;
    size_t walk = coop ? cc.walk : (size_t)ops_loop_chunk(g) * per_iteration;
    if (walk < cap[RED])
        cap[RED] = walk - walk % 16;
    for (int d = ROW; d <= COL; d++) {
        if (cap[d] == size[d])
            continue;
        cap[d] -= cap[d] >= tile[d] ? cap[d] % tile[d] : cap[d] >= 4 ? cap[d] % 4 : 0;
        /* a block must start on a texel where d runs along a vec4 view's rows */
        int whole = ((int)o[0].inner == d && a4 && !shift) || ((int)o[1].inner == d && b4);
        if (texel && aligned && whole && cap[d] % 4)
            vkt_fatal("%s: 4 rows of the output '%s' exceed the storage binding limit (%zu bytes)", names[l],
                      gpu_buffer_name(c), limit);
    }

    /* the bias as the outputs are stored: one dispatch, fp32 weights */
    int fuse = bias && gpu_buffer_dtype(bias) == GPU_DTYPE_F32 && texel && !bf16 && !q4 && cap[ROW] == size[ROW] &&
               cap[COL] == size[COL] && cap[RED] == size[RED] &&
               gpu_buffer_size(bias) <= gpu_texel_limit(g, GPU_BIND_TEXEL_F32);
    /* the output as an image (its stores whole texels): vec4 variants,
     * rows and the first element on texels, nt's N whole texels (nn's and
     * tn's K is), every block's view within the device's limit */
    size_t ia = gpu_image_vec4_alignment(g);
    int img = texel && aligned && info->image_vec4 && ia && o[2].ld % 4 == 0 && o[2].off % 4 == 0 &&
              (l != NT || N % 4 == 0) &&
              block_extent(&o[2], cap) * sizeof(float) + ia <= gpu_texel_limit(g, GPU_BIND_IMAGE_VEC4);
    /* The tiled and cooperative-matrix kernels: vec4 loads of an operand
     * whose rows, first element and contiguous extent are whole vec4, in
     * every block (blocks start on multiples of their size along each
     * dimension); A alone as floats is the "bvec4" variant (dY rows of
     * 50257 logits). A bf16 weight read as vec4 needs its bound ranges to
     * start on 8 bytes. */
    int v4[2];
    for (int i = 0; i < 2; i++) {
        size_t in = size[o[i].inner], bc = cap[o[i].inner];
        v4[i] = o[i].ld % 4 == 0 && o[i].off % 4 == 0 && in % 4 == 0 && (bc == in || bc % 4 == 0) &&
                (i == 0 || !bf16 || align % 8 == 0);
    }
    const char *loads = v4[0] && v4[1] ? "vec4" : v4[1] ? "bvec4" : "scalar";
    struct gpu_kernel *k = NULL, *k_acc = NULL;
    if (texel) {
        enum shader_id shader = matmul_shader(MATMUL_TEXEL, l,
                                              shift     ? "shift"
                                              : aligned ? "vec4"
                                                        : "scalar",
                                              bf16   ? "bf16"
                                              : q4   ? "q4"
                                              : fuse ? "bias"
                                                     : "",
                                              img);
        /* SPLIT (spec constant 0) = 1 when there is more than one block,
         * an input starts past its buffer's first element or its rows are
         * not the kernel's packed width. */
        uint32_t split = cap[ROW] < size[ROW] || cap[COL] < size[COL] || cap[RED] < size[RED] || o[0].off || o[1].off ||
                         o[0].ld != (aligned && !shift ? a_whole : a_cols) || o[1].ld != packed[1];
        struct gpu_kernel_desc d = {
            .shader = shader,
            .n_bindings = fuse ? 4 : 3,
            .bindings = {tk[0], tk[1], img ? GPU_BIND_IMAGE_VEC4 : GPU_BIND_STORAGE, GPU_BIND_TEXEL_F32},
            .push_size = sizeof(struct matmul_push_texel),
            .n_spec = q4 ? 3 : 2,
            .spec = {split, 0, q4 ? gpu_buffer_q4_flags(b) : 0}, /* Q4_FLAGS: quant4.glsl */
        };
        /* ACCUMULATE (spec constant 1): the block adds into the output,
         * as every block past the first along the reduction does */
        if (!accumulate)
            k = gpu_kernel_get(g, &d);
        if (accumulate || cap[RED] < size[RED]) {
            d.spec[1] = 1;
            k_acc = gpu_kernel_get(g, &d);
        }
    } else if (coop) {
        enum shader_id shader = matmul_shader(MATMUL_COOPMAT, l, loads,
                                              inputs == GPU_MATMUL_BF16 ? (q4 ? "bf16_q4" : "bf16")
                                              : q4                      ? "f16_q4"
                                                                        : "f16",
                                              0);
        struct gpu_kernel_desc d = {
            .shader = shader,
            .n_bindings = 3,
            .bindings = {GPU_BIND_STORAGE, GPU_BIND_STORAGE, GPU_BIND_STORAGE},
            .push_size = sizeof(struct matmul_push_tiled),
            .n_spec = q4 ? 8 : 7,
            /* DIRECT: outputs stored by coopMatStore where on 16 bytes; Q4_FLAGS */
            .spec = {cc.wg, cshape[0], cshape[1], cshape[2], cc.rm_rn[0], cc.rm_rn[1], align % 16 == 0,
                     q4 ? gpu_buffer_q4_flags(b) : 0},
            .full_subgroups = 1,
        };
        k = gpu_kernel_get(g, &d);
    } else {
        enum shader_id shader = matmul_shader(MATMUL_TILED, l, loads,
                                              bf16                            ? "bf16"
                                              : q4                            ? "q4"
                                              : tc.bk == 16 && v4[0] && v4[1] ? "k16"
                                                                              : "",
                                              0);
        struct gpu_kernel_desc d = {
            .shader = shader,
            .n_bindings = 3,
            .bindings = {GPU_BIND_STORAGE, GPU_BIND_STORAGE, GPU_BIND_STORAGE},
            .push_size = sizeof(struct matmul_push_tiled),
            .n_spec = q4 ? 5 : 4,
            .spec = {tc.wg, tc.tile, tc.tv, tc.warp_tiles, q4 ? gpu_buffer_q4_flags(b) : 0},
        };
        k = gpu_kernel_get(g, &d);
    }
    if (parts > 1) {
        splitk(g, k, bufs, o, size, tile, parts, kpart, scratch, need, accumulate);
        return 0;
    }

    size_t s[3], n[3];
    for (s[ROW] = 0; s[ROW] < size[ROW]; s[ROW] += cap[ROW])
        for (s[COL] = 0; s[COL] < size[COL]; s[COL] += cap[COL])
            for (s[RED] = 0; s[RED] < size[RED]; s[RED] += cap[RED]) {
                for (int d = 0; d < 3; d++)
                    n[d] = min_size(cap[d], size[d] - s[d]);
                uint32_t acc = s[RED] == 0 ? (uint32_t) !!accumulate : 1;
                uint32_t gx = (uint32_t)ceil_div(n[COL], tile[COL]), gy = (uint32_t)ceil_div(n[ROW], tile[ROW]);
                struct gpu_arg args[4] = {[3] = {.buf = bias}};
                if (texel) {
                    /* Inputs: whole views (bounded by end[] where the buffer is larger). */
                    struct matmul_push_texel p = {
                        .a0 = (uint32_t)block_first(&o[0], s),
                        .lda = o[0].ld,
                        .b0 = (uint32_t)block_first(&o[1], s),
                        .ldb = o[1].ld,
                        .ldc = o[2].ld,
                    };
                    p.M = (uint32_t)(l == TN ? n[RED] : n[ROW]);
                    p.N = (uint32_t)(l == NT ? n[COL] : l == NN ? n[RED] : n[ROW]);
                    p.K = (uint32_t)(l == NT ? n[RED] : n[COL]);
                    for (int i = 0; i < 2; i++)
                        args[i] = (struct gpu_arg){
                            .buf = bufs[i],
                            .range = (i == 1 && q4) || gpu_buffer_size(bufs[i]) <= tlimit[i] ? 0 : end[i]};
                    args[2] = img ? image_arg(g, c, &o[2], s, n, &p.c0)
                                  : storage_arg(c, 1, &o[2], s, n, align, elem[2], &p.c0);
                    gpu_dispatch(g, acc ? k_acc : k, args, &p, gx, gy, 1);
                } else {
                    /* A, B, C by rows ld apart (the layout fixes which
                     * dimension runs along them). */
                    struct matmul_push_tiled p = {
                        .M = (uint32_t)n[ROW],
                        .N = (uint32_t)n[COL],
                        .K = (uint32_t)n[RED],
                        .accumulate = acc,
                        .lda = o[0].ld,
                        .ldb = o[1].ld,
                        .ldc = o[2].ld,
                        .kpart = (uint32_t)n[RED],
                    };
                    args[0] = storage_arg(a, 0, &o[0], s, n, align, elem[0], &p.a0);
                    args[1] = storage_arg(b, 0, &o[1], s, n, align, elem[1], &p.b0);
                    if (q4) /* the whole buffer, the block's first element an index into it */
                        args[1] = (struct gpu_arg){.buf = b}, p.b0 = (uint32_t)block_first(&o[1], s);
                    args[2] = storage_arg(c, 1, &o[2], s, n, align, elem[2], &p.c0);
                    gpu_dispatch(g, k, args, &p, gx, gy, 1);
                }
            }
    return fuse;
}

/* The copy moves M·N floats for 2·M·N·K flops, and nn needs a grid of
 * (N/128)·(K/128) tiles to keep the threads busy: on lavapipe (2-core
 * EPYC, bench_matmul tn against tnk) the path, then with a copy of X too
 * and nt, was 1.1-1.5x faster with N and K of 576 to 3072 (M 256 to 4096),
 * 0.6-0.9x with 128 and 352; nn on the copy of dY alone runs 1.25-1.35x
 * faster than nt on both copies at GPT-2's weight gradients (M = 1024). */
#define TN_TRANSPOSED_MIN 512

/* Whether the copy of dY (from float o0, rows lda apart) and the scratch
 * that holds it fit the device's views and grid. */
static int transpose_fits(const struct gpu *g, uint32_t M, uint32_t N, size_t o0, uint32_t lda)
{
    const struct gpu_device_info *info = gpu_info(g);
    size_t end = o0 + (size_t)M * lda;
    return end * 4 <= gpu_texel_limit(g, GPU_BIND_TEXEL_VEC4) && end <= UINT32_MAX &&
           (size_t)N * M * sizeof(float) <= gpu_binding_limit(g, GPU_BIND_IMAGE_VEC4) &&
           ((N + 3) / 4 + 7) / 8 <= info->max_workgroup_count[0] && (M / 4 + 7) / 8 <= info->max_workgroup_count[1];
}

/* The scratch of tn_transposed for this shape (texel family), or 0. */
static size_t transposed_bytes(const struct gpu *g, uint32_t M, uint32_t N, uint32_t K)
{
    if (gpu_kernel_class(g) != GPU_KERNELS_TEXEL || !gpu_info(g)->image_vec4 || M % 4 || N < TN_TRANSPOSED_MIN ||
        K < TN_TRANSPOSED_MIN || !transpose_fits(g, M, N, 0, N))
        return 0;
    return (size_t)N * M * sizeof(float);
}

size_t op_matmul_tn_scratch(const struct gpu *g, uint32_t M, uint32_t N, uint32_t K)
{
    if (kernel_path_repro(kernel_pick_matmul(g)))
        return 0; /* the reproducible kernels need none */
    size_t kpart, lead = gpu_info(g)->min_storage_offset_alignment,
                  bytes[3] = {(size_t)M * N * sizeof(float) + lead, (size_t)M * K * sizeof(float) + lead,
                              (size_t)N * K * sizeof(float) + lead};
    uint32_t parts = ops_tiled_parts(g, N, K, M, bytes, &kpart);
    return parts > 1 ? (size_t)parts * N * K * sizeof(float) : transposed_bytes(g, M, N, K);
}

/* Out[c, r] = In[r, c] for R x C floats of `in` from float in_off (rows
 * ldi apart), into `out` from float out_off (rows R apart, R % 4 == 0):
 * 4 x 4 blocks, RGBA32F texels out, and in (the shift variant where in_off
 * or ldi is not a multiple of 4). */
static void transpose(struct gpu *g, struct gpu_buffer *in, size_t in_range, size_t in_off, uint32_t R, uint32_t C,
                      uint32_t ldi, struct gpu_buffer *out, size_t out_range, size_t out_off)
{
    int shift = in_off % 4 || ldi % 4;
    struct gpu_kernel_desc d = {.shader = shift ? SHADER_transpose_texel_shift : SHADER_transpose_texel,
                                .n_bindings = 2,
                                .bindings = {GPU_BIND_TEXEL_VEC4, GPU_BIND_IMAGE_VEC4},
                                .push_size = 7 * sizeof(uint32_t)};
    uint32_t c4 = (C + 3) / 4;
    uint32_t push[7] = {R / 4, c4, C, (uint32_t)in_off, ldi, (uint32_t)(out_off / 4), R / 4};
    struct gpu_arg args[2] = {{.buf = in, .range = in_range}, {.buf = out, .write = 1, .range = out_range}};
    gpu_dispatch(g, gpu_kernel_get(g, &d), args, push, (c4 + 7) / 8, (R / 4 + 7) / 8, 1);
}

/* tn through the gpu's matmul scratch where op_matmul_tn_scratch allows it
 * and the copy fits the device's limits (else 0: the tn kernel): dYᵀ
 * [N, M] at its start, then dW (+)= dYᵀ·X as nn (dYᵀ the nn's dY of M
 * columns, X its W), which splits itself within the limits. */
static int tn_transposed(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *x, struct gpu_buffer *dw, uint32_t M,
                         uint32_t N, uint32_t K, int accumulate, const size_t *off, uint32_t lda)
{
    struct gpu_buffer *scratch = gpu_matmul_scratch(g);
    size_t need = transposed_bytes(g, M, N, K), o[3] = {off ? off[0] : 0, off ? off[1] : 0, off ? off[2] : 0};
    if (!scratch || !need || need > gpu_buffer_size(scratch) || gpu_buffer_dtype(dy) != GPU_DTYPE_F32 ||
        gpu_buffer_dtype(x) != GPU_DTYPE_F32)
        return 0;
    if (!transpose_fits(g, M, N, o[0], lda))
        return 0;
    size_t end = (o[0] + (size_t)M * lda) * 4;
    ops_check("matmul_tn", "first input", dy, end);
    transpose(g, dy, gpu_buffer_size(dy) <= gpu_texel_limit(g, GPU_BIND_TEXEL_VEC4) ? 0 : end, o[0], M, N, lda, scratch,
              need, 0);
    matmul(g, NN, scratch, x, dw, N, M, K, accumulate, (size_t[3]){0, o[1], o[2]}, NULL, NULL);
    return 1;
}

void op_matmul_nt(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *w, struct gpu_buffer *y, uint32_t M,
                  uint32_t N, uint32_t K, int accumulate)
{
    matmul(g, NT, x, w, y, M, N, K, accumulate, NULL, NULL, NULL);
}

void op_matmul_nt_bias(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *w, struct gpu_buffer *bias,
                       struct gpu_buffer *y, uint32_t M, uint32_t N, uint32_t K, int accumulate)
{
    if (bias)
        ops_check("matmul_nt", "bias", bias, (size_t)N * sizeof(float));
    if (!matmul(g, NT, x, w, y, M, N, K, accumulate, NULL, NULL, bias) && bias)
        op_bias_add(g, bias, y, M, N);
}

void op_matmul_nt_at(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *w, struct gpu_buffer *y, uint32_t M,
                     uint32_t N, uint32_t K, int accumulate, const size_t off[3], const uint32_t ld[3])
{
    matmul(g, NT, x, w, y, M, N, K, accumulate, off, ld, NULL);
}

void op_matmul_nn(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *w, struct gpu_buffer *dx, uint32_t M,
                  uint32_t N, uint32_t K, int accumulate)
{
    matmul(g, NN, dy, w, dx, M, N, K, accumulate, NULL, NULL, NULL);
}

void op_matmul_nn_at(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *w, struct gpu_buffer *dx, uint32_t M,
                     uint32_t N, uint32_t K, int accumulate, const size_t off[3], const uint32_t ld[3])
{
    matmul(g, NN, dy, w, dx, M, N, K, accumulate, off, ld, NULL);
}

void op_matmul_tn(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *x, struct gpu_buffer *dw, uint32_t M,
                  uint32_t N, uint32_t K, int accumulate)
{
    matmul(g, TN, dy, x, dw, M, N, K, accumulate, NULL, NULL, NULL);
}

void op_matmul_tn_at(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *x, struct gpu_buffer *dw, uint32_t M,
                     uint32_t N, uint32_t K, int accumulate, const size_t off[3], const uint32_t ld[3])
{
    matmul(g, TN, dy, x, dw, M, N, K, accumulate, off, ld, NULL);
}
