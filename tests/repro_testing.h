/* repro_testing: what the reproducible-mode tests share. */
#ifndef VKTRAIN_REPRO_TESTING_H
#define VKTRAIN_REPRO_TESTING_H

#include <stddef.h>
#include <string.h>

/* How many of the n floats of x and y differ in their bits. */
static inline size_t repro_bit_differences(const float *x, const float *y, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += memcmp(&x[i], &y[i], sizeof x[i]) != 0;
    return d;
}

#endif
