/* fuzz_hfconfig: a model's config.json (src/formats/hfconfig.c) and the
 * recipe that takes its model from it (model.init_from, src/config).
 *
 * Input: one config.json, as it is. Promises checked for a file that
 * reads: it writes back (hf_config_write) as a file that reads back to the
 * same values; and a recipe with model.init_from naming its folder loads,
 * sizing a model model_create accepts, or fails with a message. */
#include "fuzz.h"

#include "vktrain/config.h"
#include "vktrain/hfconfig.h"

static char recipe[1024];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_setup();
    char dir[512];
    snprintf(recipe, sizeof recipe,
             "output_dir: out\nmodel:\n  init_from: \"%s\"\ndataset:\n  type: text\n  path: data.txt\n",
             fuzz_path(dir, sizeof dir, "m"));
    return 0;
}

static void check_same(const struct hf_config *a, const struct hf_config *b)
{
    if (a->arch != b->arch || a->vocab_size != b->vocab_size || a->dim != b->dim || a->n_layers != b->n_layers ||
        a->n_heads != b->n_heads || a->n_kv_heads != b->n_kv_heads || a->hidden_dim != b->hidden_dim ||
        a->max_seq_len != b->max_seq_len || a->norm_eps != b->norm_eps ||
        (a->arch == HF_LLAMA && a->rope_theta != b->rope_theta) || a->tie_embeddings != b->tie_embeddings ||
        a->bos_token_id != b->bos_token_id || a->eos_token_id != b->eos_token_id || a->pad_token_id != b->pad_token_id)
        fuzz_fail("config.json reads back with other values (dim %d/%d, layers %d/%d, eps %.17g/%.17g)", a->dim, b->dim,
                  a->n_layers, b->n_layers, a->norm_eps, b->norm_eps);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("m/config.json", data, size);
    struct hf_config c, back;
    char err[2048] = "", out[512];
    if (hf_config_read(path, &c, err, sizeof err)) {
        fuzz_refused("hf_config_read", err);
        return 0;
    }
    fuzz_path(out, sizeof out, "w/config.json");
    if (hf_config_write(out, &c, err, sizeof err))
        fuzz_fail("a config.json that reads does not write back: %s", err);
    if (hf_config_read(out, &back, err, sizeof err))
        fuzz_fail("the config.json written back does not read: %s", err);
    check_same(&c, &back);

    struct config cfg;
    err[0] = 0;
    if (config_load_string(&cfg, recipe, "fuzz.yaml", 0, NULL, err, sizeof err) == 0) {
        fuzz_check_model_sizes(&cfg);
        config_free(&cfg);
    } else
        fuzz_refused("the recipe with init_from", err);
    return 0;
}
