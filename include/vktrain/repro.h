/* repro: the reproducible profile (precision: reproducible), in which every
 * device, kernel family and split of the batch is meant to give the same
 * bits. This header is its host side so far:
 *
 * - the deterministic math, the C build of shaders/repro_math.glsl (the
 *   same source every reproducible shader includes): correctly rounded
 *   division and square root, and exp, log, tanh, sigmoid and GELU (tanh)
 *   made of single-precision + − × and integer operations only;
 * - the start-up probe, a known-answer shader that checks the device does
 *   the arithmetic the profile relies on. */
#ifndef VKTRAIN_REPRO_H
#define VKTRAIN_REPRO_H

#include <stddef.h>
#include <stdint.h>

float repro_div(float a, float b);
float repro_sqrt(float x);
float repro_exp(float x);
float repro_log(float x);
float repro_tanh(float x);
float repro_sigmoid(float x);
float repro_gelu(float x);

#endif
