/* bench_model: forward+backward tokens/s of a small llama on the chosen
 * device, with the share of time each phase takes.
 * usage: bench_model [batch [seq [dim [layers [heads]]]]]  (default
 * 16 128 128 4 4, the default recipe's shape; half as many kv heads where
 * heads is even). The first step (shader compilation on
 * lavapipe) is not timed; three steps are; a fifth is profiled per
 * dispatch (gpu_profile_print), to show which kernels to optimize next. */
#include <stdio.h>
#include <stdlib.h>

#include "vktrain/gpu.h"
#include "vktrain/model.h"
#include "vktrain/util.h"

int main(int argc, char **argv)
{
    uint32_t B = argc > 1 ? (uint32_t)atoi(argv[1]) : 16, T = argc > 2 ? (uint32_t)atoi(argv[2]) : 128;
    uint32_t C = argc > 3 ? (uint32_t)atoi(argv[3]) : 128, L = argc > 4 ? (uint32_t)atoi(argv[4]) : 4;
    uint32_t H = argc > 5 ? (uint32_t)atoi(argv[5]) : 4;
    if (B == 0 || T == 0 || C == 0 || L == 0 || H == 0 || C % H != 0) {
        fprintf(stderr, "bench_model: batch, seq, dim, layers and heads must be positive, dim a multiple of heads\n");
        return 2;
    }
    struct model_config c = {.arch = MODEL_LLAMA,
                             .vocab_size = 259,
                             .dim = C,
                             .n_layers = L,
                             .n_heads = H,
                             .n_kv_heads = H % 2 == 0 ? H / 2 : H,
                             .hidden_dim = (8 * C / 3 + 31) / 32 * 32,
                             .max_seq_len = T,
                             .norm_eps = 1e-5f,
                             .rope_theta = 10000.0,
                             .init_std = 0.02f};
    struct gpu_options opt = {.device_index = -1, .quiet = 1};
    struct gpu *g = gpu_create(&opt);
    struct model *m = model_create(g, &c, B);
    model_init_random(m, 1);
    size_t n = (size_t)B * T;
    int32_t *tok = vkt_malloc(n * 4, "tokens"), *lab = vkt_malloc(n * 4, "labels"), *pos = vkt_malloc(n * 4, "pos");
    for (size_t i = 0; i < n; i++)
        tok[i] = (int32_t)(i * 31 % 256), lab[i] = (int32_t)((i * 17 + 5) % 256), pos[i] = (int32_t)(i % T);
    struct model_batch b = {.B = B, .T = T, .tokens = tok, .labels = lab, .positions = pos};
    printf("device: %s; llama dim %u, %u layers, %u heads (%u kv), hidden %u, batch %u x %u, %.2fM parameters\n",
           gpu_info(g)->name, C, L, H, c.n_kv_heads, c.hidden_dim, B, T, model_numel(m) / 1e6);
    double fwd = 0, bwd = 0;
    for (int step = 0; step < 5; step++) {
        if (step == 4 && !gpu_profile_start(g))
            break;
        double t0 = vkt_now();
        model_zero_grad(m);
        gpu_profile_phase(g, "forward");
        model_forward(m, &b, 1.0f / (float)n);
        gpu_submit(g);
        double t1 = vkt_now();
        gpu_profile_phase(g, "backward");
        model_backward(m);
        gpu_submit(g);
        double t2 = vkt_now();
        if (step == 4) {
            gpu_profile_stop(g);
            printf("profile of one more step:\n");
            gpu_profile_print(g, stdout, 1, "step");
        } else if (step > 0) {
            fwd += t1 - t0, bwd += t2 - t1;
        }
        if (step == 3)
            printf("forward  %8.1f ms/step\nbackward %8.1f ms/step\n%.0f tokens/s (forward+backward)\n", fwd / 3 * 1e3,
                   bwd / 3 * 1e3, 3.0 * n / (fwd + bwd));
    }
    model_destroy(m);
    gpu_destroy(g);
    free(tok), free(lab), free(pos);
    return 0;
}
