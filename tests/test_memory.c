/* test_memory: device memory sub-allocated from blocks (src/gpu/gpu_alloc.c),
 * its accounting by category, and the memory plan (src/train/memory_plan.c).
 *
 * With blocks made small (1 MiB) so a few hundred buffers need several:
 *   - every buffer sits at an offset that honours its alignment, inside its
 *     block, overlapping no other; a pattern uploaded to each reads back
 *     intact after all were written (an overlap would corrupt one), both
 *     through mapped memory and through the staging buffer (as on a
 *     discrete GPU, with gpu->unified cleared);
 *   - a matmul in both kernel families (texel views and storage bindings)
 *     on sub-allocated buffers matches the C reference (normalized error
 *     < 1e-10, as test_ops);
 *   - freed space is reused, neighbours coalesce (two freed 256 KiB
 *     neighbours take a 512 KiB buffer with no new allocation), and empty
 *     blocks are given back (0 allocations at the end);
 *   - a buffer larger than a block gets a dedicated allocation; one over
 *     maxMemoryAllocationSize, and a block past maxMemoryAllocationCount,
 *     end the process with a message naming the buffer and the limit
 *     (checked in a child process); planning records the largest buffer
 *     instead, for the plan to refuse.
 * The plan: the trainer's buffers created in planning mode and then for
 * real give the same bytes in every category, for llama and gpt2, and
 * destroying either leaves every category as it was; the
 * parameter, gradient and optimizer figures equal 4, 4 and 8 bytes per
 * parameter (model_numel, an independent count). */
#include <setjmp.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/gpu/gpu_internal.h"
#include "../src/train/train_internal.h"
#include "gpu_testing.h"
#include "ref_ops.h"
#include "vktrain/config.h"
#include "vktrain/ops.h"

#define MiB ((size_t)1 << 20)

static struct gpu *g;

static void child_exit(int code)
{
    _exit(code ? code : 1);
}

/* Runs f in a child process that must end through vkt_fatal; returns 1 if
 * it did, with what it wrote to stderr in msg. */
static int dies_with(void (*f)(void), char *msg, size_t n)
{
    int fd[2];
    if (pipe(fd))
        return 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        vkt_set_exit_hook(child_exit);
        f();
        _exit(0);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < n && (r = read(fd[0], msg + got, n - 1 - got)) > 0)
        got += (size_t)r;
    msg[got] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 1;
}

static uint32_t pattern(size_t i, size_t j)
{
    return (uint32_t)(i * 2654435761u + j);
}

/* staged: copies go through the staging buffer, as on a discrete GPU. */
static void test_many_buffers(int staged)
{
    enum { N = 300 };
    struct gpu_buffer *b[N];
    size_t bytes[N];
    g->unified = !staged;
    if (staged) { /* the staging buffer, made once for the largest copy */
        uint32_t held = g->alloc.n_allocations;
        struct gpu_buffer *s = gpu_buffer_create(g, 24000, "staging maker");
        gpu_zero(g, s);
        float one = 1;
        gpu_upload(g, s, 0, &one, sizeof one);
        gpu_buffer_destroy(g, s);
        CHECK(g->staging && g->alloc.n_allocations == held + 1, "no staging buffer in an allocation of its own");
    }
    uint32_t before = g->alloc.n_allocations;
    size_t total = 0;
    for (size_t i = 0; i < N; i++) {
        bytes[i] = 4 * (1 + (i * 7919) % 6000); /* 4 B .. 24 KB */
        b[i] = gpu_buffer_create(g, bytes[i], "many");
        CHECK((gpu_buffer_host(b[i]) == NULL) == staged, "buffer %zu is %smapped", i, staged ? "" : "not ");
        total += bytes[i];
        VkMemoryRequirements req;
        vkGetBufferMemoryRequirements(g->device, b[i]->buffer, &req);
        CHECK(b[i]->offset % req.alignment == 0, "buffer %zu at offset %llu, alignment %llu", i,
              (unsigned long long)b[i]->offset, (unsigned long long)req.alignment);
        CHECK(b[i]->offset + b[i]->bound <= 1 * MiB, "buffer %zu ends past its block", i);
    }
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < i; j++)
            if (b[i]->block == b[j]->block)
                CHECK(b[i]->offset >= b[j]->offset + b[j]->bound || b[j]->offset >= b[i]->offset + b[i]->bound,
                      "buffers %zu and %zu overlap", i, j);
    uint32_t blocks = g->alloc.n_allocations - before;
    CHECK(blocks >= total / MiB + 1 && blocks <= total / MiB + 3, "%u blocks for %zu bytes", blocks, total);
    for (size_t i = 0; i < N; i++) {
        uint32_t *host = vkt_malloc(bytes[i], "pattern");
        for (size_t j = 0; j < bytes[i] / 4; j++)
            host[j] = pattern(i, j);
        gpu_upload(g, b[i], 0, host, bytes[i]);
        free(host);
    }
    int bad = 0;
    for (size_t i = 0; i < N; i++) {
        uint32_t *host = vkt_malloc(bytes[i], "pattern");
        gpu_download(g, b[i], 0, host, bytes[i]);
        for (size_t j = 0; j < bytes[i] / 4; j++)
            bad += host[j] != pattern(i, j);
        free(host);
    }
    CHECK(bad == 0, "%d words changed after every buffer was written", bad);
    /* Free every other buffer; the same sizes fit again with no new block. */
    uint32_t held = g->alloc.n_allocations;
    for (size_t i = 0; i < N; i += 2)
        gpu_buffer_destroy(g, b[i]);
    for (size_t i = 0; i < N; i += 2)
        b[i] = gpu_buffer_create(g, bytes[i], "again");
    CHECK(g->alloc.n_allocations == held, "reuse took %u allocations, %u before", g->alloc.n_allocations, held);
    for (size_t i = 0; i < N; i++)
        gpu_buffer_destroy(g, b[i]);
    CHECK(g->alloc.n_allocations == before, "%u allocations left after every buffer was freed",
          g->alloc.n_allocations - before);
    g->unified = 1;
}

static void test_coalesce(void)
{
    struct gpu_buffer *q[4];
    for (int i = 0; i < 4; i++)
        q[i] = gpu_buffer_create(g, MiB / 4, "quarter");
    CHECK(q[0]->block == q[3]->block, "four quarters of a block took more than one");
    uint32_t held = g->alloc.n_allocations;
    VkDeviceSize first = q[1]->offset < q[2]->offset ? q[1]->offset : q[2]->offset;
    gpu_buffer_destroy(g, q[1]);
    gpu_buffer_destroy(g, q[2]);
    struct gpu_buffer *half = gpu_buffer_create(g, MiB / 2, "half");
    CHECK(g->alloc.n_allocations == held && half->block == q[0]->block && half->offset == first,
          "two freed neighbours did not take a buffer of both their sizes (offset %llu, want %llu)",
          (unsigned long long)half->offset, (unsigned long long)first);
    gpu_buffer_destroy(g, half);
    gpu_buffer_destroy(g, q[0]);
    gpu_buffer_destroy(g, q[3]);
}

/* y = x·wᵀ on buffers at non-zero offsets of a shared block. */
static void test_matmul_offsets(enum gpu_kernel_class kc)
{
    enum { M = 19, K = 40, Nn = 23 };
    gpu_set_kernel_class(g, kc);
    struct gpu_buffer *pad = gpu_buffer_create(g, 100, "pad");
    double *x = vkt_malloc(sizeof(double) * M * K, "x"), *w = vkt_malloc(sizeof(double) * Nn * K, "w");
    uint64_t s = 7;
    for (int i = 0; i < M * K; i++)
        x[i] = (double)(float)((double)(vkt_splitmix64(&s) >> 11) * 0x1.0p-53 - 0.5);
    for (int i = 0; i < Nn * K; i++)
        w[i] = (double)(float)((double)(vkt_splitmix64(&s) >> 11) * 0x1.0p-53 - 0.5);
    struct gpu_buffer *bx = buffer_from_doubles(g, x, M * K, "x"), *bw = buffer_from_doubles(g, w, Nn * K, "w");
    struct gpu_buffer *by = gpu_buffer_create(g, sizeof(float) * M * Nn, "y");
    CHECK(bx->offset && bw->offset && by->offset && bx->block == pad->block, "buffers are not sub-allocated");
    op_matmul_nt(g, bx, bw, by, M, Nn, K, 0);
    gpu_submit(g);
    double *ref = vkt_malloc(sizeof(double) * M * Nn, "ref");
    ref_matmul_forward(ref, x, w, NULL, M, K, Nn);
    float *y = download_floats(g, by, M * Nn);
    double e = normalized_error(y, ref, M * Nn);
    CHECK(e < 1e-10, "%s matmul on sub-allocated buffers: normalized error %g",
          kc == GPU_KERNELS_TEXEL ? "texel" : "tiled", e);
    free(x), free(w), free(ref), free(y);
    gpu_buffer_destroy(g, bx), gpu_buffer_destroy(g, bw), gpu_buffer_destroy(g, by), gpu_buffer_destroy(g, pad);
}

static void test_dedicated(void)
{
    uint32_t before = g->alloc.n_allocations;
    struct gpu_buffer *big = gpu_buffer_create(g, 3 * MiB, "big");
    CHECK(g->alloc.n_allocations == before + 1 && big->offset == 0, "a 3 MiB buffer did not get its own allocation");
    size_t n = 3 * MiB / 4;
    uint32_t *host = vkt_malloc(3 * MiB, "big"), *back = vkt_malloc(3 * MiB, "big");
    for (size_t j = 0; j < n; j++)
        host[j] = pattern(99, j);
    gpu_upload(g, big, 0, host, 3 * MiB);
    gpu_download(g, big, 0, back, 3 * MiB);
    CHECK(!memcmp(host, back, 3 * MiB), "the dedicated buffer did not read back");
    free(host), free(back);
    gpu_buffer_destroy(g, big);
    CHECK(g->alloc.n_allocations == before, "the dedicated allocation was not freed");
}

static void create_oversize(void)
{
    g->info.max_allocation_size = 2 * MiB;
    gpu_buffer_create(g, 3 * MiB, "too big");
}

static void create_past_count(void)
{
    g->info.max_allocation_count = g->alloc.n_allocations + 2;
    for (int i = 0; i < 4; i++)
        gpu_buffer_create(g, MiB, "one block each");
}

static void test_refusals(void)
{
    char msg[4096];
    CHECK(dies_with(create_oversize, msg, sizeof msg), "a buffer over maxMemoryAllocationSize was created");
    CHECK_MSG(msg, "buffer 'too big' needs 3145728 bytes");
    CHECK_MSG(msg, "maxMemoryAllocationSize 2097152");
    CHECK(dies_with(create_past_count, msg, sizeof msg), "allocations went past maxMemoryAllocationCount");
    CHECK_MSG(msg, "buffer 'one block each'");
    CHECK_MSG(msg, "over the device's maxMemoryAllocationCount");
}

static void test_plan_largest(void)
{
    struct gpu_memory_stats s;
    gpu_memory_plan(g, 1);
    struct gpu_buffer *a = gpu_buffer_create(g, 5 * MiB, "five"), *b = gpu_buffer_create(g, 7 * MiB + 1, "seven");
    struct gpu_buffer *c = gpu_buffer_create(g, 3 * MiB, "three");
    gpu_memory_stats(g, &s);
    CHECK(s.largest == 7 * MiB + 16 && !strcmp(s.largest_name, "seven"), "largest planned: '%s', %llu bytes",
          s.largest_name, (unsigned long long)s.largest);
    gpu_buffer_destroy(g, a), gpu_buffer_destroy(g, b), gpu_buffer_destroy(g, c);
    gpu_memory_plan(g, 0);
}

/* A CPU device offers the host's memory; another its budget or heap. */
static void test_available(void)
{
    char source[160];
    uint64_t host = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    const char *type = g->info.type;
    g->info.type = "cpu";
    CHECK(gpu_memory_available(g, source, sizeof source) == host, "a CPU device does not offer the host's memory");
    CHECK_MSG(source, "the host's physical memory");
    g->info.type = "integrated";
    uint64_t heap = gpu_memory_available(g, source, sizeof source);
    CHECK(heap > 0 && heap <= g->info.heap_size[0] * 2, "the device offers %llu bytes, its heap is %llu",
          (unsigned long long)heap, (unsigned long long)g->info.heap_size[0]);
    CHECK_MSG(source, "device-local heap 0");
    printf("available: host %llu bytes; as a GPU, %llu bytes from %s\n", (unsigned long long)host,
           (unsigned long long)heap, source);
    g->info.type = type;
}

/* Every category holds what `was` holds. */
static void check_unchanged(const struct gpu_memory_stats *was, const char *when)
{
    struct gpu_memory_stats now;
    gpu_memory_stats(g, &now);
    for (int c = 0; c < GPU_MEM_CATEGORIES; c++)
        CHECK(now.bytes[c] == was->bytes[c], "%s: %s holds %llu bytes, %llu before", when,
              gpu_memory_category_name((enum gpu_mem_category)c), (unsigned long long)now.bytes[c],
              (unsigned long long)was->bytes[c]);
}

/* The trainer's buffers for the recipe with these overrides, planned and
 * then created, compared category by category. */
static void test_plan_equals_run(const char *arch)
{
    char err[2048], over_arch[64];
    snprintf(over_arch, sizeof over_arch, "model.arch=%s", arch);
    char *over[] = {over_arch, "batch_size=3", "model.vocab_size=300"};
    struct config cfg;
    if (config_load_string(&cfg, TEST_RECIPE, "test recipe", 3, over, err, sizeof err)) {
        CHECK(0, "%s", err);
        return;
    }
    struct dist d = {.world = 1};
    struct trainer t = {.cfg = &cfg, .dist = &d, .g = g, .backend = trainer_backend_for(&cfg)};
    struct gpu_memory_stats zero, plan, real;
    gpu_memory_stats(g, &zero);
    gpu_memory_plan(g, 1);
    trainer_buffers_create(&t);
    gpu_memory_stats(g, &plan);
    CHECK(plan.allocations == zero.allocations, "planning allocated memory");
    trainer_buffers_destroy(&t);
    gpu_memory_plan(g, 0);
    check_unchanged(&zero, "after the plan");
    t = (struct trainer){.cfg = &cfg, .dist = &d, .g = g, .backend = trainer_backend_for(&cfg)};
    trainer_buffers_create(&t);
    gpu_memory_stats(g, &real);
    size_t numel = model_numel(t.model);
    for (int c = 0; c < GPU_MEM_CATEGORIES; c++) {
        CHECK(plan.bytes[c] - zero.bytes[c] == real.bytes[c] - zero.bytes[c], "%s: %s planned %llu bytes, created %llu",
              arch, gpu_memory_category_name((enum gpu_mem_category)c),
              (unsigned long long)(plan.bytes[c] - zero.bytes[c]), (unsigned long long)(real.bytes[c] - zero.bytes[c]));
        CHECK(real.bytes[c] > 0, "%s: no %s", arch, gpu_memory_category_name((enum gpu_mem_category)c));
    }
    CHECK(real.bytes[GPU_MEM_PARAMETERS] - zero.bytes[GPU_MEM_PARAMETERS] == 4 * numel &&
              real.bytes[GPU_MEM_GRADIENTS] - zero.bytes[GPU_MEM_GRADIENTS] == 4 * numel &&
              real.bytes[GPU_MEM_OPTIMIZER] - zero.bytes[GPU_MEM_OPTIMIZER] == 8 * numel,
          "%s: %zu parameters, but parameters %llu, gradients %llu, optimizer %llu bytes", arch, numel,
          (unsigned long long)real.bytes[GPU_MEM_PARAMETERS], (unsigned long long)real.bytes[GPU_MEM_GRADIENTS],
          (unsigned long long)real.bytes[GPU_MEM_OPTIMIZER]);
    CHECK(real.allocated >= real.total, "%s: %llu bytes allocated for %llu bytes of buffers", arch,
          (unsigned long long)real.allocated, (unsigned long long)real.total);
    printf("%s: plan = run: parameters %llu, activations %llu, total %llu bytes in %u allocation(s)\n", arch,
           (unsigned long long)real.bytes[GPU_MEM_PARAMETERS], (unsigned long long)real.bytes[GPU_MEM_ACTIVATIONS],
           (unsigned long long)real.total, real.allocations);
    trainer_buffers_destroy(&t);
    check_unchanged(&zero, "after the run's buffers");
    config_free(&cfg);
}

int main(void)
{
    g = test_gpu();
    g->alloc.block_size = MiB;
    test_many_buffers(0);
    test_many_buffers(1);
    test_coalesce();
    test_matmul_offsets(GPU_KERNELS_TEXEL);
    test_matmul_offsets(GPU_KERNELS_TILED);
    test_dedicated();
    test_refusals();
    test_plan_largest();
    g->alloc.block_size = 0;
    test_available();
    test_plan_equals_run("llama");
    test_plan_equals_run("gpt2");
    gpu_destroy(g);
    return test_result("test_memory");
}
