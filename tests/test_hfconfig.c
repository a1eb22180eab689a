/* test_hfconfig: config.json write/read round trips for both archs,
 * published-style configs with optional keys missing or null, and the
 * errors for missing keys, wrong types and unsupported models. */
#include "test_util.h"

#include "vktrain/hfconfig.h"

#include <math.h>
#include <unistd.h>

static char err[1024];

static void check_equal(const struct hf_config *a, const struct hf_config *b, const char *what)
{
    CHECK(a->arch == b->arch && a->vocab_size == b->vocab_size && a->dim == b->dim && a->n_layers == b->n_layers &&
              a->n_heads == b->n_heads && a->n_kv_heads == b->n_kv_heads && a->hidden_dim == b->hidden_dim &&
              a->max_seq_len == b->max_seq_len && a->norm_eps == b->norm_eps && a->rope_theta == b->rope_theta &&
              a->tie_embeddings == b->tie_embeddings && a->bos_token_id == b->bos_token_id &&
              a->eos_token_id == b->eos_token_id && a->pad_token_id == b->pad_token_id,
          "%s: read back differs", what);
    CHECK(!memcmp(&a->full_layers, &b->full_layers, sizeof a->full_layers) &&
              !memcmp(&a->nope_layers, &b->nope_layers, sizeof a->nope_layers),
          "%s: the per-layer windows or RoPE read back differ", what);
}

static void round_trip(const struct hf_config *c, const char *what, const char *want_text)
{
    char path[512], tmp[600];
    snprintf(path, sizeof path, "%s/config.json", test_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(hf_config_write(path, c, err, sizeof err) == 0, "%s: %s", what, err);
    CHECK(access(tmp, F_OK) != 0, "%s left behind", tmp);
    struct hf_config r;
    CHECK(hf_config_read(path, &r, err, sizeof err) == 0, "%s: %s", what, err);
    check_equal(&r, c, what);
    CHECK(!c->head_dim || (r.head_dim == c->head_dim && r.qk_norm == c->qk_norm), "%s: head_dim %d, qk_norm %d", what,
          r.head_dim, r.qk_norm);
    CHECK(r.fused_proj == c->fused_proj && r.rotary_dim == c->rotary_dim, "%s: fused %d, rotary_dim %d back as %d, %d",
          what, c->fused_proj, c->rotary_dim, r.fused_proj, r.rotary_dim);
    CHECK(r.sliding_window == c->sliding_window, "%s: sliding_window %d back as %d", what, c->sliding_window,
          r.sliding_window);
    char text[4096] = {0};
    FILE *f = fopen(path, "r");
    CHECK(f && fread(text, 1, sizeof text - 1, f) > 0, "reading %s", path);
    if (f)
        fclose(f);
    CHECK_MSG(text, want_text);
}

static void test_round_trips(void)
{
    struct hf_config llama = {HF_LLAMA, 259, 64, 2, 4, 2, 176, 128, 1e-5, 500000.0, 0, 256, 257, 258, .qkv_bias = 0};
    round_trip(&llama, "llama", "\"architectures\": [\n    \"LlamaForCausalLM\"\n  ]");
    round_trip(&llama, "llama", "\"rms_norm_eps\": 1e-5,");
    round_trip(&llama, "llama", "\"num_key_value_heads\": 2,");
    round_trip(&llama, "llama", "\"hidden_act\": \"silu\"");
    llama.tie_embeddings = 1;
    llama.norm_eps = 1.0 / 3.0; /* needs 17 digits */
    llama.bos_token_id = llama.eos_token_id = llama.pad_token_id = -1;
    round_trip(&llama, "llama tied", "\"tie_word_embeddings\": true");
    struct hf_config gpt2 = {HF_GPT2, 50257, 48, 3, 3, 3, 192, 64, 1e-5, 0, 1, 50256, 50256, -1, .qkv_bias = 0};
    round_trip(&gpt2, "gpt2", "\"model_type\": \"gpt2\"");
    round_trip(&gpt2, "gpt2", "\"n_inner\": 192");
    round_trip(&gpt2, "gpt2", "\"activation_function\": \"gelu_new\"");
    /* heads apart from hidden / heads: qwen3 with q/k norms, else mistral without a window */
    struct hf_config q3 = {HF_LLAMA, 259, 64, 2, 4, 2, 176, 128, 1e-6, 1e6, 1, 256, 257, 258, .head_dim = 32, .qk_norm = 1};
    round_trip(&q3, "qwen3", "\"model_type\": \"qwen3\"");
    round_trip(&q3, "qwen3", "\"head_dim\": 32,");
    struct hf_config mi = q3;
    mi.qk_norm = 0;
    round_trip(&mi, "mistral", "\"model_type\": \"mistral\"");
    round_trip(&mi, "mistral", "\"sliding_window\": null");
    /* a sliding window: mistral, whatever the head size */
    struct hf_config sw = llama;
    sw.sliding_window = 16;
    round_trip(&sw, "mistral with a window", "\"model_type\": \"mistral\"");
    round_trip(&sw, "mistral with a window", "\"sliding_window\": 16");
    /* per layer: some layers global under the window, or without RoPE:
     * smollm3 (qwen3 with q/k norms), with transformers 4.57's layer_types */
    struct hf_config pl = sw;
    vkt_layers_add(&pl.full_layers, 1);
    round_trip(&pl, "llama with a window on layer 0", "\"model_type\": \"smollm3\"");
    round_trip(&pl, "llama with a window on layer 0",
               "\"layer_types\": [\n    \"sliding_attention\",\n    \"full_attention\"\n  ]");
    vkt_layers_add(&pl.nope_layers, 0);
    round_trip(&pl, "smollm3 with layer 0 without RoPE", "\"no_rope_layers\": [\n    0,\n    1\n  ]");
    pl.sliding_window = 0;
    memset(&pl.full_layers, 0, sizeof pl.full_layers);
    round_trip(&pl, "smollm3 without a window", "\"use_sliding_window\": false");
    struct hf_config q3w = q3;
    q3w.sliding_window = 16;
    vkt_layers_add(&q3w.full_layers, 0);
    round_trip(&q3w, "qwen3 with a window on layer 1", "\"max_window_layers\": 1");
    round_trip(&q3w, "qwen3 with a window on layer 1", "\"use_sliding_window\": true");
    /* fused projections and partial rotary: phi3 */
    struct hf_config phi = llama;
    phi.fused_proj = 1, phi.head_dim = 16, phi.rotary_dim = 12, phi.sliding_window = 32;
    round_trip(&phi, "phi3", "\"model_type\": \"phi3\"");
    round_trip(&phi, "phi3", "\"partial_rotary_factor\": 0.75");
    round_trip(&phi, "phi3", "\"sliding_window\": 32");
}

static int read_text(const char *text, struct hf_config *c)
{
    err[0] = 0;
    return hf_config_read(test_write("config.json", text, -1), c, err, sizeof err);
}

static void test_published(void)
{
    struct hf_config c;
    /* As the gpt2 checkpoint on the Hub has it (abridged). */
    CHECK(read_text("{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"],"
                    "\"attn_pdrop\": 0.1, \"bos_token_id\": 50256, \"embd_pdrop\": 0.1, \"eos_token_id\": 50256,"
                    "\"initializer_range\": 0.02, \"layer_norm_epsilon\": 1e-05, \"model_type\": \"gpt2\","
                    "\"n_ctx\": 1024, \"n_embd\": 768, \"n_head\": 12, \"n_inner\": null, \"n_layer\": 12,"
                    "\"n_positions\": 1024, \"vocab_size\": 50257}",
                    &c) == 0,
          "%s", err);
    struct hf_config want = {HF_GPT2, 50257, 768, 12, 12, 12, 3072, 1024, 1e-5, 0, 1, 50256, 50256, -1, .qkv_bias = 0};
    check_equal(&c, &want, "published gpt2");

    /* Old llama configs: no num_key_value_heads, rope_theta or rms_norm_eps. */
    CHECK(read_text("{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 4096,"
                    "\"intermediate_size\": 11008, \"num_attention_heads\": 32, \"num_hidden_layers\": 32,"
                    "\"max_position_embeddings\": 2048, \"vocab_size\": 32000, \"pad_token_id\": null,"
                    "\"hidden_act\": \"silu\", \"rope_scaling\": null}",
                    &c) == 0,
          "%s", err);
    struct hf_config lw = {HF_LLAMA, 32000, 4096, 32, 32, 32, 11008, 2048, 1e-6, 10000.0, 0, -1, -1, -1, .qkv_bias = 0};
    check_equal(&c, &lw, "old llama");
}

#define LLAMA_REST                                                                                                     \
    "\"intermediate_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"vocab_size\": 259"

static void expect_error(const char *text, const char *want, const char *want2);

/* The llama family's options: biases, rope_scaling, model_type defaults. */
static void test_families(void)
{
    struct hf_config c;
    CHECK(read_text("{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"intermediate_size\": 64,"
                    "\"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"vocab_size\": 300,"
                    "\"use_sliding_window\": false, \"sliding_window\": 4096, \"use_cache\": true}",
                    &c) == 0,
          "qwen2: %s", err);
    CHECK(c.arch == HF_LLAMA && !strcmp(c.model_type, "qwen2") && c.qkv_bias && !c.o_bias && !c.mlp_bias &&
              c.n_kv_heads == 32 && c.max_seq_len == 32768,
          "qwen2: biases or defaults");
    CHECK(read_text("{\"model_type\": \"llama\", \"hidden_size\": 64, \"attention_bias\": true, \"mlp_bias\": true,"
                    "\"head_dim\": 16, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0,"
                    "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}, "
                    LLAMA_REST "}",
                    &c) == 0,
          "llama3: %s", err);
    CHECK(c.qkv_bias && c.o_bias && c.mlp_bias && c.rope_scaling == 2 && c.rope_factor == 8 &&
              c.rope_low_freq_factor == 1 && c.rope_high_freq_factor == 4 && c.rope_original_max == 8192,
          "llama3: biases or rope_scaling");
    CHECK(c.head_dim == 16 && !c.qk_norm, "llama: head_dim %d", c.head_dim);
    /* Qwen3: q/k norms, head_dim 128 by default (apart from hidden / heads), no MLP biases */
    CHECK(read_text("{\"model_type\": \"qwen3\", \"hidden_size\": 64, \"attention_bias\": false, "
                    "\"use_sliding_window\": false, " LLAMA_REST "}",
                    &c) == 0,
          "qwen3: %s", err);
    CHECK(c.arch == HF_LLAMA && !strcmp(c.model_type, "qwen3") && c.qk_norm && c.head_dim == 128 && !c.qkv_bias &&
              !c.mlp_bias && c.n_kv_heads == 32 && c.max_seq_len == 32768,
          "qwen3: q/k norms, head_dim or defaults");
    CHECK(read_text("{\"model_type\": \"qwen3\", \"hidden_size\": 64, \"head_dim\": 8, " LLAMA_REST "}", &c) == 0 &&
              c.head_dim == 8,
          "qwen3 head_dim 8: %s", err);
    CHECK(read_text("{\"model_type\": \"qwen2\", \"hidden_size\": 64, " LLAMA_REST "}", &c) == 0 && c.head_dim == 16 &&
              !c.qk_norm,
          "qwen2: head_dim %d", c.head_dim);
    /* Llama 3.x Instruct: eos_token_id is a list; the first is read, and a
     * copy keeps the list when it holds the tokenizer's eos, else says that. */
    const char *l32 = "{\"model_type\": \"llama\", \"hidden_size\": 64, \"bos_token_id\": 0,"
                      "\"eos_token_id\": [1, 8, 9], " LLAMA_REST "}";
    CHECK(read_text(l32, &c) == 0 && c.eos_token_id == 1 && c.bos_token_id == 0, "eos list: %s", err);
    const char *src = test_write("source.json", l32, -1);
    char out[512], text[1024];
    snprintf(out, sizeof out, "%s/copy.json", test_dir);
    for (int eos = 9; eos <= 10; eos++) {
        c.eos_token_id = eos;
        CHECK(hf_config_write_from(out, src, &c, err, sizeof err) == 0, "write_from: %s", err);
        FILE *f = fopen(out, "rb");
        size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
        text[n] = 0;
        if (f)
            fclose(f);
        const char *want = eos == 9 ? "\"eos_token_id\": [\n    1,\n    8,\n    9\n  ]" : "\"eos_token_id\": 10";
        CHECK(strstr(text, want), "write_from with eos %d: want %s in\n%s", eos, want, text);
    }
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"eos_token_id\": [1, \"x\"], " LLAMA_REST "}",
                 "'eos_token_id' must be an integer or a list of integers, not a string", NULL);
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"bos_token_id\": [1], " LLAMA_REST "}",
                 "'bos_token_id' must be an integer, not an array", NULL);
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"eos_token_id\": [], " LLAMA_REST "}",
                 "'eos_token_id' is an empty list", NULL);
    CHECK(read_text("{\"model_type\": \"mistral\", \"hidden_size\": 64, \"sliding_window\": null, " LLAMA_REST "}",
                    &c) == 0 && !strcmp(c.model_type, "mistral") && c.n_kv_heads == 8 && !c.qkv_bias,
          "mistral: %s", err);
    /* windows: shorter than the context, given or transformers' default
     * of 4096 when absent; one that holds every position is none */
    CHECK(read_text("{\"model_type\": \"mistral\", \"hidden_size\": 64, \"max_position_embeddings\": 8192, "
                    "\"sliding_window\": 4096, " LLAMA_REST "}",
                    &c) == 0 && c.sliding_window == 4096,
          "mistral window 4096 of 8192: %s (window %d)", err, c.sliding_window);
    CHECK(read_text("{\"model_type\": \"mistral\", \"hidden_size\": 64, \"max_position_embeddings\": 8192, "
                    LLAMA_REST "}",
                    &c) == 0 && c.sliding_window == 4096,
          "mistral without sliding_window: %s (window %d)", err, c.sliding_window);
    CHECK(read_text("{\"model_type\": \"mistral\", \"hidden_size\": 64, \"max_position_embeddings\": 4096, "
                    "\"sliding_window\": 4096, " LLAMA_REST "}",
                    &c) == 0 && c.sliding_window == 0,
          "mistral window 4096 of 4096: %s (window %d)", err, c.sliding_window);
    /* Qwen2 and Qwen3: the window with use_sliding_window, on the layers
     * from max_window_layers [28] on, or as layer_types says */
    CHECK(read_text("{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"use_sliding_window\": true, "
                    "\"sliding_window\": 8, \"max_window_layers\": 1, " LLAMA_REST "}",
                    &c) == 0 && c.sliding_window == 8 && vkt_layers_has(&c.full_layers, 0) &&
              !vkt_layers_has(&c.full_layers, 1),
          "qwen2 window from layer 1: %s (window %d)", err, c.sliding_window);
    CHECK(read_text("{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"use_sliding_window\": true, "
                    "\"sliding_window\": 8, " LLAMA_REST "}",
                    &c) == 0 && c.sliding_window == 0 && !vkt_layers_count(&c.full_layers, 2),
          "qwen2 window from layer 28 of 2: %s (window %d)", err, c.sliding_window);
    CHECK(read_text("{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"use_sliding_window\": false, "
                    "\"sliding_window\": 8, \"max_window_layers\": 0, " LLAMA_REST "}",
                    &c) == 0 && c.sliding_window == 0,
          "qwen2 without use_sliding_window: %s (window %d)", err, c.sliding_window);
    CHECK(read_text("{\"model_type\": \"qwen3\", \"hidden_size\": 64, \"use_sliding_window\": true, "
                    "\"sliding_window\": 8, \"max_window_layers\": 0, "
                    "\"layer_types\": [\"sliding_attention\", \"full_attention\"], " LLAMA_REST "}",
                    &c) == 0 && c.sliding_window == 8 && c.qk_norm && !vkt_layers_has(&c.full_layers, 0) &&
              vkt_layers_has(&c.full_layers, 1),
          "qwen3 layer_types: %s (window %d)", err, c.sliding_window);
    /* Phi-3: fused projections, no window by default; Phi-4-mini's partial
     * rotary and longrope (factors per rotated pair, the attention factor
     * from max / original positions) */
    CHECK(read_text("{\"model_type\": \"phi3\", \"hidden_size\": 64, " LLAMA_REST "}", &c) == 0 && c.fused_proj &&
              !c.sliding_window && c.n_kv_heads == 4 && !c.qkv_bias && !c.rotary_dim && c.max_seq_len == 4096,
          "phi3 defaults: %s", err);
    CHECK(read_text("{\"model_type\": \"phi3\", \"hidden_size\": 64, \"partial_rotary_factor\": 0.5, "
                    "\"max_position_embeddings\": 256, \"original_max_position_embeddings\": 16, "
                    "\"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1, 2, 3, 4], "
                    "\"long_factor\": [5, 6, 7, 8]}, " LLAMA_REST "}",
                    &c) == 0 && c.rotary_dim == 8 && c.rope_scaling == 3 && c.rope_original_max == 16 &&
              c.rope_short[3] == 4 && c.rope_long[0] == 5 && fabs(c.rope_attention - sqrt(1 + log(16.0) / log(16.0))) < 1e-12,
          "phi3 longrope: %s (rotary %d, attention %g)", err, c.rotary_dim, c.rope_attention);
    /* SmolLM3: every 4th layer without RoPE by default, tied, theta 2e6;
     * its window on the layers without RoPE unless layer_types says */
    CHECK(read_text("{\"model_type\": \"smollm3\", \"hidden_size\": 64, \"intermediate_size\": 64, "
                    "\"num_attention_heads\": 4, \"num_hidden_layers\": 8, \"vocab_size\": 259}",
                    &c) == 0 && c.tie_embeddings && c.rope_theta == 2e6 && c.n_kv_heads == 4 &&
              vkt_layers_count(&c.nope_layers, 8) == 2 && vkt_layers_has(&c.nope_layers, 3) &&
              vkt_layers_has(&c.nope_layers, 7) && !c.sliding_window,
          "smollm3 defaults: %s", err);
    CHECK(read_text("{\"model_type\": \"smollm3\", \"hidden_size\": 64, \"no_rope_layers\": [1, 0], "
                    "\"use_sliding_window\": true, \"sliding_window\": 4, \"no_rope_layer_interval\": 1, "
                    LLAMA_REST "}",
                    &c) == 0 && c.sliding_window == 4 && vkt_layers_has(&c.nope_layers, 1) &&
              !vkt_layers_has(&c.nope_layers, 0) && vkt_layers_has(&c.full_layers, 0) &&
              !vkt_layers_has(&c.full_layers, 1),
          "smollm3 no_rope_layers and window: %s (window %d)", err, c.sliding_window);
    /* Gemma 2's soft-capping: absent is on (transformers' 50 and 30), null
     * off, a number that cap; Gemma 3's absent is off */
    CHECK(read_text("{\"model_type\": \"gemma2\", \"hidden_size\": 64, " LLAMA_REST "}", &c) == 0 &&
              c.attn_softcap == 50 && c.final_softcap == 30,
          "gemma2 default soft-capping: %s (%g, %g)", err, c.attn_softcap, c.final_softcap);
    CHECK(read_text("{\"model_type\": \"gemma2\", \"hidden_size\": 64, \"attn_logit_softcapping\": null, "
                    "\"final_logit_softcapping\": 12.5, " LLAMA_REST "}",
                    &c) == 0 && c.attn_softcap == 0 && c.final_softcap == 12.5,
          "gemma2 soft-capping null and 12.5: %s", err);
    CHECK(read_text("{\"model_type\": \"gemma3_text\", \"hidden_size\": 64, " LLAMA_REST "}", &c) == 0 &&
              !c.attn_softcap && !c.final_softcap,
          "gemma3 default: no soft-capping: %s", err);
    /* a multimodal gemma3: its text_config, read as a gemma3_text */
    CHECK(read_text("{\"model_type\": \"gemma3\", \"vision_config\": {\"hidden_size\": 16}, \"text_config\": "
                    "{\"hidden_size\": 64, \"head_dim\": 8, \"sliding_window\": 4, " LLAMA_REST "}}",
                    &c) == 0 && c.multimodal && !strcmp(c.model_type, "gemma3_text") && c.dim == 64 &&
              c.head_dim == 8 && c.qk_norm && c.norm_offset && c.sliding_window == 4,
          "gemma3 multimodal: %s", err);
}

static void expect_error(const char *text, const char *want, const char *want2)
{
    struct hf_config c;
    CHECK(read_text(text, &c) == -1, "accepted %s", text);
    CHECK_MSG(err, want);
    if (want2)
        CHECK_MSG(err, want2);
    CHECK_MSG(err, "config.json");
}

static void test_errors(void)
{
    expect_error("{\"model_type\": \"llama\", " LLAMA_REST "}", "missing required key 'hidden_size'", NULL);
    expect_error("{\"model_type\": \"gemma3\", \"hidden_size\": 64, " LLAMA_REST "}", "'text_config'", "language model");
    /* quantized checkpoints: bitsandbytes in 4 bits is read (test_quantized), other settings and methods are
     * refused by name */
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"quantization_config\": {\"quant_method\": "
                 "\"bitsandbytes\", \"load_in_8bit\": true}, " LLAMA_REST "}",
                 "quant_method 'bitsandbytes' in 8 bits", "not supported");
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"quantization_config\": {\"quant_method\": "
                 "\"bitsandbytes\", \"load_in_4bit\": true, \"bnb_4bit_quant_type\": \"int4\"}, " LLAMA_REST "}",
                 "bnb_4bit_quant_type 'int4'", "nf4 and fp4");
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"quantization_config\": {\"quant_method\": "
                 "\"bitsandbytes\", \"load_in_4bit\": true, \"bnb_4bit_quant_storage\": \"bfloat16\"}, " LLAMA_REST
                 "}",
                 "bnb_4bit_quant_storage 'bfloat16'", "only uint8");
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"quantization_config\": {\"quant_method\": "
                 "\"gptq\", \"bits\": 4}, " LLAMA_REST "}",
                 "quant_method 'gptq'", "not supported");
    expect_error("{\"model_type\": \"gemma2\", \"hidden_size\": 64, \"attn_logit_softcapping\": -1, " LLAMA_REST "}",
                 "'attn_logit_softcapping'", "positive number or null");
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": \"64\", " LLAMA_REST "}", "'hidden_size'",
                 "must be an integer, not a string");
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64.5, " LLAMA_REST "}", "'hidden_size'", "integer");
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 0, " LLAMA_REST "}", "'hidden_size'", "out of range");
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"rope_theta\": \"big\", " LLAMA_REST "}",
                 "'rope_theta'", "must be a number");
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"tie_word_embeddings\": 1, " LLAMA_REST "}",
                 "'tie_word_embeddings'", "true or false");
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"hidden_act\": \"gelu\", " LLAMA_REST "}",
                 "hidden_act 'gelu' is not supported", NULL);
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"mlp_bias\": 1, " LLAMA_REST "}", "'mlp_bias'",
                 NULL);
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"head_dim\": 0, " LLAMA_REST "}", "'head_dim'",
                 "positive integer");
    expect_error("{\"model_type\": \"mistral\", \"hidden_size\": 64, \"head_dim\": \"16\", \"sliding_window\": null, "
                 LLAMA_REST "}", "'head_dim'", "positive integer");
    expect_error("{\"model_type\": \"qwen3\", \"hidden_size\": 64, \"use_sliding_window\": 1, " LLAMA_REST "}",
                 "'use_sliding_window' must be true or false", NULL);
    expect_error("{\"model_type\": \"qwen3\", \"hidden_size\": 64, \"layer_types\": [\"full_attention\"], "
                 LLAMA_REST "}", "'layer_types' must be a list of num_hidden_layers = 2 entries", NULL);
    expect_error("{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"layer_types\": [\"full_attention\", "
                 "\"chunked_attention\"], " LLAMA_REST "}",
                 "'layer_types'[1] is 'chunked_attention', which is not supported", NULL);
    expect_error("{\"model_type\": \"smollm3\", \"hidden_size\": 64, \"no_rope_layers\": [1, 2], " LLAMA_REST "}",
                 "'no_rope_layers'[1] is '2'", NULL);
    expect_error("{\"model_type\": \"smollm3\", \"hidden_size\": 64, \"no_rope_layers\": [1, null], "
                 LLAMA_REST "}", "'no_rope_layers'[1] is a null", NULL);
    expect_error("{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"max_window_layers\": -1, " LLAMA_REST "}",
                 "'max_window_layers' must be a non-negative integer", NULL);
    expect_error("{\"model_type\": \"phi3\", \"hidden_size\": 64, \"partial_rotary_factor\": 0.1, " LLAMA_REST "}",
                 "'partial_rotary_factor' must be in (0, 1] and give an even number", NULL);
    expect_error("{\"model_type\": \"phi3\", \"hidden_size\": 64, \"rope_scaling\": {\"type\": \"longrope\", "
                 "\"short_factor\": [1, 2], \"long_factor\": [1, 2]}, " LLAMA_REST "}",
                 "'rope_scaling.short_factor' must be a list of 8 numbers (one per rotated pair)", NULL);
    expect_error("{\"model_type\": \"phi3\", \"hidden_size\": 64, \"original_max_position_embeddings\": null, "
                 "\"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1, 2, 3, 4, 5, 6, 7, 8], "
                 "\"long_factor\": [1, 2, 3, 4, 5, 6, 7, 8]}, " LLAMA_REST "}",
                 "longrope needs an integer original_max_position_embeddings", NULL);
    expect_error(
        "{\"model_type\": \"llama\", \"hidden_size\": 64, \"rope_scaling\": {\"type\": \"linear\"}, " LLAMA_REST "}",
        "'rope_scaling.factor'", NULL);
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"rope_scaling\": {\"rope_type\": \"yarn\", "
                 "\"factor\": 4}, " LLAMA_REST "}",
                 "'rope_scaling' of type 'yarn' is not supported", NULL);
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"rope_scaling\": {\"rope_type\": \"llama3\", "
                 "\"factor\": 8, \"low_freq_factor\": 1}, " LLAMA_REST "}",
                 "'rope_scaling.high_freq_factor'", NULL);
    expect_error("{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"use_sliding_window\": true, "
                 "\"sliding_window\": 0, " LLAMA_REST "}",
                 "'sliding_window' must be a positive integer or null", NULL);
    expect_error("{\"model_type\": \"mistral\", \"hidden_size\": 64, \"sliding_window\": 0, " LLAMA_REST "}",
                 "'sliding_window' must be a positive integer or null", NULL);
    expect_error("{\"model_type\": \"mistral\", \"hidden_size\": 64, \"sliding_window\": \"4096\", " LLAMA_REST "}",
                 "'sliding_window' must be a positive integer or null", NULL);
    expect_error("{\"model_type\": \"gpt2\", \"n_embd\": 48, \"n_head\": 3, \"n_layer\": 1, \"vocab_size\": 300,"
                 "\"scale_attn_by_inverse_layer_idx\": true}",
                 "'scale_attn_by_inverse_layer_idx': true is not supported", NULL);
    expect_error("{\"model_type\": \"bert\", \"hidden_size\": 64}", "unsupported model_type 'bert'", NULL);
    expect_error("{\"architectures\": [\"FalconForCausalLM\"]}", "unsupported architecture 'FalconForCausalLM'",
                 NULL);
    expect_error("{\"hidden_size\": 64}", "missing required key 'model_type'", NULL);
    expect_error("{\"model_type\": \"gpt2\", \"n_embd\": 48, \"n_head\": 3, \"vocab_size\": 300}",
                 "missing required key 'n_layer'", NULL);
    expect_error("{\"model_type\": \"gpt2\", \"n_embd\": 48, \"n_head\": 3, \"n_layer\": 1, \"vocab_size\": 300,"
                 "\"activation_function\": \"relu\"}",
                 "activation_function 'relu'", NULL);
    expect_error("{\"model_type\": \"gpt2\", \"n_embd\": null, \"n_head\": 3, \"n_layer\": 1, \"vocab_size\": 300}",
                 "'n_embd'", "not null");
    expect_error("{\"model_type\": \"gpt2\",", "config.json:", NULL);
    expect_error("[1]", "not a JSON object", NULL);

    char path[512];
    snprintf(path, sizeof path, "%s/missing/config.json", test_dir);
    struct hf_config c = {HF_LLAMA, 259, 64, 2, 4, 4, 176, 128, 1e-5, 1e4, 0, -1, -1, -1, .qkv_bias = 0};
    CHECK(hf_config_write(path, &c, err, sizeof err) == -1, "wrote into a missing directory");
    CHECK_MSG(err, "cannot create");
}

/* A bitsandbytes 4-bit folder's quantization_config, as transformers 4.57
 * writes it: its quant type and double quantization read; an unset type
 * is transformers' default, fp4. */
static void test_quantized(void)
{
    struct hf_config c;
    CHECK(read_text("{\"model_type\": \"llama\", \"hidden_size\": 64, \"quantization_config\": {"
                    "\"_load_in_4bit\": true, \"bnb_4bit_compute_dtype\": \"bfloat16\", \"bnb_4bit_quant_storage\": "
                    "\"uint8\", \"bnb_4bit_quant_type\": \"nf4\", \"bnb_4bit_use_double_quant\": true, "
                    "\"llm_int8_skip_modules\": null, \"load_in_4bit\": true, \"load_in_8bit\": false, "
                    "\"quant_method\": \"bitsandbytes\"}, " LLAMA_REST "}",
                    &c) == 0,
          "bitsandbytes nf4: %s", err);
    CHECK(c.bnb4 == HF_BNB_NF4 && c.bnb4_double == 1, "bitsandbytes nf4: read as %d, double %d", c.bnb4,
          c.bnb4_double);
    CHECK(read_text("{\"model_type\": \"llama\", \"hidden_size\": 64, \"quantization_config\": {"
                    "\"load_in_4bit\": true, \"quant_method\": \"bitsandbytes\"}, " LLAMA_REST "}",
                    &c) == 0,
          "bitsandbytes default: %s", err);
    CHECK(c.bnb4 == HF_BNB_FP4 && c.bnb4_double == 0, "bitsandbytes default: read as %d, double %d", c.bnb4,
          c.bnb4_double);
    CHECK(read_text("{\"model_type\": \"llama\", \"hidden_size\": 64, " LLAMA_REST "}", &c) == 0 && !c.bnb4,
          "no quantization_config: full precision");
}

int main(void)
{
    test_tmpdir();
    test_quantized();
    test_round_trips();
    test_published();
    test_families();
    test_errors();
    return test_result("test_hfconfig");
}
