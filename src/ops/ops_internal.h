/* ops_internal: what the op wrappers of src/ops share: size checks that
 * name the op and the buffer, and the three dispatch shapes (one
 * invocation per element, one workgroup per row, one invocation per
 * column). Nothing outside src/ops includes this. */
#ifndef VKTRAIN_OPS_INTERNAL_H
#define VKTRAIN_OPS_INTERNAL_H

#include "vktrain/ops.h"

/* Fatal unless buffer b holds at least `bytes`; names op and role. */
void ops_check(const char *op, const char *role, const struct gpu_buffer *b, size_t bytes);

/* A kernel whose bindings are all storage buffers; spec[0] = the 1-D
 * workgroup size when wg_spec is set. */
struct gpu_kernel *ops_kernel(struct gpu *g, const char *shader, int n_bind, uint32_t push_size, int wg_spec);

/* The largest storage binding (bytes) op_matmul plans its blocks for: the
 * device's maxStorageBufferRange, or less after ops_set_storage_limit.
 * Test-only knob: a small limit makes small shapes take the split path;
 * 0 restores the device limit. */
size_t ops_storage_limit(const struct gpu *g);
void ops_set_storage_limit(size_t bytes);

/* Test-only knob: op_flash_attention walks at most n keys (or query rows)
 * per dispatch, as under a small loop limit; 0 restores the device's. */
void op_flash_attention_set_walk(uint32_t n);

/* Dispatches ceil(n / WG) workgroups of gpu_workgroup_1d invocations,
 * capped at 4096 (elementwise shaders stride over the rest). */
void ops_dispatch_elements(struct gpu *g, struct gpu_kernel *k, const struct gpu_arg *args, const void *push,
                           size_t n, int strided);

#endif
