/* op_activation: the MLP activations SwiGLU and GELU (tanh), forward and
 * backward, elementwise (shaders/activation.comp). Never allocates. */
#include "ops_internal.h"
#include "vktrain/util.h"

static void activation(struct gpu *g, const char *variant, struct gpu_buffer *a, struct gpu_buffer *b,
                       struct gpu_buffer *c, struct gpu_buffer *d, struct gpu_buffer *e, size_t n, int writes_c)
{
    if (n > UINT32_MAX)
        vkt_fatal("%s: %zu elements exceed one dispatch", variant, n);
    struct gpu_arg args[5] = {{.buf = a}, {.buf = b}, {.buf = c, .write = writes_c},
                              {.buf = d, .write = !writes_c}, {.buf = e, .write = !writes_c}};
    for (int i = 0; i < 5; i++)
        ops_check(variant, "a", args[i].buf, n * sizeof(float));
    struct {
        uint32_t n;
        float unused;
    } push = {(uint32_t)n, 0.0f};
    ops_dispatch_elements(g, ops_kernel(g, variant, 5, sizeof push, 1), args, &push, n, 1);
}

void op_swiglu(struct gpu *g, struct gpu_buffer *gate, struct gpu_buffer *up, struct gpu_buffer *h, size_t n)
{
    activation(g, "activation_swiglu", gate, up, h, h, h, n, 1);
}

void op_swiglu_backward(struct gpu *g, struct gpu_buffer *gate, struct gpu_buffer *up, struct gpu_buffer *dh,
                        struct gpu_buffer *dgate, struct gpu_buffer *dup, size_t n)
{
    activation(g, "activation_swiglu_back", gate, up, dh, dgate, dup, n, 0);
}

void op_gelu(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *y, size_t n)
{
    activation(g, "activation_gelu", x, x, y, y, y, n, 1);
}

void op_gelu_backward(struct gpu *g, struct gpu_buffer *x, struct gpu_buffer *dy, struct gpu_buffer *dx, size_t n)
{
    activation(g, "activation_gelu_back", x, x, dy, dx, dx, n, 0);
}
