/* util: message prefixes, fatal errors, checked allocation, the clock.
 * Owns the process-wide rank prefix and exit hook; never touches Vulkan. */
#include "vktrain/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <time.h>

static char prefix[48] = "vktrain";
static void (*exit_hook)(int code);

void vkt_set_rank(int rank, int world)
{
    if (world > 1)
        snprintf(prefix, sizeof prefix, "vktrain[rank %d]", rank);
    else
        snprintf(prefix, sizeof prefix, "vktrain");
}

void vkt_set_exit_hook(void (*hook)(int code)) { exit_hook = hook; }

static void vmessage(const char *kind, const char *fmt, va_list ap)
{
    char line[4096];
    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "%s: %s%s\n", prefix, kind, line);
    fflush(stderr);
}

void vkt_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage("", fmt, ap);
    va_end(ap);
}

void vkt_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage("warning: ", fmt, ap);
    va_end(ap);
}

void vkt_error_print(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage("error: ", fmt, ap);
    va_end(ap);
}

void vkt_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage("error: ", fmt, ap);
    va_end(ap);
    fflush(stdout);
    if (exit_hook)
        exit_hook(1);
    exit(1);
}

int vkt_error(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

void *vkt_malloc(size_t n, const char *what)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        vkt_fatal("out of host memory allocating %zu bytes for %s", n, what);
    return p;
}

void *vkt_calloc(size_t count, size_t size, const char *what)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        vkt_fatal("out of host memory allocating %zu x %zu bytes for %s", count, size, what);
    return p;
}

void *vkt_realloc(void *p, size_t n, const char *what)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        vkt_fatal("out of host memory reallocating %zu bytes for %s", n, what);
    return q;
}

char *vkt_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(vkt_malloc(n, "a string"), s, n);
}

int vkt_env_flag(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v && (!strcmp(v, "0") || !strcmp(v, "1")) ? v[0] == '1' : fallback;
}

double vkt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void vkt_path(char *out, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= n)
        vkt_fatal("a path is longer than %zu bytes: %.200s...", n, out);
}

int vkt_mkdir_p(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0777) && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0777) && errno != EEXIST)
        return -1;
    return 0;
}

void vkt_bf16_round(uint16_t *out, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        if ((u & 0x7fffffffu) > 0x7f800000u)
            out[i] = (uint16_t)((u >> 16) | 0x40);
        else
            out[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
    }
}

void vkt_bf16_widen(float *out, const uint16_t *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)h[i] << 16;
        memcpy(&out[i], &bits, 4);
    }
}

uint64_t vkt_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
