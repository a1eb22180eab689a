/* gpu: the Vulkan runtime. It knows Vulkan and nothing of transformers.
 *
 * Owns the instance, the chosen physical device, one compute queue, buffers
 * (device-local with staging, or host-visible where memory is unified),
 * pipelines made from the embedded SPIR-V, and one command buffer that
 * collects dispatches until gpu_submit() sends them in one batch and waits.
 * Barriers are inserted only where a dispatch touches a buffer an earlier
 * unbarriered dispatch wrote (or writes one it read).
 *
 * Every Vulkan failure is fatal and names the call, the VkResult and what
 * was being done. */
#ifndef VKTRAIN_GPU_H
#define VKTRAIN_GPU_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vktrain/shader_ids.h"

struct gpu;
struct gpu_buffer;
struct gpu_kernel;

/* Which family of kernels suits the device: CPU drivers (lavapipe) read
 * through texel buffers, GPUs use shared-memory tiling over storage buffers. */
enum gpu_kernel_class { GPU_KERNELS_TEXEL, GPU_KERNELS_TILED };

/* The inputs of the matmuls (gpu_set_matmul_inputs). */
enum gpu_matmul_inputs { GPU_MATMUL_FP32, GPU_MATMUL_F16, GPU_MATMUL_BF16 };

struct gpu_options {
    int device_index;      /* -1: VKTRAIN_DEVICE or automatic choice */
    int local_rank;        /* automatic choice takes local_rank modulo devices */
    int validate;          /* 1: Khronos validation layer (also VKTRAIN_VALIDATE=1) */
    int quiet;             /* 1: do not print the chosen device */
    /* the matmul inputs to set (gpu_set_matmul_inputs) as the gpu is made;
     * the device's cooperative matrices are enabled for f16 or bf16
     * alone, so a run without them never asks the driver (or a validation
     * layer older than the extension) for them. VKTRAIN_MATMUL_INPUTS=
     * fp32|f16|bf16 overrides it (tests, benchmarks). */
    enum gpu_matmul_inputs matmul_inputs;
    int coopmat; /* 1: enable the cooperative matrices without setting them (tests) */
};

#define GPU_MAX_HEAPS 16
struct gpu_device_info {
    int index;
    char name[256];
    const char *type;      /* "discrete", "integrated", "virtual", "cpu", "other" */
    int type_rank;         /* discrete 4 > integrated 3 > virtual 2 > cpu 1 > other 0 */
    uint32_t vendor_id, device_id;
    char driver_name[256], driver_info[256];
    uint32_t api_version;
    uint32_t subgroup_size;
    int subgroup_arithmetic, subgroup_shuffle, subgroup_ballot;
    uint32_t shared_memory;            /* maxComputeSharedMemorySize */
    uint32_t max_storage_buffer_range;
    uint32_t min_storage_offset_alignment;
    uint32_t max_texel_buffer_elements;
    uint32_t min_texel_offset_alignment; /* minTexelBufferOffsetAlignment */
    uint32_t max_workgroup_invocations;
    uint32_t max_workgroup_count[3];
    uint64_t max_allocation_size;      /* maxMemoryAllocationSize (Vulkan 1.1 maintenance3) */
    uint32_t max_allocation_count;     /* maxMemoryAllocationCount */
    int float16, int64, texel_vec4;    /* shaderFloat16, shaderInt64, RGBA32F uniform texel buffers */
    int image_vec4;                    /* RGBA32F storage texel buffers (GPU_BIND_IMAGE_VEC4) */
    int texel_bf16;                    /* R16_UINT and R32G32_UINT uniform texel buffers (bf16 views) */
    /* Loop iterations one invocation may run in total, 0 = no limit. Mesa's
     * llvmpipe ends any loop after 65,535 iterations (a guard against
     * endless shaders), so ops split longer walks into several dispatches. */
    uint32_t max_loop_iterations;
    /* Whether a workgroup-per-row kernel may read a row through a texel
     * view while it writes the row in place through a storage binding (the
     * cross-entropy over GPT-2's vocabulary on CPU devices). 0 on lavapipe
     * newer than Mesa 22: Mesa 25.0's lavapipe computed wrong
     * cross-entropies that way (its storage kernels are right;
     * docs/devices.md, "Newer Mesa").
     * VKTRAIN_TEXEL_ROWS_WG=0|1 overrides it (tests). */
    int texel_rows_wg;
    /* Whether the reproducible attention may read a head of 16 floats as
     * four RGBA32F texels (its vec4 texel kernels). 0 on lavapipe newer
     * than Mesa 22: Mesa 25.0's lavapipe computed every output of those
     * kernels wrong at that head size alone (4-128 otherwise right), and
     * their R32F variants right; docs/devices.md, "Newer Mesa".
     * VKTRAIN_REPRO_HD16_VEC4=0|1 overrides it (tests). */
    int repro_hd16_vec4;
    /* Cooperative matrices (VK_KHR_cooperative_matrix, subgroup scope,
     * fp32 accumulators): the M x N x K shape the matmul takes with f16
     * inputs, and with bf16 inputs (VK_KHR_shader_bfloat16); 0 x 0 x 0
     * where the device has none. 16 x 16 x 16 is preferred where offered,
     * else the largest. VKTRAIN_COOPMAT=0 hides them (tests, benchmarks). */
    uint32_t coopmat_f16[3], coopmat_bf16[3];
    /* The largest subgroup a kernel with full subgroups may get
     * (VK_EXT_subgroup_size_control's maxSubgroupSize; the subgroup size
     * where the device has not the extension): such a kernel's workgroup
     * is a multiple of it. */
    uint32_t subgroup_max;
    /* lavapipe (llvmpipe) of a Mesa newer than 22, the tested one: its
     * major version (25 for 25.0.7), else 0. Training warns about it. */
    unsigned newer_lavapipe;
    /* llvmpipe: the threads its workgroups run on (LP_NUM_THREADS, else
     * the online CPUs; 1 to 32), else 0. A kernel with a choice of tile
     * sizes keeps enough workgroups to busy them (the reproducible
     * matmul's tn and nn tiles). */
    unsigned cpu_threads;
    /* GPU_LIMIT_* bits of the limits above that VKTRAIN_DEVICE_LIMITS made
     * smaller than the device's own (see gpu_limits_apply). */
    unsigned tightened;
    int usable;                        /* Vulkan >= 1.2 with a compute queue */
    const char *unusable_reason;
    uint32_t heap_count;
    uint64_t heap_size[GPU_MAX_HEAPS];
    int heap_device_local[GPU_MAX_HEAPS];
};

/* VKTRAIN_DEVICE_LIMITS="storage_range=BYTES,texel_elements=N,workgroups=N,
 * allocation=BYTES,shared=BYTES" (any subset, K/M/G suffixes: powers of
 * 1024) makes the runtime act as if the device had these smaller limits:
 * each field of the device info becomes the smaller of the device's value
 * and the given one, and its bit is set in `tightened`. gpu_list_devices
 * and gpu_create apply it to every device. spec NULL reads the variable;
 * an unknown key or a bad value is fatal and names it. */
enum {
    GPU_LIMIT_STORAGE_RANGE = 1,  /* max_storage_buffer_range */
    GPU_LIMIT_TEXEL_ELEMENTS = 2, /* max_texel_buffer_elements */
    GPU_LIMIT_WORKGROUPS = 4,     /* max_workgroup_count[0..2] */
    GPU_LIMIT_ALLOCATION = 8,     /* max_allocation_size */
    GPU_LIMIT_SHARED = 16,        /* shared_memory */
};
void gpu_limits_apply(struct gpu_device_info *d, const char *spec);

/* Lists every Vulkan device; returns the count, *out to free(). */
int gpu_list_devices(struct gpu_device_info **out, int validate);
/* The index gpu_create would pick for these options, or -1 if none is usable. */
int gpu_pick_device(const struct gpu_device_info *devs, int n, const struct gpu_options *opt);

struct gpu *gpu_create(const struct gpu_options *opt);
/* Waits for the device and frees everything. Fatal if the validation layer
 * reported anything during the gpu's life. */
void gpu_destroy(struct gpu *g);
const struct gpu_device_info *gpu_info(const struct gpu *g);
/* Whether the device is a CPU driver (lavapipe): its kernels, memory and
 * sizes differ from a GPU's. */
int gpu_cpu_device(const struct gpu_device_info *info);
enum gpu_kernel_class gpu_kernel_class(const struct gpu *g);
/* Tests: the limits of g become the device's (with VKTRAIN_DEVICE_LIMITS)
 * tightened further by spec, in gpu_limits_apply's syntax (NULL: none),
 * so one gpu can run the same work under other limits. Buffers already
 * created keep their memory. */
void gpu_set_limits(struct gpu *g, const char *spec);
/* Forces a kernel family (tests run both on one device; a rank may be given
 * another family to simulate a mixed-vendor cluster). */
void gpu_set_kernel_class(struct gpu *g, enum gpu_kernel_class c);
/* precision: reproducible. When on, every op of ops.h and ops_optim.h
 * records its reproducible-mode kernel (include/vktrain/repro.h): the
 * same bits from either kernel family and from every device that passes
 * the start-up probe. Off by default. */
int gpu_reproducible(const struct gpu *g);
void gpu_set_reproducible(struct gpu *g, int on);
/* The inputs of the matmuls (ops.h's nt, nn, tn on fp32 operands):
 * GPU_MATMUL_FP32 (the default) multiplies fp32 values; GPU_MATMUL_F16
 * and GPU_MATMUL_BF16 round both operands to that 16-bit type and
 * multiply them on the device's cooperative matrices, accumulating in
 * fp32 (shaders/default/matmul_coopmat.comp). gpu_set_matmul_inputs fails, naming
 * what is missing, where the device has no such matrices, the gpu was
 * made without them (gpu_options.matmul_inputs) or this build has not
 * their kernels (gpu_coopmat_missing says which, NULL: none). A
 * frozen bf16 weight (model.base_dtype) and the reproducible mode keep
 * their kernels; a 4-bit weight has cooperative-matrix variants. */
const char *gpu_coopmat_missing(const struct gpu *g, enum gpu_matmul_inputs t);
/* Whether this build embeds the cooperative-matrix kernels for t (its
 * glslc could compile them: cmake/Shaders.cmake). */
int gpu_coopmat_built(enum gpu_matmul_inputs t);
void gpu_set_matmul_inputs(struct gpu *g, enum gpu_matmul_inputs t);
enum gpu_matmul_inputs gpu_matmul_inputs(const struct gpu *g);
/* precision: reproducible's sums over samples inside the gradients
 * (include/vktrain/repro.h, repro_param_rows): while a micro-batch of
 * `samples` sequences (a power of two) of `rows` rows each is recorded,
 * every reduction over rows into a buffer that has a stack is cut at the
 * sequences' boundaries; 0, 0 ends it. The stack of a gradient buffer:
 * log2(samples) floats per element, element o's at [o·levels, ...). */
void gpu_set_repro_samples(struct gpu *g, uint32_t rows, uint32_t samples);
/* A workspace for the texel family's matmul tn, which then runs as two
 * transposes and nt where the operands fit it (op_matmul_tn_scratch);
 * NULL (the default): the tn kernel. The caller owns the buffer. */
void gpu_set_matmul_scratch(struct gpu *g, struct gpu_buffer *b);
struct gpu_buffer *gpu_matmul_scratch(const struct gpu *g);
uint32_t gpu_repro_sample_rows(const struct gpu *g);
uint32_t gpu_repro_samples(const struct gpu *g);
void gpu_buffer_set_stack(struct gpu_buffer *b, struct gpu_buffer *stack);
struct gpu_buffer *gpu_buffer_stack(const struct gpu_buffer *b);
/* Workgroup size for 1-D kernels: a multiple of the subgroup size near 256,
 * at most GPU_WORKGROUP_1D_MAX (the size of their shared arrays,
 * shaders/common/wg1d.glsl), within the device's limits (and with a float per
 * invocation within its shared memory, which the row and reduction kernels
 * need). */
#define GPU_WORKGROUP_1D_MAX 256
uint32_t gpu_workgroup_1d(const struct gpu *g);

/* Buffers. The name appears in every error about the buffer. */
struct gpu_buffer *gpu_buffer_create(struct gpu *g, size_t bytes, const char *name);
void gpu_buffer_destroy(struct gpu *g, struct gpu_buffer *b);
size_t gpu_buffer_size(const struct gpu_buffer *b);
const char *gpu_buffer_name(const struct gpu_buffer *b);
/* What a buffer's elements are, for the ops that read either kind (the
 * matmul's weight operand): fp32 unless set. A tag only: sizes stay in
 * bytes, and the caller converts what it uploads and downloads. */
enum gpu_dtype { GPU_DTYPE_F32, GPU_DTYPE_BF16, GPU_DTYPE_Q4 }; /* Q4: include/vktrain/quant4.h's layout */
void gpu_buffer_set_dtype(struct gpu_buffer *b, enum gpu_dtype t);
enum gpu_dtype gpu_buffer_dtype(const struct gpu_buffer *b);
/* A GPU_DTYPE_Q4 buffer's header flags (Q4_FLAG_*), which the kernels
 * that read it are specialized for: set them with what is uploaded. */
void gpu_buffer_set_q4_flags(struct gpu_buffer *b, uint32_t flags);
uint32_t gpu_buffer_q4_flags(const struct gpu_buffer *b);

/* Device memory. Buffers are sub-allocated from a few large blocks per
 * memory type (src/gpu/gpu_alloc.c). Each buffer belongs to the category in
 * force when it was created, set with gpu_memory_category before a group of
 * creations (it stays set; workspace at first), and the gpu keeps the bytes
 * of the live buffers per category. The staging buffer is host memory and
 * belongs to none. */
enum gpu_mem_category {
    GPU_MEM_PARAMETERS,
    GPU_MEM_GRADIENTS,
    GPU_MEM_OPTIMIZER,   /* optimizer state */
    GPU_MEM_ACTIVATIONS, /* sized by batch_size x max_seq_len */
    GPU_MEM_WORKSPACE,   /* scratch, reductions, loss accumulators, tables */
    GPU_MEM_CATEGORIES
};
const char *gpu_memory_category_name(enum gpu_mem_category c);
/* Buffers created from now on belong to c; returns the category before. */
enum gpu_mem_category gpu_memory_category(struct gpu *g, enum gpu_mem_category c);
/* Planning: while on, gpu_buffer_create records each buffer's bytes and
 * category and allocates nothing. The placeholders it returns may be
 * uploaded to and zeroed (no-ops) and destroyed; reading one or binding it
 * to a dispatch is fatal. So the code that creates the buffers for real
 * also computes the plan, and the two cannot drift. */
void gpu_memory_plan(struct gpu *g, int on);
struct gpu_memory_stats {
    uint64_t bytes[GPU_MEM_CATEGORIES]; /* live buffers, placeholders included */
    uint64_t total;                     /* their sum */
    uint32_t allocations;               /* Vulkan memory allocations held */
    uint64_t allocated;                 /* bytes of those allocations */
    uint64_t largest;                   /* the largest buffer planned since */
    char largest_name[64];              /* planning was turned on, and its name */
};
void gpu_memory_stats(const struct gpu *g, struct gpu_memory_stats *s);
/* Bytes of one shared block: 256 MiB, less when maxMemoryAllocationSize is
 * smaller. A buffer larger than a block gets an allocation of its own. */
uint64_t gpu_memory_block_size(const struct gpu *g);
/* The memory the device offers buffers, and in `source` where the figure
 * comes from: for a CPU device the host's physical memory (lavapipe reports
 * a fixed heap but allocates host memory without limit), else
 * VK_EXT_memory_budget's budget where the extension exists, else the
 * largest device-local heap. */
uint64_t gpu_memory_available(const struct gpu *g, char *source, size_t n);

/* Synchronous copies: pending dispatches are submitted and finished first. */
void gpu_upload(struct gpu *g, struct gpu_buffer *b, size_t offset, const void *src, size_t bytes);
/* Several uploads (to distinct ranges) in one submit: where they are
 * staged, through one staging buffer and one command buffer. */
struct gpu_copy {
    struct gpu_buffer *buf;
    size_t offset;
    const void *src;
    size_t bytes;
};
void gpu_upload_batch(struct gpu *g, const struct gpu_copy *c, int n);
void gpu_download(struct gpu *g, const struct gpu_buffer *b, size_t offset, void *dst, size_t bytes);
/* Records a fill of the whole buffer with zero bytes. */
void gpu_zero(struct gpu *g, struct gpu_buffer *b);

/* Kernels: a pipeline from an embedded shader, created once and cached. */
enum gpu_binding_kind {
    GPU_BIND_STORAGE,    /* std430 storage buffer */
    GPU_BIND_TEXEL_VEC4, /* uniform texel buffer, VK_FORMAT_R32G32B32A32_SFLOAT */
    GPU_BIND_TEXEL_F32,  /* uniform texel buffer, VK_FORMAT_R32_SFLOAT */
    /* bf16 elements read as uints (the shader widens them by a shift) */
    GPU_BIND_TEXEL_BF16X4, /* uniform texel buffer, VK_FORMAT_R32G32_UINT: 4 bf16 per texel */
    GPU_BIND_TEXEL_BF16,   /* uniform texel buffer, VK_FORMAT_R16_UINT: 1 bf16 per texel */
    GPU_BIND_TEXEL_U32,    /* uniform texel buffer, VK_FORMAT_R32_UINT: a 4-bit weight's words */
    /* read and written: llvmpipe gathers a texel for 8 lanes where a storage
     * access is one scalar load or store per lane and component */
    GPU_BIND_IMAGE_VEC4, /* storage texel buffer, VK_FORMAT_R32G32B32A32_SFLOAT */
    GPU_BIND_KINDS
};
#define GPU_MAX_BINDINGS 8
#define GPU_MAX_SPEC 8
struct gpu_kernel_desc {
    enum shader_id shader; /* the embedded module (vktrain/shaders.h) */
    int n_bindings;
    enum gpu_binding_kind bindings[GPU_MAX_BINDINGS];
    uint32_t push_size;  /* bytes of push constants */
    int n_spec;          /* specialization constants, ids 0..n_spec-1 */
    uint32_t spec[GPU_MAX_SPEC];
    /* VK_EXT_subgroup_size_control's full subgroups (cooperative
     * matrices, with SPIR-V 1.5): a workgroup of whole subgroups */
    int full_subgroups;
};
struct gpu_kernel *gpu_kernel_get(struct gpu *g, const struct gpu_kernel_desc *d);
/* Largest buffer a texel binding of this kind can view (bytes). */
size_t gpu_texel_limit(const struct gpu *g, enum gpu_binding_kind kind);
/* The most bytes one binding of this kind may view (maxStorageBufferRange,
 * or the texel limit), and the alignment its offset needs. */
size_t gpu_binding_limit(const struct gpu *g, enum gpu_binding_kind kind);
size_t gpu_binding_alignment(const struct gpu *g, enum gpu_binding_kind kind);
/* The offset alignment of an RGBA32F storage texel view whose first
 * element must stay on a texel: a multiple of 16 bytes; 0 if none fits
 * (an alignment that is neither a multiple nor a divisor of 16). */
size_t gpu_image_vec4_alignment(const struct gpu *g);
/* What kernel k was made with: its shader's name, its bindings, binding
 * i's kind. */
const char *gpu_kernel_name(const struct gpu_kernel *k);
int gpu_kernel_binding_count(const struct gpu_kernel *k);
enum gpu_binding_kind gpu_kernel_binding(const struct gpu_kernel *k, int i);

struct gpu_arg {
    struct gpu_buffer *buf;
    int write;           /* the dispatch writes it */
    size_t offset, range;/* bytes; range 0 = to the end of the buffer */
};
/* Records one dispatch of gx*gy*gz workgroups. */
void gpu_dispatch(struct gpu *g, struct gpu_kernel *k, const struct gpu_arg *args,
                  const void *push, uint32_t gx, uint32_t gy, uint32_t gz);
/* Submits everything recorded since the last submit and waits for it. */
void gpu_submit(struct gpu *g);
/* The same in two halves, so the host can work while the device runs:
 * recording, copies and gpu_submit wait for work in flight first. */
void gpu_submit_async(struct gpu *g);
void gpu_wait(struct gpu *g);
/* The buffer's memory when it is host-visible (unified memory), else NULL.
 * Read it only when no work in flight writes the buffer. */
const void *gpu_buffer_host(const struct gpu_buffer *b);

/* Timers from timestamp queries around recorded work. gpu_timer_ms is valid
 * after the gpu_submit that ran both ends; it returns -1 when the queue has
 * no timestamps. */
int gpu_timer_start(struct gpu *g);
void gpu_timer_stop(struct gpu *g, int timer);
double gpu_timer_ms(struct gpu *g, int timer);

/* Profiling. While on, every dispatch is timed by a timestamp pair around
 * it (written when the commands before it have finished, and when it has)
 * and its time is added to the row of (phase, kernel); off, no timestamp
 * is written. Fills and copies are not timed. */
struct gpu_profile_row {
    const char *phase;   /* as given to gpu_profile_phase */
    const char *kernel;  /* the shader's name */
    double ms;           /* device time of its dispatches */
    double flops;        /* operations declared by gpu_profile_flops; 0: none */
    uint64_t dispatches;
};
/* Clears the rows and starts timing; returns 0 (and times nothing) when
 * the queue has no timestamps (timestampValidBits 0). */
int gpu_profile_start(struct gpu *g);
/* Submits and waits for recorded work, so that every timed dispatch is in
 * the rows, then stops timing. The rows stay readable. */
void gpu_profile_stop(struct gpu *g);
/* Labels the dispatches recorded from now on ("other" until set); the
 * string must outlive the profile. Cheap when profiling is off. */
void gpu_profile_phase(struct gpu *g, const char *phase);
/* Declares the floating-point operations of the next dispatch (an op split
 * into several dispatches may declare all of them on its first). */
void gpu_profile_flops(struct gpu *g, double flops);
/* The rows collected so far, in order of first appearance; *rows stays
 * valid until work is submitted while profiling, or gpu_destroy. */
int gpu_profile_rows(const struct gpu *g, const struct gpu_profile_row **rows);
/* The rows as a table: for each phase (in order of first appearance) its
 * total, then its kernels by share of the whole; times and dispatch counts
 * divided by `repeats` (per `unit`, e.g. 10 and "step"), GFLOP/s where
 * FLOPs were declared; a last line sums the kernels with FLOP counts. */
void gpu_profile_print(const struct gpu *g, FILE *f, int repeats, const char *unit);

#endif
