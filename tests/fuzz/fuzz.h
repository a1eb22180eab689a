/* fuzz: what the libFuzzer targets of tests/fuzz share.
 *
 * Each fuzz_<target>.c feeds one input to one parser through its public
 * API and checks what the parser promises: an error comes back as -1 and a
 * message (never an exit: vkt_fatal ends the input as a crash here), and
 * what it accepts holds together (each target says which invariants it
 * checks). Files the parsers read are written to a scratch folder of the
 * process, removed at exit. The same sources build two ways: with
 * -fsanitize=fuzzer (VKTRAIN_FUZZ=ON, scripts/fuzz.sh) and, in the normal
 * build, with replay.c as main, which runs the kept inputs of
 * tests/fuzz/<target>/ once (ctest test_fuzz_<target>). */
#ifndef VKTRAIN_FUZZ_H
#define VKTRAIN_FUZZ_H

#define _GNU_SOURCE /* nftw, memmem, open_memstream */
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vktrain/config.h"
#include "vktrain/model.h"
#include "vktrain/util.h"

/* A target defines LLVMFuzzerTestOneInput, and LLVMFuzzerInitialize when
 * it has fixtures to make; fuzz_setup runs at its first scratch path. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise: prints it and aborts, which both drivers report. */
static inline _Noreturn void VKT_PRINTF(1, 2) fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

/* vkt_fatal's exit hook: the parsers under test promise to return their
 * errors, so reaching vkt_fatal (it has printed the message) is a finding. */
static inline _Noreturn void fuzz_on_fatal(int code)
{
    fuzz_fail("vkt_fatal was called (exit %d): a parser must return its errors", code);
}

/* An input the parser refused, with its message: printed when
 * FUZZ_VERBOSE is set (to see what the kept inputs reach); a refusal
 * without a message is a broken promise. */
static inline void fuzz_refused(const char *what, const char *err)
{
    if (!err[0])
        fuzz_fail("%s failed without a message", what);
    if (getenv("FUZZ_VERBOSE"))
        fprintf(stderr, "fuzz: %s: %s\n", what, err);
}

/* A recipe that loaded sizes a model model_create accepts: the size checks
 * hold on every path that sets a size (init_from, derived defaults). */
static inline void fuzz_check_model_sizes(const struct config *cfg)
{
    struct model_config mc;
    char err[2048];
    if (model_config_from(&cfg->model, &mc, err, sizeof err))
        fuzz_fail("a recipe that loads has a model.init_from that does not read: %s", err);
    if (model_config_check(&mc, (uint32_t)cfg->batch_size, err, sizeof err))
        fuzz_fail("a recipe that loads sizes a model model_create refuses: %s", err);
}

static char fuzz_scratch[256];

static inline int fuzz_remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static inline void fuzz_remove_scratch(void)
{
    if (fuzz_scratch[0])
        nftw(fuzz_scratch, fuzz_remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Once per process: the exit hook and the scratch folder (in $TMPDIR,
 * /dev/shm when there is no TMPDIR: every input is written to it). */
static inline void fuzz_setup(void)
{
    if (fuzz_scratch[0])
        return;
    vkt_set_exit_hook(fuzz_on_fatal);
    const char *base = getenv("TMPDIR");
    struct stat st;
    if (!base)
        base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fuzz_scratch, sizeof fuzz_scratch, "%s/vktrain_fuzz_XXXXXX", base);
    if (!mkdtemp(fuzz_scratch)) {
        perror(fuzz_scratch);
        exit(2);
    }
    atexit(fuzz_remove_scratch);
}

/* scratch/name in out (name may hold one folder level, made here); sets
 * the process up on first use. */
static inline const char *fuzz_path(char *out, size_t n, const char *name)
{
    fuzz_setup();
    snprintf(out, n, "%s/%s", fuzz_scratch, name);
    const char *slash = strchr(name, '/');
    if (slash) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%.*s", fuzz_scratch, (int)(slash - name), name);
        if (mkdir(dir, 0700) && errno != EEXIST)
            fuzz_fail("cannot make %s: %s", dir, strerror(errno));
    }
    return out;
}

/* Writes n bytes to scratch/name; returns its path (a static buffer). */
static inline const char *fuzz_write(const char *name, const void *data, size_t n)
{
    static char path[512];
    fuzz_path(path, sizeof path, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f))
        fuzz_fail("cannot write %s: %s", path, strerror(errno));
    return path;
}

#endif
