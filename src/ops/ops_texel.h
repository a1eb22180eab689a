/* ops_texel: helpers for the texel-family variants of the non-matmul ops
 * (inputs through uniform texel buffers, outputs storage; CPU devices, see
 * README "Kernels per device class"). Nothing outside src/ops includes it. */
#ifndef VKTRAIN_OPS_TEXEL_H
#define VKTRAIN_OPS_TEXEL_H

#include "vktrain/ops.h"

/* The most iterations a kernel should plan for one invocation's walk over
 * rows (or keys) on this device: a margin under its loop limit, or no
 * limit. llvmpipe counts every loop's iterations in an invocation
 * together, so a texel kernel is chosen only when a bound on its
 * iterations stays under this, and ops with longer walks split them over
 * dispatches. */
uint32_t ops_loop_chunk(const struct gpu *g);

/* Nonzero when g runs the texel family and every buffer in bufs (n of
 * them, NULLs skipped) fits one texel view of `kind`. */
int ops_texel_usable(const struct gpu *g, enum gpu_binding_kind kind, struct gpu_buffer *const *bufs, int n);

/* Nonzero when g runs the texel family and views of `kind` can hold rows
 * of row_bytes in ranges (the rows between aligned offsets fit one view),
 * for ops that bind their row buffers in ranges. */
int ops_texel_rows_fit(const struct gpu *g, enum gpu_binding_kind kind, size_t row_bytes);

/* The texel width an op runs at: 4 (RGBA32F views) when its shape allows
 * vec4 chunks (vec4_shape) and its views fit as RGBA32F (vec4_fits); else
 * 1 (R32F) when they fit as R32F (f32_fits); else 0 (the storage
 * kernels). f32_always: some of its views (per-row statistics) are R32F at
 * either width, so 4 needs f32_fits too. */
int ops_texel_width(int vec4_shape, int vec4_fits, int f32_fits, int f32_always);

/* The f32_mask bit of texel binding i (ops_texel_variant): an R32F view at
 * either width. */
#define OPS_R32F(i) (1u << (i))

/* The kernel `shader` with the given binding kinds; spec constants
 * spec[0..n_spec-1]. */
struct gpu_kernel *ops_texel_kernel(struct gpu *g, enum shader_id shader, int n_bind,
                                    const enum gpu_binding_kind *kinds, uint32_t push_size, int n_spec,
                                    const uint32_t *spec);

/* The kernel widths[width == 4] (SHADER_WIDTHS(base): <base>_vec4 or
 * <base>_scalar) for texel width 4 or 1: bindings
 * 0..n_tex-1 are texel views (R32F where f32_mask has the bit, OPS_R32F,
 * or at width 1; RGBA32F otherwise), the rest storage. */
struct gpu_kernel *ops_texel_variant(struct gpu *g, const enum shader_id *widths, int width, int n_tex, unsigned f32_mask,
                                     int n_bind, uint32_t push_size, int n_spec, const uint32_t *spec);

#endif
