/* repro_matmul: the reproducible mode's matrix product (the order of
 * shaders/reproducible/repro_matmul.glsl: one accumulator per output, k in order, every
 * operation rounded on its own), on the device in either kernel family
 * (its C reference is in tests/ref). It records dispatches and never submits.
 * op_matmul_* record it when gpu_reproducible(g). */
#include "vktrain/gpu.h"
#include "vktrain/kernel_select.h"
#include "vktrain/repro.h"
#include "vktrain/util.h"

/* C[M,N] (+)= A[M,K]·B[K,N] in the layout's terms, as strides. */
struct product {
    uint32_t M, N, K;
    uint32_t sai, sak, sbk, sbj;
};

/* nt: Y[M,N] = X[M,K]·W[N,K]ᵀ; nn: dX[M,K] = dY[M,N]·W[N,K];
 * tn: dW[N,K] = dY[M,N]ᵀ·X[M,K]. */
static struct product product_of(enum repro_layout layout, uint32_t M, uint32_t N, uint32_t K)
{
    switch (layout) {
    case REPRO_NT:
        return (struct product){M, N, K, K, 1, 1, K};
    case REPRO_NN:
        return (struct product){M, K, N, N, 1, K, 1};
    default:
        return (struct product){N, K, M, 1, N, K, 1};
    }
}

static const char *layout_name(enum repro_layout layout)
{
    return layout == REPRO_NT ? "nt" : layout == REPRO_NN ? "nn" : "tn";
}

/* The binding of an operand of `bytes` bytes that starts `first` floats
 * into buffer b: from the aligned offset at or before it; *base = its
 * first float within the binding. */
static struct gpu_arg operand_arg(const struct gpu *g, enum gpu_binding_kind kind, struct gpu_buffer *b, int write,
                                  size_t first, size_t bytes, uint32_t *base)
{
    size_t align = gpu_binding_alignment(g, kind), at = first * 4;
    size_t off = align > 1 ? at - at % align : at;
    *base = (uint32_t)((at - off) / 4);
    return (struct gpu_arg){b, write, off, at - off + bytes};
}

void repro_matmul(struct gpu *g, enum repro_layout layout, struct gpu_buffer *a, struct gpu_buffer *b,
                  struct gpu_buffer *c, uint32_t M, uint32_t N, uint32_t K, int accumulate)
{
    repro_matmul_at(g, layout, a, b, c, M, N, K, accumulate, NULL);
}

/* A tn product into a gradient summed per sample (repro_matmul_grad):
 * samples of `rows` rows, k = 0 being row `first` of the micro-batch, the
 * stack `stack` of `levels` floats per output. */
struct segments {
    uint32_t rows, first, levels;
    struct gpu_buffer *stack;
};

/* repro_matmul_at; with seg, 0 (nothing recorded) where the kernel the
 * product takes has no SEGMENTS (all but the vec4 family's tn), with bias
 * (nt) 0 where it is not one dispatch of the vec4 kernel, else 1. */
static int matmul_at(struct gpu *g, enum repro_layout layout, struct gpu_buffer *a, struct gpu_buffer *b,
                     struct gpu_buffer *c, uint32_t M, uint32_t N, uint32_t K, int accumulate, const size_t off[3],
                     const struct segments *seg, struct gpu_buffer *bias)
{
    struct product p = product_of(layout, M, N, K);
    struct gpu_buffer *bufs[3] = {a, b, c};
    /* q4: a 4-bit weight as B of nt or nn (include/vktrain/quant4.h), bound
     * whole, read by the texel and tiled kernels' q4 variants: the value
     * of an element is the same product on every device, so the bits are
     * those of the fp32 weight it dequantizes to */
    int q4 = gpu_buffer_dtype(b) == GPU_DTYPE_Q4 && layout != REPRO_TN;
    for (int i = 0; i < 3; i++)
        if (gpu_buffer_dtype(bufs[i]) != GPU_DTYPE_F32 && !(i == 1 && q4))
            vkt_fatal("repro_matmul_%s: '%s' holds %s values; the reproducible mode takes fp32 operands only, "
                      "and a 4-bit weight as nt's and nn's B (model.base_dtype: %s is not supported with "
                      "precision: reproducible)",
                      layout_name(layout), gpu_buffer_name(bufs[i]),
                      gpu_buffer_dtype(bufs[i]) == GPU_DTYPE_BF16 ? "bf16" : "4-bit",
                      gpu_buffer_dtype(bufs[i]) == GPU_DTYPE_BF16 ? "bf16" : "nf4");
    size_t a_bytes = (size_t)p.M * p.K * 4, b_bytes = (size_t)p.K * p.N * 4, c_bytes = (size_t)p.M * p.N * 4;
    size_t o[3] = {off ? off[0] : 0, off ? off[1] : 0, off ? off[2] : 0};
    /* a 4-bit weight: its own layout, o[1] an element: at least the nibbles */
    size_t b_need = q4 ? (o[1] + (size_t)p.K * p.N + 1) / 2 : o[1] * 4 + b_bytes;
    if (gpu_buffer_size(a) < o[0] * 4 + a_bytes || gpu_buffer_size(b) < b_need ||
        gpu_buffer_size(c) < o[2] * 4 + c_bytes)
        vkt_fatal("repro_matmul_%s %ux%ux%u: buffers '%s', '%s', '%s' hold %zu, %zu, %zu bytes; the shape needs "
                  "%zu, %zu, %zu from float %zu, %zu, %zu",
                  layout_name(layout), M, N, K, gpu_buffer_name(a), gpu_buffer_name(b), gpu_buffer_name(c),
                  gpu_buffer_size(a), gpu_buffer_size(b), gpu_buffer_size(c), a_bytes, b_bytes, c_bytes, o[0], o[1],
                  o[2]);
    if (p.M == 0 || p.N == 0 || p.K == 0)
        vkt_fatal("repro_matmul_%s %ux%ux%u: an empty dimension", layout_name(layout), M, N, K);
    int texel = gpu_kernel_class(g) == GPU_KERNELS_TEXEL;
    /* vec4: the texel family's RGBA32F kernel, where every row of A and B
     * that runs along a vec4 (and the reduction, where it does) is whole
     * texels from a texel boundary (see repro_matmul_vec4.comp). */
    int vec4 = texel && !q4 && o[0] % 4 == 0 && o[1] % 4 == 0 &&
               (layout == REPRO_NT   ? p.K % 4 == 0 && p.sai % 4 == 0 && p.sbj % 4 == 0
                : layout == REPRO_NN ? p.K % 4 == 0 && p.sai % 4 == 0 && p.sbk % 4 == 0
                                     : p.sak % 4 == 0 && p.sbk % 4 == 0);
    /* shift: the same kernel reading A at any float offset (nn and tn
     * with B whole texels: the LM head's dlogits, rows of V floats). */
    int shift = texel && !q4 && !vec4 && layout != REPRO_NT && o[1] % 4 == 0 && p.sbk % 4 == 0;
    enum gpu_binding_kind in_kind;
    size_t limit, out_limit, in_align, out_align, rows, chunk, b_row = (size_t)(p.N - 1) * p.sbj + 1;
    for (;;) {
        in_kind = vec4 || shift ? GPU_BIND_TEXEL_VEC4 : texel ? GPU_BIND_TEXEL_F32 : GPU_BIND_STORAGE;
        limit = gpu_binding_limit(g, in_kind), out_limit = gpu_binding_limit(g, GPU_BIND_STORAGE);
        in_align = gpu_binding_alignment(g, in_kind), out_align = gpu_binding_alignment(g, GPU_BIND_STORAGE);
        /* Blocks of rows of C and ranges of k, within the binding limits
         * (the LM head's 50257-row gradient is over lavapipe's 128 MiB
         * storage range) and the device's loop limit (llvmpipe ends a
         * loop after 65,535 iterations; the tiled kernel loops k/16 + k
         * times, the texel ones k times at most). A block binds its rows
         * of C, the A elements of its rows and k range (at most half a
         * binding for one k), the B elements of its k range; each range
         * after the first accumulates into C: the float stored and read
         * back is the accumulator, so every output takes the same
         * additions in the same order, whatever the blocks. */
        size_t in_floats = limit > in_align ? (limit - in_align) / 4 : 0;
        size_t out_fit = out_limit > out_align ? (out_limit - out_align) / ((size_t)p.N * 4) : 0;
        if (seg) { /* the stack's binding (RGBA32F texels): levels x C's */
            size_t s_limit = gpu_binding_limit(g, GPU_BIND_IMAGE_VEC4),
                   s_align = gpu_binding_alignment(g, GPU_BIND_IMAGE_VEC4);
            size_t s_fit = s_limit > s_align ? (s_limit - s_align) / ((size_t)p.N * 4 * seg->levels) : 0;
            out_fit = out_fit < s_fit ? out_fit : s_fit;
        }
        rows = (size_t)gpu_info(g)->max_workgroup_count[1] * (vec4 || shift ? 128 : texel ? 32 : 64);
        rows = rows < p.M ? rows : p.M;
        rows = rows < out_fit ? rows : out_fit;
        if (in_floats < 2)
            rows = 0;
        else if ((in_floats / 2 - 1) / p.sai + 1 < rows)
            rows = (in_floats / 2 - 1) / p.sai + 1;
        size_t a_rows = rows ? (rows - 1) * p.sai + 1 : 0;
        size_t loops = gpu_info(g)->max_loop_iterations;
        chunk = (size_t)p.K;
        if (loops && (loops - loops / 16) / 17 * 16 < chunk)
            chunk = (loops - loops / 16) / 17 * 16;
        if (rows && (in_floats - a_rows) / p.sak + 1 < chunk)
            chunk = (in_floats - a_rows) / p.sak + 1;
        if (q4) /* bound whole: no range of B to fit */
            ;
        else if (in_floats < b_row)
            chunk = 0;
        else if ((in_floats - b_row) / p.sbk + 1 < chunk)
            chunk = (in_floats - b_row) / p.sbk + 1;
        /* vec4: every block starts on a texel; tn's blocks of rows start
         * i0 floats into A, nt's and nn's ranges of k k0 floats into A
         * (and nt's B): multiples of 4, or (under tiny binding limits)
         * the kernels that read A at any offset. */
        size_t *cut = !vec4 ? NULL : layout == REPRO_TN ? &rows : &chunk;
        if (cut && *cut < (layout == REPRO_TN ? p.M : p.K)) {
            if (*cut < 4) {
                vec4 = 0;
                shift = layout != REPRO_NT && o[1] % 4 == 0 && p.sbk % 4 == 0;
                continue;
            }
            *cut -= *cut % 4;
        }
        break;
    }
    enum gpu_binding_kind b_kind = q4 ? (texel ? GPU_BIND_TEXEL_U32 : GPU_BIND_STORAGE) : in_kind;
    if (q4 && gpu_buffer_size(b) > gpu_binding_limit(g, b_kind))
        vkt_fatal("repro_matmul_%s %ux%ux%u: the 4-bit weight '%s' (%zu bytes) is over one binding (%zu bytes)",
                  layout_name(layout), M, N, K, gpu_buffer_name(b), gpu_buffer_size(b), gpu_binding_limit(g, b_kind));
    if (rows == 0 || chunk == 0)
        vkt_fatal("repro_matmul_%s %ux%ux%u: a row of the output '%s' or of the operands '%s', '%s' is over one "
                  "binding (%zu bytes for inputs, %zu for the output)",
                  layout_name(layout), M, N, K, gpu_buffer_name(c), gpu_buffer_name(a), gpu_buffer_name(b), limit,
                  out_limit);
    /* the in-loop push takes an invocation's 4 columns as one group of the
     * stack (N % 4 == 0), bound as RGBA32F storage texels */
    int segments = seg && layout == REPRO_TN && (vec4 || shift) && p.N % 4 == 0 && repro_stack_texels(g);
    if (seg && !segments)
        return 0;
    /* pairs: the "_seg2" kernels, samples two at a time (repro_matmul_vec4.comp),
     * for the dispatches whose rows are whole pairs of samples of a multiple
     * of 4 rows; VKTRAIN_REPRO_PAIRS=0 turns them off (tests: both give the
     * tree's bits). The ranges of k then end on pairs where they can. */
    size_t pair_rows =
        segments && seg->rows % 4 == 0 && kernel_env_flag(KENV_REPRO_PAIRS, 1) ? 2 * (size_t)seg->rows : 0;
    if (pair_rows && chunk < p.K && chunk >= pair_rows)
        chunk -= chunk % pair_rows;
    if (bias && (layout != REPRO_NT || !vec4 || rows < p.M || chunk < p.K ||
                 gpu_buffer_size(bias) > gpu_binding_limit(g, GPU_BIND_TEXEL_F32)))
        return 0;
    /* img: nt and nn of the vec4 kernel with C bound as an RGBA32F storage
     * texel buffer, whole rows of texels (N and C's first float multiples
     * of 4, an offset alignment that keeps texels whole, every block's
     * view within the device's limit): each output texel stored at once,
     * and a product that overwrites reads no output (specialization
     * constant 0). Elsewhere (the LM head's rows of V floats, tight
     * limits) the storage variants, with the same bits. */
    size_t ia = gpu_image_vec4_alignment(g);
    int img = vec4 && !segments && layout != REPRO_TN && gpu_info(g)->image_vec4 && ia && p.N % 4 == 0 &&
              o[2] % 4 == 0 && rows * p.N * 4 + ia <= gpu_binding_limit(g, GPU_BIND_IMAGE_VEC4);
    static const enum shader_id vec4_shader[] = {
        [REPRO_NT] = SHADER_repro_matmul_vec4_nt, [REPRO_NN] = SHADER_repro_matmul_vec4_nn, [REPRO_TN] = SHADER_repro_matmul_vec4_tn};
    static const enum shader_id img_shader[] = {
        [REPRO_NT] = SHADER_repro_matmul_vec4_nt_img, [REPRO_NN] = SHADER_repro_matmul_vec4_nn_img};
    static const enum shader_id shift_shader[] = {
        [REPRO_NN] = SHADER_repro_matmul_vec4_nn_shift, [REPRO_TN] = SHADER_repro_matmul_vec4_tn_shift};
    /* wide: 16x16 outputs per invocation, 128x128 per workgroup (the same
     * bits), for tn and for nn with C as texels, where the columns fill
     * more than the narrow tile's 64 (a column group past N still
     * computes, unstored) and that leaves at least two workgroups and one
     * per thread of a CPU device: fewer fetches per product. On lavapipe
     * with two threads, in-process alternation at the default recipe's and
     * GPT-2's shapes: tn 1.1-1.8x faster with two or more wide workgroups
     * (0.7-0.9x with one), nn 1.0-1.3x; nt was slower (0.45-0.9x), so it
     * keeps the narrow tiles, and so does tn over pairs of samples (the
     * "_seg2" kernels): narrow 1.05-1.6x faster there at the default
     * recipe's shapes (2048 rows of 16 samples; 0.95-1.0x at GPT-2's,
     * 1024 and 512 rows of 4), where the wide pair kernel gained little
     * over the wide single one. VKTRAIN_REPRO_WIDE=0|1 forces it (tests:
     * both give the bits of the C reference). */
    size_t wide_groups = (size_t)((p.M + 127) / 128) * ((p.N + 127) / 128);
    unsigned threads = gpu_info(g)->cpu_threads;
    int pairs_first = pair_rows && seg->first % pair_rows == 0 && p.K >= pair_rows;
    int wide = (((vec4 || shift) && layout == REPRO_TN) || (img && layout == REPRO_NN)) &&
               kernel_env_flag(KENV_REPRO_WIDE,
                            p.N > 64 && wide_groups >= 2 && wide_groups >= threads && (!pairs_first || shift));
    /* tn over samples: seg_shader[pairs][shift][wide] */
    static const enum shader_id seg_shader[2][2][2] = {
        {{SHADER_repro_matmul_vec4_tn_seg, SHADER_repro_matmul_vec4_tn_seg_wide},
         {SHADER_repro_matmul_vec4_tn_shift_seg, SHADER_repro_matmul_vec4_tn_shift_seg_wide}},
        {{SHADER_repro_matmul_vec4_tn_seg2, SHADER_repro_matmul_vec4_tn_seg2_wide},
         {SHADER_repro_matmul_vec4_tn_shift_seg2, SHADER_repro_matmul_vec4_tn_shift_seg2_wide}}};
    enum shader_id shader = segments ? seg_shader[0][!vec4][wide]
                         : wide   ? (layout == REPRO_NN ? SHADER_repro_matmul_vec4_nn_img_wide
                                     : vec4             ? SHADER_repro_matmul_vec4_tn_wide
                                                        : SHADER_repro_matmul_vec4_tn_shift_wide)
                         : bias   ? (img ? SHADER_repro_matmul_vec4_nt_bias_img : SHADER_repro_matmul_vec4_nt_bias)
                         : img    ? img_shader[layout]
                         : vec4   ? vec4_shader[layout]
                         : shift  ? shift_shader[layout]
                         : texel  ? (q4 ? SHADER_repro_matmul_texel_q4 : SHADER_repro_matmul_texel_f32)
                         : q4     ? SHADER_repro_matmul_tiled_q4
                                  : SHADER_repro_matmul_tiled_f32;
    struct gpu_kernel_desc d = {.shader = shader,
                                .n_bindings = segments || bias ? 4 : 3,
                                .bindings = {in_kind, b_kind, img ? GPU_BIND_IMAGE_VEC4 : GPU_BIND_STORAGE,
                                             bias ? GPU_BIND_TEXEL_F32 : GPU_BIND_IMAGE_VEC4},
                                .push_size = segments ? 15 * 4 : 11 * 4};
    d.n_spec = img || q4; /* img: ACCUMULATE, 0 and 1; q4: Q4_FLAGS (quant4.glsl) */
    d.spec[0] = q4 ? gpu_buffer_q4_flags(b) : 0;
    struct gpu_kernel *kernel = gpu_kernel_get(g, &d), *kernel_acc = kernel, *kernel_pairs = NULL;
    if (img) {
        d.spec[0] = 1;
        kernel_acc = gpu_kernel_get(g, &d);
    }
    if (pair_rows) {
        d.shader = seg_shader[1][!vec4][wide];
        kernel_pairs = gpu_kernel_get(g, &d);
    }
    /* vec4: 8x8 invocations of 16x8 outputs (wide: 16x16); texel: of 4x4;
     * tiled: 16x16 of 4x4. */
    uint32_t gx = wide            ? (p.N + 127) / 128
                  : vec4 || shift ? (p.N + 63) / 64
                  : texel         ? (p.N + 31) / 32
                                  : (p.N + 63) / 64;
    if (gx > gpu_info(g)->max_workgroup_count[0])
        vkt_fatal("repro_matmul_%s %ux%ux%u: %u workgroups across, over the device's %u", layout_name(layout), M, N, K,
                  gx, gpu_info(g)->max_workgroup_count[0]);
    uint32_t base[3];
    struct gpu_arg args[4] = {[3] = {.buf = bias}}; /* the bias, where there is one (one dispatch) */
    for (size_t i0 = 0; i0 < p.M; i0 += rows) {
        uint32_t mi = (uint32_t)(p.M - i0 < rows ? p.M - i0 : rows);
        uint32_t gy = vec4 || shift ? (mi + 127) / 128 : texel ? (mi + 31) / 32 : (mi + 63) / 64;
        args[2] = operand_arg(g, img ? GPU_BIND_IMAGE_VEC4 : GPU_BIND_STORAGE, c, 1, o[2] + i0 * p.N,
                              (size_t)mi * p.N * 4, &base[2]);
        for (size_t k0 = 0; k0 < p.K; k0 += chunk) {
            uint32_t kn = (uint32_t)(p.K - k0 < chunk ? p.K - k0 : chunk);
            args[0] = operand_arg(g, in_kind, a, 0, o[0] + i0 * p.sai + k0 * p.sak,
                                  ((mi - 1) * (size_t)p.sai + (kn - 1) * (size_t)p.sak + 1) * 4, &base[0]);
            if (q4) {
                args[1] = (struct gpu_arg){b, 0, 0, gpu_buffer_size(b)};
                base[1] = (uint32_t)(o[1] + k0 * p.sbk); /* an element index */
            } else {
                args[1] = operand_arg(g, in_kind, b, 0, o[1] + k0 * p.sbk, ((kn - 1) * (size_t)p.sbk + b_row) * 4,
                                      &base[1]);
            }
            uint32_t push[15] = {
                mi, p.N, kn, accumulate || k0 > 0 ? 1u : 0u, p.sai, p.sak, p.sbk, p.sbj, base[0], base[1], base[2], 0,
                0,  0,   0};
            if (segments) {
                /* the block's first group (o[2] + i0·N, a multiple of 4) at vec4 s0 */
                size_t L = seg->levels;
                uint32_t s0;
                args[3] = operand_arg(g, GPU_BIND_IMAGE_VEC4, seg->stack, 1, (o[2] + i0 * p.N) * L,
                                      (size_t)mi * p.N * L * 4, &s0);
                push[11] = seg->rows, push[12] = seg->first + (uint32_t)k0, push[13] = seg->levels, push[14] = s0 / 4;
            }
            int pairs = pair_rows && (seg->first + k0) % pair_rows == 0 && kn % pair_rows == 0;
            gpu_dispatch(g, pairs ? kernel_pairs : accumulate || k0 > 0 ? kernel_acc : kernel, args, push, gx, gy, 1);
        }
    }
    return 1;
}

void repro_matmul_at(struct gpu *g, enum repro_layout layout, struct gpu_buffer *a, struct gpu_buffer *b,
                     struct gpu_buffer *c, uint32_t M, uint32_t N, uint32_t K, int accumulate, const size_t off[3])
{
    matmul_at(g, layout, a, b, c, M, N, K, accumulate, off, NULL, NULL);
}

int repro_matmul_nt_bias(struct gpu *g, struct gpu_buffer *a, struct gpu_buffer *b, struct gpu_buffer *bias,
                         struct gpu_buffer *c, uint32_t M, uint32_t N, uint32_t K, int accumulate)
{
    return matmul_at(g, REPRO_NT, a, b, c, M, N, K, accumulate, NULL, NULL, bias);
}

/* tn into a parameter gradient, rows [r0, r1) of the product's k. */
struct grad_rows {
    struct gpu_buffer *a, *b, *c;
    uint32_t N, K;
    int accumulate;
    size_t off[3];
};

static void grad_rows(struct gpu *g, void *ctx, uint32_t r0, uint32_t r1)
{
    const struct grad_rows *x = ctx;
    size_t o[3] = {x->off[0] + (size_t)r0 * x->N, x->off[1] + (size_t)r0 * x->K, x->off[2]};
    repro_matmul_at(g, REPRO_TN, x->a, x->b, x->c, r1 - r0, x->N, x->K, x->accumulate || r0 > 0, o);
}

void repro_matmul_grad(struct gpu *g, struct gpu_buffer *a, struct gpu_buffer *b, struct gpu_buffer *c, uint32_t M,
                       uint32_t N, uint32_t K, int accumulate, const size_t off[3])
{
    struct grad_rows x = {a, b, c, N, K, accumulate, {off ? off[0] : 0, off ? off[1] : 0, off ? off[2] : 0}};
    uint32_t first = (uint32_t)(x.off[1] / K), rows, levels;
    struct gpu_buffer *stack = repro_sample_stack(g, c, first, M, &rows, &levels);
    if (stack) { /* the vec4 kernels push in the loop; the others per sample */
        if (x.off[2])
            vkt_fatal("repro_matmul_grad: '%s' at float %zu: a gradient summed over samples is a whole buffer",
                      gpu_buffer_name(c), x.off[2]);
        struct segments seg = {rows, first, levels, stack};
        if (matmul_at(g, REPRO_TN, a, b, c, M, N, K, accumulate, x.off, &seg, NULL))
            return;
    }
    repro_param_rows(g, c, first, M, grad_rows, &x);
}
