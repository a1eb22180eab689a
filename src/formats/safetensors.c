/* safetensors: reading and writing the safetensors format (see the header),
 * and the atomic file writer every checkpoint file goes through.
 *
 * Reading validates the whole header before touching the data: header size,
 * JSON shape, each entry's dtype/shape/data_offsets, sizes against the shape,
 * and overlaps between tensors (holes are tolerated). F16 and BF16 convert to
 * f32 exactly. Assumes a little-endian host, and says so if it is not.
 * Never prints and never exits. */
#include "vktrain/safetensors.h"

#include "vktrain/util.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static int host_is_le(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

int64_t st_numel(const struct st_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

/* Exact: every f16 is an f32. Subnormals are mant * 2^-24. */
static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
    if (e == 0) {
        float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    if (e == 31)
        bits = sign | 0x7f800000u | (m << 13);
    else
        bits = sign | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* ---- reading ---- */

enum st_dtype { DT_F32, DT_F16, DT_BF16, DT_U8, DT_OTHER };

/* Every dtype the format defines, with its size in bytes. */
static const struct {
    const char *name;
    int size;
} dtypes[] = {{"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F64", 8}, {"I64", 8},  {"U64", 8},     {"I32", 4},    {"U32", 4},
              {"I16", 2}, {"U16", 2}, {"I8", 1},   {"U8", 1},  {"BOOL", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1}};

struct entry {
    const char *name; /* points into the JSON header */
    enum st_dtype dt;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t begin, end;
};

static int entry_parse(const char *path, const char *name, json_t *v, uint64_t data_size, int u8, struct entry *e,
                       char *err, size_t errlen)
{
    if (strlen(name) >= ST_NAME_MAX)
        return vkt_error(err, errlen, "%s: tensor '%.60s...': name longer than %d bytes", path, name, ST_NAME_MAX - 1);
    if (!json_is_object(v))
        return vkt_error(err, errlen, "%s: tensor '%s': header entry is not an object", path, name);
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
           *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd))
        return vkt_error(err, errlen, "%s: tensor '%s': missing or non-string dtype", path, name);
    if (!json_is_array(js))
        return vkt_error(err, errlen, "%s: tensor '%s': missing or non-array shape", path, name);
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
        !json_is_integer(json_array_get(jo, 1)))
        return vkt_error(err, errlen, "%s: tensor '%s': data_offsets must be [begin, end] integers", path, name);

    const char *dt = json_string_value(jd);
    int esize = 0;
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(dt, dtypes[i].name)) {
            esize = dtypes[i].size;
            e->dt = i < 3 ? (enum st_dtype)i : u8 && !strcmp(dt, "U8") ? DT_U8 : DT_OTHER;
        }
    if (!esize)
        return vkt_error(err, errlen, "%s: tensor '%s': unknown dtype '%s'", path, name, dt);
    if (e->dt == DT_OTHER)
        return vkt_error(err, errlen, "%s: tensor '%s': unsupported dtype '%s' (F32, F16 and BF16 are read%s)", path,
                         name, dt, u8 ? ", and U8" : "");

    size_t nd = json_array_size(js);
    if (nd > ST_MAX_DIMS)
        return vkt_error(err, errlen, "%s: tensor '%s': %zu dims, at most %d supported", path, name, nd, ST_MAX_DIMS);
    e->name = name;
    e->ndim = (int)nd;
    uint64_t bytes = (uint64_t)esize;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(js, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return vkt_error(err, errlen, "%s: tensor '%s': shape[%zu] is not a non-negative integer", path, name, i);
        uint64_t di = (uint64_t)json_integer_value(d);
        e->shape[i] = (int64_t)di;
        if (di && bytes > UINT64_MAX / di)
            return vkt_error(err, errlen, "%s: tensor '%s': shape overflows", path, name);
        bytes *= di;
    }
    json_int_t b = json_integer_value(json_array_get(jo, 0)), en = json_integer_value(json_array_get(jo, 1));
    if (b < 0 || en < b || (uint64_t)en > data_size)
        return vkt_error(err, errlen, "%s: tensor '%s': data_offsets [%lld, %lld] out of range (data is %llu bytes)", path,
                    name, (long long)b, (long long)en, (unsigned long long)data_size);
    e->begin = (uint64_t)b;
    e->end = (uint64_t)en;
    if (e->end - e->begin != bytes)
        return vkt_error(err, errlen, "%s: tensor '%s': data_offsets span %llu bytes, shape x %s needs %llu", path, name,
                    (unsigned long long)(e->end - e->begin), dt, (unsigned long long)bytes);
    return 0;
}

static int entry_cmp(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int check_metadata(const char *path, json_t *m, char *err, size_t errlen)
{
    const char *k;
    json_t *v;
    if (!json_is_object(m))
        return vkt_error(err, errlen, "%s: __metadata__ is not an object", path);
    json_object_foreach(m, k, v)
    {
        if (!json_is_string(v))
            return vkt_error(err, errlen, "%s: __metadata__ value '%s' is not a string", path, k);
    }
    return 0;
}

static int read_tensor(FILE *f, const char *path, uint64_t data_start, const struct entry *e, struct st_tensor *t,
                       char *err, size_t errlen)
{
    snprintf(t->name, sizeof t->name, "%s", e->name);
    t->ndim = e->ndim;
    memcpy(t->shape, e->shape, sizeof t->shape);
    size_t n = (size_t)st_numel(t), bytes = (size_t)(e->end - e->begin);
    if (e->dt == DT_U8) { /* kept as bytes */
        t->bytes = vkt_malloc(n ? n : 1, "safetensors bytes");
        if (n && (fseeko(f, (off_t)(data_start + e->begin), SEEK_SET) || fread(t->bytes, 1, n, f) != n))
            return vkt_error(err, errlen, "%s: tensor '%s': short read", path, e->name);
        return 0;
    }
    t->data = vkt_malloc(n ? n * sizeof(float) : 1, "safetensors tensor");
    if (!n)
        return 0;
    void *raw = e->dt == DT_F32 ? (void *)t->data : vkt_malloc(bytes, "safetensors f16 buffer");
    int rc = 0;
    if (fseeko(f, (off_t)(data_start + e->begin), SEEK_SET) || fread(raw, 1, bytes, f) != bytes)
        rc = vkt_error(err, errlen, "%s: tensor '%s': short read", path, e->name);
    const uint8_t *p = raw;
    for (size_t i = 0; !rc && e->dt != DT_F32 && i < n; i++) {
        uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
        if (e->dt == DT_F16)
            t->data[i] = f16_to_f32(h);
        else
            vkt_bf16_widen(&t->data[i], &h, 1);
    }
    if (raw != (void *)t->data)
        free(raw);
    return rc;
}

/* Parses and validates the header; fills entries sorted by offset. */
static int header_parse(const char *path, json_t *root, uint64_t data_size, int u8, struct st_file *out,
                        struct entry **entries, int *n, char *err, size_t errlen)
{
    if (!json_is_object(root))
        return vkt_error(err, errlen, "%s: header is not a JSON object", path);
    *entries = vkt_calloc(json_object_size(root) + 1, sizeof **entries, "safetensors header");
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v)
    {
        if (!strcmp(k, "__metadata__")) {
            if (check_metadata(path, v, err, errlen))
                return -1;
            out->metadata_json = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
            continue;
        }
        if (entry_parse(path, k, v, data_size, u8, &(*entries)[*n], err, errlen))
            return -1;
        ++*n;
    }
    qsort(*entries, (size_t)*n, sizeof **entries, entry_cmp);
    uint64_t reach = 0;
    const struct entry *last = NULL;
    for (int i = 0; i < *n; i++) {
        const struct entry *e = &(*entries)[i];
        if (e->end == e->begin)
            continue;
        if (last && e->begin < reach)
            return vkt_error(err, errlen, "%s: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap", path, last->name,
                        (unsigned long long)last->begin, (unsigned long long)last->end, e->name,
                        (unsigned long long)e->begin, (unsigned long long)e->end);
        last = e;
        reach = e->end;
    }
    return 0;
}

static int read_file(const char *path, int u8, struct st_file *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!host_is_le())
        return vkt_error(err, errlen, "%s: safetensors needs a little-endian host", path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return vkt_error(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    uint8_t len8[8];
    char *hdr = NULL;
    json_t *root = NULL;
    struct entry *entries = NULL;
    int n = 0, rc = -1;
    if (fstat(fileno(f), &sb)) {
        vkt_error(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        goto done;
    }
    uint64_t fsize = (uint64_t)sb.st_size, hlen = 0;
    if (fsize < 8 || fread(len8, 1, 8, f) != 8) {
        vkt_error(err, errlen, "%s: too short for a safetensors file (%llu bytes)", path, (unsigned long long)fsize);
        goto done;
    }
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | len8[i];
    if (hlen > ST_HEADER_MAX || hlen > fsize - 8) {
        vkt_error(err, errlen, "%s: header length %llu exceeds the file (%llu bytes) or the %u-byte limit", path,
             (unsigned long long)hlen, (unsigned long long)fsize, ST_HEADER_MAX);
        goto done;
    }
    hdr = vkt_malloc(hlen + 1, "safetensors header");
    if (fread(hdr, 1, hlen, f) != hlen) {
        vkt_error(err, errlen, "%s: short read of the header", path);
        goto done;
    }
    json_error_t jerr;
    root = json_loadb(hdr, hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        vkt_error(err, errlen, "%s: header is not valid JSON: %s (at byte %d)", path, jerr.text, jerr.position);
        goto done;
    }
    if (header_parse(path, root, fsize - 8 - hlen, u8, out, &entries, &n, err, errlen))
        goto done;
    out->t = vkt_calloc((size_t)n + 1, sizeof *out->t, "safetensors tensors");
    for (out->n = 0; out->n < n; out->n++)
        if (read_tensor(f, path, 8 + hlen, &entries[out->n], &out->t[out->n], err, errlen)) {
            out->n++;
            goto done;
        }
    rc = 0;
done:
    free(entries);
    json_decref(root);
    free(hdr);
    fclose(f);
    if (rc)
        st_free(out);
    return rc;
}

int st_read(const char *path, struct st_file *out, char *err, size_t errlen)
{
    return read_file(path, 0, out, err, errlen);
}

int st_read_u8(const char *path, struct st_file *out, char *err, size_t errlen)
{
    return read_file(path, 1, out, err, errlen);
}

const struct st_tensor *st_find(const struct st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name))
            return &f->t[i];
    return NULL;
}

void st_free(struct st_file *f)
{
    for (int i = 0; i < f->n; i++) {
        free(f->t[i].data);
        free(f->t[i].bytes);
    }
    free(f->t);
    free(f->metadata_json);
    memset(f, 0, sizeof *f);
}

/* ---- writing ---- */

/* need_data: every tensor with elements must have data (no fill). */
static json_t *header_build(const char *path, const struct st_tensor *t, int n, const char *metadata_json, int bf16,
                            int need_data, char *err, size_t errlen)
{
    json_t *root = json_object();
    if (metadata_json) {
        json_error_t jerr;
        json_t *m = json_loads(metadata_json, 0, &jerr);
        if (!m || check_metadata(path, m, err, errlen)) {
            if (!m)
                vkt_error(err, errlen, "%s: metadata is not valid JSON: %s", path, jerr.text);
            json_decref(m);
            json_decref(root);
            return NULL;
        }
        json_object_set_new(root, "__metadata__", m);
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const char *name = t[i].name;
        int bad = !name[0] || !memchr(name, 0, ST_NAME_MAX) || !strcmp(name, "__metadata__") ||
                  json_object_get(root, name) || t[i].ndim < 0 || t[i].ndim > ST_MAX_DIMS;
        for (int d = 0; !bad && d < t[i].ndim; d++)
            bad = t[i].shape[d] < 0;
        if (bad || (need_data && st_numel(&t[i]) && !t[i].data)) {
            vkt_error(err, errlen, "%s: tensor '%.*s': bad or duplicate name, shape or data", path, ST_NAME_MAX - 1, name);
            json_decref(root);
            return NULL;
        }
        json_t *shape = json_array(), *e = json_object();
        for (int d = 0; d < t[i].ndim; d++)
            json_array_append_new(shape, json_integer(t[i].shape[d]));
        uint64_t bytes = (uint64_t)st_numel(&t[i]) * (bf16 ? 2 : sizeof(float));
        json_object_set_new(e, "dtype", json_string(bf16 ? "BF16" : "F32"));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets", json_pack("[II]", (json_int_t)off, (json_int_t)(off + bytes)));
        json_object_set_new(root, name, e);
        off += bytes;
    }
    return root;
}

int st_write(const char *path, const struct st_tensor *t, int n, const char *metadata_json, char *err, size_t errlen)
{
    return st_write_dtype(path, t, n, metadata_json, 0, err, errlen);
}

int st_write_dtype(const char *path, const struct st_tensor *t, int n, const char *metadata_json, int bf16, char *err,
                   size_t errlen)
{
    return st_write_fill(path, t, n, metadata_json, bf16, NULL, NULL, err, errlen);
}

void (*ckpt_write_hook)(const char *path, int chunk);

/* A file written atomically: chunks go to path.tmp, renamed at the end. */
struct atomic_file {
    const char *path;
    char *tmp;
    FILE *f;
    int ok, chunk, e;
};

static int atomic_open(struct atomic_file *a, const char *path, char *err, size_t errlen)
{
    size_t plen = strlen(path);
    *a = (struct atomic_file){.path = path, .tmp = vkt_malloc(plen + 5, "temporary path"), .ok = 1};
    memcpy(a->tmp, path, plen);
    memcpy(a->tmp + plen, ".tmp", 5);
    a->f = fopen(a->tmp, "wb");
    if (!a->f) {
        vkt_error(err, errlen, "%s: cannot create %s: %s", path, a->tmp, strerror(errno));
        free(a->tmp);
        return -1;
    }
    return 0;
}

/* Hands one chunk to the file (nothing after a failed one). */
static void atomic_chunk(struct atomic_file *a, const void *buf, size_t len)
{
    if (!a->ok)
        return;
    a->ok = !len || fwrite(buf, 1, len, a->f) == len;
    if (!a->ok)
        a->e = errno;
    if (ckpt_write_hook)
        ckpt_write_hook(a->path, a->chunk);
    a->chunk++;
}

/* Flushes, fsyncs and renames path.tmp to path, then fsyncs the directory;
 * on any failure removes path.tmp. Returns 0 or -1. */
static int atomic_finish(struct atomic_file *a, char *err, size_t errlen)
{
    int ok = a->ok && !fflush(a->f) && !fsync(fileno(a->f));
    int e = a->ok ? errno : a->e;
    if (fclose(a->f) && ok)
        ok = 0, e = errno;
    if (ok && rename(a->tmp, a->path))
        ok = 0, e = errno;
    if (!ok) {
        vkt_error(err, errlen, "%s: write failed: %s", a->path, strerror(e));
        unlink(a->tmp);
        free(a->tmp);
        return -1;
    }
    free(a->tmp);
    /* Make the rename itself durable. */
    char *dir = vkt_strdup(a->path), *slash = strrchr(dir, '/');
    if (slash)
        slash[slash == dir] = 0;
    int fd = open(slash ? dir : ".", O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
    return 0;
}

int ckpt_write_atomic(const char *path, int n, const void *const *bufs, const size_t *lens, char *err, size_t errlen)
{
    struct atomic_file a;
    if (atomic_open(&a, path, err, errlen))
        return -1;
    for (int i = 0; i < n; i++)
        atomic_chunk(&a, bufs[i], lens[i]);
    return atomic_finish(&a, err, errlen);
}

int st_write_fill(const char *path, const struct st_tensor *t, int n, const char *metadata_json, int bf16,
                  st_fill_fn fill, void *ctx, char *err, size_t errlen)
{
    if (!host_is_le())
        return vkt_error(err, errlen, "%s: safetensors needs a little-endian host", path);
    json_t *root = header_build(path, t, n, metadata_json, bf16, !fill, err, errlen);
    if (!root)
        return -1;
    char *json = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    size_t jlen = strlen(json), hlen = (jlen + 7) / 8 * 8;
    uint8_t *head = vkt_malloc(8 + hlen, "safetensors header");
    for (int i = 0; i < 8; i++)
        head[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    memcpy(head + 8, json, jlen);
    memset(head + 8 + jlen, ' ', hlen - jlen);
    free(json);
    size_t most = 1;
    for (int i = 0; fill && i < n; i++)
        most = (size_t)st_numel(&t[i]) > most ? (size_t)st_numel(&t[i]) : most;
    float *buf = fill ? vkt_malloc(most * sizeof(float), "tensor being written") : NULL;
    struct atomic_file a;
    int rc = atomic_open(&a, path, err, errlen);
    if (!rc) {
        atomic_chunk(&a, head, 8 + hlen);
        for (int i = 0; i < n; i++) {
            size_t numel = (size_t)st_numel(&t[i]);
            const float *x = t[i].data;
            if (fill && a.ok) {
                fill(ctx, i, buf);
                x = buf;
            }
            if (bf16) {
                uint16_t *h = vkt_malloc((numel ? numel : 1) * sizeof *h, "bf16 tensor");
                vkt_bf16_round(h, x, numel);
                atomic_chunk(&a, h, numel * 2);
                free(h);
            } else {
                atomic_chunk(&a, x, numel * sizeof(float));
            }
        }
        rc = atomic_finish(&a, err, errlen);
    }
    free(buf);
    free(head);
    return rc;
}
