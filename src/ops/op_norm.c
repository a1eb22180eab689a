/* op_norm: RMSNorm, LayerNorm and the column sums that give their weight
 * and bias gradients (and a linear layer's bias gradient). Row kernels run
 * one workgroup per row; column sums one invocation per column, rows in
 * order, so every result is deterministic. Never allocates. */
#include "ops_internal.h"
#include "vktrain/util.h"

#define F sizeof(float)

struct norm_push {
    uint32_t C;
    float eps;
};
struct colsum_push {
    uint32_t rows, C;
};

static void colsum(struct gpu *g, const char *variant, struct gpu_buffer *dy, struct gpu_buffer *x,
                   struct gpu_buffer *mean, struct gpu_buffer *rstd, struct gpu_buffer *out, uint32_t rows,
                   uint32_t C)
{
    ops_check(variant, "gradient", out, F * C);
    struct gpu_arg args[5] = {{.buf = dy}, {.buf = x}, {.buf = mean}, {.buf = rstd}, {.buf = out, .write = 1}};
    struct colsum_push push = {rows, C};
    ops_dispatch_elements(g, ops_kernel(g, variant, 5, sizeof push, 1), args, &push, C, 0);
}

void op_rmsnorm(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *w, struct gpu_buffer *y,
                struct gpu_buffer *rstd, uint32_t rows, uint32_t C, float eps)
{
    ops_check("rmsnorm", "input", x, F * rows * C);
    ops_check("rmsnorm", "weight", w, F * C);
    ops_check("rmsnorm", "output", y, F * rows * C);
    ops_check("rmsnorm", "rstd", rstd, F * rows);
    struct gpu_arg args[4] = {{.buf = x}, {.buf = w}, {.buf = y, .write = 1}, {.buf = rstd, .write = 1}};
    struct norm_push push = {C, eps};
    gpu_dispatch(g, ops_kernel(g, "rmsnorm", 4, sizeof push, 1), args, &push, rows, 1, 1);
}

void op_rmsnorm_backward(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *x, struct gpu_buffer *w,
                         struct gpu_buffer *rstd, struct gpu_buffer *dx, struct gpu_buffer *dw, uint32_t rows,
                         uint32_t C)
{
    ops_check("rmsnorm_backward", "output gradient", dy, F * rows * C);
    ops_check("rmsnorm_backward", "input gradient", dx, F * rows * C);
    struct gpu_arg args[5] = {{.buf = dy}, {.buf = x}, {.buf = w}, {.buf = rstd}, {.buf = dx, .write = 1}};
    uint32_t push = C;
    gpu_dispatch(g, ops_kernel(g, "rmsnorm_back", 5, sizeof push, 1), args, &push, rows, 1, 1);
    colsum(g, "colsum_rms", dy, x, rstd, rstd, dw, rows, C);
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
    struct norm_push push = {C, eps};
    gpu_dispatch(g, ops_kernel(g, "layernorm", 6, sizeof push, 1), args, &push, rows, 1, 1);
}

void op_layernorm_backward(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *x, struct gpu_buffer *w,
                           struct gpu_buffer *mean, struct gpu_buffer *rstd, struct gpu_buffer *dx,
                           struct gpu_buffer *dw, struct gpu_buffer *db, uint32_t rows, uint32_t C)
{
    ops_check("layernorm_backward", "output gradient", dy, F * rows * C);
    ops_check("layernorm_backward", "input gradient", dx, F * rows * C);
    struct gpu_arg args[6] = {{.buf = dy}, {.buf = x}, {.buf = w}, {.buf = mean}, {.buf = rstd},
                              {.buf = dx, .write = 1}};
    uint32_t push = C;
    gpu_dispatch(g, ops_kernel(g, "layernorm_back", 6, sizeof push, 1), args, &push, rows, 1, 1);
    colsum(g, "colsum_ln", dy, x, mean, rstd, dw, rows, C);
    colsum(g, "colsum_plain", dy, dy, dy, dy, db, rows, C);
}

void op_bias_add(struct gpu *g, struct gpu_buffer *bias, struct gpu_buffer *y, uint32_t rows, uint32_t C)
{
    ops_check("bias_add", "bias", bias, F * C);
    ops_check("bias_add", "output", y, F * rows * C);
    struct gpu_arg args[2] = {{.buf = bias}, {.buf = y, .write = 1}};
    struct colsum_push push = {rows * C, C};
    ops_dispatch_elements(g, ops_kernel(g, "bias_add", 2, sizeof push, 1), args, &push, (size_t)rows * C, 1);
}

void op_bias_backward(struct gpu *g, struct gpu_buffer *dy, struct gpu_buffer *db, uint32_t rows, uint32_t C)
{
    ops_check("bias_backward", "output gradient", dy, F * rows * C);
    colsum(g, "colsum_plain", dy, dy, dy, dy, db, rows, C);
}
