/* test_repro_adamw: the reproducible AdamW step gives, on the device, the
 * bits of its C reference (repro_adamw_ref) for θ, m and v, over steps with
 * weight decay, clipping and bias correction at t = 1, 2, 3 and 100000, on
 * tensors of mixed magnitudes with zeros; and it is AdamW: θ within
 * 1e-6·(|θ| + lr) of the default mode's op_adamw (torch's formula) from the
 * same state, which differs only in the rounding of the square root, the
 * division and the bias correction (a multiply by 1/√(1 − β2^t) here). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_testing.h"
#include "repro_testing.h"
#include "vktrain/ops_optim.h"
#include "repro_ref.h"

#define N 10007

static float *data(struct ref_rng *rng, double scale, int square)
{
    float *x = vkt_malloc(N * sizeof *x, "data");
    for (size_t i = 0; i < N; i++) {
        double r = ref_rng_normal(rng) * scale * (ref_rng_uniform(rng) < 0.1 ? 1e-3 : 1.0);
        x[i] = ref_rng_uniform(rng) < 0.02 ? 0.0f : (float)(square ? r * r : r);
    }
    return x;
}

int main(void)
{
    struct gpu *g = test_gpu();
    struct ref_rng rng;
    ref_rng_seed(&rng, 1416);
    float *state[3] = {data(&rng, 0.1, 0), data(&rng, 0.01, 0), data(&rng, 0.01, 1)}; /* θ, m, v */
    struct gpu_buffer *repro[3], *dflt[3], *bg = gpu_buffer_create(g, N * 4, "grad");
    for (int j = 0; j < 3; j++) {
        repro[j] = gpu_buffer_create(g, N * 4, "repro state");
        dflt[j] = gpu_buffer_create(g, N * 4, "default state");
    }
    const int64_t steps[] = {1, 2, 3, 100000};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        float *grad = data(&rng, 1.0, 0);
        gpu_upload(g, bg, 0, grad, N * 4);
        for (int j = 0; j < 3; j++) {
            gpu_upload(g, repro[j], 0, state[j], N * 4);
            gpu_upload(g, dflt[j], 0, state[j], N * 4);
        }
        struct op_adamw_step s = {.lr = 3e-4 * (double)(k + 1),
                                  .beta1 = 0.9,
                                  .beta2 = 0.95,
                                  .eps = 1e-8,
                                  .weight_decay = 0.1,
                                  .t = steps[k],
                                  .grad_scale = k == 2 ? 0.37 : 1.0};
        op_repro_adamw(g, repro[0], bg, repro[1], repro[2], N, &s);
        op_adamw(g, dflt[0], bg, dflt[1], dflt[2], N, &s);
        gpu_submit(g);
        repro_adamw_ref(state[0], grad, state[1], state[2], N, &s);
        size_t differ = 0;
        for (int j = 0; j < 3; j++) {
            float *got = download_floats(g, repro[j], N);
            differ += repro_bit_differences(got, state[j], N);
            free(got);
        }
        float *dt = download_floats(g, dflt[0], N);
        size_t far = 0;
        double worst = 0;
        for (size_t i = 0; i < N; i++) {
            double d = fabs((double)dt[i] - state[0][i]) / (fabs(state[0][i]) + s.lr);
            worst = d > worst ? d : worst;
            far += d > 1e-6;
        }
        printf("t = %lld: %zu of 3 x %d values differ from C; the default mode's θ within %.2g of |θ| + lr\n",
               (long long)s.t, differ, N, worst);
        CHECK(differ == 0, "t = %lld: %zu values differ from C", (long long)s.t, differ);
        CHECK(far == 0, "t = %lld: %zu elements further than 1e-6 from the default mode", (long long)s.t, far);
        free(dt);
        free(grad);
    }
    for (int j = 0; j < 3; j++) {
        gpu_buffer_destroy(g, repro[j]);
        gpu_buffer_destroy(g, dflt[j]);
        free(state[j]);
    }
    gpu_buffer_destroy(g, bg);
    gpu_destroy(g);
    return test_failures ? 1 : 0;
}
