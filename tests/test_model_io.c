/* test_model_io: model.safetensors + config.json written by model_save
 * load back bit-exactly into a model built from that config.json (llama
 * untied, gpt2 with its transposed Conv1D weights), and loading a file
 * that does not fit the model fails with a message naming the tensor. */
#include <string.h>

#include "gpu_testing.h"
#include "vktrain/model.h"
#include "vktrain/safetensors.h"

static struct gpu *g;

static void roundtrip(const struct model_config *c, const char *dir)
{
    char err[512] = "";
    struct model *a = model_create(g, c, 1);
    model_init_random(a, 5);
    CHECK(model_save(a, dir, NULL, err, sizeof err) == 0, "save: %s", err);
    struct model_config rc;
    CHECK(model_config_read(dir, &rc, err, sizeof err) == 0, "config: %s", err);
    CHECK(rc.arch == c->arch && rc.dim == c->dim && rc.n_layers == c->n_layers && rc.n_heads == c->n_heads &&
              rc.n_kv_heads == c->n_kv_heads && rc.hidden_dim == c->hidden_dim && rc.vocab_size == c->vocab_size &&
              rc.max_seq_len == c->max_seq_len && rc.tie_embeddings == c->tie_embeddings,
          "config.json does not describe the saved model");
    struct model *b = model_create(g, &rc, 1);
    CHECK(model_load(b, dir, err, sizeof err) == 0, "load: %s", err);
    for (int i = 0; i < model_param_count(a); i++) {
        struct model_param *p = model_param(a, i), *q = model_param(b, i);
        float *x = download_floats(g, p->w, p->numel), *y = download_floats(g, q->w, q->numel);
        CHECK(!strcmp(p->name, q->name) && !memcmp(x, y, p->numel * sizeof(float)), "%s differs after the round trip",
              p->name);
        free(x), free(y);
    }
    /* HF layout on disk: GPT-2's c_attn is (C, 3C). */
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    struct st_file f;
    CHECK(st_read(path, &f, err, sizeof err) == 0, "%s", err);
    const struct st_tensor *t = st_find(&f, c->arch == MODEL_GPT2 ? "h.0.attn.c_attn.weight" : "lm_head.weight");
    CHECK(t && t->shape[0] == (c->arch == MODEL_GPT2 ? (int64_t)c->dim : (int64_t)c->vocab_size),
          "the file does not hold the HF layout");
    st_free(&f);
    model_destroy(a);
    model_destroy(b);
}

int main(void)
{
    g = test_gpu();
    const char *dir = test_tmpdir();
    struct model_config llama = {MODEL_LLAMA, 259, 16, 2, 4, 2, 48, 32, 1e-5f, 10000.0, 0, 0.02f, 0, 0, .qkv_bias = 0};
    roundtrip(&llama, dir);
    struct model_config gpt2 = {MODEL_GPT2, 259, 12, 2, 3, 3, 48, 32, 1e-5f, 0, 1, 0.02f, 0, 0, .qkv_bias = 0};
    roundtrip(&gpt2, dir);

    /* dir now holds the gpt2 model: a llama cannot load it, nor a gpt2 of another width. */
    char err[512] = "";
    struct model *m = model_create(g, &llama, 1);
    CHECK(model_load(m, dir, err, sizeof err) != 0 && strstr(err, "is not a parameter") && strstr(err, "wte.weight"),
          "loading gpt2 tensors into a llama: '%s'", err);
    model_destroy(m);
    gpt2.dim = 24, gpt2.hidden_dim = 96;
    m = model_create(g, &gpt2, 1);
    CHECK(model_load(m, dir, err, sizeof err) != 0 && strstr(err, "has shape") && strstr(err, "wte.weight"),
          "loading a narrower gpt2: '%s'", err);
    model_destroy(m);
    gpu_destroy(g);
    return test_result("test_model_io");
}
