/* data_tokens: the `tokens` dataset reader, llm.c shards. A shard is a
 * header of 256 little-endian int32 (magic, version, token count at [2],
 * the rest unused) and then count tokens: magic 20240520 version 1 holds
 * uint16 tokens (GPT-2 sized vocabularies), magic 20240801 version 7
 * uint32 ones (llm.c's Llama 3 shards). The header, the file size and
 * every token (< model.vocab_size) are checked, each error naming the file
 * and byte offset. Shards are concatenated in path order into one stream.
 * Writing shards: shard_write_*. Never builds sequences. */
#include "data_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vktrain/util.h"

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
    uint32_t magic = le32(h), version = le32(h + 4);
    int width = magic == SHARD_MAGIC_U16 ? 2 : magic == SHARD_MAGIC_U32 ? 4 : 0;
    if (!width) {
        snprintf(err, errlen, "%s: offset 0: magic %u, expected %d (uint16 tokens) or %d (uint32) (not an llm.c token shard)",
                 file, magic, SHARD_MAGIC_U16, SHARD_MAGIC_U32);
        goto out;
    }
    uint32_t want = width == 2 ? SHARD_VERSION_U16 : SHARD_VERSION_U32;
    if (version != want) {
        snprintf(err, errlen, "%s: offset 4: version %u, expected %u for magic %u (uint%d tokens)", file, version,
                 want, magic, 8 * width);
        goto out;
    }
    int64_t count = le32(h + 8);
    if (count > INT32_MAX || size != SHARD_HEADER_BYTES + width * count) {
        snprintf(err, errlen,
                 "%s: offset 8: the header says %lld tokens (%lld bytes) but the file has %lld "
                 "bytes",
                 file, (long long)count, (long long)(SHARD_HEADER_BYTES + width * count), (long long)size);
        goto out;
    }
    data_store_reserve(d, count);
    vkt_token *tok = d->tok_ids + d->n_tok;
    unsigned char *bytes = (unsigned char *)tok;
    if ((int64_t)fread(bytes, (size_t)width, (size_t)count, f) != count) {
        snprintf(err, errlen, "%s: read error", file);
        goto out;
    }
    /* widen in place, from the end (uint16 tokens fill the first half) */
    for (int64_t i = count - 1; i >= 0; i--)
        tok[i] = width == 2 ? (vkt_token)(bytes[2 * i] | bytes[2 * i + 1] << 8) : le32(bytes + 4 * i);
    for (int64_t i = 0; i < count; i++) {
        if (tok[i] >= (vkt_token)d->cfg->model.vocab_size) {
            snprintf(err, errlen, "%s: offset %lld: token %u (index %lld) is not below model.vocab_size %d", file,
                     (long long)(SHARD_HEADER_BYTES + width * i), (unsigned)tok[i], (long long)i,
                     d->cfg->model.vocab_size);
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

/* ---- writing a shard ---- */

int shard_open(struct shard_writer *w, const char *path, int width, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    w->width = width;
    w->path = vkt_strdup(path);
    size_t n = strlen(path) + 32;
    w->tmp = vkt_malloc(n, "shard path");
    snprintf(w->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    w->f = fopen(w->tmp, "wb");
    static const unsigned char zero[SHARD_HEADER_BYTES];
    if (!w->f || fwrite(zero, 1, sizeof zero, w->f) != sizeof zero) {
        snprintf(err, errlen, "%s: cannot write: %s", w->tmp, strerror(errno));
        shard_abort(w);
        return -1;
    }
    return 0;
}

int shard_write(struct shard_writer *w, const vkt_token *ids, size_t n, char *err, size_t errlen)
{
    if (w->count + (int64_t)n > INT32_MAX) {
        snprintf(err, errlen, "%s: more than 2^31 - 1 tokens, the most a shard's header can count (split the input "
                 "over several shards)", w->path);
        return -1;
    }
    unsigned char buf[4096];
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        for (; i < n && k + 4 <= sizeof buf; i++)
            for (int b = 0; b < w->width; b++)
                buf[k++] = (unsigned char)(ids[i] >> 8 * b);
        if (fwrite(buf, 1, k, w->f) != k) {
            snprintf(err, errlen, "%s: write error: %s", w->tmp, strerror(errno));
            return -1;
        }
    }
    w->count += (int64_t)n;
    return 0;
}

int shard_finish(struct shard_writer *w, char *err, size_t errlen)
{
    unsigned char h[12];
    uint32_t head[3] = {w->width == 2 ? SHARD_MAGIC_U16 : SHARD_MAGIC_U32,
                        w->width == 2 ? SHARD_VERSION_U16 : SHARD_VERSION_U32, (uint32_t)w->count};
    for (int i = 0; i < 12; i++)
        h[i] = (unsigned char)(head[i / 4] >> 8 * (i % 4));
    int bad = fseek(w->f, 0, SEEK_SET) || fwrite(h, 1, sizeof h, w->f) != sizeof h;
    bad |= fclose(w->f) != 0;
    w->f = NULL;
    if (bad || rename(w->tmp, w->path)) {
        snprintf(err, errlen, "%s: cannot write: %s", bad ? w->tmp : w->path, strerror(errno));
        shard_abort(w);
        return -1;
    }
    free(w->tmp);
    w->tmp = NULL;
    shard_abort(w);
    return 0;
}

void shard_abort(struct shard_writer *w)
{
    if (w->f)
        fclose(w->f);
    if (w->tmp)
        remove(w->tmp);
    free(w->tmp);
    free(w->path);
    memset(w, 0, sizeof *w);
}
