/* fuzz_safetensors: the safetensors reader (src/formats/safetensors.c).
 *
 * Input: one .safetensors file, as it is. Promises checked for a file that
 * reads: every tensor's shape is non-negative and its data readable (the
 * sanitizer watches every float), and it writes back (st_write; the
 * reader accepts an empty tensor name the writer refuses, so such files
 * stop here) as a file that reads back to the same tensors, bit for bit,
 * and the same metadata. */
#include "fuzz.h"

#include "vktrain/safetensors.h"

volatile uint32_t fuzz_touched; /* the data's bits, summed: every float is read */

static void check_same(const struct st_file *a, const struct st_file *b)
{
    if (a->n != b->n)
        fuzz_fail("%d tensors written, %d read back", a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        const struct st_tensor *x = &a->t[i], *y = st_find(b, x->name);
        if (!y || x->ndim != y->ndim || memcmp(x->shape, y->shape, sizeof x->shape))
            fuzz_fail("tensor '%s' reads back missing or with another shape", x->name);
        if (memcmp(x->data, y->data, (size_t)st_numel(x) * sizeof(float)))
            fuzz_fail("tensor '%s' reads back with other values", x->name);
    }
    if (!a->metadata_json != !b->metadata_json || (a->metadata_json && strcmp(a->metadata_json, b->metadata_json)))
        fuzz_fail("the metadata reads back as %s, written %s", b->metadata_json ? b->metadata_json : "none",
                  a->metadata_json ? a->metadata_json : "none");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("in.safetensors", data, size);
    struct st_file f, back;
    char err[1024] = "", out[512];
    if (st_read(path, &f, err, sizeof err)) {
        fuzz_refused("st_read", err);
        return 0;
    }
    int unnamed = 0;
    uint32_t sum = 0;
    for (int i = 0; i < f.n; i++) {
        const struct st_tensor *t = &f.t[i];
        int64_t n = st_numel(t);
        if (t->ndim < 0 || t->ndim > ST_MAX_DIMS || n < 0)
            fuzz_fail("tensor '%s': %d dims, %lld elements", t->name, t->ndim, (long long)n);
        for (int64_t j = 0; j < n; j++) {
            uint32_t u;
            memcpy(&u, &t->data[j], 4);
            sum += u;
        }
        unnamed |= !t->name[0];
    }
    fuzz_touched = sum;
    fuzz_path(out, sizeof out, "out.safetensors");
    if (!unnamed) {
        if (st_write(out, f.t, f.n, f.metadata_json, err, sizeof err))
            fuzz_fail("a file that reads does not write back: %s", err);
        if (st_read(out, &back, err, sizeof err))
            fuzz_fail("the file written back does not read: %s", err);
        check_same(&f, &back);
        st_free(&back);
    }
    st_free(&f);
    return 0;
}
