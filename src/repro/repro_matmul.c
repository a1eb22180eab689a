/* repro_matmul: the reproducible profile's matrix product (the order of
 * shaders/repro_matmul.glsl: one accumulator per output, k in order, every
 * operation rounded on its own), on the device in either kernel family and
 * on the host as the C reference. It records dispatches and never submits.
 * op_matmul_* record it when gpu_reproducible(g). */
#include "vktrain/gpu.h"
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

/* Whether the layout's operands are whole texels along the dimension the
 * texel kernel's RGBA32F variant reads them by (nt: A and B along k, rows
 * of K floats; nn: A along k, B along j; tn: A along i, B along j) and
 * the block dimensions it reads by 4 (M for tn, N for nn and tn) are
 * multiples of 4; k goes by 4, a tail of K % 4 in the R32F kernel. */
static int vec_shape(enum repro_layout layout, const struct product *p)
{
    if (layout == REPRO_NT)
        return p->sai % 4 == 0 && p->sbj % 4 == 0;
    if (layout == REPRO_NN)
        return p->sai % 4 == 0 && p->N % 4 == 0 && p->sbk % 4 == 0;
    return p->M % 4 == 0 && p->sak % 4 == 0 && p->N % 4 == 0 && p->sbk % 4 == 0;
}

static const char *layout_name(enum repro_layout layout)
{
    return layout == REPRO_NT ? "nt" : layout == REPRO_NN ? "nn" : "tn";
}

void repro_matmul_ref(enum repro_layout layout, const float *a, const float *b, float *c, uint32_t M, uint32_t N,
                      uint32_t K, int accumulate)
{
    struct product p = product_of(layout, M, N, K);
    for (size_t i = 0; i < p.M; i++)
        for (size_t j = 0; j < p.N; j++) {
            float acc = accumulate ? c[i * p.N + j] : 0.0f;
            for (size_t k = 0; k < p.K; k++) {
                float t = a[i * p.sai + k * p.sak] * b[k * p.sbk + j * p.sbj];
                acc = acc + t;
            }
            c[i * p.N + j] = acc;
        }
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

void repro_matmul_at(struct gpu *g, enum repro_layout layout, struct gpu_buffer *a, struct gpu_buffer *b,
                     struct gpu_buffer *c, uint32_t M, uint32_t N, uint32_t K, int accumulate, const size_t off[3])
{
    struct product p = product_of(layout, M, N, K);
    struct gpu_buffer *bufs[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (gpu_buffer_dtype(bufs[i]) != GPU_DTYPE_F32)
            vkt_fatal("repro_matmul_%s: '%s' holds bf16 values; the reproducible profile takes fp32 operands only "
                      "(model.base_dtype: bf16 is not supported with precision: reproducible)",
                      layout_name(layout), gpu_buffer_name(bufs[i]));
    size_t a_bytes = (size_t)p.M * p.K * 4, b_bytes = (size_t)p.K * p.N * 4, c_bytes = (size_t)p.M * p.N * 4;
    size_t o[3] = {off ? off[0] : 0, off ? off[1] : 0, off ? off[2] : 0};
    if (gpu_buffer_size(a) < o[0] * 4 + a_bytes || gpu_buffer_size(b) < o[1] * 4 + b_bytes ||
        gpu_buffer_size(c) < o[2] * 4 + c_bytes)
        vkt_fatal("repro_matmul_%s %ux%ux%u: buffers '%s', '%s', '%s' hold %zu, %zu, %zu bytes; the shape needs "
                  "%zu, %zu, %zu from float %zu, %zu, %zu",
                  layout_name(layout), M, N, K, gpu_buffer_name(a), gpu_buffer_name(b), gpu_buffer_name(c),
                  gpu_buffer_size(a), gpu_buffer_size(b), gpu_buffer_size(c), a_bytes, b_bytes, c_bytes, o[0], o[1],
                  o[2]);
    if (p.M == 0 || p.N == 0 || p.K == 0)
        vkt_fatal("repro_matmul_%s %ux%ux%u: an empty dimension", layout_name(layout), M, N, K);
    int texel = gpu_kernel_class(g) == GPU_KERNELS_TEXEL;
    enum gpu_binding_kind in_kind = texel ? GPU_BIND_TEXEL_F32 : GPU_BIND_STORAGE;
    size_t limit = gpu_binding_limit(g, in_kind), out_limit = gpu_binding_limit(g, GPU_BIND_STORAGE);
    size_t in_align = gpu_binding_alignment(g, in_kind), out_align = gpu_binding_alignment(g, GPU_BIND_STORAGE);
    /* Blocks of rows of C and ranges of k, within the binding limits (the
     * LM head's 50257-row gradient is over lavapipe's 128 MiB storage
     * range) and the device's loop limit (llvmpipe ends a loop after
     * 65,535 iterations; the tiled kernel loops k/16 + k times, the texel
     * one k times). A block binds its rows of C, the A elements of its
     * rows and k range (at most half a binding for one k), the B elements
     * of its k range; each range after the first accumulates into C: the
     * float stored and read back is the accumulator, so every output
     * takes the same additions in the same order, whatever the blocks. */
    size_t in_floats = limit > in_align ? (limit - in_align) / 4 : 0;
    size_t out_fit = out_limit > out_align ? (out_limit - out_align) / ((size_t)p.N * 4) : 0;
    size_t rows = (size_t)gpu_info(g)->max_workgroup_count[1] * (texel ? 32 : 16);
    rows = rows < p.M ? rows : p.M;
    rows = rows < out_fit ? rows : out_fit;
    if (in_floats < 2)
        rows = 0;
    else if ((in_floats / 2 - 1) / p.sai + 1 < rows)
        rows = (in_floats / 2 - 1) / p.sai + 1;
    size_t a_rows = rows ? (rows - 1) * p.sai + 1 : 0, b_row = (size_t)(p.N - 1) * p.sbj + 1;
    size_t chunk = (size_t)p.K, loops = gpu_info(g)->max_loop_iterations;
    if (loops && (loops - loops / 16) / 17 * 16 < chunk)
        chunk = (loops - loops / 16) / 17 * 16;
    if (rows && (in_floats - a_rows) / p.sak + 1 < chunk)
        chunk = (in_floats - a_rows) / p.sak + 1;
    if (in_floats < b_row)
        chunk = 0;
    else if ((in_floats - b_row) / p.sbk + 1 < chunk)
        chunk = (in_floats - b_row) / p.sbk + 1;
    if (rows == 0 || chunk == 0)
        vkt_fatal("repro_matmul_%s %ux%ux%u: a row of the output '%s' or of the operands '%s', '%s' is over one "
                  "binding (%zu bytes for inputs, %zu for the output)",
                  layout_name(layout), M, N, K, gpu_buffer_name(c), gpu_buffer_name(a), gpu_buffer_name(b), limit,
                  out_limit);
    struct gpu_kernel_desc d = {.shader = texel ? "repro_matmul_texel" : "repro_matmul_tiled",
                                .n_bindings = 3,
                                .bindings = {in_kind, in_kind, GPU_BIND_STORAGE},
                                .push_size = 11 * 4};
    struct gpu_kernel *kernel = gpu_kernel_get(g, &d), *vec_kernel = NULL;
    /* The texel kernel's RGBA32F variant of the layout where the operands
     * are whole texels along the dimension it reads them by (see
     * repro_matmul_texel.comp and vec_shape); a dispatch whose operands do
     * not start on a texel takes the R32F one. */
    if (texel && vec_shape(layout, &p) && chunk >= 4) {
        static const char *const names[] = {"repro_matmul_texel_kk", "repro_matmul_texel_kj", "repro_matmul_texel_ij"};
        chunk -= chunk % 4;
        if (layout == REPRO_TN && rows >= 4)
            rows -= rows % 4;
        d.shader = names[layout];
        d.bindings[0] = d.bindings[1] = GPU_BIND_TEXEL_VEC4;
        vec_kernel = gpu_kernel_get(g, &d);
    }
    /* texel: 8x8 invocations of 4x4 outputs; tiled: 16x16 of one. */
    uint32_t gx = texel ? (p.N + 31) / 32 : (p.N + 15) / 16;
    if (gx > gpu_info(g)->max_workgroup_count[0])
        vkt_fatal("repro_matmul_%s %ux%ux%u: %u workgroups across, over the device's %u", layout_name(layout), M, N, K,
                  gx, gpu_info(g)->max_workgroup_count[0]);
    uint32_t base[3];
    struct gpu_arg args[3];
    for (size_t i0 = 0; i0 < p.M; i0 += rows) {
        uint32_t mi = (uint32_t)(p.M - i0 < rows ? p.M - i0 : rows);
        uint32_t gy = texel ? (mi + 31) / 32 : (mi + 15) / 16;
        args[2] = operand_arg(g, GPU_BIND_STORAGE, c, 1, o[2] + i0 * p.N, (size_t)mi * p.N * 4, &base[2]);
        for (size_t k0 = 0, kn; k0 < p.K; k0 += kn) {
            kn = p.K - k0 < chunk ? p.K - k0 : chunk;
            /* the RGBA32F variant steps k by 4: a last range's tail of
             * k % 4 goes to the R32F kernel in a dispatch of its own */
            int vec = vec_kernel != NULL && (layout != REPRO_TN || mi % 4 == 0);
            if (vec && kn % 4)
                kn -= kn >= 4 ? kn % 4 : 0, vec = kn % 4 == 0;
            size_t first[2] = {o[0] + i0 * p.sai + k0 * p.sak, o[1] + k0 * p.sbk};
            size_t bytes[2] = {((mi - 1) * (size_t)p.sai + (kn - 1) * (size_t)p.sak + 1) * 4,
                               ((kn - 1) * (size_t)p.sbk + b_row) * 4};
            struct gpu_buffer *in[2] = {a, b};
            for (int i = 0; i < 2 && vec; i++) {
                args[i] = operand_arg(g, GPU_BIND_TEXEL_VEC4, in[i], 0, first[i], bytes[i], &base[i]);
                args[i].range += (16 - args[i].range % 16) % 16;
                vec = base[i] % 4 == 0 && args[i].offset + args[i].range <= gpu_buffer_size(in[i]) &&
                      args[i].range <= gpu_binding_limit(g, GPU_BIND_TEXEL_VEC4);
            }
            for (int i = 0; i < 2 && !vec; i++)
                args[i] = operand_arg(g, in_kind, in[i], 0, first[i], bytes[i], &base[i]);
            uint32_t push[11] = {mi,    p.N,   (uint32_t)kn, accumulate || k0 > 0 ? 1u : 0u,
                                 p.sai, p.sak, p.sbk,         p.sbj,
                                 base[0], base[1], base[2]};
            gpu_dispatch(g, vec ? vec_kernel : kernel, args, push, gx, gy, 1);
        }
    }
}
