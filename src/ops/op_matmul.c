/* op_matmul: the three matmul layouts of a linear layer, each one dispatch.
 * Picks the kernel per device class: texel kernels (vec4 views when the
 * contiguous dimensions are multiples of 4, scalar views otherwise) on CPU
 * drivers, the shared-memory tiled kernel on GPUs. Never allocates. */
#include <stdio.h>

#include "ops_internal.h"
#include "vktrain/util.h"

enum layout { NT, NN, TN };

struct matmul_push_texel {
    uint32_t M, N, K, accumulate;
};
struct matmul_push_tiled {
    uint32_t M, N, K, accumulate;
    uint32_t sam, sak, sbk, sbn;
};

static uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

/* a, b are the inputs, c the output; (M, N, K) as in ops.h for the layout. */
static void matmul(struct gpu *g, enum layout l, struct gpu_buffer *a, struct gpu_buffer *b, struct gpu_buffer *c,
                   uint32_t M, uint32_t N, uint32_t K, int accumulate)
{
    static const char *names[] = {"matmul_nt", "matmul_nn", "matmul_tn"};
    if (M == 0 || N == 0 || K == 0)
        vkt_fatal("%s: empty shape M=%u N=%u K=%u", names[l], M, N, K);
    /* Output rows x cols of C, and the sizes of a, b. */
    uint32_t rows = l == TN ? N : M, cols = l == NT ? N : K;
    ops_check(names[l], "first input", a, sizeof(float) * M * (l == NT ? K : N));
    ops_check(names[l], "second input", b, sizeof(float) * (l == TN ? M : N) * K);
    ops_check(names[l], "output", c, sizeof(float) * rows * cols);
    struct gpu_arg args[3] = {{.buf = a}, {.buf = b}, {.buf = c, .write = 1}};

    int aligned = K % 4 == 0 && (l == NT || N % 4 == 0);
    enum gpu_binding_kind tk = aligned ? GPU_BIND_TEXEL_VEC4 : GPU_BIND_TEXEL_F32;
    size_t limit = gpu_texel_limit(g, tk);
    if (gpu_kernel_class(g) == GPU_KERNELS_TEXEL && gpu_buffer_size(a) <= limit && gpu_buffer_size(b) <= limit) {
        char shader[32];
        snprintf(shader, sizeof shader, "%s_%s", names[l], aligned ? "vec4" : "scalar");
        struct gpu_kernel_desc d = {
            .shader = shader, .n_bindings = 3, .bindings = {tk, tk, GPU_BIND_STORAGE},
            .push_size = sizeof(struct matmul_push_texel),
        };
        struct matmul_push_texel push = {M, N, K, (uint32_t)!!accumulate};
        gpu_dispatch(g, gpu_kernel_get(g, &d), args, &push, ceil_div(ceil_div(cols, 4), 8), ceil_div(rows, 128), 1);
        return;
    }
    /* Tiled: C[rows, cols] = A(rows x inner) · B(inner x cols) by strides. */
    uint32_t wg_x = 16, wg_y = gpu_info(g)->max_workgroup_invocations >= 256 ? 16 : 8;
    struct gpu_kernel_desc d = {
        .shader = "matmul_tiled", .n_bindings = 3,
        .bindings = {GPU_BIND_STORAGE, GPU_BIND_STORAGE, GPU_BIND_STORAGE},
        .push_size = sizeof(struct matmul_push_tiled), .n_spec = 2, .spec = {wg_x, wg_y},
    };
    struct matmul_push_tiled push = {rows, cols, 0, (uint32_t)!!accumulate, 0, 0, 0, 0};
    switch (l) {
    case NT: /* A = X (M,K), B(k,n) = W[n,k] */
        push.K = K, push.sam = K, push.sak = 1, push.sbk = 1, push.sbn = K;
        break;
    case NN: /* A = dY (M,N), B(k,n) = W[k,n] with k over N */
        push.K = N, push.sam = N, push.sak = 1, push.sbk = K, push.sbn = 1;
        break;
    case TN: /* A(n,m) = dY[m,n], B(m,k) = X[m,k] with m over M */
        push.K = M, push.sam = 1, push.sak = N, push.sbk = K, push.sbn = 1;
        break;
    }
    gpu_dispatch(g, gpu_kernel_get(g, &d), args, &push, ceil_div(cols, 64), ceil_div(rows, 64), 1);
}

void op_matmul_nt(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *w, struct gpu_buffer *y, uint32_t M,
                  uint32_t N, uint32_t K, int accumulate)
{
    matmul(g, NT, x, w, y, M, N, K, accumulate);
}

void op_matmul_nn(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *w, struct gpu_buffer *dx, uint32_t M,
                  uint32_t N, uint32_t K, int accumulate)
{
    matmul(g, NN, dy, w, dx, M, N, K, accumulate);
}

void op_matmul_tn(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *x, struct gpu_buffer *dw, uint32_t M,
                  uint32_t N, uint32_t K, int accumulate)
{
    matmul(g, TN, dy, x, dw, M, N, K, accumulate);
}
