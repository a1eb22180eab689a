/* bench_attention: milliseconds of the attention forward and backward,
 * present kernels (op_attention, (T,T) probabilities) against flash
 * attention (op_flash_attention, per-row log-sum-exp), and flash attention
 * in the reproducible mode (gpu_set_reproducible: exact per row, own
 * exp and log) against the default one, at T = 64 .. 2048.
 * usage: bench_attention [B H KVH hd [reps [doc]]]   (default 1 12 12 64, 5 reps)
 * doc > 0: document ids as training passes them (a packed batch), a new
 * document every doc tokens; 0 (the default): none.
 * usage: bench_attention window T W [B H KVH hd [reps]]   (default 4096 512, 1 4 4 64, 3 reps)
 * a sliding window of W keys against the whole causal row at T, in the
 * default and the reproducible modes: the ratio is what the window saves
 * (ideally about T / (2·W) for the O(T·W) walk against O(T²/2)).
 * VKTRAIN_KERNELS=texel|tiled picks the family. Each figure is the best of
 * reps single calls, from timestamp queries (wall clock when the queue has
 * none); a first untimed round compiles the shaders. The present kernels are skipped where their (T,T)
 * buffers would pass the storage buffer range, or where their loops would pass the device's
 * loop limit (they stop with an error there). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vktrain/gpu.h"
#include "vktrain/ops.h"
#include "vktrain/util.h"

#include "bench_util.h"

struct bufs {
    struct gpu_buffer *q, *k, *v, *doc, *out, *dout, *dq, *dk, *dv, *probs, *dscores, *lse, *stats;
};

/* Milliseconds of one call of the forward (backward = 0) or backward;
 * flash 2: in the reproducible mode. */
static double timed(struct gpu *g, const struct op_attention_shape *s, struct bufs *b, int flash, int backward)
{
    gpu_set_reproducible(g, flash == 2);
    struct bench_clock c = bench_begin(g);
    if (flash && !backward)
        op_flash_attention(g, s, b->q, b->k, b->v, b->doc, b->lse, b->out);
    else if (flash)
        op_flash_attention_backward(g, s, b->q, b->k, b->v, b->doc, b->out, b->lse, b->dout, b->stats, b->dq, b->dk,
                                    b->dv);
    else if (!backward)
        op_attention(g, s, b->q, b->k, b->v, b->doc, b->probs, b->out);
    else
        op_attention_backward(g, s, b->q, b->k, b->v, b->probs, b->dout, b->dscores, b->dq, b->dk, b->dv);
    return bench_end(g, c);
}

static struct gpu_buffer *filled(struct gpu *g, size_t n, const char *name)
{
    return bench_filled(g, n, name, 1.0f);
}

/* The window mode: flash attention over T rows with the whole causal row
 * and with a window of W keys, each mode's forward + backward. */
static int bench_window(int argc, char **argv)
{
    uint32_t T = argc >= 3 ? (uint32_t)atoi(argv[2]) : 4096, W = argc >= 4 ? (uint32_t)atoi(argv[3]) : 512;
    uint32_t B = 1, H = 4, KVH = 4, hd = 64;
    int reps = argc >= 9 ? atoi(argv[8]) : 3;
    if (argc >= 8)
        B = (uint32_t)atoi(argv[4]), H = (uint32_t)atoi(argv[5]), KVH = (uint32_t)atoi(argv[6]),
        hd = (uint32_t)atoi(argv[7]);
    if (!T || !W || !B || !H || !KVH || !hd || reps < 1 || H % KVH) {
        fprintf(stderr, "usage: bench_attention window T W [B H KVH hd [reps]]\n");
        return 2;
    }
    struct gpu_options opt = {.device_index = -1, .quiet = 1};
    struct gpu *g = gpu_create(&opt);
    size_t rows = (size_t)B * T, nq = rows * H * hd, nk = rows * KVH * hd;
    struct bufs b = {filled(g, nq, "q"),    filled(g, nk, "k"),  filled(g, nk, "v"),  NULL,
                     filled(g, nq, "out"),  filled(g, nq, "dout"), filled(g, nq, "dq"), filled(g, nk, "dk"),
                     filled(g, nk, "dv"),   NULL,                NULL,                filled(g, 2 * rows * H, "lse"),
                     filled(g, 2 * rows * H, "stats")};
    printf("device: %s (%s kernels), B=%u T=%u H=%u KVH=%u hd=%u, window %u, best of %d, ms per call\n",
           gpu_info(g)->name, gpu_kernel_class(g) == GPU_KERNELS_TEXEL ? "texel" : "tiled", B, T, H, KVH, hd, W, reps);
    printf("%-13s %12s %12s %12s %12s %9s\n", "mode", "causal fwd", "causal bwd", "window fwd", "window bwd",
           "speedup");
    for (int mode = 1; mode <= 2; mode++) {
        double best[4] = {1e30, 1e30, 1e30, 1e30};
        for (int r = -1; r < reps; r++)
            for (int i = 0; i < 4; i++) {
                struct op_attention_shape s = {.B = B, .T = T, .H = H, .KVH = KVH, .hd = hd, .window = i / 2 ? W : 0};
                double ms = timed(g, &s, &b, mode, i % 2);
                if (r >= 0 && ms < best[i])
                    best[i] = ms;
            }
        printf("%-13s %12.2f %12.2f %12.2f %12.2f %8.2fx\n", mode == 1 ? "default" : "reproducible", best[0], best[1],
               best[2], best[3], (best[0] + best[1]) / (best[2] + best[3]));
    }
    struct gpu_buffer **all = (struct gpu_buffer **)&b;
    for (size_t i = 0; i < sizeof b / sizeof *all; i++)
        gpu_buffer_destroy(g, all[i]);
    gpu_destroy(g);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "window"))
        return bench_window(argc, argv);
    uint32_t B = 1, H = 12, KVH = 12, hd = 64;
    int reps = 5;
    if (argc >= 5)
        B = (uint32_t)atoi(argv[1]), H = (uint32_t)atoi(argv[2]), KVH = (uint32_t)atoi(argv[3]),
        hd = (uint32_t)atoi(argv[4]);
    if (argc >= 6)
        reps = atoi(argv[5]);
    uint32_t doc_len = argc >= 7 ? (uint32_t)atoi(argv[6]) : 0;
    struct gpu_options opt = {.device_index = -1, .quiet = 1};
    struct gpu *g = gpu_create(&opt);
    const char *family = gpu_kernel_class(g) == GPU_KERNELS_TEXEL ? "texel" : "tiled";
    printf("device: %s (%s kernels), B=%u H=%u KVH=%u hd=%u, best of %d, ms per call", gpu_info(g)->name, family, B, H,
           KVH, hd, reps);
    if (doc_len)
        printf(", a document every %u tokens", doc_len);
    printf("\n");
    printf("%6s %12s %12s %12s %12s %8s %12s %12s %8s\n", "T", "present fwd", "present bwd", "flash fwd", "flash bwd",
           "speedup", "repro fwd", "repro bwd", "cost");
    for (uint32_t T = 64; T <= 2048; T *= 2) {
        size_t rows = (size_t)B * T, nq = rows * H * hd, nk = rows * KVH * hd, np = (size_t)B * H * T * T;
        uint32_t limit = gpu_info(g)->max_loop_iterations;
        int present = np * sizeof(float) <= gpu_info(g)->max_storage_buffer_range &&
                      (gpu_kernel_class(g) == GPU_KERNELS_TEXEL ? hd <= 64 : !limit || (size_t)T * (2 * hd + 2) *
                                                                                     (H / KVH) <= limit);
        struct op_attention_shape s = {.B = B, .T = T, .H = H, .KVH = KVH, .hd = hd};
        /* lse: room for the reproducible walk cut into parts (op_flash_attention_lse_floats) */
        struct bufs b = {filled(g, nq, "q"),
                         filled(g, nk, "k"),
                         filled(g, nk, "v"),
                         NULL,
                         filled(g, nq, "out"),
                         filled(g, nq, "dout"),
                         filled(g, nq, "dq"),
                         filled(g, nk, "dk"),
                         filled(g, nk, "dv"),
                         NULL,
                         NULL,
                         filled(g, 2 * rows * H, "lse"),
                         filled(g, 2 * rows * H, "stats")};
        if (doc_len) {
            int32_t *ids = vkt_malloc(rows * sizeof *ids, "doc ids");
            for (size_t i = 0; i < rows; i++)
                ids[i] = (int32_t)(i % T / doc_len);
            b.doc = gpu_buffer_create(g, rows * sizeof *ids, "doc");
            gpu_upload(g, b.doc, 0, ids, rows * sizeof *ids);
            free(ids);
        }
        if (present) {
            b.probs = gpu_buffer_create(g, np * sizeof(float), "probs");
            b.dscores = gpu_buffer_create(g, np * sizeof(float), "dscores");
        }
        /* The best of reps rounds, the kernels interleaved in each round so
         * that load from other processes touches them alike. */
        double best[6] = {1e30, 1e30, 1e30, 1e30, 1e30, 1e30};
        for (int r = -1; r < reps; r++)
            for (int i = present ? 0 : 2; i < 6; i++) {
                double ms = timed(g, &s, &b, i / 2, i % 2);
                if (r >= 0 && ms < best[i])
                    best[i] = ms;
            }
        double pf = best[0], pb = best[1], ff = best[2], fb = best[3], rf = best[4], rb = best[5];
        if (present)
            printf("%6u %12.2f %12.2f %12.2f %12.2f %7.2fx", T, pf, pb, ff, fb, (pf + pb) / (ff + fb));
        else
            printf("%6u %12s %12s %12.2f %12.2f %8s", T, "-", "-", ff, fb, "-");
        printf(" %12.2f %12.2f %7.2fx\n", rf, rb, (rf + rb) / (ff + fb));
        struct gpu_buffer **all = (struct gpu_buffer **)&b;
        for (size_t i = 0; i < sizeof b / sizeof *all; i++)
            gpu_buffer_destroy(g, all[i]);
    }
    gpu_destroy(g);
    return 0;
}
