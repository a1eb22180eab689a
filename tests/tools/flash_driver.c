/* flash_driver: one forward and backward of op_flash_attention on raw
 * float32 files, for tests/test_flash_torch.py.
 *
 *   flash_driver DIR B T H KVH HD HAS_DOC
 *
 * DIR holds q.bin (B,T,H,HD), k.bin and v.bin (B,T,KVH,HD), dout.bin
 * (B,T,H,HD) as float32 and, when HAS_DOC is 1, doc.bin (B,T) int32
 * document ids. Writes out.bin (B,T,H,HD), lse.bin (B,H,T) and dq.bin,
 * dk.bin, dv.bin (gradients from zero) there. The kernel family is the
 * device's or VKTRAIN_KERNELS's. Any error is printed and exits non-zero. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vktrain/gpu.h"
#include "vktrain/ops.h"
#include "vktrain/util.h"

static struct gpu *g;
static const char *dir;

/* A device buffer of `bytes` holding DIR/name (or zeros when name is NULL). */
static struct gpu_buffer *load(const char *name, size_t bytes, const char *what)
{
    struct gpu_buffer *b = gpu_buffer_create(g, bytes, what);
    if (!name) {
        gpu_zero(g, b);
        return b;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        vkt_fatal("flash_driver: cannot open %s", path);
    void *data = vkt_malloc(bytes, path);
    if (fread(data, 1, bytes, f) != bytes || fgetc(f) != EOF)
        vkt_fatal("flash_driver: %s does not hold exactly %zu bytes", path, bytes);
    fclose(f);
    gpu_upload(g, b, 0, data, bytes);
    free(data);
    return b;
}

static void save(struct gpu_buffer *b, const char *name)
{
    size_t bytes = gpu_buffer_size(b);
    void *data = vkt_malloc(bytes, name);
    gpu_download(g, b, 0, data, bytes);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, bytes, f) != bytes || fclose(f))
        vkt_fatal("flash_driver: cannot write %s", path);
    free(data);
}

int main(int argc, char **argv)
{
    if (argc != 8)
        vkt_fatal("usage: flash_driver DIR B T H KVH HD HAS_DOC");
    dir = argv[1];
    uint32_t v[6];
    for (int i = 0; i < 6; i++) {
        char *end;
        unsigned long x = strtoul(argv[2 + i], &end, 10);
        if (*end || (i < 5 && x == 0) || x > 1u << 20)
            vkt_fatal("flash_driver: argument %d '%s' is not a valid count", 2 + i, argv[2 + i]);
        v[i] = (uint32_t)x;
    }
    struct op_attention_shape s = {.B = v[0], .T = v[1], .H = v[2], .KVH = v[3], .hd = v[4]};
    struct gpu_options opt = {.device_index = -1, .quiet = 1};
    g = gpu_create(&opt);
    size_t F = sizeof(float), rows = (size_t)s.B * s.T, nq = F * rows * s.H * s.hd, nk = F * rows * s.KVH * s.hd;
    struct gpu_buffer *q = load("q.bin", nq, "q"), *k = load("k.bin", nk, "k"), *vb = load("v.bin", nk, "v");
    struct gpu_buffer *dout = load("dout.bin", nq, "dout");
    struct gpu_buffer *doc = v[5] ? load("doc.bin", sizeof(int32_t) * rows, "doc") : NULL;
    struct gpu_buffer *out = load(NULL, nq, "out"), *lse = load(NULL, F * rows * s.H, "lse");
    struct gpu_buffer *stats = load(NULL, 2 * F * rows * s.H, "stats");
    struct gpu_buffer *dq = load(NULL, nq, "dq"), *dk = load(NULL, nk, "dk"), *dv = load(NULL, nk, "dv");
    op_flash_attention(g, &s, q, k, vb, doc, lse, out);
    op_flash_attention_backward(g, &s, q, k, vb, doc, out, lse, dout, stats, dq, dk, dv);
    save(out, "out.bin"), save(lse, "lse.bin"), save(dq, "dq.bin"), save(dk, "dk.bin"), save(dv, "dv.bin");
    struct gpu_buffer *all[] = {q, k, vb, dout, doc, out, lse, stats, dq, dk, dv};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gpu_buffer_destroy(g, all[i]);
    gpu_destroy(g);
    return 0;
}
