/* sampler: the order of training sequences. Epoch e is a permutation of the
 * sequence list drawn by Fisher-Yates from splitmix64 seeded with (seed, e),
 * so it is the same on every platform, rank and (W, A, B). Step s of an
 * epoch takes positions [s*G, (s+1)*G), G = W*A*B; the sequence at s*G + k
 * goes to rank (k / B) mod W, micro-batch k / (W*B). Steps count on across
 * epochs; the tail of an epoch short of G is dropped.
 * Owns one index array, refilled once per epoch; never copies tokens. */
#include "vktrain/data.h"

#include <stdio.h>
#include <stdlib.h>

#include "vktrain/util.h"

int sampler_init(struct sampler *s, int64_t n_seq, uint64_t seed, bool shuffle, int world, int accum, int batch,
                 char *err, size_t errlen)
{
    int64_t G = (int64_t)world * accum * batch;
    *s = (struct sampler){.n_seq = n_seq,
                          .world = world,
                          .accum = accum,
                          .batch = batch,
                          .seed = seed,
                          .shuffle = shuffle,
                          .perm_epoch = -1};
    if (n_seq > UINT32_MAX) {
        snprintf(err, errlen, "data: %lld sequences are more than the sampler's 2^32", (long long)n_seq);
        return -1;
    }
    if (n_seq < G) {
        snprintf(err, errlen,
                 "data: %lld training sequences are fewer than one global batch of %lld "
                 "(world %d x gradient_accumulation_steps %d x batch_size %d)",
                 (long long)n_seq, (long long)G, world, accum, batch);
        return -1;
    }
    s->steps_per_epoch = n_seq / G;
    s->dropped = n_seq % G;
    s->perm = vkt_malloc((size_t)n_seq * sizeof *s->perm, "sampler permutation");
    return 0;
}

void sampler_free(struct sampler *s)
{
    free(s->perm);
    s->perm = NULL;
}

struct data_pos sampler_pos(const struct sampler *s, int64_t step)
{
    return (struct data_pos){step / s->steps_per_epoch, step % s->steps_per_epoch};
}

int64_t sampler_step(const struct sampler *s, struct data_pos pos)
{
    return pos.epoch * s->steps_per_epoch + pos.step;
}

int64_t sampler_total_steps(const struct sampler *s, const struct config *cfg)
{
    return cfg->max_steps ? cfg->max_steps : cfg->epochs * s->steps_per_epoch;
}

static void permute(struct sampler *s, int64_t epoch)
{
    for (int64_t i = 0; i < s->n_seq; i++)
        s->perm[i] = (uint32_t)i;
    if (s->shuffle) {
        uint64_t state = s->seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(epoch + 1));
        /* j = r mod (i + 1): the bias is below (i + 1) / 2^64, far under
         * anything measurable. */
        for (int64_t i = s->n_seq - 1; i > 0; i--) {
            uint64_t j = vkt_splitmix64(&state) % (uint64_t)(i + 1);
            uint32_t t = s->perm[i];
            s->perm[i] = s->perm[j];
            s->perm[j] = t;
        }
    }
    s->perm_epoch = epoch;
}

uint32_t sampler_first(const struct sampler *s, int rank, int micro)
{
    return (uint32_t)(((int64_t)micro * s->world + rank) * s->batch);
}

void sampler_batch(struct sampler *s, int64_t step, int rank, int micro, int64_t *seq)
{
    struct data_pos pos = sampler_pos(s, step);
    if (pos.epoch != s->perm_epoch)
        permute(s, pos.epoch);
    int64_t G = (int64_t)s->world * s->accum * s->batch;
    int64_t base = pos.step * G + sampler_first(s, rank, micro);
    for (int b = 0; b < s->batch; b++)
        seq[b] = s->perm[base + b];
}
