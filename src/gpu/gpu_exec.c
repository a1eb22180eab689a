/* gpu_exec: kernels (pipelines from embedded SPIR-V), descriptor binding
 * (pushed into the command buffer where VK_KHR_push_descriptor exists, else
 * a set per dispatch from a pool), dispatch recording with the barriers
 * hazards need, batched submission, and timestamp timers (per-dispatch
 * profiling is gpu_profile.c's).
 * Owns the command buffer's life: begun lazily, submitted and waited for
 * by gpu_submit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_internal.h"
#include "vktrain/shaders.h"
#include "vktrain/util.h"

enum shader_id shader_lookup(const char *name)
{
    for (int i = SHADER_NONE + 1; i < SHADER_COUNT; i++)
        if (!strcmp(shader_blobs[i].name, name))
            return (enum shader_id)i;
    return SHADER_NONE;
}

int gpu_shader_built(enum shader_id id) { return id < SHADER_COUNT && shader_blobs[id].code; }

static const struct shader_blob *shader_find(enum shader_id id)
{
    if (id == SHADER_NONE || (unsigned)id >= SHADER_COUNT)
        vkt_fatal("a kernel without a shader (id %d)", (int)id);
    const struct shader_blob *b = &shader_blobs[id];
    if (!b->code)
        vkt_fatal("shader '%s' (shaders/%s) is not in this build: it needs a glslc with %s (cmake/Shaders.cmake)",
                  b->name, b->file, b->needs);
    return b;
}

static VkDescriptorType descriptor_type(enum gpu_binding_kind k)
{
    return k == GPU_BIND_STORAGE      ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
           : k == GPU_BIND_IMAGE_VEC4 ? VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER
                                      : VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
}

static int kernel_matches(const struct gpu_kernel *k, const struct gpu_kernel_desc *d)
{
    return k->id == d->shader && k->n_spec == d->n_spec &&
           !memcmp(k->spec, d->spec, sizeof(uint32_t) * (size_t)d->n_spec);
}

struct gpu_kernel *gpu_kernel_get(struct gpu *g, const struct gpu_kernel_desc *d)
{
    for (int i = 0; i < g->n_kernels; i++)
        if (kernel_matches(&g->kernels[i], d))
            return &g->kernels[i];
    if (g->n_kernels == GPU_MAX_KERNELS)
        vkt_fatal("too many distinct kernels (%d) while creating '%s'", GPU_MAX_KERNELS,
                  shader_find(d->shader)->name);
    const struct shader_blob *blob = shader_find(d->shader);
    struct gpu_kernel *k = &g->kernels[g->n_kernels];
    memset(k, 0, sizeof *k);
    k->id = d->shader;
    k->shader = blob->name;
    k->n_spec = d->n_spec;
    memcpy(k->spec, d->spec, sizeof k->spec);
    k->n_bindings = d->n_bindings;
    memcpy(k->bindings, d->bindings, sizeof k->bindings);
    k->push_size = d->push_size;

    VkDescriptorSetLayoutBinding b[GPU_MAX_BINDINGS];
    for (int i = 0; i < d->n_bindings; i++)
        b[i] = (VkDescriptorSetLayoutBinding){
            .binding = (uint32_t)i,
            .descriptorType = descriptor_type(d->bindings[i]),
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    VkDescriptorSetLayoutCreateInfo dl = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .flags = g->push_descriptors ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR : 0,
        .bindingCount = (uint32_t)d->n_bindings,
        .pBindings = b,
    };
    VK_CHECK(vkCreateDescriptorSetLayout(g->device, &dl, NULL, &k->set_layout),
             "creating the descriptor layout of kernel '%s'", blob->name);
    VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = d->push_size};
    VkPipelineLayoutCreateInfo pl = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &k->set_layout,
        .pushConstantRangeCount = d->push_size ? 1 : 0,
        .pPushConstantRanges = &pr,
    };
    VK_CHECK(vkCreatePipelineLayout(g->device, &pl, NULL, &k->layout), "creating the pipeline layout of kernel '%s'",
             blob->name);
    VkShaderModuleCreateInfo smci = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = *blob->size,
        .pCode = blob->code,
    };
    VkShaderModule module;
    VK_CHECK(vkCreateShaderModule(g->device, &smci, NULL, &module), "loading shader '%s'", blob->name);
    VkSpecializationMapEntry map[GPU_MAX_SPEC];
    for (int i = 0; i < d->n_spec; i++)
        map[i] = (VkSpecializationMapEntry){.constantID = (uint32_t)i, .offset = 4u * (uint32_t)i, .size = 4};
    VkSpecializationInfo spec = {
        .mapEntryCount = (uint32_t)d->n_spec,
        .pMapEntries = map,
        .dataSize = 4u * (size_t)d->n_spec,
        .pData = k->spec,
    };
    VkComputePipelineCreateInfo cp = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage =
            {
                .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .flags = d->full_subgroups ? VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT : 0,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = module,
                .pName = "main",
                .pSpecializationInfo = d->n_spec ? &spec : NULL,
            },
        .layout = k->layout,
    };
    VK_CHECK(vkCreateComputePipelines(g->device, VK_NULL_HANDLE, 1, &cp, NULL, &k->pipeline),
             "creating the compute pipeline of kernel '%s'", blob->name);
    vkDestroyShaderModule(g->device, module, NULL);
    g->n_kernels++;
    return k;
}

/* Bytes of one texel, and the view's format, of a texel binding kind. */
static size_t texel_bytes(enum gpu_binding_kind kind)
{
    static const size_t bytes[GPU_BIND_KINDS] = {[GPU_BIND_TEXEL_VEC4] = 16,
                                                 [GPU_BIND_TEXEL_F32] = 4,
                                                 [GPU_BIND_TEXEL_BF16X4] = 8,
                                                 [GPU_BIND_TEXEL_BF16] = 2,
                                                 [GPU_BIND_TEXEL_U32] = 4,
                                                 [GPU_BIND_IMAGE_VEC4] = 16};
    return bytes[kind];
}
static VkFormat texel_format(enum gpu_binding_kind kind)
{
    static const VkFormat formats[GPU_BIND_KINDS] = {[GPU_BIND_TEXEL_VEC4] = VK_FORMAT_R32G32B32A32_SFLOAT,
                                                     [GPU_BIND_TEXEL_F32] = VK_FORMAT_R32_SFLOAT,
                                                     [GPU_BIND_TEXEL_BF16X4] = VK_FORMAT_R32G32_UINT,
                                                     [GPU_BIND_TEXEL_BF16] = VK_FORMAT_R16_UINT,
                                                     [GPU_BIND_TEXEL_U32] = VK_FORMAT_R32_UINT,
                                                     [GPU_BIND_IMAGE_VEC4] = VK_FORMAT_R32G32B32A32_SFLOAT};
    return formats[kind];
}

size_t gpu_texel_limit(const struct gpu *g, enum gpu_binding_kind kind)
{
    return (size_t)g->info.max_texel_buffer_elements * texel_bytes(kind);
}

size_t gpu_binding_limit(const struct gpu *g, enum gpu_binding_kind kind)
{
    return kind == GPU_BIND_STORAGE ? g->info.max_storage_buffer_range : gpu_texel_limit(g, kind);
}

size_t gpu_binding_alignment(const struct gpu *g, enum gpu_binding_kind kind)
{
    size_t a = kind == GPU_BIND_STORAGE ? g->info.min_storage_offset_alignment : g->info.min_texel_offset_alignment;
    return a ? a : 1;
}

size_t gpu_image_vec4_alignment(const struct gpu *g)
{
    size_t a = gpu_binding_alignment(g, GPU_BIND_IMAGE_VEC4);
    return a % 16 == 0 ? a : 16 % a == 0 ? 16 : 0;
}

const char *gpu_kernel_name(const struct gpu_kernel *k) { return k->shader; }
int gpu_kernel_binding_count(const struct gpu_kernel *k) { return k->n_bindings; }
enum gpu_binding_kind gpu_kernel_binding(const struct gpu_kernel *k, int i) { return k->bindings[i]; }

/* A full memory barrier between compute and transfer work. */
static void barrier(struct gpu *g, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access)
{
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT |
                         VK_ACCESS_TRANSFER_READ_BIT,
        .dstAccessMask = dst_access,
    };
    vkCmdPipelineBarrier(g->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, dst_stage, 0,
                         1, &mb, 0, NULL, 0, NULL);
}

void gpu_cmd_ensure(struct gpu *g)
{
    if (g->recording)
        return;
    gpu_wait(g); /* the one command buffer is free again */
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    VK_CHECK(vkBeginCommandBuffer(g->cmd, &bi), "beginning a command buffer");
    g->recording = 1;
    /* Work of earlier submissions is complete (we waited), but its writes
     * must be made visible to this one. */
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT,
    };
    vkCmdPipelineBarrier(g->cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0,
                         NULL, 0, NULL);
    g->epoch++;
}

void gpu_hazard(struct gpu *g, struct gpu_buffer *const *bufs, const int *write, int n)
{
    int conflict = 0;
    for (int i = 0; i < n; i++)
        conflict |= bufs[i]->written_epoch == g->epoch || (write[i] && bufs[i]->read_epoch == g->epoch);
    if (conflict) {
        barrier(g, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                    VK_ACCESS_TRANSFER_WRITE_BIT);
        g->epoch++;
    }
    for (int i = 0; i < n; i++) {
        if (write[i])
            bufs[i]->written_epoch = g->epoch;
        else
            bufs[i]->read_epoch = g->epoch;
    }
}

/* A texel view of binding i of kernel k (named in the errors). */
static VkBufferView make_view(struct gpu *g, const struct gpu_kernel *k, int i, struct gpu_buffer *b,
                              enum gpu_binding_kind kind, size_t offset, size_t range)
{
    VkFormat fmt = texel_format(kind);
    size_t texel = texel_bytes(kind);
    range = (range + texel - 1) / texel * texel;
    if (range / texel > g->info.max_texel_buffer_elements)
        vkt_fatal("kernel '%s': binding %d views %zu bytes of buffer '%s' as texels, over maxTexelBufferElements "
                  "(%u texels%s) on %s; the op must bind it in ranges",
                  k->shader, i, range, b->name, g->info.max_texel_buffer_elements,
                  g->info.tightened & GPU_LIMIT_TEXEL_ELEMENTS ? ", as VKTRAIN_DEVICE_LIMITS sets it" : "",
                  g->info.name);
    if (offset % gpu_binding_alignment(g, kind))
        vkt_fatal("kernel '%s': binding %d texel view offset %zu of buffer '%s' is not a multiple of %zu", k->shader,
                  i, offset, b->name, gpu_binding_alignment(g, kind));
    VkBufferViewCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
        .buffer = b->buffer,
        .format = fmt,
        .offset = offset,
        .range = range,
    };
    VkBufferView v;
    VK_CHECK(vkCreateBufferView(g->device, &ci, NULL, &v), "creating a texel view of buffer '%s'", b->name);
    return v;
}

static VkBufferView texel_view(struct gpu *g, const struct gpu_kernel *k, int i, const struct gpu_arg *a)
{
    enum gpu_binding_kind kind = k->bindings[i];
    size_t range = a->range ? a->range : a->buf->size - a->offset;
    if (a->offset == 0 && range == a->buf->size) {
        VkBufferView *cached = &a->buf->views[kind];
        if (!*cached)
            *cached = make_view(g, k, i, a->buf, kind, 0, range);
        return *cached;
    }
    if (g->n_transient == g->cap_transient) {
        g->cap_transient = g->cap_transient ? 2 * g->cap_transient : 64;
        g->transient = vkt_realloc(g->transient, sizeof *g->transient * (size_t)g->cap_transient, "texel views");
    }
    return g->transient[g->n_transient++] = make_view(g, k, i, a->buf, kind, a->offset, range);
}

void gpu_dispatch(struct gpu *g, struct gpu_kernel *k, const struct gpu_arg *args, const void *push, uint32_t gx,
                  uint32_t gy, uint32_t gz)
{
    if (gx == 0 || gy == 0 || gz == 0)
        return;
    for (int i = 0; i < 3; i++) {
        uint32_t c = i == 0 ? gx : i == 1 ? gy : gz;
        if (c > g->info.max_workgroup_count[i])
            vkt_fatal("kernel '%s': %u workgroups in dimension %d exceed the device limit %u", k->shader, c, i,
                      g->info.max_workgroup_count[i]);
    }
    /* the descriptor pool and the profile's queries hold GPU_POOL_SETS */
    if ((!g->push_descriptors && g->sets_used == GPU_POOL_SETS) || (g->profiling && gpu_profile_full(g)))
        gpu_submit(g);
    gpu_cmd_ensure(g);

    VkDescriptorSet set = VK_NULL_HANDLE;
    if (!g->push_descriptors) {
        VkDescriptorSetAllocateInfo ai = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
            .descriptorPool = g->desc_pool,
            .descriptorSetCount = 1,
            .pSetLayouts = &k->set_layout,
        };
        VK_CHECK(vkAllocateDescriptorSets(g->device, &ai, &set), "allocating descriptors for kernel '%s'",
                 k->shader);
        g->sets_used++;
    }

    VkWriteDescriptorSet w[GPU_MAX_BINDINGS];
    VkDescriptorBufferInfo bi[GPU_MAX_BINDINGS];
    VkBufferView views[GPU_MAX_BINDINGS];
    struct gpu_buffer *bufs[GPU_MAX_BINDINGS];
    int writes[GPU_MAX_BINDINGS];
    for (int i = 0; i < k->n_bindings; i++) {
        const struct gpu_arg *a = &args[i];
        if (!a->buf)
            vkt_fatal("kernel '%s': binding %d has no buffer", k->shader, i);
        if (!a->buf->buffer)
            vkt_fatal("kernel '%s': binding %d is buffer '%s', a placeholder made while planning memory", k->shader,
                      i, a->buf->name);
        if (a->offset > a->buf->size || a->range > a->buf->size - a->offset)
            vkt_fatal("kernel '%s': binding %d range [%zu, +%zu) is outside buffer '%s' (%zu bytes)", k->shader, i,
                      a->offset, a->range, a->buf->name, a->buf->size);
        w[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = set,
            .dstBinding = (uint32_t)i,
            .descriptorCount = 1,
            .descriptorType = descriptor_type(k->bindings[i]),
        };
        if (k->bindings[i] == GPU_BIND_STORAGE) {
            size_t range = a->range ? a->range : a->buf->size - a->offset;
            if (range == 0)
                range = 4;
            if (range > g->info.max_storage_buffer_range)
                vkt_fatal("kernel '%s': binding %d views %zu bytes of buffer '%s', over maxStorageBufferRange "
                          "(%u bytes%s) on %s; the op must bind it in ranges",
                          k->shader, i, range, a->buf->name, g->info.max_storage_buffer_range,
                          g->info.tightened & GPU_LIMIT_STORAGE_RANGE ? ", as VKTRAIN_DEVICE_LIMITS sets it" : "",
                          g->info.name);
            if (a->offset % gpu_binding_alignment(g, GPU_BIND_STORAGE))
                vkt_fatal("kernel '%s': binding %d offset %zu of buffer '%s' is not a multiple of %zu", k->shader, i,
                          a->offset, a->buf->name, gpu_binding_alignment(g, GPU_BIND_STORAGE));
            bi[i] = (VkDescriptorBufferInfo){.buffer = a->buf->buffer, .offset = a->offset, .range = range};
            w[i].pBufferInfo = &bi[i];
        } else {
            views[i] = texel_view(g, k, i, a);
            w[i].pTexelBufferView = &views[i];
        }
        bufs[i] = a->buf;
        writes[i] = a->write;
    }
    gpu_hazard(g, bufs, writes, k->n_bindings);
    vkCmdBindPipeline(g->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipeline);
    if (g->push_descriptors) {
        g->push_descriptors(g->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, (uint32_t)k->n_bindings, w);
    } else {
        vkUpdateDescriptorSets(g->device, (uint32_t)k->n_bindings, w, 0, NULL);
        vkCmdBindDescriptorSets(g->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 1, &set, 0, NULL);
    }
    if (k->push_size)
        vkCmdPushConstants(g->cmd, k->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, k->push_size, push);
    if (g->profiling)
        gpu_profile_begin(g, k);
    vkCmdDispatch(g->cmd, gx, gy, gz);
    if (g->profiling)
        gpu_profile_end(g);
    g->n_recorded++;
}

void gpu_submit_async(struct gpu *g)
{
    if (!g->recording)
        return;
    /* Device writes become visible to the host reading mapped memory. */
    barrier(g, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    VK_CHECK(vkEndCommandBuffer(g->cmd), "ending the command buffer");
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &g->cmd,
    };
    VK_CHECK(vkQueueSubmit(g->queue, 1, &si, g->fence), "submitting %u recorded commands", g->n_recorded);
    g->recording = 0;
    g->in_flight = 1;
}

void gpu_submit(struct gpu *g)
{
    gpu_submit_async(g);
    gpu_wait(g);
}

void gpu_wait(struct gpu *g)
{
    if (!g->in_flight)
        return;
    g->in_flight = 0;
    VK_CHECK(vkWaitForFences(g->device, 1, &g->fence, VK_TRUE, UINT64_MAX), "waiting for %u commands to finish",
             g->n_recorded);
    VK_CHECK(vkResetFences(g->device, 1, &g->fence), "resetting the submit fence");
    VK_CHECK(vkResetCommandBuffer(g->cmd, 0), "resetting the command buffer");
    VK_CHECK(vkResetDescriptorPool(g->device, g->desc_pool, 0), "resetting the descriptor pool");
    for (int i = 0; i < g->n_transient; i++)
        vkDestroyBufferView(g->device, g->transient[i], NULL);
    g->n_transient = 0;
    gpu_profile_collect(g);
    for (uint32_t q = 0; q < 2 * GPU_MAX_TIMERS; q++) {
        if (!g->query_pending[q])
            continue;
        VK_CHECK(vkGetQueryPoolResults(g->device, g->query_pool, q, 1, sizeof(uint64_t), &g->timer_ticks[q],
                                       sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                 "reading timestamp %u", q);
        g->query_pending[q] = 0;
    }
    g->n_recorded = 0;
    g->sets_used = 0;
}

static void timestamp(struct gpu *g, uint32_t q)
{
    gpu_cmd_ensure(g);
    vkCmdWriteTimestamp(g->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, g->query_pool, q);
    g->query_pending[q] = 1;
    g->n_recorded++;
}

int gpu_timer_start(struct gpu *g)
{
    int t = g->n_timers++ % GPU_MAX_TIMERS;
    if (!g->timestamps_ok)
        return t;
    gpu_cmd_ensure(g);
    vkCmdResetQueryPool(g->cmd, g->query_pool, 2u * (uint32_t)t, 2);
    timestamp(g, 2u * (uint32_t)t);
    return t;
}

void gpu_timer_stop(struct gpu *g, int t)
{
    if (g->timestamps_ok)
        timestamp(g, 2u * (uint32_t)t + 1);
}

double gpu_timer_ms(struct gpu *g, int t)
{
    if (!g->timestamps_ok)
        return -1.0;
    uint64_t d = g->timer_ticks[2 * t + 1] - g->timer_ticks[2 * t];
    return (double)d * g->timestamp_period * 1e-6;
}
