/* test_config: recipe defaults, every class of recipe error with its
 * message, overrides, init_from, printing and hashing. */
#include <string.h>
#include <sys/stat.h>

#include "test_util.h"

#include "vktrain/config.h"

static char err[2048];
#define CONFIG_LONG 3073 /* one byte over the longest path a recipe may give */

static int load(struct config *c, const char *text, int n, char *const *ov)
{
    err[0] = 0;
    return config_load_string(c, text, "r.yaml", n, ov, err, sizeof err);
}

/* The recipe must fail with a message containing want. */
static void expect_error(const char *text, int n, char *const *ov, const char *want)
{
    struct config c;
    int rc = load(&c, text, n, ov);
    CHECK(rc == -1, "accepted a bad recipe, wanted '%s'", want);
    if (rc == 0)
        config_free(&c);
    else
        CHECK_MSG(err, want);
}

static void test_defaults(void)
{
    struct config c;
    CHECK(load(&c, TEST_RECIPE, 0, NULL) == 0, "%s", err);
    CHECK(c.seed == 1234, "seed %lld", (long long)c.seed);
    CHECK(c.model.arch == ARCH_LLAMA && c.model.n_kv_heads == 4, "n_kv_heads %d", c.model.n_kv_heads);
    CHECK(c.model.hidden_dim == 192, "llama hidden_dim of dim 64: %d (8/3*64 -> 192)", c.model.hidden_dim);
    CHECK(c.model.vocab_size == 259 && !c.model.tie_embeddings, "vocab %d", c.model.vocab_size);
    CHECK(c.model.norm_eps == 1e-5 && c.model.rope_theta == 10000 && c.model.init_std == 0.02, "norms");
    CHECK(c.dataset.packed && c.dataset.shuffle && !c.dataset.train_on_input, "dataset flags");
    CHECK(c.batch_size == 8 && c.gradient_accumulation_steps == 1 && c.epochs == 1 && c.max_steps == 0, "batch keys");
    CHECK(c.optimizer.lr == 3e-4 && c.optimizer.betas[0] == 0.9 && c.optimizer.betas[1] == 0.95 &&
              c.optimizer.eps == 1e-8 && c.optimizer.weight_decay == 0,
          "optimizer");
    CHECK(c.lr_scheduler.type == LR_COSINE && c.lr_scheduler.warmup_steps == 0, "scheduler");
    CHECK(c.clip_grad_norm == 0 && c.log_every_n_steps == 1 && c.eval_every_n_steps == 0, "intervals");
    CHECK(c.device_index == -1 && c.dist.bucket_mb == 25 && c.dist.check_every == 100, "device, dist");
    config_free(&c);

    char *gpt2[] = {"model.arch=gpt2", "dataset.type=sft_jsonl"};
    CHECK(load(&c, TEST_RECIPE, 2, gpt2) == 0, "%s", err);
    CHECK(c.model.hidden_dim == 256 && c.model.tie_embeddings, "gpt2: hidden %d", c.model.hidden_dim);
    CHECK(!c.dataset.packed, "sft_jsonl is not packed by default");
    config_free(&c);

    char *dim[] = {"model.dim=128"};
    CHECK(load(&c, TEST_RECIPE, 1, dim) == 0 && c.model.hidden_dim == 352, "dim 128: hidden %d", c.model.hidden_dim);
    config_free(&c);
}

static void test_errors(void)
{
    expect_error(TEST_RECIPE "optimizer:\n  lrr: 0.1\n", 0, NULL,
                 "r.yaml:11:3: unknown key 'optimizer.lrr' (did you mean 'optimizer.lr'?)");
    expect_error(TEST_RECIPE "lr: 0.1\n", 0, NULL, "r.yaml:10:1: unknown key 'lr' (did you mean 'optimizer.lr'?)");
    expect_error(TEST_RECIPE "optimiser:\n  lr: 0.1\n", 0, NULL, "(did you mean 'optimizer'?)");
    expect_error(TEST_RECIPE "zzzzzzzzzzzz: 1\n", 0, NULL, "unknown key 'zzzzzzzzzzzz'\0");
    expect_error(TEST_RECIPE "batch_size: abc\n", 0, NULL, "r.yaml:10:13: batch_size: expected an integer, got 'abc'");
    expect_error(TEST_RECIPE "batch_size: \"8\"\n", 0, NULL, "batch_size: expected an integer, got the string \"8\"");
    expect_error(TEST_RECIPE "optimizer:\n  lr: fast\n", 0, NULL, "r.yaml:11:7: optimizer.lr: expected a number");
    expect_error(TEST_RECIPE "resume: yes\n", 0, NULL, "resume: expected true or false, got 'yes'");
    expect_error(TEST_RECIPE "lr_scheduler:\n  type: step\n", 0, NULL,
                 "lr_scheduler.type: expected one of constant, cosine, linear, got 'step'");
    expect_error(TEST_RECIPE "optimizer:\n  betas: 0.9\n", 0, NULL, "optimizer.betas: expected a list of two numbers");
    /* the per-layer lists: one entry per layer, transformers' names */
    char *types3[] = {"model.sliding_window=4", "model.layer_types=[full_attention, sliding_attention, full_attention]"};
    expect_error(TEST_RECIPE, 2, types3, "model.layer_types: 3 entries for 2 layers (give one per layer, or none)");
    char *typo[] = {"model.sliding_window=4", "model.layer_types=[full_attention, sliding]"};
    expect_error(TEST_RECIPE, 2, typo,
                 "model.layer_types: entry 1 is 'sliding' (each is full_attention or sliding_attention)");
    char *nowin[] = {"model.layer_types=[full_attention, sliding_attention]"};
    expect_error(TEST_RECIPE, 1, nowin,
                 "model.layer_types: names sliding_attention layers but model.sliding_window is not set");
    char *rope2[] = {"model.no_rope_layers=[1, 2]"};
    expect_error(TEST_RECIPE, 1, rope2, "model.no_rope_layers: entry 1 is '2' (each is 0 or 1)");
    char *gpt2_nope[] = {"model.arch=gpt2", "model.no_rope_layers=[1, 0]"};
    expect_error(TEST_RECIPE, 2, gpt2_nope, "model.no_rope_layers: gpt2 has no sliding window and no RoPE");
    char *part3[] = {"model.partial_rotary_factor=0.05"};
    expect_error(TEST_RECIPE, 1, part3,
                 "model.partial_rotary_factor: 0.05 of heads of 16: it must give an even number of rotated dimensions");
    char *part_qk[] = {"model.partial_rotary_factor=0.5", "model.qk_norm=true"};
    expect_error(TEST_RECIPE, 2, part_qk, "model.partial_rotary_factor: 0.5 of heads of 16: not with model.qk_norm");
    char *qk_nope[] = {"model.qk_norm=true", "model.no_rope_layers=[1, 0]"};
    expect_error(TEST_RECIPE, 2, qk_nope, "q/k norms with layers without RoPE: no Hugging Face family has both");
    expect_error(TEST_RECIPE "model:\n  dim: 3\n", 0, NULL, "duplicate key 'model.dim' (first set at r.yaml:3:8)");
    expect_error(TEST_RECIPE "dataset: text\n", 0, NULL, "'dataset' must be a mapping of dataset.* keys");
    expect_error(TEST_RECIPE "batch_size: 0\n", 0, NULL, "r.yaml:10:13: batch_size: 0 is out of range (must be >= 1)");
    expect_error(TEST_RECIPE "optimizer:\n  lr: -1\n", 0, NULL, "optimizer.lr: -1 is out of range (must be > 0)");
    expect_error(TEST_RECIPE "optimizer:\n  betas: [0.9, 1.0]\n", 0, NULL,
                 "optimizer.betas: 1 is out of range (must be >= 0 and < 1)");
    expect_error(TEST_RECIPE "batch_size: 99999999999\n", 0, NULL, "batch_size: 99999999999 is out of range");
    expect_error(TEST_RECIPE "batch_size: [1\n", 0, NULL, "r.yaml:11:1: YAML syntax error");
    expect_error("- a\n- b\n", 0, NULL, "r.yaml: a recipe must be a mapping of keys");

    expect_error("model:\n  dim: 64\n", 0, NULL, "r.yaml: required key 'output_dir' is missing");
    expect_error("output_dir: o\ndataset:\n  type: text\n  path: p\n", 0, NULL,
                 "required key 'model.dim' is missing (or give model.init_from)");
    expect_error("output_dir: o\nmodel:\n  dim: 64\n  n_layers: 1\n  n_heads: 4\n  max_seq_len: 8\n"
                 "dataset:\n  type: text\n",
                 0, NULL, "required key 'dataset.path' is missing");

    expect_error(TEST_RECIPE "model:\n  n_heads: 3\n", 0, NULL, "duplicate key");
    char *heads[] = {"model.n_heads=3"};
    expect_error(TEST_RECIPE, 1, heads, "override 'model.n_heads=3': model.n_heads: 3 does not divide model.dim 64");
    char *kv[] = {"model.n_kv_heads=3"};
    expect_error(TEST_RECIPE, 1, kv, "model.n_kv_heads: 3 does not divide model.n_heads 4");
    char *odd[] = {"model.n_heads=64"};
    expect_error(TEST_RECIPE, 1, odd, "must be even for RoPE");
    char *vocab[] = {"model.vocab_size=100"};
    expect_error(TEST_RECIPE, 1, vocab, "model.vocab_size: 100 is smaller than the tokenizer's 259 ids");
    char *hf[] = {"tokenizer.type=hf"};
    expect_error(TEST_RECIPE, 1, hf,
                 "required key 'tokenizer.path' is missing (tokenizer.type hf reads a tokenizer.json)");
    char *both[] = {"dataset.val_path=v.txt", "dataset.val_fraction=0.1"};
    expect_error(TEST_RECIPE, 2, both, "give either dataset.val_path or dataset.val_fraction");
    char *eval[] = {"eval_every_n_steps=10"};
    expect_error(TEST_RECIPE, 1, eval, "eval_every_n_steps: 10 needs a validation set");
    char *tok[] = {"dataset.type=tokens", "dataset.packed=false"};
    expect_error(TEST_RECIPE, 2, tok, "dataset.packed: a tokens dataset is one token stream");
}

/* Sizes whose products would overflow, or size tensors no device holds,
 * are refused before anything is computed from them, naming the product. */
static void test_sizes(void)
{
    char *vocab[] = {"model.vocab_size=2147483647", "model.dim=2147483646", "model.n_heads=1", "model.hidden_dim=8"};
    expect_error(TEST_RECIPE, 4, vocab,
                 "r.yaml: model: vocab_size x dim = 2147483647 x 2147483646 elements for the token embedding: "
                 "more than the 2^38 one tensor may hold");
    char *rows[] = {"batch_size=65536", "model.max_seq_len=65536"};
    expect_error(TEST_RECIPE, 2, rows, "batch_size x max_seq_len = 65536 x 65536 = 4294967296 rows in a micro-batch");
    char *act[] = {"batch_size=1024", "model.max_seq_len=1048576", "model.hidden_dim=1024"};
    expect_error(TEST_RECIPE, 3, act,
                 "batch_size x max_seq_len x hidden_dim = 1073741824 x 1024 elements for an activation");
    char *gpt2[] = {"model.arch=gpt2", "model.dim=2000000", "model.n_heads=2", "model.hidden_dim=8"};
    expect_error(TEST_RECIPE, 4, gpt2, "3 x dim x dim = 6000000 x 2000000 elements for an attention weight");
    char *hidden[] = {"model.dim=1073741824"};
    expect_error(TEST_RECIPE, 1, hidden,
                 "override 'model.dim=1073741824': model.dim: 1073741824 makes the default model.hidden_dim "
                 "(8/3 x dim) 2863311552, more than 2^31 - 1");
    char *layers[] = {"model.n_layers=65537"};
    expect_error(TEST_RECIPE, 1, layers, "model.n_layers: 65537 is out of range (must be >= 1 and <= 65536)");
    char *tokens[] = {"gradient_accumulation_steps=2147483647", "batch_size=1024"};
    expect_error(TEST_RECIPE, 2, tokens,
                 "override 'gradient_accumulation_steps=2147483647': gradient_accumulation_steps x batch_size x "
                 "model.max_seq_len = 2147483647 x 1024 x 32 tokens per rank and step: more than 2^40");
}

/* A path too long to append vktrain's file names to is refused where it is
 * set (config resolution would otherwise end the process building one). */
static void test_long_path(void)
{
    static char ov[CONFIG_LONG + 32];
    snprintf(ov, sizeof ov, "model.init_from=%0*d", CONFIG_LONG, 0);
    char *init[] = {ov};
    expect_error(TEST_RECIPE, 1, init, "model.init_from: a path of 3073 bytes; at most 3072 are accepted");
}

static void test_overrides(void)
{
    struct config c;
    char *ov[] = {"optimizer.betas=[0.8, 0.99]",
                  "dataset.packed=false",
                  "max_steps=100",
                  "max_steps=null",
                  "clip_grad_norm=1",
                  "device.index=3",
                  "dataset.exclude=[\"*.dat\", b]",
                  "output_dir='x y'",
                  "dataset.separator=\"%\"",
                  "seed=7"};
    CHECK(load(&c, TEST_RECIPE, 10, ov) == 0, "%s", err);
    CHECK(c.optimizer.betas[0] == 0.8 && c.optimizer.betas[1] == 0.99, "betas");
    CHECK(!c.dataset.packed && c.max_steps == 0 && c.clip_grad_norm == 1.0, "packed, max_steps");
    CHECK(c.device_index == 3 && c.seed == 7, "device %d", c.device_index);
    CHECK(c.dataset.n_exclude == 2 && !strcmp(c.dataset.exclude[0], "*.dat") && !strcmp(c.dataset.exclude[1], "b"),
          "exclude");
    CHECK(!strcmp(c.output_dir, "x y") && !strcmp(c.dataset.separator, "%"), "strings");
    config_free(&c);

    char *bad_key[] = {"optimizer.lrr=1"};
    expect_error(TEST_RECIPE, 1, bad_key,
                 "override 'optimizer.lrr=1': unknown key 'optimizer.lrr' (did you mean 'optimizer.lr'?)");
    char *bad_val[] = {"dataset.packed=maybe"};
    expect_error(TEST_RECIPE, 1, bad_val, "override 'dataset.packed=maybe': dataset.packed: expected true or false");
    char *no_eq[] = {"optimizer.lr"};
    expect_error(TEST_RECIPE, 1, no_eq, "override 'optimizer.lr': expected key.sub=value");
    char *section[] = {"model={dim: 3}"};
    expect_error(TEST_RECIPE, 1, section, "'model' is a section");
    char *bad_yaml[] = {"optimizer.betas=[0.9"};
    expect_error(TEST_RECIPE, 1, bad_yaml, "the value is not valid YAML");
}

static void write_json(const char *json)
{
    char dir[300];
    snprintf(dir, sizeof dir, "mkdir -p %s/hf", test_dir);
    CHECK(system(dir) == 0, "mkdir");
    test_write("hf/config.json", json, -1);
}

static void test_init_from(void)
{
    char recipe[1024], *inc[] = {"model.dim=64"}, *ok[] = {"model.dim=128", "model.max_seq_len=64"};
    snprintf(recipe, sizeof recipe, "output_dir: o\nmodel:\n  init_from: %s/hf\ndataset:\n  type: text\n  path: p\n",
             test_dir);
    write_json("{\"model_type\": \"llama\", \"hidden_size\": 128, \"num_hidden_layers\": 2,"
               " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 344,"
               " \"vocab_size\": 300, \"max_position_embeddings\": 256, \"rms_norm_eps\": 1e-6,"
               " \"rope_theta\": 500000.0, \"tie_word_embeddings\": true}");
    struct config c;
    CHECK(load(&c, recipe, 0, NULL) == 0, "%s", err);
    CHECK(c.model.dim == 128 && c.model.n_layers == 2 && c.model.n_heads == 4 && c.model.n_kv_heads == 2 &&
              c.model.hidden_dim == 344 && c.model.vocab_size == 300 && c.model.max_seq_len == 256 &&
              c.model.norm_eps == 1e-6 && c.model.rope_theta == 500000 && c.model.tie_embeddings,
          "llama config.json read");
    config_free(&c);
    CHECK(load(&c, recipe, 2, ok) == 0 && c.model.max_seq_len == 64, "agreeing keys: %s", err);
    config_free(&c);
    expect_error(recipe, 1, inc, "override 'model.dim=64': model.dim: 64 disagrees with hidden_size = 128 in");
    char *longer[] = {"model.max_seq_len=512"};
    expect_error(recipe, 1, longer, "model.max_seq_len: 512 exceeds max_position_embeddings = 256");
    char *arch[] = {"model.arch=gpt2"};
    expect_error(recipe, 1, arch, "model.arch: gpt2 disagrees with model_type 'llama'");

    write_json("{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_layer\": 2, \"n_head\": 4,"
               " \"vocab_size\": 50257, \"n_positions\": 1024, \"layer_norm_epsilon\": 1e-5}");
    CHECK(load(&c, recipe, 0, NULL) == 0, "%s", err);
    CHECK(c.model.arch == ARCH_GPT2 && c.model.dim == 64 && c.model.hidden_dim == 256 && c.model.n_kv_heads == 4 &&
              c.model.tie_embeddings && c.model.vocab_size == 50257,
          "gpt2 config.json read");
    config_free(&c);

    write_json("{\"model_type\": \"llama\", \"hidden_size\": 1048576, \"num_hidden_layers\": 2,"
               " \"num_attention_heads\": 8192, \"intermediate_size\": 2048, \"vocab_size\": 2147483647}");
    expect_error(recipe, 0, NULL, "r.yaml:3:14: model.init_from: ");
    expect_error(recipe, 0, NULL, "config.json: vocab_size x dim = 2147483647 x 1048576 elements for the token embedding");
    write_json("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 1000000,"
               " \"num_attention_heads\": 4, \"intermediate_size\": 128, \"vocab_size\": 300}");
    expect_error(recipe, 0, NULL,
                 "num_hidden_layers = 1000000 is out of range for model.n_layers (must be >= 1 and <= 65536)");
    write_json("{\"model_type\": \"gpt2\", \"n_embd\": 1073741824, \"n_layer\": 1, \"n_head\": 4,"
               " \"vocab_size\": 300}");
    expect_error(recipe, 0, NULL,
                 "'n_inner' is absent and its default 4 x n_embd = 4 x 1073741824 is more than 2^31 - 1");
    /* per layer: Qwen2's window from max_window_layers on, SmolLM3's
     * layers without RoPE, filled in or checked against the recipe */
    write_json("{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_key_value_heads\": 2,"
               " \"num_attention_heads\": 4, \"intermediate_size\": 128, \"vocab_size\": 300,"
               " \"use_sliding_window\": true, \"sliding_window\": 8, \"max_window_layers\": 1}");
    CHECK(load(&c, recipe, 0, NULL) == 0, "%s", err);
    CHECK(c.model.sliding_window == 8 && c.model.n_layer_types == 2 &&
              !strcmp(c.model.layer_types[0], "full_attention") && !strcmp(c.model.layer_types[1], "sliding_attention"),
          "qwen2 window from layer 1 read");
    config_free(&c);
    char *same[] = {"model.layer_types=[full_attention, sliding_attention]"};
    CHECK(load(&c, recipe, 1, same) == 0, "agreeing layer_types: %s", err);
    config_free(&c);
    char *other[] = {"model.layer_types=[sliding_attention, sliding_attention]"};
    expect_error(recipe, 1, other, "model.layer_types: layer 0 is sliding_attention here and full_attention in");
    write_json("{\"model_type\": \"smollm3\", \"hidden_size\": 64, \"num_hidden_layers\": 4,"
               " \"num_attention_heads\": 4, \"intermediate_size\": 128, \"vocab_size\": 300}");
    CHECK(load(&c, recipe, 0, NULL) == 0, "%s", err);
    CHECK(c.model.n_no_rope_layers == 4 && !strcmp(c.model.no_rope_layers[0], "1") &&
              !strcmp(c.model.no_rope_layers[3], "0") && !c.model.n_layer_types && c.model.rope_theta == 2e6,
          "smollm3 no_rope_layers read");
    config_free(&c);
    write_json("{\"model_type\": \"falcon\"}");
    expect_error(recipe, 0, NULL, "unsupported model_type 'falcon'");
    write_json("{\"model_type\": \"llama\", \"hidden_size\": 128}");
    expect_error(recipe, 0, NULL, "missing required key 'vocab_size'");
    char missing[512];
    snprintf(missing, sizeof missing, "output_dir: o\nmodel:\n  init_from: %s/none\n", test_dir);
    expect_error(missing, 0, NULL, "r.yaml:3:14: model.init_from: cannot read");
    expect_error(missing, 0, NULL, "none/config.json: unable to open");
}

static void test_print_and_hash(void)
{
    struct config c, back;
    char *ov[] = {"optimizer.lr=1e-3", "dataset.separator=\"a\\\"b\"", "dataset.exclude=[\"*.dat\"]"};
    CHECK(load(&c, TEST_RECIPE, 3, ov) == 0, "%s", err);
    char *text = NULL, *again = NULL;
    size_t n;
    FILE *f = open_memstream(&text, &n);
    config_print(&c, f);
    fclose(f);
    CHECK(strstr(text, "  lr: 0.001\n"), "printed lr:\n%s", text);
    CHECK(load(&back, text, 0, NULL) == 0, "printed recipe does not load: %s\n%s", err, text);
    f = open_memstream(&again, &n);
    config_print(&back, f);
    fclose(f);
    CHECK(!strcmp(text, again), "print is not a fixed point:\n%s\n---\n%s", text, again);
    CHECK(config_hash(&c) == config_hash(&back), "hash differs after a round trip");
    uint64_t h = config_hash(&c);
    c.max_steps = 5;
    c.resume = true;
    CHECK(config_hash(&c) == h, "max_steps and resume must not change the hash");
    c.optimizer.lr = 2e-3;
    CHECK(config_hash(&c) != h, "lr must change the hash");
    config_free(&c);
    config_free(&back);
    free(text);
    free(again);
}

/* The lora section: defaults by arch, the keys that need it on, dropout,
 * and an adapter folder's adapter_config.json filling and checking it. */
static void test_lora(void)
{
    struct config c;
    char *on[] = {"lora.rank=4"};
    CHECK(load(&c, TEST_RECIPE, 1, on) == 0, "%s", err);
    CHECK(c.lora.rank == 4 && c.lora.alpha == 8 && c.lora.n_targets == 2 && !strcmp(c.lora.targets[1], "v_proj"),
          "lora defaults: alpha %g, %d targets", c.lora.alpha, c.lora.n_targets);
    config_free(&c);
    char *gpt2[] = {"lora.rank=2", "model.arch=gpt2", "lora.alpha=1"};
    CHECK(load(&c, TEST_RECIPE, 3, gpt2) == 0, "%s", err);
    CHECK(c.lora.alpha == 1 && c.lora.n_targets == 1 && !strcmp(c.lora.targets[0], "c_attn"), "gpt2 lora targets");
    config_free(&c);
    expect_error(TEST_RECIPE "lora:\n  alpha: 4\n", 0, NULL, "lora.alpha: LoRA is off (lora.rank is 0)");
    char *drop[] = {"lora.rank=4", "lora.dropout=0.1"};
    CHECK(load(&c, TEST_RECIPE, 2, drop) == 0 && c.lora.dropout == 0.1, "lora.dropout 0.1: %s", err);
    config_free(&c);
    expect_error(TEST_RECIPE "lora:\n  rank: 4\n  dropout: 1\n", 0, NULL,
                 "lora.dropout: 1 is out of range (must be >= 0 and < 1)");

    char dir[2048], path[4096];
    snprintf(dir, sizeof dir, "%s/adapter", test_tmpdir());
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"peft_type\": \"LORA\", \"r\": 3, \"lora_alpha\": 5, \"target_modules\": [\"q_proj\", \"v_proj\"]}", f);
    fclose(f);
    char from[4200], rank[] = "lora.rank=4";
    snprintf(from, sizeof from, "lora.init_from=%s", dir);
    char *ov[] = {from, rank};
    CHECK(load(&c, TEST_RECIPE, 1, ov) == 0, "%s", err);
    CHECK(c.lora.rank == 3 && c.lora.alpha == 5 && c.lora.n_targets == 2 && !strcmp(c.lora.targets[1], "v_proj"),
          "lora.init_from: rank %d alpha %g", c.lora.rank, c.lora.alpha);
    config_free(&c);
    expect_error(TEST_RECIPE, 2, ov, "lora.rank: 4 disagrees with r = 3 in");
    f = fopen(path, "w");
    fputs("{\"peft_type\": \"LORA\", \"r\": 3, \"lora_alpha\": 5, \"target_modules\": \".*proj\"}", f);
    fclose(f);
    expect_error(TEST_RECIPE, 1, ov, "target_modules must be a list of module names");

    /* LoRA off: the lora keys enter neither the hash nor the differences,
     * so a checkpoint's recipe.yaml from before the section resumes. */
    CHECK(load(&c, TEST_RECIPE, 0, NULL) == 0, "%s", err);
    char *text = NULL, diff[1024];
    size_t n;
    f = open_memstream(&text, &n);
    config_print(&c, f);
    fclose(f);
    char *cut = strstr(text, "lora:\n");
    CHECK(cut != NULL, "no lora section printed");
    if (cut)
        *cut = 0;
    CHECK(config_diff(&c, text, diff, sizeof diff) == 0, "a recipe without the lora section differs: %s", diff);
    uint64_t h = config_hash(&c);
    config_free(&c);
    CHECK(load(&c, text, 0, NULL) == 0 && config_hash(&c) == h, "the hash changes without the lora section: %s", err);
    config_free(&c);
    free(text);
}

int main(void)
{
    test_tmpdir();
    test_defaults();
    test_errors();
    test_overrides();
    test_sizes();
    test_long_path();
    test_init_from();
    test_print_and_hash();
    test_lora();
    return test_result("test_config");
}
