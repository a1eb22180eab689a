/* repro_matmul: the reproducible profile's matrix product (the order of
 * shaders/repro_matmul.glsl: one accumulator per output, k in order, every
 * operation rounded on its own), on the device in either kernel family and
 * on the host as the C reference. It records dispatches and never submits.
 * Not yet wired into the model: the next steps of issue 14 do that. */
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

void repro_matmul(struct gpu *g, enum repro_layout layout, struct gpu_buffer *a, struct gpu_buffer *b,
                  struct gpu_buffer *c, uint32_t M, uint32_t N, uint32_t K, int accumulate)
{
    struct product p = product_of(layout, M, N, K);
    size_t a_bytes = (size_t)p.M * p.K * 4, b_bytes = (size_t)p.K * p.N * 4, c_bytes = (size_t)p.M * p.N * 4;
    if (gpu_buffer_size(a) < a_bytes || gpu_buffer_size(b) < b_bytes || gpu_buffer_size(c) < c_bytes)
        vkt_fatal("repro_matmul_%s %ux%ux%u: buffers '%s', '%s', '%s' hold %zu, %zu, %zu bytes; the shape needs "
                  "%zu, %zu, %zu",
                  layout_name(layout), M, N, K, gpu_buffer_name(a), gpu_buffer_name(b), gpu_buffer_name(c),
                  gpu_buffer_size(a), gpu_buffer_size(b), gpu_buffer_size(c), a_bytes, b_bytes, c_bytes);
    if (p.M == 0 || p.N == 0 || p.K == 0)
        vkt_fatal("repro_matmul_%s %ux%ux%u: an empty dimension", layout_name(layout), M, N, K);
    int texel = gpu_kernel_class(g) == GPU_KERNELS_TEXEL;
    enum gpu_binding_kind in_kind = texel ? GPU_BIND_TEXEL_F32 : GPU_BIND_STORAGE;
    size_t limit = gpu_binding_limit(g, in_kind), out_limit = gpu_binding_limit(g, GPU_BIND_STORAGE);
    if (a_bytes > limit || b_bytes > limit || c_bytes > out_limit)
        vkt_fatal("repro_matmul_%s %ux%ux%u: an operand is over one binding (%zu bytes for inputs, %zu for the "
                  "output); the reproducible matmul does not split products yet",
                  layout_name(layout), M, N, K, limit, out_limit);
    struct gpu_kernel_desc d = {.shader = texel ? "repro_matmul_texel" : "repro_matmul_tiled",
                                .n_bindings = 3,
                                .bindings = {in_kind, in_kind, GPU_BIND_STORAGE},
                                .push_size = 10 * 4};
    struct gpu_kernel *kernel = gpu_kernel_get(g, &d);
    struct gpu_arg args[3] = {{a, 0, 0, a_bytes}, {b, 0, 0, b_bytes}, {c, 1, 0, c_bytes}};
    /* texel: 8x8 invocations of 4x4 outputs; tiled: 16x16 of one. */
    uint32_t gx = texel ? (p.N + 31) / 32 : (p.N + 15) / 16, gy = texel ? (p.M + 31) / 32 : (p.M + 15) / 16;
    const uint32_t *cap = gpu_info(g)->max_workgroup_count;
    if (gx > cap[0] || gy > cap[1])
        vkt_fatal("repro_matmul_%s %ux%ux%u: %ux%u workgroups, over the device's %ux%u", layout_name(layout), M, N, K,
                  gx, gy, cap[0], cap[1]);
    /* A device that bounds an invocation's loop iterations (llvmpipe: 65,535
     * in all) gets the reduction in consecutive ranges of k, each dispatch
     * accumulating into C: the same additions in the same order. The tiled
     * kernel loops k/16 + k times, the texel one k times. */
    uint32_t loops = gpu_info(g)->max_loop_iterations;
    uint32_t chunk = loops ? (loops - loops / 16) / 17 * 16 : p.K;
    uint32_t k0 = 0;
    do {
        uint32_t kn = p.K - k0 < chunk ? p.K - k0 : chunk;
        uint32_t push[10] = {p.M,   p.N,        kn,        accumulate || k0 > 0 ? 1u : 0u, p.sai, p.sak, p.sbk,
                             p.sbj, k0 * p.sak, k0 * p.sbk};
        gpu_dispatch(g, kernel, args, push, gx, gy, 1);
        k0 += kn;
    } while (k0 < p.K);
}
