/* test_util: the few helpers the C tests share: CHECK, which reports the
 * failing condition with its file and line and makes the test fail, and
 * scratch files in a fresh temporary directory. */
#ifndef VKTRAIN_TEST_UTIL_H
#define VKTRAIN_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failures;

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);                                   \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
            test_failures++;                                                                                           \
        }                                                                                                              \
    } while (0)

/* A minimal valid recipe (a text dataset; data.txt need not exist for the
 * config tests). */
#define TEST_RECIPE                                                                                                    \
    "output_dir: out\n"                                                                                                \
    "model:\n"                                                                                                         \
    "  dim: 64\n"                                                                                                      \
    "  n_layers: 2\n"                                                                                                  \
    "  n_heads: 4\n"                                                                                                   \
    "  max_seq_len: 32\n"                                                                                              \
    "dataset:\n"                                                                                                       \
    "  type: text\n"                                                                                                   \
    "  path: data.txt\n"

/* err must contain want. */
#define CHECK_MSG(err, want) CHECK(strstr((err), (want)), "message '%s' lacks '%s'", (err), (want))

/* A new directory under $TMPDIR or /tmp; removed by test_cleanup. */
static char test_dir[256];

static inline const char *test_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(test_dir, sizeof test_dir, "%s/vktrain_test_XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(test_dir)) {
        perror("mkdtemp");
        exit(2);
    }
    return test_dir;
}

/* Writes n bytes (n < 0: strlen) to test_dir/name; returns the path in a
 * static buffer that the next call reuses. */
static inline const char *test_write(const char *name, const void *data, long n)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", test_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n < 0 ? strlen(data) : (size_t)n, f) != (n < 0 ? strlen(data) : (size_t)n)) {
        perror(path);
        exit(2);
    }
    fclose(f);
    return path;
}

static inline void test_cleanup(void)
{
    char cmd[300];
    if (test_dir[0]) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", test_dir);
        if (system(cmd))
            fprintf(stderr, "could not remove %s\n", test_dir);
    }
}

static inline int test_result(const char *name)
{
    test_cleanup();
    if (test_failures)
        fprintf(stderr, "%s: %d checks failed\n", name, test_failures);
    else
        printf("%s: all checks passed\n", name);
    return test_failures != 0;
}

#endif
