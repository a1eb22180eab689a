/* gpu_memory: buffers, their texel views, the bytes per memory category
 * (and the planning mode that counts them without allocating), and copies
 * between host and device. Memory itself comes from gpu_alloc.c. On
 * unified memory (lavapipe, integrated GPUs) buffers are mapped and copies
 * are memcpy; on discrete GPUs (and under VKTRAIN_FORCE_STAGING=1) they go
 * through one staging buffer, HOST_CACHED where the device has such
 * memory. Copies are synchronous: they finish pending work first. Under
 * VKTRAIN_FILL_NAN=1 every new buffer starts filled with NaN. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "gpu_internal.h"
#include "vktrain/util.h"

/* The first memory type with the flags `want`, preferring one that also
 * has `prefer`. */
static uint32_t memory_type(struct gpu *g, uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer,
                            const char *name)
{
    for (uint32_t i = 0; i < g->mem.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (g->mem.memoryTypes[i].propertyFlags & (want | prefer)) == (want | prefer))
            return i;
    for (uint32_t i = 0; i < g->mem.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (g->mem.memoryTypes[i].propertyFlags & want) == want)
            return i;
    vkt_fatal("no Vulkan memory type with flags 0x%x for buffer '%s' on %s", (unsigned)want, name,
              g->info.name);
}

static const char *const category_names[GPU_MEM_CATEGORIES] = {
    "parameters", "gradients", "optimizer state", "activations", "workspace",
};

const char *gpu_memory_category_name(enum gpu_mem_category c) { return category_names[c]; }

enum gpu_mem_category gpu_memory_category(struct gpu *g, enum gpu_mem_category c)
{
    enum gpu_mem_category was = g->category;
    g->category = c;
    return was;
}

void gpu_memory_plan(struct gpu *g, int on)
{
    g->planning = on;
    if (on)
        g->plan_largest = 0, g->plan_largest_name[0] = 0;
}

void gpu_memory_stats(const struct gpu *g, struct gpu_memory_stats *s)
{
    *s = (struct gpu_memory_stats){.allocations = g->alloc.n_allocations, .allocated = g->alloc.allocated,
                                   .largest = g->plan_largest};
    snprintf(s->largest_name, sizeof s->largest_name, "%s", g->plan_largest_name);
    for (int c = 0; c < GPU_MEM_CATEGORIES; c++) {
        s->bytes[c] = g->used[c];
        s->total += g->used[c];
    }
}

/* Records a fill of the whole buffer with the 32-bit pattern `word`. */
static void fill(struct gpu *g, struct gpu_buffer *b, uint32_t word)
{
    gpu_cmd_ensure(g);
    int w = 1;
    gpu_hazard(g, &b, &w, 1);
    vkCmdFillBuffer(g->cmd, b->buffer, 0, VK_WHOLE_SIZE, word);
    g->n_recorded++;
}

/* host: host-visible memory of its own, outside the categories (the
 * staging buffer). */
static struct gpu_buffer *buffer_new(struct gpu *g, size_t bytes, const char *name, int host)
{
    struct gpu_buffer *b = vkt_calloc(1, sizeof *b, "a gpu buffer");
    snprintf(b->name, sizeof b->name, "%s", name);
    b->size = bytes;
    /* Whole vec4 texels, so an RGBA32F view covers every element. Sizes
     * come bounded from model_config_check; this one guards the rounding. */
    if (bytes > SIZE_MAX - 15)
        vkt_fatal("buffer '%s': %zu bytes cannot be allocated", name, bytes);
    size_t alloc = (bytes + 15) & ~(size_t)15;
    if (!alloc)
        alloc = 16;
    b->category = g->category;
    b->accounted = host ? 0 : alloc;
    g->used[b->category] += b->accounted;
    if (g->planning && !host) {
        if (alloc > g->plan_largest) {
            g->plan_largest = alloc;
            snprintf(g->plan_largest_name, sizeof g->plan_largest_name, "%s", name);
        }
        return b;
    }
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = alloc,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
                 VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
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
    /* The staging buffer in HOST_CACHED memory where there is such: the
     * host reads downloads (gradients, checkpoints) from it, and uncached
     * write-combined memory reads many times slower. */
    VkMemoryPropertyFlags prefer = host ? VK_MEMORY_PROPERTY_HOST_CACHED_BIT : 0;
    gpu_alloc_bind(g, b, &req, memory_type(g, req.memoryTypeBits, want, prefer, name), host);
    if (!host && !g->unified)
        b->mapped = NULL; /* copies go through staging, as on any discrete GPU */
    if (!host && g->fill_nan)
        fill(g, b, 0x7fc00000u); /* a quiet NaN; as int32 2143289344, no valid id */
    return b;
}

struct gpu_buffer *gpu_buffer_create(struct gpu *g, size_t bytes, const char *name)
{
    return buffer_new(g, bytes, name, 0);
}

void gpu_buffer_views_destroy(struct gpu *g, struct gpu_buffer *b)
{
    for (int k = 0; k < GPU_BIND_KINDS; k++) {
        if (b->views[k])
            vkDestroyBufferView(g->device, b->views[k], NULL);
        b->views[k] = VK_NULL_HANDLE;
    }
}

void gpu_buffer_destroy(struct gpu *g, struct gpu_buffer *b)
{
    if (!b)
        return;
    g->used[b->category] -= b->accounted;
    if (b->buffer) {
        if (g->n_recorded)
            gpu_submit(g);
        gpu_wait(g);
        gpu_buffer_views_destroy(g, b);
        vkDestroyBuffer(g->device, b->buffer, NULL);
        gpu_alloc_release(g, b);
    }
    free(b);
}

size_t gpu_buffer_size(const struct gpu_buffer *b) { return b->size; }
const void *gpu_buffer_host(const struct gpu_buffer *b) { return b->mapped; }
const char *gpu_buffer_name(const struct gpu_buffer *b) { return b->name; }
void gpu_buffer_set_dtype(struct gpu_buffer *b, enum gpu_dtype t) { b->dtype = t; }
enum gpu_dtype gpu_buffer_dtype(const struct gpu_buffer *b) { return b->dtype; }
void gpu_buffer_set_q4_flags(struct gpu_buffer *b, uint32_t flags) { b->q4_flags = flags; }
uint32_t gpu_buffer_q4_flags(const struct gpu_buffer *b) { return b->q4_flags; }

void gpu_buffer_set_stack(struct gpu_buffer *b, struct gpu_buffer *stack)
{
    b->stack = stack;
}

struct gpu_buffer *gpu_buffer_stack(const struct gpu_buffer *b)
{
    return b->stack;
}

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

void gpu_upload_batch(struct gpu *g, const struct gpu_copy *c, int n)
{
    size_t staged = 0; /* bytes that go through the staging buffer */
    int work = 0;
    for (int i = 0; i < n; i++) {
        check_range(c[i].buf, c[i].offset, c[i].bytes, "uploading");
        if (!c[i].buf->buffer || !c[i].bytes)
            continue; /* a planning placeholder, or nothing */
        work = 1;
        if (!c[i].buf->mapped)
            staged += (c[i].bytes + 15) & ~(size_t)15;
    }
    if (!work)
        return;
    if (g->n_recorded)
        gpu_submit(g);
    gpu_wait(g);
    struct gpu_buffer *s = staged ? staging(g, staged < STAGING_CHUNK ? staged : STAGING_CHUNK) : NULL;
    size_t at = 0; /* bytes of s holding copies recorded since the last submit */
    for (int i = 0; i < n; i++) {
        struct gpu_buffer *b = c[i].buf;
        const char *src = c[i].src;
        if (!b->buffer || !c[i].bytes)
            continue;
        if (b->mapped) {
            memcpy((char *)b->mapped + c[i].offset, src, c[i].bytes);
            continue;
        }
        for (size_t done = 0; done < c[i].bytes;) {
            size_t piece = c[i].bytes - done < STAGING_CHUNK ? c[i].bytes - done : STAGING_CHUNK;
            if (at + piece > s->size) {
                gpu_submit(g);
                at = 0;
            }
            memcpy((char *)s->mapped + at, src + done, piece);
            gpu_cmd_ensure(g);
            VkBufferCopy r = {.srcOffset = at, .dstOffset = c[i].offset + done, .size = piece};
            vkCmdCopyBuffer(g->cmd, s->buffer, b->buffer, 1, &r);
            g->n_recorded++;
            at += (piece + 15) & ~(size_t)15;
            done += piece;
        }
    }
    if (at)
        gpu_submit(g);
}

void gpu_upload(struct gpu *g, struct gpu_buffer *b, size_t offset, const void *src, size_t bytes)
{
    gpu_upload_batch(g, &(struct gpu_copy){.buf = b, .offset = offset, .src = src, .bytes = bytes}, 1);
}

void gpu_download(struct gpu *g, const struct gpu_buffer *b, size_t offset, void *dst, size_t bytes)
{
    check_range(b, offset, bytes, "downloading");
    if (!b->buffer)
        vkt_fatal("downloading buffer '%s': it is a placeholder made while planning memory, it holds nothing",
                  b->name);
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
    if (!b->buffer)
        return; /* a planning placeholder */
    fill(g, b, 0);
}

void gpu_set_matmul_scratch(struct gpu *g, struct gpu_buffer *b)
{
    g->matmul_scratch = b;
}

struct gpu_buffer *gpu_matmul_scratch(const struct gpu *g)
{
    return g->matmul_scratch;
}
