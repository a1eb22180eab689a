/* util: messages and the one place where a fatal error ends the process.
 *
 * Every module reports an unrecoverable error through vkt_fatal() with its
 * context (which key, file:line, tensor, Vulkan call). vkt_fatal prints it
 * once, with the rank when running under MPI, and calls the exit hook the
 * dist module installs (MPI_Abort), so a failing rank never hangs the job.
 * Nothing here knows Vulkan, MPI or transformers. */
#ifndef VKTRAIN_UTIL_H
#define VKTRAIN_UTIL_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define VKT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define VKT_PRINTF(a, b)
#endif

/* Prefix for messages: "vktrain" alone, or "vktrain[rank r]" when world > 1. */
void vkt_set_rank(int rank, int world);
/* Called by vkt_fatal instead of exit(1), e.g. MPI_Abort. Must not return. */
void vkt_set_exit_hook(void (*hook)(int code));

void vkt_info(const char *fmt, ...) VKT_PRINTF(1, 2);
void vkt_warn(const char *fmt, ...) VKT_PRINTF(1, 2);
_Noreturn void vkt_fatal(const char *fmt, ...) VKT_PRINTF(1, 2);
/* Prints an error as vkt_fatal does, without ending the process: for an
 * error every rank saw, printed by one rank before all of them leave
 * together (dist_exit). */
void vkt_error_print(const char *fmt, ...) VKT_PRINTF(1, 2);

/* Allocation that never returns NULL: out of memory is fatal with a reason. */
void *vkt_malloc(size_t n, const char *what);
void *vkt_calloc(size_t count, size_t size, const char *what);
void *vkt_realloc(void *p, size_t n, const char *what);
char *vkt_strdup(const char *s);

/* A 0|1 switch from the environment (tests' overrides of a device
 * default): 1 or 0 where name is exactly "1" or "0", else fallback. */
int vkt_env_flag(const char *name, int fallback);

/* Formats a message into err (for functions that report errors to their
 * caller rather than ending the process) and returns -1. */
int vkt_error(char *err, size_t errlen, const char *fmt, ...) VKT_PRINTF(3, 4);

/* Formats a file path into out; a path longer than n is fatal. */
void vkt_path(char *out, size_t n, const char *fmt, ...) VKT_PRINTF(3, 4);

/* mkdir -p: 0, or -1 with errno set. */
int vkt_mkdir_p(const char *path);

/* splitmix64 (Steele, Lea, Flood 2014): one 64-bit state, full period, the
 * same stream on every platform. Init, data order and sampling use it. */
uint64_t vkt_splitmix64(uint64_t *state);

/* bfloat16, the upper half of an fp32: vkt_bf16_round rounds n floats to
 * nearest even as torch's .to(torch.bfloat16) does (NaN stays NaN), and
 * vkt_bf16_widen gives back each value exactly. */
void vkt_bf16_round(uint16_t *out, const float *x, size_t n);
void vkt_bf16_widen(float *out, const uint16_t *h, size_t n);

/* A set of a model's layers, one bit each (a model has at most
 * VKT_MAX_LAYERS): which layers attend globally under a sliding window,
 * which have no RoPE. All zero is the empty set, so a zeroed config
 * describes every layer alike. */
#define VKT_MAX_LAYERS 65536
struct vkt_layers {
    uint64_t bits[VKT_MAX_LAYERS / 64];
};
static inline int vkt_layers_has(const struct vkt_layers *s, uint32_t l)
{
    return l < VKT_MAX_LAYERS && (s->bits[l / 64] >> (l % 64) & 1);
}
static inline void vkt_layers_add(struct vkt_layers *s, uint32_t l)
{
    if (l < VKT_MAX_LAYERS)
        s->bits[l / 64] |= (uint64_t)1 << (l % 64);
}
/* Members below n. */
static inline uint32_t vkt_layers_count(const struct vkt_layers *s, uint32_t n)
{
    uint32_t k = 0;
    for (uint32_t l = 0; l < n; l++)
        k += (uint32_t)vkt_layers_has(s, l);
    return k;
}

/* Monotonic clock in seconds. */
double vkt_now(void);

#endif
