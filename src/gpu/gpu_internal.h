/* gpu_internal: the structures shared by the files of src/gpu. Nothing
 * outside src/gpu includes this; the interface is include/vktrain/gpu.h. */
#ifndef VKTRAIN_GPU_INTERNAL_H
#define VKTRAIN_GPU_INTERNAL_H

#include <vulkan/vulkan.h>

#include "vktrain/gpu.h"

/* Fatal unless the call returned VK_SUCCESS; `what` says what was being done. */
#define VK_CHECK(call, ...)                                                    \
    do {                                                                       \
        VkResult vk_check_r_ = (call);                                         \
        if (vk_check_r_ != VK_SUCCESS)                                         \
            gpu_vk_fail(#call, vk_check_r_, __VA_ARGS__);                      \
    } while (0)

/* VK_KHR_cooperative_matrix and VK_KHR_shader_bfloat16 as the Vulkan
 * registry defines them (Debian 12's headers, 1.3.239, predate both). */
#define VKT_COOPMAT_EXTENSION "VK_KHR_cooperative_matrix"
#define VKT_BFLOAT16_EXTENSION "VK_KHR_shader_bfloat16"
#define VKT_STYPE_COOPMAT_FEATURES ((VkStructureType)1000506000)
#define VKT_STYPE_COOPMAT_PROPERTIES ((VkStructureType)1000506001)
#define VKT_STYPE_BFLOAT16_FEATURES ((VkStructureType)1000141000)
#define VKT_COMPONENT_FLOAT16 0u
#define VKT_COMPONENT_FLOAT32 1u
#define VKT_COMPONENT_BFLOAT16 1000141000u
#define VKT_SCOPE_SUBGROUP 3u
struct vkt_coopmat_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrix, cooperativeMatrixRobustBufferAccess;
};
struct vkt_coopmat_properties {
    VkStructureType sType;
    void *pNext;
    uint32_t MSize, NSize, KSize;
    uint32_t AType, BType, CType, ResultType; /* VkComponentTypeKHR */
    VkBool32 saturatingAccumulation;
    uint32_t scope; /* VkScopeKHR */
};
struct vkt_bfloat16_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 shaderBFloat16Type, shaderBFloat16DotProduct, shaderBFloat16CooperativeMatrix;
};
typedef VkResult(VKAPI_PTR *vkt_coopmat_properties_fn)(VkPhysicalDevice, uint32_t *, struct vkt_coopmat_properties *);
/* Whether the device lists extension `name`. */
int gpu_has_extension(VkPhysicalDevice p, const char *name);
/* Whether this build embeds the SPIR-V module `name`. */
int gpu_shader_built(enum shader_id id);

_Noreturn void gpu_vk_fail(const char *call, VkResult r, const char *what, ...);
const char *gpu_vk_result_name(VkResult r);

struct gpu_buffer {
    VkBuffer buffer;        /* VK_NULL_HANDLE for a planning placeholder */
    struct gpu_block *block;/* the memory it is bound in (gpu_alloc.c) */
    VkDeviceSize offset, bound; /* where in the block, and how many bytes */
    size_t size;
    size_t accounted;       /* bytes counted in its category (0: host memory) */
    enum gpu_mem_category category;
    void *mapped;           /* non-NULL when host-visible */
    VkBufferView views[GPU_BIND_KINDS]; /* whole-buffer texel views by kind, made on first use */
    enum gpu_dtype dtype;
    uint32_t q4_flags;      /* GPU_DTYPE_Q4: its header's flags (quant4.h), the kernels' specialization */
    char name[64];
    struct gpu_buffer *stack; /* precision: reproducible: a gradient's stack over samples (gpu_buffer_set_stack) */
    uint32_t written_epoch; /* barrier epoch of the last write / read */
    uint32_t read_epoch;
};

struct gpu_kernel {
    enum shader_id id;
    const char *shader; /* its name, shader_blobs[id].name */
    uint32_t spec[GPU_MAX_SPEC];
    int n_spec;
    int n_bindings;
    enum gpu_binding_kind bindings[GPU_MAX_BINDINGS];
    uint32_t push_size;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkPipeline pipeline;
};

/* The sub-allocator's state (gpu_alloc.c). */
struct gpu_alloc {
    struct gpu_block **blocks;
    int n_blocks, cap_blocks;
    VkDeviceSize block_size;  /* 0: the default; tests set it smaller */
    uint32_t n_allocations;   /* VkDeviceMemory objects held */
    VkDeviceSize allocated;   /* their bytes */
};

#define GPU_MAX_KERNELS 256
#define GPU_MAX_TIMERS 64
#define GPU_POOL_SETS 1024

struct gpu {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice phys;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    struct gpu_device_info info;
    VkPhysicalDeviceMemoryProperties mem;
    VkPhysicalDeviceLimits limits;
    enum gpu_kernel_class kclass;
    int reproducible;       /* the ops record the reproducible mode's kernels */
    enum gpu_matmul_inputs matmul_inputs; /* gpu_set_matmul_inputs */
    int coopmat_enabled;                  /* the device was made with its cooperative matrices */
    uint32_t sample_rows, samples; /* gpu_set_repro_samples */
    struct gpu_buffer *matmul_scratch; /* gpu_set_matmul_scratch */
    int unified;            /* device-local memory is host-visible */
    int fill_nan;           /* VKTRAIN_FILL_NAN: new buffers start as NaN */

    VkCommandPool cmd_pool;
    VkCommandBuffer cmd;
    VkFence fence;
    int recording;          /* cmd has been begun */
    int in_flight;          /* cmd was submitted and not yet waited for */
    uint32_t n_recorded;    /* commands since the last submit */
    /* Descriptors: pushed into the command buffer (VK_KHR_push_descriptor)
     * where the device has it, else one set per dispatch from desc_pool,
     * which holds GPU_POOL_SETS and is reset at every submit. */
    PFN_vkCmdPushDescriptorSetKHR push_descriptors; /* NULL: the pool */
    VkDescriptorPool desc_pool;
    uint32_t sets_used;
    VkBufferView *transient;  /* views of sub-ranges, freed at submit */
    int n_transient, cap_transient;

    /* Hazard tracking: buffers touched since the last barrier carry the
     * current epoch; a new epoch starts at every barrier. */
    uint32_t epoch;

    struct gpu_kernel kernels[GPU_MAX_KERNELS];
    int n_kernels;

    VkQueryPool query_pool;
    float timestamp_period;
    int timestamps_ok;
    int n_timers;
    uint64_t timer_ticks[2 * GPU_MAX_TIMERS];
    unsigned char query_pending[2 * GPU_MAX_TIMERS]; /* written in the recording */

    /* gpu_profile.c: rows and queries, created by the first
     * gpu_profile_start; `profiling` is the one test a dispatch makes. */
    struct gpu_profile *prof;
    int profiling;
    const char *profile_phase;

    struct gpu_buffer *staging; /* for discrete memory uploads/downloads */
    struct gpu_alloc alloc;
    int memory_budget;          /* VK_EXT_memory_budget is enabled */
    enum gpu_mem_category category; /* of the buffers created next */
    int planning;               /* gpu_memory_plan is on */
    uint64_t plan_largest;      /* the largest buffer planned since then */
    char plan_largest_name[64];
    uint64_t used[GPU_MEM_CATEGORIES]; /* bytes of the buffers alive */

    int validation_messages;
};

VkInstance gpu_instance_create(int validate, VkDebugUtilsMessengerEXT *messenger, int *messages);
void gpu_device_info_fill(VkInstance inst, VkPhysicalDevice p, int index, struct gpu_device_info *d);
/* The instance's physical devices (n of them; the caller frees the array). */
VkPhysicalDevice *gpu_physical_devices(VkInstance inst, uint32_t *n);
/* The queue family vktrain computes on (compute, preferring one without
 * graphics), or -1. */
int gpu_compute_queue_family(VkPhysicalDevice p);
/* Begins the command buffer if it is not recording yet. */
void gpu_cmd_ensure(struct gpu *g);
/* Records a barrier first if touching these buffers (write[i]: written)
 * would race with commands recorded since the last barrier. */
void gpu_hazard(struct gpu *g, struct gpu_buffer *const *bufs, const int *write, int n);
void gpu_buffer_views_destroy(struct gpu *g, struct gpu_buffer *b);
/* gpu_profile.c: a timestamp before and after the dispatch of k being
 * recorded (only while g->profiling); the times of a finished submit into
 * the rows (gpu_wait); the queries and rows freed (gpu_destroy). */
void gpu_profile_begin(struct gpu *g, const struct gpu_kernel *k);
void gpu_profile_end(struct gpu *g);
int gpu_profile_full(const struct gpu *g); /* the recording holds all the queries it may */
void gpu_profile_collect(struct gpu *g);
void gpu_profile_destroy(struct gpu *g);

/* gpu_alloc.c: binding b (created, not yet bound) to memory of this type at req's size
 * and alignment, in a shared block or (dedicated, or larger than a block)
 * an allocation of its own; giving its memory back; and freeing every
 * block at gpu_destroy. */
void gpu_alloc_bind(struct gpu *g, struct gpu_buffer *b, const VkMemoryRequirements *req, uint32_t type,
                    int dedicated);
void gpu_alloc_release(struct gpu *g, struct gpu_buffer *b);
void gpu_alloc_destroy(struct gpu *g);

#endif
