/* checkpoint_files: the size and checksum of every file of a checkpoint,
 * recorded in its train_state.json when it is written and checked when a
 * run resumes from it, so a truncated or altered file (a partial copy, a
 * disk error) is found before training goes on from it. The checksum is
 * FNV-1a over 64-bit little-endian words in four interleaved lanes (fast
 * enough to read a checkpoint back at disk speed); any change of one word
 * changes its lane, and so the sum. Owns nothing; reads files, never
 * writes them. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"
#include "vktrain/util.h"

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull
#define CHUNK ((size_t)1 << 20)

/* The checksum of a whole file and its size; -1 with errno when it cannot
 * be read. */
static int file_sum(const char *path, uint64_t *sum, uint64_t *bytes)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    uint64_t lane[4] = {FNV_OFFSET, FNV_OFFSET ^ 1, FNV_OFFSET ^ 2, FNV_OFFSET ^ 3};
    unsigned char *buf = vkt_malloc(CHUNK, "checksum buffer");
    size_t k;
    *bytes = 0;
    while ((k = fread(buf, 1, CHUNK, f)) > 0) {
        size_t i = 0;
        for (; i + 32 <= k; i += 32)
            for (int l = 0; l < 4; l++) {
                uint64_t w;
                memcpy(&w, buf + i + 8 * l, 8); /* host order: checkpoints are read where written */
                lane[l] = (lane[l] ^ w) * FNV_PRIME;
            }
        for (; i < k; i++) /* the tail of the file (chunks are multiples of 32) */
            lane[0] = (lane[0] ^ buf[i]) * FNV_PRIME;
        *bytes += k;
    }
    int failed = ferror(f);
    free(buf);
    fclose(f);
    if (failed)
        return -1;
    uint64_t h = FNV_OFFSET;
    for (int l = 0; l < 4; l++)
        h = (h ^ lane[l]) * FNV_PRIME;
    *sum = (h ^ *bytes) * FNV_PRIME;
    return 0;
}

json_t *checkpoint_files_describe(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        vkt_fatal("cannot list %s: %s", dir, strerror(errno));
    json_t *files = json_object();
    struct dirent *e;
    char path[4096], hex[24];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "train_state.json"))
            continue;
        uint64_t sum, bytes;
        vkt_path(path, sizeof path, "%s/%s", dir, e->d_name);
        if (file_sum(path, &sum, &bytes))
            vkt_fatal("cannot read back %s: %s", path, strerror(errno));
        snprintf(hex, sizeof hex, "%016" PRIx64, sum);
        json_object_set_new(files, e->d_name, json_pack("{s:I, s:s}", "bytes", (json_int_t)bytes, "fnv", hex));
    }
    closedir(d);
    return files;
}

int checkpoint_files_verify(const char *dir, const json_t *files, char *err, size_t n)
{
    const char *name;
    json_t *v;
    char path[4096], hex[24];
    json_object_foreach((json_t *)files, name, v) {
        json_int_t want = json_integer_value(json_object_get(v, "bytes"));
        const char *want_sum = json_string_value(json_object_get(v, "fnv"));
        uint64_t sum, bytes;
        vkt_path(path, sizeof path, "%s/%s", dir, name);
        if (file_sum(path, &sum, &bytes))
            return vkt_error(err, n, "%s: %s", path, strerror(errno));
        if ((json_int_t)bytes != want)
            return vkt_error(err, n, "%s has %" PRIu64 " bytes, train_state.json says %lld (a partial file)", path,
                             bytes, (long long)want);
        snprintf(hex, sizeof hex, "%016" PRIx64, sum);
        if (!want_sum || strcmp(hex, want_sum))
            return vkt_error(err, n, "%s: its checksum is %s, train_state.json says %s (the file was altered)",
                             path, hex, want_sum ? want_sum : "nothing");
    }
    return 0;
}
