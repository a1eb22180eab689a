/* test_model_io: model.safetensors + config.json written by model_save
 * load back bit-exactly into a model built from that config.json (llama
 * untied, gpt2 with its transposed Conv1D weights), and loading a file
 * that does not fit the model fails with a message naming the tensor.
 * Also: a llama with every bias saved in shards (index file, no
 * model.safetensors) loads back bit-exactly; a bf16 save holds each value
 * rounded to bf16 (within 2^-8 relative, low 16 bits zero); a gpt2 whose
 * position table is longer than max_seq_len saves every row and says so
 * in n_positions. */
#include <glob.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

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

/* Saves a with opts, loads it into a model of the same config, and
 * compares every parameter: exactly, or (bf16) to bf16 rounding. */
static void save_load(struct model *a, const char *dir, const struct model_save_options *o)
{
    char err[512] = "";
    CHECK(model_save(a, dir, o, err, sizeof err) == 0, "save: %s", err);
    struct model *b = model_create(g, model_config(a), 1);
    CHECK(model_load(b, dir, err, sizeof err) == 0, "load: %s", err);
    for (int i = 0; i < model_param_count(a); i++) {
        struct model_param *p = model_param(a, i), *q = model_param(b, i);
        float *x = download_floats(g, p->w, p->numel), *y = download_floats(g, q->w, q->numel);
        int bad = 0;
        for (size_t j = 0; j < p->numel && !bad; j++) {
            uint32_t u;
            memcpy(&u, &y[j], 4);
            bad = o->bf16 ? (u & 0xffff) || fabsf(x[j] - y[j]) > ldexpf(fabsf(x[j]), -8) : x[j] != y[j];
        }
        CHECK(!bad, "%s differs after the round trip%s", p->name, o->bf16 ? " (bf16)" : "");
        free(x), free(y);
    }
    model_destroy(b);
}

static void test_shards_bf16_positions(const char *dir)
{
    struct model_config c = {MODEL_LLAMA, 259, 16, 2, 4, 2, 48, 32, 1e-5f, 10000.0, 0, 0.02f, 0, 0,
                             .qkv_bias = 1, .o_bias = 1, .mlp_bias = 1};
    struct model *a = model_create(g, &c, 1);
    model_init_random(a, 7);
    CHECK(model_param_find(a, "model.layers.1.self_attn.k_proj.bias") &&
              model_param_find(a, "model.layers.0.mlp.gate_proj.bias") &&
              model_param_find(a, "model.layers.0.self_attn.o_proj.bias"),
          "the biases are parameters");
    char path[600];
    struct model_save_options o = {.bos = 1, .eos = 2, .pad = -1, .shard_bytes = 4096};
    save_load(a, dir, &o);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    CHECK(access(path, F_OK) == 0, "sharded save: no %s", path);
    snprintf(path, sizeof path, "%s/model-*-of-*.safetensors", dir);
    glob_t gl;
    CHECK(glob(path, 0, NULL, &gl) == 0 && gl.gl_pathc > 2, "sharded save: fewer than 3 files %s", path);
    globfree(&gl);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(access(path, F_OK) != 0, "sharded save left %s", path);
    o.shard_bytes = 0, o.bf16 = 1;
    save_load(a, dir, &o);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    CHECK(access(path, F_OK) != 0, "unsharded save left %s", path);
    model_destroy(a);

    struct model_config p = {MODEL_GPT2, 259, 12, 1, 3, 3, 48, 16, 1e-5f, 0, 1, 0.02f, 0, 0, .pos_rows = 40};
    a = model_create(g, &p, 1);
    model_init_random(a, 8);
    o.bf16 = 0;
    save_load(a, dir, &o);
    char err[512];
    struct model_config rc;
    CHECK(model_config_read(dir, &rc, err, sizeof err) == 0 && rc.max_seq_len == 40, "n_positions: %s", err);
    CHECK(model_param_find(a, "wpe.weight")->shape[0] == 40, "the position table has 40 rows");
    model_destroy(a);
}

int main(void)
{
    g = test_gpu();
    const char *dir = test_tmpdir();
    struct model_config llama = {MODEL_LLAMA, 259, 16, 2, 4, 2, 48, 32, 1e-5f, 10000.0, 0, 0.02f, 0, 0, .qkv_bias = 0};
    roundtrip(&llama, dir);
    struct model_config gpt2 = {MODEL_GPT2, 259, 12, 2, 3, 3, 48, 32, 1e-5f, 0, 1, 0.02f, 0, 0, .qkv_bias = 0};
    roundtrip(&gpt2, dir);
    test_shards_bf16_positions(dir);
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
