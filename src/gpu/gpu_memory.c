/* gpu_memory: buffers, their texel views, and copies between host and
 * device. On unified memory (lavapipe, integrated GPUs) buffers are mapped
 * and copies are memcpy; on discrete GPUs they go through one staging
 * buffer. Copies are synchronous: they finish pending work first. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "gpu_internal.h"
#include "vktrain/util.h"

static uint32_t memory_type(struct gpu *g, uint32_t bits, VkMemoryPropertyFlags want, const char *name)
{
    for (uint32_t i = 0; i < g->mem.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (g->mem.memoryTypes[i].propertyFlags & want) == want)
            return i;
    vkt_fatal("no Vulkan memory type with flags 0x%x for buffer '%s' on %s", (unsigned)want, name,
              g->info.name);
}

static struct gpu_buffer *buffer_new(struct gpu *g, size_t bytes, const char *name, int host)
{
    struct gpu_buffer *b = vkt_calloc(1, sizeof *b, "a gpu buffer");
    snprintf(b->name, sizeof b->name, "%s", name);
    b->size = bytes;
    /* Whole vec4 texels, so an RGBA32F view covers every element. */
    size_t alloc = (bytes + 15) & ~(size_t)15;
    if (!alloc)
        alloc = 16;
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = alloc,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
                 VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VK_CHECK(vkCreateBuffer(g->device, &bci, NULL, &b->buffer), "creating buffer '%s' of %zu bytes", name, bytes);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(g->device, b->buffer, &req);
    VkMemoryPropertyFlags want;
    if (host)
        want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    else if (g->unified)
        want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
               VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    else
        want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    VkMemoryAllocateInfo mai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = memory_type(g, req.memoryTypeBits, want, name),
    };
    VK_CHECK(vkAllocateMemory(g->device, &mai, NULL, &b->memory), "allocating %zu bytes for buffer '%s'",
             (size_t)req.size, name);
    VK_CHECK(vkBindBufferMemory(g->device, b->buffer, b->memory, 0), "binding memory of buffer '%s'", name);
    if (host || g->unified)
        VK_CHECK(vkMapMemory(g->device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped), "mapping buffer '%s'", name);
    return b;
}

struct gpu_buffer *gpu_buffer_create(struct gpu *g, size_t bytes, const char *name)
{
    return buffer_new(g, bytes, name, 0);
}

void gpu_buffer_views_destroy(struct gpu *g, struct gpu_buffer *b)
{
    if (b->view_vec4)
        vkDestroyBufferView(g->device, b->view_vec4, NULL);
    if (b->view_f32)
        vkDestroyBufferView(g->device, b->view_f32, NULL);
    b->view_vec4 = b->view_f32 = VK_NULL_HANDLE;
}

void gpu_buffer_destroy(struct gpu *g, struct gpu_buffer *b)
{
    if (!b)
        return;
    if (g->n_recorded)
        gpu_submit(g);
    gpu_wait(g);
    gpu_buffer_views_destroy(g, b);
    vkDestroyBuffer(g->device, b->buffer, NULL);
    vkFreeMemory(g->device, b->memory, NULL);
    free(b);
}

size_t gpu_buffer_size(const struct gpu_buffer *b) { return b->size; }
const void *gpu_buffer_host(const struct gpu_buffer *b) { return b->mapped; }
const char *gpu_buffer_name(const struct gpu_buffer *b) { return b->name; }

static void check_range(const struct gpu_buffer *b, size_t offset, size_t bytes, const char *verb)
{
    if (offset > b->size || bytes > b->size - offset)
        vkt_fatal("%s %zu bytes at offset %zu of buffer '%s' (%zu bytes): out of range", verb, bytes, offset,
                  b->name, b->size);
}

static struct gpu_buffer *staging(struct gpu *g, size_t bytes)
{
    if (g->staging && g->staging->size >= bytes)
        return g->staging;
    if (g->staging)
        gpu_buffer_destroy(g, g->staging);
    g->staging = buffer_new(g, bytes, "staging", 1);
    return g->staging;
}

/* Largest piece moved through the staging buffer at once. */
#define STAGING_CHUNK ((size_t)64 << 20)

void gpu_upload(struct gpu *g, struct gpu_buffer *b, size_t offset, const void *src, size_t bytes)
{
    check_range(b, offset, bytes, "uploading");
    if (g->n_recorded)
        gpu_submit(g);
    gpu_wait(g);
    if (b->mapped) {
        memcpy((char *)b->mapped + offset, src, bytes);
        return;
    }
    for (size_t done = 0; done < bytes;) {
        size_t n = bytes - done < STAGING_CHUNK ? bytes - done : STAGING_CHUNK;
        struct gpu_buffer *s = staging(g, n);
        memcpy(s->mapped, (const char *)src + done, n);
        gpu_cmd_ensure(g);
        VkBufferCopy c = {.srcOffset = 0, .dstOffset = offset + done, .size = n};
        vkCmdCopyBuffer(g->cmd, s->buffer, b->buffer, 1, &c);
        g->n_recorded++;
        gpu_submit(g);
        done += n;
    }
}

void gpu_download(struct gpu *g, const struct gpu_buffer *b, size_t offset, void *dst, size_t bytes)
{
    check_range(b, offset, bytes, "downloading");
    if (g->n_recorded)
        gpu_submit(g);
    gpu_wait(g);
    if (b->mapped) {
        memcpy(dst, (const char *)b->mapped + offset, bytes);
        return;
    }
    for (size_t done = 0; done < bytes;) {
        size_t n = bytes - done < STAGING_CHUNK ? bytes - done : STAGING_CHUNK;
        struct gpu_buffer *s = staging(g, n);
        gpu_cmd_ensure(g);
        VkBufferCopy c = {.srcOffset = offset + done, .dstOffset = 0, .size = n};
        vkCmdCopyBuffer(g->cmd, b->buffer, s->buffer, 1, &c);
        g->n_recorded++;
        gpu_submit(g);
        memcpy((char *)dst + done, s->mapped, n);
        done += n;
    }
}

void gpu_zero(struct gpu *g, struct gpu_buffer *b)
{
    gpu_cmd_ensure(g);
    int w = 1;
    gpu_hazard(g, &b, &w, 1);
    vkCmdFillBuffer(g->cmd, b->buffer, 0, VK_WHOLE_SIZE, 0);
    g->n_recorded++;
}
