/* bench_ops: milliseconds per call of the elementwise kernels of a model
 * step (GELU and SwiGLU forward and backward, the bias add, an AdamW step
 * over rows · hidden parameters), in the
 * default mode and in the reproducible one (gpu_set_reproducible), on
 * the default recipe's shapes (rows = 16 · 128, hidden 352, width 384).
 * usage: bench_ops [rows hidden width [reps [op]]]   (default 2048 352 384, 15, all)
 * (op: one of the names printed, e.g. adamw, to time that one alone)
 * Each figure is the best of reps calls, the profiles alternated call by
 * call, each first in turn, so that load from other processes and the
 * caches touch both alike (timestamp
 * queries; wall clock where the queue has none); a first untimed round
 * compiles the shaders. The last column is the default's time over the
 * reproducible one: the reproducible mode's cost, as bench_repro.sh
 * gives it for whole steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vktrain/gpu.h"
#include "vktrain/ops.h"
#include "vktrain/ops_optim.h"
#include "vktrain/util.h"

#include "bench_util.h"

struct bufs {
    struct gpu_buffer *a, *b, *c, *d, *e, *bias, *v;
    uint32_t rows, hidden, width;
};

enum { GELU, GELU_BACK, SWIGLU, SWIGLU_BACK, BIAS, ADAMW, N_OPS };
static const char *names[N_OPS] = {"gelu", "gelu backward", "swiglu", "swiglu backward", "bias add", "adamw"};

static void call(struct gpu *g, struct bufs *b, int op)
{
    size_t n = (size_t)b->rows * b->hidden;
    switch (op) {
    case GELU:
        op_gelu(g, b->a, b->c, n);
        break;
    case GELU_BACK:
        op_gelu_backward(g, b->a, b->b, b->d, n);
        break;
    case SWIGLU:
        op_swiglu(g, b->a, b->b, b->c, n);
        break;
    case SWIGLU_BACK:
        op_swiglu_backward(g, b->a, b->b, b->c, b->d, b->e, n);
        break;
    case BIAS:
        op_bias_add(g, b->bias, b->c, b->rows, b->width);
        break;
    default: { /* θ in c, the gradient in a, m in d, v (non-negative) in v */
        struct op_adamw_step st = {
            .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .t = 10, .grad_scale = 1.0};
        op_adamw(g, b->c, b->a, b->d, b->v, n, &st);
        break;
    }
    }
}

static double timed(struct gpu *g, struct bufs *b, int op, int repro)
{
    gpu_set_reproducible(g, repro);
    struct bench_clock c = bench_begin(g);
    call(g, b, op);
    return bench_end(g, c);
}

static struct gpu_buffer *filled(struct gpu *g, size_t n, const char *name)
{
    return bench_filled(g, n, name, 4.0f);
}

int main(int argc, char **argv)
{
    struct bufs b = {.rows = 2048, .hidden = 352, .width = 384};
    int reps = 15;
    if (argc >= 4)
        b.rows = (uint32_t)atoi(argv[1]), b.hidden = (uint32_t)atoi(argv[2]), b.width = (uint32_t)atoi(argv[3]);
    if (argc >= 5)
        reps = atoi(argv[4]);
    const char *only = argc >= 6 ? argv[5] : NULL;
    int known = !only;
    for (int op = 0; op < N_OPS && !known; op++)
        known = !strcmp(only, names[op]);
    if (!known) {
        char list[256] = "";
        for (int op = 0; op < N_OPS; op++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s'%s'", op ? ", " : "", names[op]);
        vkt_fatal("bench_ops: no op named '%s' (%s)", only, list);
    }
    struct gpu_options opt = {.device_index = -1, .quiet = 1};
    struct gpu *g = gpu_create(&opt);
    const char *family = gpu_kernel_class(g) == GPU_KERNELS_TEXEL ? "texel" : "tiled";
    printf("device: %s (%s kernels), rows %u, hidden %u, width %u, best of %d, ms per call\n", gpu_info(g)->name,
           family, b.rows, b.hidden, b.width, reps);
    size_t n = (size_t)b.rows * (b.hidden > b.width ? b.hidden : b.width);
    b.a = filled(g, n, "a"), b.b = filled(g, n, "b"), b.c = filled(g, n, "c"), b.d = filled(g, n, "d");
    b.e = filled(g, n, "e"), b.bias = filled(g, b.width, "bias");
    float *sq = vkt_malloc(n * sizeof *sq, "v");
    for (size_t i = 0; i < n; i++)
        sq[i] = (float)((i * 2654435761u) % 1000) * 1e-6f; /* AdamW's second moment: non-negative */
    b.v = gpu_buffer_create(g, n * sizeof *sq, "v");
    gpu_upload(g, b.v, 0, sq, n * sizeof *sq);
    free(sq);
    printf("%-18s %10s %13s %8s\n", "op", "default", "reproducible", "ratio");
    for (int op = 0; op < N_OPS; op++) {
        if (only && strcmp(only, names[op]))
            continue;
        double best[2] = {1e30, 1e30};
        for (int r = -1; r < reps; r++)
            for (int i = 0; i < 2; i++) {
                int repro = (r & 1) ^ i; /* either profile first in turn */
                double ms = timed(g, &b, op, repro);
                if (r >= 0 && ms < best[repro])
                    best[repro] = ms;
            }
        printf("%-18s %10.3f %13.3f %8.2f\n", names[op], best[0], best[1], best[0] / best[1]);
    }
    struct gpu_buffer *all[] = {b.a, b.b, b.c, b.d, b.e, b.bias, b.v};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gpu_buffer_destroy(g, all[i]);
    gpu_destroy(g);
    return 0;
}
