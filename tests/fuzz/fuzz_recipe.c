/* fuzz_recipe: the recipe loader (src/config) with overrides.
 *
 * Input: the YAML text up to the first NUL byte, then up to 16
 * NUL-separated `key=value` overrides. Relative paths start in the scratch
 * folder, which holds a model folder `m` (a config.json) for
 * model.init_from. Inputs naming "dev", "proc" or "sys" are skipped: a
 * tokenizer.path of /dev/zero would read forever. Promise checked beyond "errors come back": a
 * recipe that loads prints (config_print) as YAML that loads back to the
 * same recipe: the same hash, no key differing (config_diff), the same
 * text printed again. */
#include "fuzz.h"

#include "vktrain/config.h"

#define MAX_OVERRIDES 16

static const char model_json[] = "{\"model_type\": \"llama\", \"vocab_size\": 300, \"hidden_size\": 64,"
                                 " \"intermediate_size\": 160, \"num_hidden_layers\": 2,"
                                 " \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
                                 " \"max_position_embeddings\": 128}";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_setup();
    fuzz_write("m/config.json", model_json, sizeof model_json - 1);
    if (chdir(fuzz_scratch))
        fuzz_fail("cannot enter %s", fuzz_scratch);
    return 0;
}

static char *print_recipe(const struct config *cfg)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f)
        fuzz_fail("open_memstream: %s", strerror(errno));
    config_print(cfg, f);
    fclose(f);
    return text;
}

static int same(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static void check_strings(const struct config *a, const struct config *b)
{
    const char *const x[] = {a->output_dir,   a->model.init_from,   a->tokenizer.path,
                             a->dataset.path, a->dataset.separator, a->dataset.val_path};
    const char *const y[] = {b->output_dir,   b->model.init_from,   b->tokenizer.path,
                             b->dataset.path, b->dataset.separator, b->dataset.val_path};
    for (int i = 0; i < 6; i++)
        if (!same(x[i], y[i]))
            fuzz_fail("string %d reads back as '%.80s', was '%.80s'", i, y[i] ? y[i] : "(null)",
                      x[i] ? x[i] : "(null)");
    if (a->dataset.n_exclude != b->dataset.n_exclude)
        fuzz_fail("dataset.exclude reads back with %d patterns, had %d", b->dataset.n_exclude, a->dataset.n_exclude);
    for (int i = 0; i < a->dataset.n_exclude; i++)
        if (!same(a->dataset.exclude[i], b->dataset.exclude[i]))
            fuzz_fail("dataset.exclude[%d] reads back as another pattern", i);
}

static void check_round_trip(const struct config *cfg)
{
    char *text = print_recipe(cfg), err[2048], diff[4096];
    struct config again;
    if (config_load_string(&again, text, "printed.yaml", 0, NULL, err, sizeof err))
        fuzz_fail("the printed recipe does not load: %s\n%s", err, text);
    if (config_hash(&again) != config_hash(cfg))
        fuzz_fail("the printed recipe has another hash\n%s", text);
    if (config_diff(&again, text, diff, sizeof diff))
        fuzz_fail("the printed recipe differs from itself loaded back: %s", diff);
    check_strings(cfg, &again);
    char *twice = print_recipe(&again);
    if (strcmp(text, twice))
        fuzz_fail("printed twice, the recipe changes:\n%s\n---\n%s", text, twice);
    free(twice);
    free(text);
    config_free(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const skip[] = {"dev", "proc", "sys"};
    for (int i = 0; i < 3; i++)
        if (memmem(data, size, skip[i], strlen(skip[i])))
            return 0;
    char *buf = malloc(size + 1), *ov[MAX_OVERRIDES];
    memcpy(buf, data, size);
    buf[size] = 0;
    int n_ov = 0;
    for (char *p = buf + strlen(buf); p < buf + size && n_ov < MAX_OVERRIDES; p += strlen(p))
        ov[n_ov++] = ++p;
    struct config cfg;
    char err[2048] = "";
    if (config_load_string(&cfg, buf, "fuzz.yaml", n_ov, ov, err, sizeof err) == 0) {
        fuzz_check_model_sizes(&cfg);
        check_round_trip(&cfg);
        config_free(&cfg);
    } else {
        fuzz_refused("config_load_string", err);
    }
    free(buf);
    return 0;
}
