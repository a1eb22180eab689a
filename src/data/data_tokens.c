/* data_tokens: the `tokens` dataset reader, llm.c shards. A shard is a
 * header of 256 little-endian int32 (magic 20240520, version 1, token count
 * at [2], the rest unused) and then count uint16 tokens. The header, the
 * file size and every token (< model.vocab_size) are checked, each error
 * naming the file and byte offset. Shards are concatenated in path order
 * into one stream. Never builds sequences. */
#include "data_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_BYTES (256 * 4)

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int read_shard(struct data *d, const char *file, struct data_docs *docs, char *err, size_t errlen)
{
    FILE *f = fopen(file, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st)) {
        snprintf(err, errlen, "%s: cannot open: %s", file, strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    unsigned char h[SHARD_HEADER_BYTES];
    int rc = -1;
    int64_t size = (int64_t)st.st_size;
    if (size < SHARD_HEADER_BYTES || fread(h, 1, sizeof h, f) != sizeof h) {
        snprintf(err, errlen, "%s: %lld bytes, too short for the %d-byte shard header", file, (long long)size,
                 SHARD_HEADER_BYTES);
        goto out;
    }
    if (le32(h) != SHARD_MAGIC) {
        snprintf(err, errlen, "%s: offset 0: magic %u, expected %d (not an llm.c token shard)", file, le32(h),
                 SHARD_MAGIC);
        goto out;
    }
    if (le32(h + 4) != SHARD_VERSION) {
        snprintf(err, errlen, "%s: offset 4: version %u, expected %d (uint16 tokens)", file, le32(h + 4),
                 SHARD_VERSION);
        goto out;
    }
    int64_t count = le32(h + 8);
    if (size != SHARD_HEADER_BYTES + 2 * count) {
        snprintf(err, errlen,
                 "%s: offset 8: the header says %lld tokens (%lld bytes) but the file has %lld "
                 "bytes",
                 file, (long long)count, (long long)(SHARD_HEADER_BYTES + 2 * count), (long long)size);
        goto out;
    }
    data_store_reserve(d, count);
    vkt_token *tok = d->tok_ids + d->n_tok;
    unsigned char *bytes = (unsigned char *)tok;
    if ((int64_t)fread(tok, 2, (size_t)count, f) != count) {
        snprintf(err, errlen, "%s: read error", file);
        goto out;
    }
    for (int64_t i = 0; i < count; i++) {
        tok[i] = (vkt_token)(bytes[2 * i] | bytes[2 * i + 1] << 8);
        if (tok[i] >= d->cfg->model.vocab_size) {
            snprintf(err, errlen, "%s: offset %lld: token %u (index %lld) is not below model.vocab_size %d", file,
                     (long long)(SHARD_HEADER_BYTES + 2 * i), (unsigned)tok[i], (long long)i, d->cfg->model.vocab_size);
            goto out;
        }
    }
    if (count)
        data_docs_push(docs, d->n_tok, count);
    d->n_tok += count;
    d->stats.n_docs++;
    d->stats.n_bytes += size;
    d->stats.n_files++;
    rc = 0;
out:
    fclose(f);
    return rc;
}

int data_read_tokens(struct data *d, const char *path, struct data_docs *docs, char *err, size_t errlen)
{
    char **files;
    int n_files;
    if (data_list_files(d, path, &files, &n_files, err, errlen))
        return -1;
    int rc = 0;
    for (int i = 0; i < n_files && rc == 0; i++)
        rc = read_shard(d, files[i], docs, err, errlen);
    data_free_files(files, n_files);
    return rc;
}
