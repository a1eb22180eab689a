/* make_model: writes a tiny random model (model.safetensors + config.json)
 * for the script tests: `make_model DIR llama|gpt2 [SEED]`, DIR created if
 * missing. The byte vocabulary (259), dim 32, 2 layers, 4 heads (llama: 2
 * key/value heads, untied; gpt2 tied), hidden 64, max_seq_len 64, weights
 * normal(0, 0.2) so that outputs depend on the input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "vktrain/gpu.h"
#include "vktrain/model.h"

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4 || (strcmp(argv[2], "llama") && strcmp(argv[2], "gpt2"))) {
        fprintf(stderr, "usage: make_model DIR llama|gpt2 [SEED]\n");
        return 2;
    }
    int llama = !strcmp(argv[2], "llama");
    mkdir(argv[1], 0777);
    struct model_config c = {
        .arch = llama ? MODEL_LLAMA : MODEL_GPT2,
        .vocab_size = 259,
        .dim = 32,
        .n_layers = 2,
        .n_heads = 4,
        .n_kv_heads = llama ? 2 : 4,
        .hidden_dim = 64,
        .max_seq_len = 64,
        .norm_eps = 1e-5f,
        .rope_theta = 10000.0,
        .tie_embeddings = !llama,
        .init_std = 0.2f,
    };
    struct gpu_options go = {.device_index = -1, .quiet = 1};
    struct gpu *g = gpu_create(&go);
    struct model *m = model_create(g, &c, 1);
    model_init_random(m, argc == 4 ? strtoull(argv[3], NULL, 10) : 1);
    char err[4096];
    int rc = model_save(m, argv[1], NULL, err, sizeof err);
    if (rc)
        fprintf(stderr, "make_model: %s\n", err);
    model_destroy(m);
    gpu_destroy(g);
    return rc ? 1 : 0;
}
