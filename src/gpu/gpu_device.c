/* gpu_device: the Vulkan instance, gpu_create/gpu_destroy (the device
 * chosen among those gpu_info.c describes) and the context's accessors.
 * Owns the VkInstance and VkDevice; never records or submits work. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_internal.h"
#include "vktrain/kernel_select.h"
#include "vktrain/util.h"

const char *gpu_vk_result_name(VkResult r)
{
    switch (r) {
#define NAME(x) case x: return #x;
    NAME(VK_SUCCESS) NAME(VK_NOT_READY) NAME(VK_TIMEOUT) NAME(VK_EVENT_SET)
    NAME(VK_EVENT_RESET) NAME(VK_INCOMPLETE) NAME(VK_ERROR_OUT_OF_HOST_MEMORY)
    NAME(VK_ERROR_OUT_OF_DEVICE_MEMORY) NAME(VK_ERROR_INITIALIZATION_FAILED)
    NAME(VK_ERROR_DEVICE_LOST) NAME(VK_ERROR_MEMORY_MAP_FAILED)
    NAME(VK_ERROR_LAYER_NOT_PRESENT) NAME(VK_ERROR_EXTENSION_NOT_PRESENT)
    NAME(VK_ERROR_FEATURE_NOT_PRESENT) NAME(VK_ERROR_INCOMPATIBLE_DRIVER)
    NAME(VK_ERROR_TOO_MANY_OBJECTS) NAME(VK_ERROR_FORMAT_NOT_SUPPORTED)
    NAME(VK_ERROR_FRAGMENTED_POOL) NAME(VK_ERROR_UNKNOWN)
    NAME(VK_ERROR_OUT_OF_POOL_MEMORY) NAME(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    NAME(VK_ERROR_FRAGMENTATION) NAME(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    NAME(VK_PIPELINE_COMPILE_REQUIRED)
#undef NAME
    default: return "VkResult(unknown)";
    }
}

void gpu_vk_fail(const char *call, VkResult r, const char *what, ...)
{
    char ctx[512];
    va_list ap;
    va_start(ap, what);
    vsnprintf(ctx, sizeof ctx, what, ap);
    va_end(ap);
    const char *paren = strchr(call, '(');
    int n = paren ? (int)(paren - call) : (int)strlen(call);
    vkt_fatal("Vulkan call %.*s failed with %s while %s", n, call, gpu_vk_result_name(r), ctx);
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                    VkDebugUtilsMessageTypeFlagsEXT type,
                                                    const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                    void *user)
{
    (void)type;
    if (sev < VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT)
        return VK_FALSE;
    ++*(int *)user;
    /* the message's name (a VUID, or the layer's own), which
     * VK_LAYER_MESSAGE_ID_FILTER takes */
    vkt_warn("Vulkan validation: [%s] %s", data->pMessageIdName ? data->pMessageIdName : "-", data->pMessage);
    return VK_FALSE;
}

/* A switch of the environment: unset, empty or "0" is off, "1" on;
 * anything else is an error naming it. */
static int env_flag(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v || !strcmp(v, "0"))
        return 0;
    if (strcmp(v, "1"))
        vkt_fatal("%s='%s': expected 0 or 1", name, v);
    return 1;
}

static int has_layer(const char *name)
{
    uint32_t n = 0;
    vkEnumerateInstanceLayerProperties(&n, NULL);
    VkLayerProperties *p = vkt_calloc(n, sizeof *p, "layer list");
    vkEnumerateInstanceLayerProperties(&n, p);
    int found = 0;
    for (uint32_t i = 0; i < n; i++)
        found |= !strcmp(p[i].layerName, name);
    free(p);
    return found;
}

static int has_instance_ext(const char *name)
{
    uint32_t n = 0;
    vkEnumerateInstanceExtensionProperties(NULL, &n, NULL);
    VkExtensionProperties *p = vkt_calloc(n, sizeof *p, "extension list");
    vkEnumerateInstanceExtensionProperties(NULL, &n, p);
    int found = 0;
    for (uint32_t i = 0; i < n; i++)
        found |= !strcmp(p[i].extensionName, name);
    free(p);
    return found;
}

VkInstance gpu_instance_create(int validate, VkDebugUtilsMessengerEXT *messenger, int *messages)
{
    const char *env = getenv("VKTRAIN_VALIDATE");
    if (env && *env && strcmp(env, "0"))
        validate = 1;
    uint32_t version = 0;
    if (vkEnumerateInstanceVersion(&version) != VK_SUCCESS || version < VK_API_VERSION_1_2)
        vkt_fatal("the Vulkan loader supports only Vulkan %u.%u; vktrain needs 1.2 or newer",
                  VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version));

    const char *layers[1] = {"VK_LAYER_KHRONOS_validation"};
    const char *exts[2];
    uint32_t n_ext = 0;
    VkInstanceCreateFlags flags = 0;
    if (validate) {
        if (!has_layer(layers[0]))
            vkt_fatal("validation was requested (VKTRAIN_VALIDATE=1) but the layer %s is not "
                      "installed (Debian: apt-get install vulkan-validationlayers)", layers[0]);
        exts[n_ext++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    }
    if (has_instance_ext("VK_KHR_portability_enumeration")) {
        exts[n_ext++] = "VK_KHR_portability_enumeration";
        flags |= 0x00000001; /* VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR */
    }
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "vktrain",
        .pEngineName = "vktrain",
        .apiVersion = VK_API_VERSION_1_2,
    };
    VkDebugUtilsMessengerCreateInfoEXT dbg = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_validation,
        .pUserData = messages,
    };
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = validate ? &dbg : NULL,
        .flags = flags,
        .pApplicationInfo = &app,
        .enabledLayerCount = validate ? 1 : 0,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = n_ext,
        .ppEnabledExtensionNames = exts,
    };
    VkInstance inst;
    VK_CHECK(vkCreateInstance(&ci, NULL, &inst), "creating the Vulkan instance");
    *messenger = VK_NULL_HANDLE;
    if (validate) {
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(inst, "vkCreateDebugUtilsMessengerEXT");
        VK_CHECK(create(inst, &dbg, NULL, messenger), "installing the validation message handler");
    }
    return inst;
}

struct gpu *gpu_create(const struct gpu_options *opt)
{
    kernel_env_load(); /* the kernel overrides, checked before any device work */
    struct gpu *g = vkt_calloc(1, sizeof *g, "the gpu context");
    g->category = GPU_MEM_WORKSPACE;
    g->instance = gpu_instance_create(opt ? opt->validate : 0, &g->messenger, &g->validation_messages);
    uint32_t n = 0;
    VkPhysicalDevice *p = gpu_physical_devices(g->instance, &n);
    if (n == 0)
        vkt_fatal("no Vulkan device found (on a machine without a GPU install Mesa's lavapipe: "
                  "apt-get install mesa-vulkan-drivers)");
    struct gpu_device_info *devs = vkt_calloc(n, sizeof *devs, "device info");
    for (uint32_t i = 0; i < n; i++)
        gpu_device_info_fill(g->instance, p[i], (int)i, &devs[i]);
    int pick = gpu_pick_device(devs, (int)n, opt);
    if (pick < 0)
        vkt_fatal("no usable Vulkan device: %s %s", devs[0].name, devs[0].unusable_reason);
    g->phys = p[pick];
    g->info = devs[pick];
    free(devs);
    free(p);

    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(g->phys, &props);
    g->limits = props.limits;
    g->timestamp_period = props.limits.timestampPeriod;
    vkGetPhysicalDeviceMemoryProperties(g->phys, &g->mem);

    const char *kenv = kernel_env(KENV_KERNELS);
    if (kenv)
        g->kclass = !strcmp(kenv, "texel") ? GPU_KERNELS_TEXEL : GPU_KERNELS_TILED;
    else
        g->kclass = gpu_cpu_device(&g->info) ? GPU_KERNELS_TEXEL : GPU_KERNELS_TILED;

    g->queue_family = (uint32_t)gpu_compute_queue_family(g->phys);
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(g->phys, &nq, NULL);
    VkQueueFamilyProperties *qf = vkt_calloc(nq, sizeof *qf, "queue families");
    vkGetPhysicalDeviceQueueFamilyProperties(g->phys, &nq, qf);
    g->timestamps_ok = qf[g->queue_family].timestampValidBits > 0;
    free(qf);

    uint32_t n_dext = 0;
    vkEnumerateDeviceExtensionProperties(g->phys, NULL, &n_dext, NULL);
    VkExtensionProperties *dext = vkt_calloc(n_dext, sizeof *dext, "device extensions");
    vkEnumerateDeviceExtensionProperties(g->phys, NULL, &n_dext, dext);
    const char *enable[6];
    uint32_t n_enable = 0;
    /* GPU-assisted validation (1.3.239, Debian 12's layer) does not see
     * pushed descriptors and reports each as uninitialized: under it,
     * descriptors come from the pool. */
    const char *layer_enables = getenv("VK_LAYER_ENABLES");
    int gpu_assisted = g->messenger && layer_enables && strstr(layer_enables, "GPU_ASSISTED");
    int push_descriptors = 0;
    for (uint32_t i = 0; i < n_dext; i++) {
        if (!strcmp(dext[i].extensionName, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) && !gpu_assisted) {
            enable[n_enable++] = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
            push_descriptors = 1;
        }
        if (!strcmp(dext[i].extensionName, "VK_KHR_portability_subset"))
            enable[n_enable++] = "VK_KHR_portability_subset";
        if (!strcmp(dext[i].extensionName, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME)) {
            enable[n_enable++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
            g->memory_budget = 1;
        }
    }
    free(dext);
    /* cooperative matrices (gpu_set_matmul_inputs), with 16-bit floats in
     * shaders and bf16 ones where listed (coopmat_fill) */
    VkPhysicalDeviceSubgroupSizeControlFeaturesEXT sc = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT, .computeFullSubgroups = VK_TRUE};
    struct vkt_coopmat_features cf = {.sType = VKT_STYPE_COOPMAT_FEATURES, .pNext = &sc, .cooperativeMatrix = VK_TRUE};
    struct vkt_bfloat16_features bf = {.sType = VKT_STYPE_BFLOAT16_FEATURES,
                                       .pNext = &cf,
                                       .shaderBFloat16Type = VK_TRUE,
                                       .shaderBFloat16CooperativeMatrix = VK_TRUE};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .shaderFloat16 = VK_TRUE,
                                            .vulkanMemoryModel = VK_TRUE};
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f12};
    enum gpu_matmul_inputs inputs = opt ? opt->matmul_inputs : GPU_MATMUL_FP32;
    const char *ienv = kernel_env(KENV_MATMUL_INPUTS);
    if (ienv) /* checked: fp32, f16 or bf16 */
        inputs = !strcmp(ienv, "fp32") ? GPU_MATMUL_FP32 : !strcmp(ienv, "f16") ? GPU_MATMUL_F16 : GPU_MATMUL_BF16;
    g->coopmat_enabled =
        (inputs != GPU_MATMUL_FP32 || (opt && opt->coopmat)) && (g->info.coopmat_f16[0] || g->info.coopmat_bf16[0]);
    if (g->coopmat_enabled) {
        enable[n_enable++] = VKT_COOPMAT_EXTENSION;
        enable[n_enable++] = VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME;
        f12.pNext = &cf;
        if (g->info.coopmat_bf16[0]) {
            enable[n_enable++] = VKT_BFLOAT16_EXTENSION;
            f12.pNext = &bf;
        }
    }

    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = g->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &prio,
    };
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci,
        .enabledExtensionCount = n_enable,
        .ppEnabledExtensionNames = enable,
        .pNext = f12.pNext ? &feats : NULL,
    };
    VK_CHECK(vkCreateDevice(g->phys, &dci, NULL, &g->device), "creating the logical device on %s",
             g->info.name);
    vkGetDeviceQueue(g->device, g->queue_family, 0, &g->queue);
    if (push_descriptors)
        g->push_descriptors =
            (PFN_vkCmdPushDescriptorSetKHR)vkGetDeviceProcAddr(g->device, "vkCmdPushDescriptorSetKHR");

    /* Unified memory: integrated and CPU devices whose device-local memory
     * can be mapped; discrete GPUs go through a staging buffer, and so does
     * any device under VKTRAIN_FORCE_STAGING=1 (CI tests that path). */
    if ((g->info.type_rank == 3 || g->info.type_rank == 1) && !env_flag("VKTRAIN_FORCE_STAGING")) {
        VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                     VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                     VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
        for (uint32_t i = 0; i < g->mem.memoryTypeCount; i++)
            if ((g->mem.memoryTypes[i].propertyFlags & want) == want)
                g->unified = 1;
    }

    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = g->queue_family,
    };
    VK_CHECK(vkCreateCommandPool(g->device, &pci, NULL, &g->cmd_pool), "creating the command pool");
    VkCommandBufferAllocateInfo cai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = g->cmd_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    VK_CHECK(vkAllocateCommandBuffers(g->device, &cai, &g->cmd), "allocating the command buffer");
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_CHECK(vkCreateFence(g->device, &fci, NULL, &g->fence), "creating the submit fence");

    VkDescriptorPoolSize sizes[3] = {
        {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, GPU_POOL_SETS * GPU_MAX_BINDINGS},
        {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, GPU_POOL_SETS * GPU_MAX_BINDINGS},
        {VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER, GPU_POOL_SETS * GPU_MAX_BINDINGS},
    };
    VkDescriptorPoolCreateInfo dpci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .maxSets = GPU_POOL_SETS,
        .poolSizeCount = 3,
        .pPoolSizes = sizes,
    };
    VK_CHECK(vkCreateDescriptorPool(g->device, &dpci, NULL, &g->desc_pool), "creating the descriptor pool");

    if (g->timestamps_ok) {
        VkQueryPoolCreateInfo qpci = {
            .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
            .queryType = VK_QUERY_TYPE_TIMESTAMP,
            .queryCount = 2 * GPU_MAX_TIMERS,
        };
        VK_CHECK(vkCreateQueryPool(g->device, &qpci, NULL, &g->query_pool), "creating the timestamp pool");
    }
    g->epoch = 1;
    g->fill_nan = env_flag("VKTRAIN_FILL_NAN");
    if (inputs != GPU_MATMUL_FP32)
        gpu_set_matmul_inputs(g, inputs);
    if (!(opt && opt->quiet))
        vkt_info("device %d: %s (%s, %s kernels%s%s)", g->info.index, g->info.name, g->info.type,
                 g->kclass == GPU_KERNELS_TEXEL ? "texel" : "tiled", g->unified ? "" : ", staged copies",
                 g->fill_nan ? ", new buffers NaN" : "");
    return g;
}

void gpu_destroy(struct gpu *g)
{
    if (!g)
        return;
    vkDeviceWaitIdle(g->device);
    if (g->staging)
        gpu_buffer_destroy(g, g->staging);
    gpu_alloc_destroy(g);
    for (int i = 0; i < g->n_kernels; i++) {
        vkDestroyPipeline(g->device, g->kernels[i].pipeline, NULL);
        vkDestroyPipelineLayout(g->device, g->kernels[i].layout, NULL);
        vkDestroyDescriptorSetLayout(g->device, g->kernels[i].set_layout, NULL);
    }
    if (g->query_pool)
        vkDestroyQueryPool(g->device, g->query_pool, NULL);
    gpu_profile_destroy(g);
    vkDestroyDescriptorPool(g->device, g->desc_pool, NULL);
    vkDestroyFence(g->device, g->fence, NULL);
    vkDestroyCommandPool(g->device, g->cmd_pool, NULL);
    vkDestroyDevice(g->device, NULL);
    if (g->messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy = (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
            g->instance, "vkDestroyDebugUtilsMessengerEXT");
        destroy(g->instance, g->messenger, NULL);
    }
    vkDestroyInstance(g->instance, NULL);
    int messages = g->validation_messages;
    free(g->transient);
    free(g);
    if (messages)
        vkt_fatal("the Vulkan validation layer reported %d message(s) (above)", messages);
}

const struct gpu_device_info *gpu_info(const struct gpu *g) { return &g->info; }
int gpu_cpu_device(const struct gpu_device_info *info)
{
    return !strcmp(info->type, "cpu");
}
enum gpu_kernel_class gpu_kernel_class(const struct gpu *g) { return g->kclass; }
void gpu_set_kernel_class(struct gpu *g, enum gpu_kernel_class c) { g->kclass = c; }
int gpu_reproducible(const struct gpu *g) { return g->reproducible; }
void gpu_set_reproducible(struct gpu *g, int on) { g->reproducible = on; }

int gpu_coopmat_built(enum gpu_matmul_inputs t)
{
    static const enum shader_id f16[] = {SHADER_matmul_coopmat_nt_f16_vec4, SHADER_matmul_coopmat_nt_f16_bvec4,
                                         SHADER_matmul_coopmat_nt_f16_scalar, SHADER_matmul_coopmat_nn_f16_vec4,
                                         SHADER_matmul_coopmat_nn_f16_bvec4, SHADER_matmul_coopmat_nn_f16_scalar,
                                         SHADER_matmul_coopmat_tn_f16_vec4, SHADER_matmul_coopmat_tn_f16_bvec4,
                                         SHADER_matmul_coopmat_tn_f16_scalar},
                                bf16[] = {SHADER_matmul_coopmat_nt_bf16_vec4, SHADER_matmul_coopmat_nt_bf16_bvec4,
                                          SHADER_matmul_coopmat_nt_bf16_scalar, SHADER_matmul_coopmat_nn_bf16_vec4,
                                          SHADER_matmul_coopmat_nn_bf16_bvec4, SHADER_matmul_coopmat_nn_bf16_scalar,
                                          SHADER_matmul_coopmat_tn_bf16_vec4, SHADER_matmul_coopmat_tn_bf16_bvec4,
                                          SHADER_matmul_coopmat_tn_bf16_scalar};
    if (t == GPU_MATMUL_FP32)
        return 1;
    for (int i = 0; i < 9; i++)
        if (!gpu_shader_built(t == GPU_MATMUL_BF16 ? bf16[i] : f16[i]))
            return 0;
    return 1;
}

const char *gpu_coopmat_missing(const struct gpu *g, enum gpu_matmul_inputs t)
{
    if (t == GPU_MATMUL_FP32)
        return NULL;
    const uint32_t *shape = t == GPU_MATMUL_F16 ? g->info.coopmat_f16 : g->info.coopmat_bf16;
    if (shape[0] && !g->coopmat_enabled)
        return "the gpu was made without its cooperative matrices (gpu_options.matmul_inputs)";
    if (!shape[0])
        return t == GPU_MATMUL_F16 ? "the device has no f16 cooperative matrices with fp32 accumulators "
                                     "(VK_KHR_cooperative_matrix)"
                                   : "the device has no bf16 cooperative matrices with fp32 accumulators "
                                     "(VK_KHR_cooperative_matrix with VK_KHR_shader_bfloat16)";
    if (!gpu_coopmat_built(t))
        return "this build has no cooperative-matrix kernels: its glslc could not compile them "
               "(docs/devices.md, \"Cooperative matrices\")";
    /* the kernel's tile of 2 x 2 subgroup tiles of 2 x 2 matrices */
    if (4 * g->info.subgroup_max > g->info.max_workgroup_invocations)
        return "the device's workgroups hold fewer than 4 subgroups";
    return NULL;
}

void gpu_set_matmul_inputs(struct gpu *g, enum gpu_matmul_inputs t)
{
    const char *missing = gpu_coopmat_missing(g, t);
    if (missing)
        vkt_fatal("%s matmul inputs on %s: %s", t == GPU_MATMUL_F16 ? "f16" : "bf16", g->info.name, missing);
    g->matmul_inputs = t;
}

enum gpu_matmul_inputs gpu_matmul_inputs(const struct gpu *g)
{
    return g->matmul_inputs;
}
void gpu_set_repro_samples(struct gpu *g, uint32_t rows, uint32_t samples)
{
    g->sample_rows = rows, g->samples = samples;
}
uint32_t gpu_repro_sample_rows(const struct gpu *g)
{
    return g->sample_rows;
}
uint32_t gpu_repro_samples(const struct gpu *g)
{
    return g->samples;
}

void gpu_set_limits(struct gpu *g, const char *spec)
{
    gpu_device_info_fill(g->instance, g->phys, g->info.index, &g->info);
    if (spec)
        gpu_limits_apply(&g->info, spec);
}

uint32_t gpu_workgroup_1d(const struct gpu *g)
{
    uint32_t s = g->info.subgroup_size, max = g->info.max_workgroup_invocations;
    if (max > g->info.shared_memory / sizeof(float))
        max = g->info.shared_memory / (uint32_t)sizeof(float);
    uint32_t wg = GPU_WORKGROUP_1D_MAX < max ? GPU_WORKGROUP_1D_MAX : max;
    wg -= wg % s;
    return wg ? wg : s;
}
