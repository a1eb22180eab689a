/* adamw_driver: runs vktrain's optimizer pieces (grad_norm_record,
 * grad_norm_total, grad_clip_factor, op_adamw) on tensors and gradients
 * read from a file, for tests/test_optim_torch.py to compare with
 * torch.nn.utils.clip_grad_norm_ + torch.optim.AdamW. Never interprets the
 * numbers; it only runs the steps and writes what the device holds.
 *
 * Usage: adamw_driver IN OUT. All values little-endian.
 * IN:  u32 K (tensors), u32 S (steps), f64 beta1, beta2, eps, max_norm
 *      (<= 0: no clipping); per tensor: u32 n, f64 weight_decay, f32 θ[n];
 *      per step: f64 lr, then f32 grad[n] of each tensor in order.
 * OUT: per step: f64 grad_norm (before clipping), f64 clip factor; then per
 *      tensor f32 θ[n], m[n], v[n] after the step. */
#include <stdio.h>
#include <stdlib.h>

#include "vktrain/gpu.h"
#include "vktrain/ops_optim.h"
#include "vktrain/util.h"

static void get(FILE *f, void *p, size_t bytes)
{
    if (fread(p, 1, bytes, f) != bytes)
        vkt_fatal("adamw_driver: input ends early");
}

static void put(FILE *f, const void *p, size_t bytes)
{
    if (fwrite(p, 1, bytes, f) != bytes)
        vkt_fatal("adamw_driver: write failed");
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: adamw_driver IN OUT\n");
        return 2;
    }
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    if (!in || !out)
        vkt_fatal("adamw_driver: cannot open %s or %s", argv[1], argv[2]);
    uint32_t K, S;
    double hp[4];
    get(in, &K, 4);
    get(in, &S, 4);
    get(in, hp, sizeof hp);
    struct gpu_options opt = {.device_index = -1, .quiet = 1};
    struct gpu *g = gpu_create(&opt);
    struct grad_tensor *t = vkt_calloc(K, sizeof *t, "tensors");
    struct gpu_buffer **w = vkt_calloc(K, sizeof *w, "w"), **m = vkt_calloc(K, sizeof *m, "m");
    struct gpu_buffer **v = vkt_calloc(K, sizeof *v, "v");
    double *wd = vkt_calloc(K, sizeof *wd, "wd");
    size_t most = 0;
    for (uint32_t k = 0; k < K; k++) {
        uint32_t n;
        get(in, &n, 4);
        get(in, &wd[k], 8);
        float *x = vkt_malloc(n * sizeof *x, "theta");
        get(in, x, n * sizeof *x);
        t[k].n = n;
        t[k].grad = gpu_buffer_create(g, n * sizeof(float), "grad");
        w[k] = gpu_buffer_create(g, n * sizeof(float), "theta");
        m[k] = gpu_buffer_create(g, n * sizeof(float), "exp_avg");
        v[k] = gpu_buffer_create(g, n * sizeof(float), "exp_avg_sq");
        gpu_upload(g, w[k], 0, x, n * sizeof *x);
        gpu_zero(g, m[k]);
        gpu_zero(g, v[k]);
        most = n > most ? n : most;
        free(x);
    }
    struct gpu_buffer *scratch = gpu_buffer_create(g, grad_norm_scratch(g, t, (int)K) * sizeof(float), "scratch");
    struct gpu_buffer *slots = gpu_buffer_create(g, K * sizeof(float), "slots");
    float *x = vkt_malloc(most * sizeof *x, "host"), *sl = vkt_malloc(K * sizeof *sl, "slots");
    for (uint32_t s = 1; s <= S; s++) {
        double lr;
        get(in, &lr, 8);
        for (uint32_t k = 0; k < K; k++) {
            get(in, x, t[k].n * sizeof *x);
            gpu_upload(g, t[k].grad, 0, x, t[k].n * sizeof *x);
        }
        grad_norm_record(g, t, (int)K, scratch, slots, 0);
        gpu_download(g, slots, 0, sl, K * sizeof *sl);
        double r[2];
        r[0] = grad_norm_total(sl, (int)K);
        r[1] = grad_clip_factor(r[0], hp[3]);
        put(out, r, sizeof r);
        for (uint32_t k = 0; k < K; k++) {
            struct op_adamw_step a = {.lr = lr, .beta1 = hp[0], .beta2 = hp[1], .eps = hp[2],
                                      .weight_decay = wd[k], .t = s, .grad_scale = r[1]};
            op_adamw(g, w[k], t[k].grad, m[k], v[k], t[k].n, &a);
        }
        for (uint32_t k = 0; k < K; k++) {
            struct gpu_buffer *b[3] = {w[k], m[k], v[k]};
            for (int j = 0; j < 3; j++) {
                gpu_download(g, b[j], 0, x, t[k].n * sizeof *x);
                put(out, x, t[k].n * sizeof *x);
            }
        }
    }
    for (uint32_t k = 0; k < K; k++) {
        gpu_buffer_destroy(g, t[k].grad);
        gpu_buffer_destroy(g, w[k]);
        gpu_buffer_destroy(g, m[k]);
        gpu_buffer_destroy(g, v[k]);
    }
    gpu_buffer_destroy(g, scratch);
    gpu_buffer_destroy(g, slots);
    gpu_destroy(g);
    free(t), free(w), free(m), free(v), free(wd), free(x), free(sl);
    fclose(in);
    if (fclose(out))
        vkt_fatal("adamw_driver: cannot write %s", argv[2]);
    return 0;
}
