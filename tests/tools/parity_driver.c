/* parity_driver: one forward and backward of a Hugging Face model through
 * the shaders, dumped as safetensors for tests/test_parity_torch.py.
 *
 *   parity_driver MODEL_DIR BATCH.safetensors OUT.safetensors
 *
 * MODEL_DIR holds config.json + model.safetensors. BATCH holds "tokens",
 * "labels", "positions" and optionally "doc_ids", each [B, T] F32 holding
 * exact integers (-100 in labels for positions outside the loss). OUT gets
 * "loss" [1] (loss sum / N), "count" [1] (N, the valid labels the device
 * counted), "logits" [B*T, V] and "grad.<HF name>" for every parameter in
 * the Hugging Face layout (GPT-2 Conv1D gradients transposed back to
 * (in, out)). The dlogits scale is 1/N with N counted on the host, as the
 * training step does. Any error is printed and exits non-zero. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vktrain/gpu.h"
#include "vktrain/model.h"
#include "vktrain/safetensors.h"
#include "vktrain/util.h"

/* Batch tensor `name` as int32, checked to be [B, T] of exact integers. */
static int32_t *batch_ints(const struct st_file *f, const char *path, const char *name, int required, uint32_t *B,
                           uint32_t *T)
{
    const struct st_tensor *t = st_find(f, name);
    if (!t) {
        if (required)
            vkt_fatal("%s: tensor '%s' is missing", path, name);
        return NULL;
    }
    if (t->ndim != 2 || t->shape[0] < 1 || t->shape[1] < 1)
        vkt_fatal("%s: tensor '%s' must be [B, T]", path, name);
    if (*B == 0)
        *B = (uint32_t)t->shape[0], *T = (uint32_t)t->shape[1];
    if (t->shape[0] != *B || t->shape[1] != *T)
        vkt_fatal("%s: tensor '%s' is [%lld, %lld], tokens are [%u, %u]", path, name, (long long)t->shape[0],
                  (long long)t->shape[1], *B, *T);
    size_t n = (size_t)*B * *T;
    int32_t *out = vkt_malloc(n * sizeof *out, name);
    for (size_t i = 0; i < n; i++) {
        float v = t->data[i];
        if (v != floorf(v) || fabsf(v) > 16777216.0f)
            vkt_fatal("%s: tensor '%s' element %zu = %g is not an exact integer", path, name, i, (double)v);
        out[i] = (int32_t)v;
    }
    return out;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: parity_driver MODEL_DIR BATCH.safetensors OUT.safetensors\n");
        return 2;
    }
    const char *dir = argv[1], *batch_path = argv[2], *out_path = argv[3];
    char err[1024];

    struct model_config c;
    if (model_config_read(dir, &c, err, sizeof err))
        vkt_fatal("%s", err);
    struct st_file bf;
    if (st_read(batch_path, &bf, err, sizeof err))
        vkt_fatal("%s", err);
    uint32_t B = 0, T = 0;
    int32_t *tokens = batch_ints(&bf, batch_path, "tokens", 1, &B, &T);
    int32_t *labels = batch_ints(&bf, batch_path, "labels", 1, &B, &T);
    int32_t *positions = batch_ints(&bf, batch_path, "positions", 1, &B, &T);
    int32_t *doc_ids = batch_ints(&bf, batch_path, "doc_ids", 0, &B, &T);
    st_free(&bf);
    size_t rows = (size_t)B * T;
    if (T > c.max_seq_len)
        vkt_fatal("%s: T = %u exceeds max_seq_len %u", batch_path, T, c.max_seq_len);
    uint32_t N = 0;
    for (size_t i = 0; i < rows; i++) {
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= c.vocab_size)
            vkt_fatal("%s: token %d at %zu is outside the vocabulary (%u)", batch_path, tokens[i], i, c.vocab_size);
        if (positions[i] < 0 || (uint32_t)positions[i] >= c.max_seq_len)
            vkt_fatal("%s: position %d at %zu is outside [0, %u)", batch_path, positions[i], i, c.max_seq_len);
        if (labels[i] != -100 && (labels[i] < 0 || (uint32_t)labels[i] >= c.vocab_size))
            vkt_fatal("%s: label %d at %zu is outside the vocabulary (%u)", batch_path, labels[i], i, c.vocab_size);
        N += labels[i] != -100;
    }
    if (N == 0)
        vkt_fatal("%s: every label is -100", batch_path);

    struct gpu_options opt = {.device_index = -1, .quiet = 1};
    struct gpu *g = gpu_create(&opt);
    struct model *m = model_create(g, &c, B);
    if (model_load(m, dir, err, sizeof err))
        vkt_fatal("%s", err);
    model_keep_logits(m, 1);
    model_zero_grad(m);
    model_loss_reset(m);
    struct model_batch b = {
        .B = B, .T = T, .tokens = tokens, .labels = labels, .positions = positions, .doc_ids = doc_ids};
    model_forward(m, &b, 1.0f / (float)N);
    model_backward(m);
    double loss_sum, count;
    model_read_loss(m, &loss_sum, &count);

    int np = model_param_count(m);
    struct st_tensor *t = vkt_calloc((size_t)np + 3, sizeof *t, "output tensors");
    snprintf(t[0].name, sizeof t[0].name, "loss");
    t[0].ndim = 1, t[0].shape[0] = 1;
    t[0].data = vkt_malloc(sizeof(float), "loss");
    t[0].data[0] = (float)(loss_sum / N);
    snprintf(t[1].name, sizeof t[1].name, "count");
    t[1].ndim = 1, t[1].shape[0] = 1;
    t[1].data = vkt_malloc(sizeof(float), "count");
    t[1].data[0] = (float)count;
    snprintf(t[2].name, sizeof t[2].name, "logits");
    t[2].ndim = 2, t[2].shape[0] = (int64_t)rows, t[2].shape[1] = c.vocab_size;
    t[2].data = vkt_malloc(rows * c.vocab_size * sizeof(float), "logits");
    model_read_logits(m, t[2].data);
    for (int i = 0; i < np; i++) {
        struct model_param *p = model_param(m, i);
        struct st_tensor *o = &t[3 + i];
        if (snprintf(o->name, sizeof o->name, "grad.%s", p->name) >= (int)sizeof o->name)
            vkt_fatal("parameter name %s is too long for the output", p->name);
        o->ndim = p->ndim;
        float *host = vkt_malloc(p->numel * sizeof(float), p->name);
        gpu_download(g, p->grad, 0, host, p->numel * sizeof(float));
        if (p->hf_transposed) {
            /* internal (out, in) -> HF Conv1D (in, out) */
            uint32_t rows_o = p->shape[0], cols_i = p->shape[1];
            o->shape[0] = cols_i, o->shape[1] = rows_o;
            o->data = vkt_malloc(p->numel * sizeof(float), p->name);
            for (uint32_t r = 0; r < rows_o; r++)
                for (uint32_t k = 0; k < cols_i; k++)
                    o->data[(size_t)k * rows_o + r] = host[(size_t)r * cols_i + k];
            free(host);
        } else {
            o->shape[0] = p->shape[0], o->shape[1] = p->shape[1];
            o->data = host;
        }
    }
    int rc = st_write(out_path, t, np + 3, NULL, err, sizeof err);
    for (int i = 0; i < np + 3; i++)
        free(t[i].data);
    free(t);
    if (rc)
        vkt_fatal("%s", err);
    printf("parity_driver: B=%u T=%u N=%u device count=%g loss=%.8f\n", B, T, N, count, loss_sum / N);
    model_destroy(m);
    gpu_destroy(g);
    free(tokens);
    free(labels);
    free(positions);
    free(doc_ids);
    return 0;
}
