/* gpu_alloc: the device memory behind buffers, sub-allocated from a few
 * large blocks.
 *
 * Owns every VkDeviceMemory of the gpu: blocks of gpu_memory_block_size()
 * bytes per memory type (256 MiB, less when maxMemoryAllocationSize is
 * smaller), each with a free list of spans kept sorted by offset and coalesced when a
 * buffer is released; host-visible blocks are mapped once. A buffer larger
 * than a block, or the staging buffer, gets an allocation of its own. It counts allocations and
 * refuses, naming the buffer, before passing maxMemoryAllocationCount. It
 * also answers how much memory the device offers (gpu_memory_available).
 * It never creates buffers or records commands (gpu_memory.c does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_internal.h"
#include "vktrain/util.h"

#define GPU_BLOCK_DEFAULT ((VkDeviceSize)256 << 20)

struct gpu_span {
    VkDeviceSize off, size;
};

struct gpu_block {
    VkDeviceMemory memory;
    uint32_t type; /* memory type index */
    VkDeviceSize size;
    char *mapped;          /* non-NULL for host-visible memory */
    int dedicated;         /* holds one buffer larger than a block */
    int live;              /* buffers bound in it */
    struct gpu_span *free; /* sorted by offset, never adjacent */
    int n_free, cap_free;
};

uint64_t gpu_memory_block_size(const struct gpu *g)
{
    VkDeviceSize size = g->alloc.block_size ? g->alloc.block_size : GPU_BLOCK_DEFAULT;
    if (g->info.max_allocation_size && g->info.max_allocation_size < size)
        size = g->info.max_allocation_size;
    return size;
}

static void span_insert(struct gpu_block *k, int at, VkDeviceSize off, VkDeviceSize size)
{
    if (k->n_free == k->cap_free) {
        k->cap_free = k->cap_free ? 2 * k->cap_free : 8;
        k->free = vkt_realloc(k->free, sizeof *k->free * (size_t)k->cap_free, "free list");
    }
    memmove(&k->free[at + 1], &k->free[at], sizeof *k->free * (size_t)(k->n_free - at));
    k->free[at] = (struct gpu_span){off, size};
    k->n_free++;
}

static void span_remove(struct gpu_block *k, int at)
{
    memmove(&k->free[at], &k->free[at + 1], sizeof *k->free * (size_t)(k->n_free - at - 1));
    k->n_free--;
}

/* First fit: the offset of `size` bytes at `align` carved out of k's free
 * list, or -1 when no span holds them. */
static int64_t block_take(struct gpu_block *k, VkDeviceSize size, VkDeviceSize align)
{
    for (int i = 0; i < k->n_free; i++) {
        struct gpu_span s = k->free[i];
        VkDeviceSize off = (s.off + align - 1) / align * align;
        if (off + size > s.off + s.size)
            continue;
        span_remove(k, i);
        if (off + size < s.off + s.size)
            span_insert(k, i, off + size, s.off + s.size - off - size);
        if (off > s.off)
            span_insert(k, i, s.off, off - s.off);
        return (int64_t)off;
    }
    return -1;
}

/* Returns [off, off + size) to k's free list, merged with its neighbours. */
static void block_give(struct gpu_block *k, VkDeviceSize off, VkDeviceSize size)
{
    int i = 0;
    while (i < k->n_free && k->free[i].off < off)
        i++;
    if (i > 0 && k->free[i - 1].off + k->free[i - 1].size == off) {
        i--;
        k->free[i].size += size;
    } else {
        span_insert(k, i, off, size);
    }
    if (i + 1 < k->n_free && k->free[i].off + k->free[i].size == k->free[i + 1].off) {
        k->free[i].size += k->free[i + 1].size;
        span_remove(k, i + 1);
    }
}

static struct gpu_block *block_new(struct gpu *g, uint32_t type, VkDeviceSize size, int dedicated, const char *name)
{
    uint32_t cap = g->info.max_allocation_count;
    if (cap && g->alloc.n_allocations >= cap)
        vkt_fatal("buffer '%s': a new block of %llu bytes would be Vulkan memory allocation %u, over the "
                  "device's maxMemoryAllocationCount of %u (%llu bytes are allocated in %u blocks now)",
                  name, (unsigned long long)size, g->alloc.n_allocations + 1, cap,
                  (unsigned long long)g->alloc.allocated, g->alloc.n_allocations);
    struct gpu_block *k = vkt_calloc(1, sizeof *k, "a memory block");
    k->type = type;
    k->size = size;
    k->dedicated = dedicated;
    VkMemoryAllocateInfo mai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = size,
        .memoryTypeIndex = type,
    };
    VK_CHECK(vkAllocateMemory(g->device, &mai, NULL, &k->memory),
             "allocating a %s block of %llu bytes (memory type %u) for buffer '%s'; %llu bytes in %u blocks "
             "are allocated already",
             dedicated ? "dedicated" : "shared", (unsigned long long)size, type, name,
             (unsigned long long)g->alloc.allocated, g->alloc.n_allocations);
    if (g->mem.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)
        VK_CHECK(vkMapMemory(g->device, k->memory, 0, VK_WHOLE_SIZE, 0, (void **)&k->mapped),
                 "mapping a memory block for buffer '%s'", name);
    span_insert(k, 0, 0, size);
    if (g->alloc.n_blocks == g->alloc.cap_blocks) {
        g->alloc.cap_blocks = g->alloc.cap_blocks ? 2 * g->alloc.cap_blocks : 8;
        g->alloc.blocks =
            vkt_realloc(g->alloc.blocks, sizeof *g->alloc.blocks * (size_t)g->alloc.cap_blocks, "memory blocks");
    }
    g->alloc.blocks[g->alloc.n_blocks++] = k;
    g->alloc.n_allocations++;
    g->alloc.allocated += size;
    return k;
}

static void block_free(struct gpu *g, struct gpu_block *k)
{
    for (int i = 0; i < g->alloc.n_blocks; i++)
        if (g->alloc.blocks[i] == k) {
            g->alloc.blocks[i] = g->alloc.blocks[--g->alloc.n_blocks];
            break;
        }
    vkFreeMemory(g->device, k->memory, NULL);
    g->alloc.n_allocations--;
    g->alloc.allocated -= k->size;
    free(k->free);
    free(k);
}

void gpu_alloc_bind(struct gpu *g, struct gpu_buffer *b, const VkMemoryRequirements *req, uint32_t type, int dedicated)
{
    VkDeviceSize block = gpu_memory_block_size(g);
    struct gpu_block *k = NULL;
    int64_t off = -1;
    if (dedicated || req->size > block) {
        if (g->info.max_allocation_size && req->size > g->info.max_allocation_size)
            vkt_fatal("buffer '%s' needs %llu bytes, more than one Vulkan allocation may hold on %s "
                      "(maxMemoryAllocationSize %llu bytes)",
                      b->name, (unsigned long long)req->size, g->info.name,
                      (unsigned long long)g->info.max_allocation_size);
        k = block_new(g, type, req->size, 1, b->name);
        off = block_take(k, req->size, 1);
    } else {
        for (int i = 0; i < g->alloc.n_blocks && off < 0; i++) {
            k = g->alloc.blocks[i];
            if (!k->dedicated && k->type == type)
                off = block_take(k, req->size, req->alignment);
        }
        if (off < 0) {
            k = block_new(g, type, block, 0, b->name);
            off = block_take(k, req->size, req->alignment);
        }
    }
    k->live++;
    b->block = k;
    b->offset = (VkDeviceSize)off;
    b->bound = req->size;
    VK_CHECK(vkBindBufferMemory(g->device, b->buffer, k->memory, b->offset),
             "binding buffer '%s' at offset %llu of a memory block", b->name, (unsigned long long)b->offset);
    b->mapped = k->mapped ? k->mapped + b->offset : NULL;
}

void gpu_alloc_release(struct gpu *g, struct gpu_buffer *b)
{
    struct gpu_block *k = b->block;
    block_give(k, b->offset, b->bound);
    if (--k->live == 0)
        block_free(g, k);
    b->block = NULL;
    b->mapped = NULL;
}

void gpu_alloc_destroy(struct gpu *g)
{
    while (g->alloc.n_blocks)
        block_free(g, g->alloc.blocks[0]);
    free(g->alloc.blocks);
    g->alloc.blocks = NULL;
}

uint64_t gpu_memory_available(const struct gpu *g, char *source, size_t n)
{
    if (gpu_cpu_device(&g->info)) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        snprintf(source, n,
                 "the host's physical memory: a CPU device allocates host memory, its reported "
                 "heap is no limit");
        return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    }
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
                                               .pNext = g->memory_budget ? &budget : NULL};
    vkGetPhysicalDeviceMemoryProperties2(g->phys, &props);
    uint32_t best = 0;
    for (uint32_t h = 1; h < props.memoryProperties.memoryHeapCount; h++) {
        int local = !!(props.memoryProperties.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT);
        int best_local = !!(props.memoryProperties.memoryHeaps[best].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT);
        if (local > best_local || (local == best_local && props.memoryProperties.memoryHeaps[h].size >
                                                              props.memoryProperties.memoryHeaps[best].size))
            best = h;
    }
    if (g->memory_budget) {
        snprintf(source, n, "VK_EXT_memory_budget of device-local heap %u", best);
        return budget.heapBudget[best];
    }
    snprintf(source, n, "device-local heap %u", best);
    return props.memoryProperties.memoryHeaps[best].size;
}
