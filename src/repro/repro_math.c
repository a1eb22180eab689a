/* repro_math: the reproducible mode's math (division, square root, exp,
 * log, tanh, sigmoid, GELU; sin and cos) for the host and the C reference, compiled from
 * the very source the shaders include, so both give the same bits. */
#include "vktrain/repro.h"

#include "repro_glsl_c.h"

#include "../../shaders/reproducible/repro_math.glsl"
#include "../../shaders/reproducible/repro_trig.glsl"
