/* gpu_info: what vktrain knows of each Vulkan device (gpu_device_info:
 * the facts users and kernels need, `vktrain devices`), the limits a test
 * or a user tightens (VKTRAIN_DEVICE_LIMITS), and the choice of device.
 * Reads the Vulkan instance's devices; creates nothing on them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_internal.h"
#include "vktrain/kernel_select.h"
#include "vktrain/util.h"

static const char *type_name(VkPhysicalDeviceType t, int *rank)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        *rank = 4;
        return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        *rank = 3;
        return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
        *rank = 2;
        return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        *rank = 1;
        return "cpu";
    default:
        *rank = 0;
        return "other";
    }
}

int gpu_compute_queue_family(VkPhysicalDevice p)
{
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(p, &n, NULL);
    VkQueueFamilyProperties *q = vkt_calloc(n, sizeof *q, "queue families");
    vkGetPhysicalDeviceQueueFamilyProperties(p, &n, q);
    int best = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT))
            continue;
        /* A compute-only family first: on GPUs it is the async compute engine. */
        if (best < 0 || !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
            best = (int)i;
        if (!(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
            break;
    }
    free(q);
    return best;
}

int gpu_has_extension(VkPhysicalDevice p, const char *name)
{
    uint32_t n = 0;
    vkEnumerateDeviceExtensionProperties(p, NULL, &n, NULL);
    VkExtensionProperties *e = vkt_calloc(n ? n : 1, sizeof *e, "device extensions");
    vkEnumerateDeviceExtensionProperties(p, NULL, &n, e);
    int found = 0;
    for (uint32_t i = 0; i < n; i++)
        found |= !strcmp(e[i].extensionName, name);
    free(e);
    return found;
}

/* d->coopmat_f16 and coopmat_bf16: the shape of the device's subgroup
 * cooperative matrices for each input type with fp32 accumulators and
 * results, 16 x 16 x 16 where listed, else the one of most products. */
static void coopmat_fill(VkInstance inst, VkPhysicalDevice p, struct gpu_device_info *d)
{
    if (d->api_version < VK_API_VERSION_1_2 || !kernel_env_flag(KENV_COOPMAT, 1) ||
        !gpu_has_extension(p, VKT_COOPMAT_EXTENSION) ||
        !gpu_has_extension(p, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME))
        return;
    VkPhysicalDeviceSubgroupSizeControlFeaturesEXT sc = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
    struct vkt_coopmat_features cf = {.sType = VKT_STYPE_COOPMAT_FEATURES, .pNext = &sc};
    struct vkt_bfloat16_features bf = {.sType = VKT_STYPE_BFLOAT16_FEATURES, .pNext = &cf};
    int has_bf16 = gpu_has_extension(p, VKT_BFLOAT16_EXTENSION);
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .pNext = has_bf16 ? (void *)&bf : (void *)&cf};
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f12};
    vkGetPhysicalDeviceFeatures2(p, &feats);
    vkt_coopmat_properties_fn list =
        (vkt_coopmat_properties_fn)vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
    /* glslc declares the Vulkan memory model for the matrices' scopes;
     * whole subgroups stand in for SPIR-V 1.6 (the instance is 1.2) */
    if (!cf.cooperativeMatrix || !f12.shaderFloat16 || !f12.vulkanMemoryModel || !sc.computeFullSubgroups || !list)
        return;
    uint32_t n = 0;
    list(p, &n, NULL);
    struct vkt_coopmat_properties *cp = vkt_calloc(n ? n : 1, sizeof *cp, "cooperative matrix shapes");
    for (uint32_t i = 0; i < n; i++)
        cp[i].sType = VKT_STYPE_COOPMAT_PROPERTIES;
    list(p, &n, cp);
    for (uint32_t i = 0; i < n; i++) {
        const struct vkt_coopmat_properties *c = &cp[i];
        uint32_t *shape = c->AType == VKT_COMPONENT_FLOAT16                                          ? d->coopmat_f16
                          : c->AType == VKT_COMPONENT_BFLOAT16 && bf.shaderBFloat16CooperativeMatrix ? d->coopmat_bf16
                                                                                                     : NULL;
        if (!shape || c->BType != c->AType || c->CType != VKT_COMPONENT_FLOAT32 ||
            c->ResultType != VKT_COMPONENT_FLOAT32 || c->scope != VKT_SCOPE_SUBGROUP || c->saturatingAccumulation)
            continue;
        int is16 = c->MSize == 16 && c->NSize == 16 && c->KSize == 16;
        int had16 = shape[0] == 16 && shape[1] == 16 && shape[2] == 16;
        if (!had16 && (is16 || (uint64_t)c->MSize * c->NSize * c->KSize > (uint64_t)shape[0] * shape[1] * shape[2])) {
            shape[0] = c->MSize;
            shape[1] = c->NSize;
            shape[2] = c->KSize;
        }
    }
    free(cp);
}

void gpu_device_info_fill(VkInstance inst, VkPhysicalDevice p, int index, struct gpu_device_info *d)
{
    memset(d, 0, sizeof *d);
    VkPhysicalDeviceSubgroupSizeControlPropertiesEXT ssc = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT};
    int has_ssc = gpu_has_extension(p, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    VkPhysicalDeviceSubgroupProperties sub = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
                                              .pNext = has_ssc ? &ssc : NULL};
    VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
                                                 .pNext = &sub};
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, .pNext = &m3};
    VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &drv};
    vkGetPhysicalDeviceProperties2(p, &props);
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f12};
    const VkPhysicalDeviceLimits *L = &props.properties.limits;

    d->index = index;
    snprintf(d->name, sizeof d->name, "%s", props.properties.deviceName);
    d->type = type_name(props.properties.deviceType, &d->type_rank);
    d->vendor_id = props.properties.vendorID;
    d->device_id = props.properties.deviceID;
    d->api_version = props.properties.apiVersion;
    if (d->api_version >= VK_API_VERSION_1_2) {
        vkGetPhysicalDeviceFeatures2(p, &feats);
        snprintf(d->driver_name, sizeof d->driver_name, "%s", drv.driverName);
        snprintf(d->driver_info, sizeof d->driver_info, "%s", drv.driverInfo);
    }
    d->subgroup_size = sub.subgroupSize ? sub.subgroupSize : 1;
    d->subgroup_max = ssc.maxSubgroupSize > d->subgroup_size ? ssc.maxSubgroupSize : d->subgroup_size;
    d->subgroup_arithmetic = !!(sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    d->subgroup_shuffle = !!(sub.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
    d->subgroup_ballot = !!(sub.supportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT);
    d->shared_memory = L->maxComputeSharedMemorySize;
    d->max_storage_buffer_range = L->maxStorageBufferRange;
    d->min_storage_offset_alignment = (uint32_t)L->minStorageBufferOffsetAlignment;
    d->max_texel_buffer_elements = L->maxTexelBufferElements;
    d->min_texel_offset_alignment = (uint32_t)L->minTexelBufferOffsetAlignment;
    d->max_workgroup_invocations = L->maxComputeWorkGroupInvocations;
    for (int i = 0; i < 3; i++)
        d->max_workgroup_count[i] = L->maxComputeWorkGroupCount[i];
    d->max_allocation_size = m3.maxMemoryAllocationSize;
    d->max_allocation_count = L->maxMemoryAllocationCount;
    d->float16 = f12.shaderFloat16;
    d->int64 = feats.features.shaderInt64;
    VkFormatProperties fp;
    vkGetPhysicalDeviceFormatProperties(p, VK_FORMAT_R32G32B32A32_SFLOAT, &fp);
    d->texel_vec4 = !!(fp.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT);
    d->image_vec4 = !!(fp.bufferFeatures & VK_FORMAT_FEATURE_STORAGE_TEXEL_BUFFER_BIT);
    d->texel_bf16 = 1;
    const VkFormat bf16_views[] = {VK_FORMAT_R16_UINT, VK_FORMAT_R32G32_UINT};
    for (int i = 0; i < 2; i++) {
        vkGetPhysicalDeviceFormatProperties(p, bf16_views[i], &fp);
        d->texel_bf16 &= !!(fp.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT);
    }

    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(p, &mem);
    d->heap_count = mem.memoryHeapCount < GPU_MAX_HEAPS ? mem.memoryHeapCount : GPU_MAX_HEAPS;
    for (uint32_t i = 0; i < d->heap_count; i++) {
        d->heap_size[i] = mem.memoryHeaps[i].size;
        d->heap_device_local[i] = !!(mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT);
    }

    d->max_loop_iterations = drv.driverID == VK_DRIVER_ID_MESA_LLVMPIPE ? 65535 : 0;
    unsigned mesa_major = 0;
    const char *mesa = strstr(d->driver_info, "Mesa ");
    if (mesa)
        sscanf(mesa, "Mesa %u", &mesa_major);
    d->newer_lavapipe = drv.driverID == VK_DRIVER_ID_MESA_LLVMPIPE && mesa_major > 22 ? mesa_major : 0;
    if (drv.driverID == VK_DRIVER_ID_MESA_LLVMPIPE) {
        const char *lp_threads = getenv("LP_NUM_THREADS");
        long n = lp_threads ? strtol(lp_threads, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
        /* LP_NUM_THREADS=0: the calling thread; llvmpipe runs 32 at most
         * (16 in some releases) */
        d->cpu_threads = n < 1 ? 1 : n > 32 ? 32 : (unsigned)n;
    }
    d->texel_rows_wg = kernel_env_flag(KENV_TEXEL_ROWS_WG, !d->newer_lavapipe);
    d->repro_hd16_vec4 = kernel_env_flag(KENV_REPRO_HD16_VEC4, !d->newer_lavapipe);
    coopmat_fill(inst, p, d);
    gpu_limits_apply(d, NULL);
    d->usable = 1;
    if (d->api_version < VK_API_VERSION_1_2) {
        d->usable = 0;
        d->unusable_reason = "supports only Vulkan < 1.2";
    } else if (gpu_compute_queue_family(p) < 0) {
        d->usable = 0;
        d->unusable_reason = "has no compute queue";
    } else if (!d->texel_vec4) {
        d->usable = 0;
        d->unusable_reason = "cannot read RGBA32F uniform texel buffers";
    }
}

/* v = min(v, limit); *bit into tightened when that lowered it. */
static uint64_t tighten(uint64_t v, uint64_t limit, unsigned bit, unsigned *tightened)
{
    if (v && v <= limit)
        return v;
    *tightened |= bit;
    return limit;
}

void gpu_limits_apply(struct gpu_device_info *d, const char *spec)
{
    static const struct {
        const char *key;
        unsigned bit;
        uint64_t min; /* the smallest value that makes sense */
    } keys[] = {
        {"storage_range", GPU_LIMIT_STORAGE_RANGE, 256},
        {"texel_elements", GPU_LIMIT_TEXEL_ELEMENTS, 64},
        {"workgroups", GPU_LIMIT_WORKGROUPS, 1},
        {"allocation", GPU_LIMIT_ALLOCATION, 4096},
        {"shared", GPU_LIMIT_SHARED, 1024},
    };
    const char *var = "VKTRAIN_DEVICE_LIMITS";
    if (!spec)
        spec = getenv(var);
    if (!spec || !*spec)
        return;
    char buf[512];
    if (strlen(spec) >= sizeof buf)
        vkt_fatal("%s is longer than %zu characters", var, sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (!eq)
            vkt_fatal("%s='%s': '%s' is not key=value (keys: storage_range, texel_elements, workgroups, "
                      "allocation, shared)",
                      var, spec, item);
        *eq = 0;
        int k = -1;
        for (int i = 0; i < (int)(sizeof keys / sizeof keys[0]); i++)
            if (!strcmp(item, keys[i].key))
                k = i;
        if (k < 0)
            vkt_fatal("%s='%s': unknown key '%s' (keys: storage_range, texel_elements, workgroups, allocation, "
                      "shared)",
                      var, spec, item);
        const char *text = eq + 1;
        char *end;
        errno = 0;
        unsigned long long v = *text >= '0' && *text <= '9' ? strtoull(text, &end, 10) : (end = (char *)text, 0);
        int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
        if (shift)
            end++;
        if (end == text || *end || errno || v > (UINT64_MAX >> shift))
            vkt_fatal("%s='%s': %s='%s' is not a whole number (K, M, G suffixes allowed)", var, spec, item, text);
        v <<= shift;
        if (v < keys[k].min)
            vkt_fatal("%s='%s': %s=%llu is below the smallest supported value %llu", var, spec, item, v,
                      (unsigned long long)keys[k].min);
        unsigned *t = &d->tightened;
        uint64_t u32 = v < UINT32_MAX ? v : UINT32_MAX;
        switch (keys[k].bit) {
        case GPU_LIMIT_STORAGE_RANGE:
            d->max_storage_buffer_range = (uint32_t)tighten(d->max_storage_buffer_range, u32, keys[k].bit, t);
            break;
        case GPU_LIMIT_TEXEL_ELEMENTS:
            d->max_texel_buffer_elements = (uint32_t)tighten(d->max_texel_buffer_elements, u32, keys[k].bit, t);
            break;
        case GPU_LIMIT_WORKGROUPS:
            for (int i = 0; i < 3; i++)
                d->max_workgroup_count[i] = (uint32_t)tighten(d->max_workgroup_count[i], u32, keys[k].bit, t);
            break;
        case GPU_LIMIT_ALLOCATION:
            d->max_allocation_size = tighten(d->max_allocation_size, v, keys[k].bit, t);
            break;
        default:
            d->shared_memory = (uint32_t)tighten(d->shared_memory, u32, keys[k].bit, t);
        }
    }
}

VkPhysicalDevice *gpu_physical_devices(VkInstance inst, uint32_t *n)
{
    VK_CHECK(vkEnumeratePhysicalDevices(inst, n, NULL), "counting Vulkan devices");
    VkPhysicalDevice *p = vkt_calloc(*n, sizeof *p, "device list");
    VK_CHECK(vkEnumeratePhysicalDevices(inst, n, p), "listing Vulkan devices");
    return p;
}

int gpu_list_devices(struct gpu_device_info **out, int validate)
{
    kernel_env_load();
    int messages = 0;
    VkDebugUtilsMessengerEXT messenger;
    VkInstance inst = gpu_instance_create(validate, &messenger, &messages);
    uint32_t n = 0;
    VkPhysicalDevice *p = gpu_physical_devices(inst, &n);
    *out = vkt_calloc(n, sizeof **out, "device info");
    for (uint32_t i = 0; i < n; i++)
        gpu_device_info_fill(inst, p[i], (int)i, &(*out)[i]);
    free(p);
    if (messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy =
            (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(inst, "vkDestroyDebugUtilsMessengerEXT");
        destroy(inst, messenger, NULL);
    }
    vkDestroyInstance(inst, NULL);
    return (int)n;
}

int gpu_pick_device(const struct gpu_device_info *devs, int n, const struct gpu_options *opt)
{
    int want = opt ? opt->device_index : -1;
    const char *env = getenv("VKTRAIN_DEVICE");
    if (want < 0 && env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end || v < 0)
            vkt_fatal("VKTRAIN_DEVICE='%s' is not a device index (see `vktrain devices`)", env);
        want = (int)v;
    }
    if (want >= 0) {
        if (want >= n)
            vkt_fatal("device index %d requested but only %d Vulkan device(s) exist (see `vktrain devices`)", want, n);
        if (!devs[want].usable)
            vkt_fatal("device %d (%s) cannot be used: it %s", want, devs[want].name, devs[want].unusable_reason);
        return want;
    }
    /* Automatic: the best type present; local rank picks among devices of it. */
    int best_rank = -1, count = 0;
    for (int i = 0; i < n; i++)
        if (devs[i].usable && devs[i].type_rank > best_rank)
            best_rank = devs[i].type_rank;
    for (int i = 0; i < n; i++)
        count += devs[i].usable && devs[i].type_rank == best_rank;
    if (!count)
        return -1;
    int k = (opt ? opt->local_rank : 0) % count;
    for (int i = 0; i < n; i++)
        if (devs[i].usable && devs[i].type_rank == best_rank && k-- == 0)
            return i;
    return -1;
}
