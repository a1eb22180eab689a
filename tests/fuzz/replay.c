/* replay: main() for a fuzz target in the normal build. Runs every file
 * named on the command line, and every file in every folder named (in name
 * order, hidden files skipped), once through LLVMFuzzerTestOneInput, as
 * libFuzzer does with -runs=0. A broken promise aborts (fuzz_fail), which
 * fails the ctest. Prints how many inputs ran. */
#include "fuzz.h"

#include <dirent.h>

static int count;

static void run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
        exit(2);
    }
    size_t cap = 1 << 16, n = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap)
            buf = realloc(buf, cap *= 2);
    fclose(f);
    if (!buf) {
        fprintf(stderr, "replay: out of memory reading %s\n", path);
        exit(2);
    }
    /* libFuzzer hands the target a buffer of exactly n bytes; so does this. */
    uint8_t *exact = malloc(n ? n : 1);
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    count++;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        run_file(dir);
        return;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            names = realloc(names, (n + 1) * sizeof *names);
            names[n++] = strdup(e->d_name);
        }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        run_file(path);
        free(names[i]);
    }
    free(names);
}

int main(int argc, char **argv)
{
    /* Absolute paths: a target may change its working directory. */
    for (int i = 1; i < argc; i++) {
        char *abs = realpath(argv[i], NULL);
        if (!abs) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 2;
        }
        argv[i] = abs;
    }
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++)
        run_dir(argv[i]);
    printf("replay: %d inputs, none broke a promise\n", count);
    return 0;
}
