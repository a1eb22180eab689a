/* repro_glsl_c: the few GLSL words shaders/reproducible/repro_math.glsl uses, as C, so
 * that the same text compiles as C (src/repro/repro_math.c). Only what that
 * file needs; it is no general GLSL emulation.
 *
 * The C must compute what the shader computes: float operations in single
 * precision one at a time (FLT_EVAL_METHOD 0: SSE, not x87) and never
 * contracted into an FMA (CMakeLists.txt builds src/repro with
 * -ffp-contract=off). */
#ifndef VKTRAIN_REPRO_GLSL_C_H
#define VKTRAIN_REPRO_GLSL_C_H

#include <float.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "the reproducible math needs float expressions evaluated in float (FLT_EVAL_METHOD 0)"
#endif

#define REPRO_C 1
#define precise
#define REPRO_INTERNAL static
#define REPRO_U(x) ((uint32_t)(x))
#define REPRO_I(x) ((int32_t)(x))
#define REPRO_F(x) ((float)(x))
typedef uint32_t uint;

#include "vktrain/repro.h"

#define uintBitsToFloat repro_float_of
#define floatBitsToUint repro_bits_of

#endif
