/* grad_norm: the global gradient norm and the clipping factor of
 * torch.nn.utils.clip_grad_norm_ (docs/normalization.md: grad_norm is the
 * L2 norm of g before clipping; clipping scales g by
 * min(1, max_norm/(norm + 1e-6))).
 *
 * Owns the recording of one op_sumsq per gradient tensor into caller-owned
 * slots and the host-side sum in double. Never allocates device memory,
 * never submits or downloads (the caller reads the slots back with the rest
 * of the step's scalars), and never modifies a gradient: the clip factor
 * travels to op_adamw as its grad_scale. */
#include <math.h>

#include "vktrain/ops.h"
#include "vktrain/ops_optim.h"
#include "vktrain/util.h"

size_t grad_norm_scratch(const struct gpu *g, const struct grad_tensor *t, int count)
{
    size_t most = 1;
    for (int i = 0; i < count; i++) {
        size_t s = t[i].n ? op_reduce_scratch(g, t[i].n) : 1;
        if (s > most)
            most = s;
    }
    return most;
}

void grad_norm_record(struct gpu *g, const struct grad_tensor *t, int count, struct gpu_buffer *scratch,
                      struct gpu_buffer *slots, uint32_t first_slot)
{
    if (gpu_buffer_size(slots) < ((size_t)first_slot + (size_t)count) * sizeof(float))
        vkt_fatal("grad_norm: slots buffer '%s' holds %zu bytes, %u + %d slots need %zu", gpu_buffer_name(slots),
                  gpu_buffer_size(slots), first_slot, count, ((size_t)first_slot + (size_t)count) * sizeof(float));
    for (int i = 0; i < count; i++) {
        if (t[i].n == 0)
            vkt_fatal("grad_norm: gradient tensor %d is empty", i);
        op_sumsq(g, t[i].grad, t[i].n, scratch, slots, first_slot + (uint32_t)i);
    }
}

double grad_norm_total(const float *slots, int count)
{
    double s = 0.0;
    for (int i = 0; i < count; i++)
        s += (double)slots[i];
    return sqrt(s);
}

double grad_clip_factor(double norm, double max_norm)
{
    if (!(max_norm > 0.0))
        return 1.0;
    double c = max_norm / (norm + 1e-6);
    return c > 1.0 ? 1.0 : c; /* a NaN norm stays NaN, as in torch */
}
