/*
 * ref_random.c — a small deterministic random generator for the reference
 * tests (declared in ref_ops.h): splitmix64, uniforms from its top 53 bits,
 * normals by Box–Muller. Same seed, same numbers, on every machine.
 */
#include "ref_ops.h"

#include <math.h>

#define REF_TWO_PI 6.283185307179586

void ref_rng_seed(struct ref_rng *rng, uint64_t seed)
{
    rng->state = seed;
}

uint64_t ref_rng_u64(struct ref_rng *rng)
{
    uint64_t z = (rng->state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double ref_rng_uniform(struct ref_rng *rng)
{
    return (double)(ref_rng_u64(rng) >> 11) * (1.0 / 9007199254740992.0);
}

double ref_rng_normal(struct ref_rng *rng)
{
    double u1 = 1.0 - ref_rng_uniform(rng); // in (0, 1], so log(u1) is finite
    double u2 = ref_rng_uniform(rng);
    return sqrt(-2.0 * log(u1)) * cos(REF_TWO_PI * u2);
}
