/* test_tokenizer_hf_unit: the hf tokenizer without an oracle (test_tokenizer_hf.py
 * has one): a hand-made tokenizer.json's merges by rank, its special ids, a
 * decode; every refused file with its message; and the recipe keys
 * tokenizer.type/tokenizer.path (errors name the key, vocab_size defaults to
 * the tokenizer's size). */
#include "test_util.h"

#include "vktrain/config.h"
#include "vktrain/tokenizer.h"

static char err[4096];

/* GPT-2's bytes_to_unicode, as UTF-8. */
static void byte_char(int b, char out[3])
{
    int n = 0, cp = b;
    for (int c = 0; c < 256; c++) {
        bool keep = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255);
        if (!keep && c == b)
            cp = 256 + n;
        if (!keep)
            n++;
    }
    if (cp < 0x80) {
        out[0] = (char)cp, out[1] = 0;
    } else {
        out[0] = (char)(0xc0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3f)), out[2] = 0;
    }
}

/* A tokenizer.json: the 256 byte tokens (ids 0-255, JSON-escaped where
 * needed), then extra vocab entries and merges (JSON fragments that start
 * with a comma or are empty), and the rest of the file. */
static const char *write_tok(const char *name, const char *vocab_extra, const char *merges, const char *added,
                             const char *rest)
{
    static char json[65536];
    int o = snprintf(json, sizeof json, "{\"added_tokens\": [%s], %s \"model\": {\"type\": \"BPE\", \"vocab\": {",
                     added, rest);
    for (int b = 0; b < 256; b++) {
        char c[3];
        byte_char(b, c);
        const char *esc = c[0] == '"' ? "\\\"" : c[0] == '\\' ? "\\\\" : c;
        o += snprintf(json + o, sizeof json - (size_t)o, "%s\"%s\": %d", b ? ", " : "", esc, b);
    }
    snprintf(json + o, sizeof json - (size_t)o, "%s}, \"merges\": [%s]}}", vocab_extra, merges);
    return test_write(name, json, -1);
}

#define GOOD_REST                                                                                                      \
    "\"normalizer\": null, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"ByteLevel\"},"
#define EOT "{\"id\": 260, \"content\": \"<|endoftext|>\", \"special\": true}"

static int open_path(struct tokenizer *t, const char *path)
{
    struct config_tokenizer cfg = {.type = TOKENIZER_HF, .path = (char *)path};
    err[0] = 0;
    return tokenizer_open(t, &cfg, err, sizeof err);
}

static void expect_fail(const char *path, const char *want)
{
    struct tokenizer t;
    int rc = open_path(&t, path);
    CHECK(rc == -1, "accepted %s, wanted '%s'", path, want);
    if (rc == 0)
        tokenizer_close(&t);
    else {
        CHECK_MSG(err, want);
        CHECK_MSG(err, path);
    }
}

static void test_encode(void)
{
    /* ids: 256 "aa", 257 "aaa"... merges by rank: "a a" (0), then "b c"
     * (1), then "aa b" (2); "Ġ a" makes " a". */
    const char *path = write_tok("good.json", ", \"aa\": 256, \"bc\": 257, \"aab\": 258, \"\\u0120a\": 259",
                                 "\"a a\", [\"b\", \"c\"], \"aa b\", \"\\u0120 a\"", EOT, GOOD_REST);
    struct tokenizer t;
    CHECK(open_path(&t, path) == 0, "%s", err);
    CHECK(t.size == 261 && t.eos == 260 && t.bos == 260 && t.pad == 260, "size %d bos %d eos %d pad %d", t.size, t.bos,
          t.eos, t.pad);
    vkt_token ids[300];
    /* "aaa": the leftmost "a a" merges first -> aa a */
    size_t n = tokenizer_encode(&t, "aaa", 3, ids, 300);
    CHECK(n == 2 && ids[0] == 256 && ids[1] == 'a', "aaa: %zu ids %u %u", n, ids[0], ids[1]);
    /* "aabc": "a a" (rank 0) before "b c" (rank 1), then "aa b" is gone
     * (b merged into bc) -> aa bc */
    n = tokenizer_encode(&t, "aabc", 4, ids, 300);
    CHECK(n == 2 && ids[0] == 256 && ids[1] == 257, "aabc: %zu ids %u %u", n, ids[0], ids[1]);
    /* "aab": aa then aab */
    n = tokenizer_encode(&t, "aab", 3, ids, 300);
    CHECK(n == 1 && ids[0] == 258, "aab: %zu ids %u", n, ids[0]);
    /* " a a": the split keeps " a" pieces; Ġa merges */
    n = tokenizer_encode(&t, " a a", 4, ids, 300);
    CHECK(n == 2 && ids[0] == 259 && ids[1] == 259, " a a: %zu ids %u %u", n, ids[0], ids[1]);
    /* "a's": 'a' then the contraction, never merged across pieces */
    n = tokenizer_encode(&t, "a'sa", 4, ids, 300);
    CHECK(n == 4 && ids[0] == 'a' && ids[1] == '\'' && ids[2] == 's' && ids[3] == 'a', "a'sa: %zu ids", n);
    /* an empty text has no ids; an added token in the text is its id */
    CHECK(tokenizer_encode(&t, "", 0, ids, 300) == 0, "empty text");
    n = tokenizer_encode(&t, "a<|endoftext|>aa", 16, ids, 300);
    CHECK(n == 3 && ids[0] == 'a' && ids[1] == 260 && ids[2] == 256, "a<|endoftext|>aa: %zu ids %u %u", n, ids[0],
          ids[1]);
    /* decode: bytes back, the special id as its content, unknown ids */
    vkt_token d[] = {256, 257, 259, 260, 300, 0xffff};
    char out[128];
    size_t len = tokenizer_decode(&t, d, 6, out, sizeof out);
    CHECK(len == strlen(out) && !strcmp(out, "aabc a<|endoftext|><|id:300|><|id:65535|>"), "decode: %s", out);
    len = tokenizer_decode(&t, d, 6, out, 5);
    CHECK(len == 41 && !strcmp(out, "aabc"), "truncated decode: %zu %s", len, out);
    /* every byte 0-255 round-trips */
    unsigned char all[256];
    char back[300];
    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)(255 - i);
    n = tokenizer_encode(&t, all, 256, ids, 300);
    CHECK(n <= 256 && tokenizer_decode(&t, ids, n, back, sizeof back) == 256 && !memcmp(back, all, 256),
          "every byte: %zu ids", n);
    tokenizer_close(&t);
    tokenizer_close(&t); /* closing twice is harmless */
}

static void test_refused(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/missing.json", test_dir);
    expect_fail(path, "cannot open");
    expect_fail(test_write("bad.json", "{\"model\": ", -1), "line 1");
    expect_fail(test_write("array.json", "[1, 2]", -1), "not a JSON object");
    expect_fail(test_write("wp.json", "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", -1),
                "model.type 'WordPiece' is not supported");
    expect_fail(test_write("uni.json", "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", -1),
                "model.type 'Unigram' is not supported");
    {
        /* sentencepiece style: Metaspace needs its replacement, the vocab
         * its unknown token */
        const char *sp = test_write("sp.json",
                                    "{\"normalizer\": null, \"pre_tokenizer\": {\"type\": \"Metaspace\"}, "
                                    "\"decoder\": {\"type\": \"Metaspace\"}, \"model\": {\"type\": \"BPE\", "
                                    "\"byte_fallback\": true, \"vocab\": {}, \"merges\": []}}",
                                    -1);
        expect_fail(sp, "pre_tokenizer.replacement must be one character");
        sp = test_write("unk.json",
                        "{\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"_\", \"prepend_scheme\": "
                        "\"first\"}, \"decoder\": {\"type\": \"Metaspace\", \"replacement\": \"_\"}, \"model\": "
                        "{\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"vocab\": {\"a\": 0}, \"merges\": []}}",
                        -1);
        expect_fail(sp, "model.unk_token '<unk>' is not in model.vocab");
        sp = test_write("scheme.json",
                        "{\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"_\", \"prepend_scheme\": "
                        "\"sometimes\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}",
                        -1);
        expect_fail(sp, "pre_tokenizer.prepend_scheme 'sometimes' is not always, first or never");
    }
    expect_fail(write_tok("meta.json", "", "", EOT,
                          "\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"_\"}, \"decoder\": "
                          "{\"type\": \"ByteLevel\"},"),
                "decoder 'ByteLevel' is not supported here");
    expect_fail(write_tok("nfkc.json", "", "", EOT,
                          "\"normalizer\": {\"type\": \"NFKC\"}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}, "
                          "\"decoder\": {\"type\": \"ByteLevel\"},"),
                "normalizer 'NFKC' is not supported");
    expect_fail(write_tok("seqnorm.json", "", "", EOT,
                          "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, "
                          "{\"type\": \"Replace\", \"pattern\": {\"Regex\": \" +\"}, \"content\": \" \"}]}, "
                          "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"ByteLevel\"},"),
                "normalizer.normalizers[1]: a Replace is supported with a non-empty pattern {\"String\": ...} and a "
                "string content only (not a Regex pattern)");
    expect_fail(write_tok("after.json", "", "", EOT,
                          "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
                          "\"ByteLevel\"}, {\"type\": \"Digits\"}]}, \"decoder\": {\"type\": \"ByteLevel\"},"),
                "pre_tokenizer.pretokenizers[1]: 'Digits' after ByteLevel is not supported");
    expect_fail(test_write("bfb.json",
                           "{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"ByteLevel\"}, "
                           "\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"vocab\": {}}}",
                           -1),
                "model.byte_fallback true with a ByteLevel pre-tokenizer is not supported");
    expect_fail(write_tok("dec.json", "", "", EOT,
                          "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"WordPiece\"},"),
                "decoder 'WordPiece' is not supported");
    expect_fail(write_tok("nodec.json", "", "", EOT, "\"pre_tokenizer\": {\"type\": \"ByteLevel\"},"),
                "decoder 'none' is not supported");
    expect_fail(write_tok("aps.json", "", "", EOT,
                          "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true}, \"decoder\": "
                          "{\"type\": \"ByteLevel\"},"),
                "add_prefix_space true is not supported");
    expect_fail(write_tok("split.json", "", "", EOT,
                          "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
                          "\"pattern\": {\"Regex\": \"\\\\p{N}{1,3}\"}, \"behavior\": \"Isolated\"}, {\"type\": "
                          "\"ByteLevel\", \"use_regex\": false}]}, \"decoder\": {\"type\": \"ByteLevel\"},"),
                "pre_tokenizer.pretokenizers[0]: a Split with pattern \\p{N}{1,3} is not supported");
    expect_fail(write_tok("punct.json", "", "", EOT,
                          "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
                          "\"Punctuation\"}, {\"type\": \"ByteLevel\"}]}, \"decoder\": {\"type\": \"ByteLevel\"},"),
                "pre_tokenizer.pretokenizers[0] 'Punctuation' is not supported");
    expect_fail(write_tok("noeos.json", "", "", "", GOOD_REST), "no end-of-text token");
    expect_fail(write_tok("merge.json", "", "\"a b\"", EOT, GOOD_REST),
                "model.merges[0] 'a b': 'ab' is not in the vocab");
    expect_fail(write_tok("merge3.json", "", "\"a b c\"", EOT, GOOD_REST), "model.merges[0] 'a b c' is not two tokens");
    expect_fail(write_tok("hugeid.json", "", "",
                          "{\"id\": 2147483647, \"content\": \"<|endoftext|>\", \"special\": true}", GOOD_REST),
                "added_tokens[0]: needs an integer id in [0, 2^24) and a string content");
    /* an id the 8-byte-an-id table would need 16 GB for (found by fuzz_tokenizer) */
    expect_fail(write_tok("bigid.json", ", \"zz\": 2000000000", "", EOT, GOOD_REST),
                "model.vocab: the id of 'zz' is not an integer in [0, 2^24)");
    expect_fail(
        test_write("sfx.json", "{\"model\": {\"type\": \"BPE\", \"end_of_word_suffix\": \"</w>\", \"vocab\": {}}}", -1),
        "model.end_of_word_suffix '</w>' is not supported");
    /* a vocab without every byte token */
    expect_fail(test_write("nobytes.json",
                           "{\"added_tokens\": [" EOT "], " GOOD_REST
                           " \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}",
                           -1),
                "model.vocab lacks the token");
    /* no path */
    struct tokenizer t;
    struct config_tokenizer none = {.type = TOKENIZER_HF};
    CHECK(tokenizer_open(&t, &none, err, sizeof err) == -1 && strstr(err, "tokenizer.path"), "no path: %s", err);
}


static void test_config(void)
{
    const char *good = write_tok("good.json", "", "", EOT, GOOD_REST);
    char pathkey[700], recipe[2048];
    snprintf(pathkey, sizeof pathkey, "tokenizer.path=%s", good);
    struct config c;
    char *ov[] = {"tokenizer.type=hf", pathkey};
    int loaded = config_load_string(&c, TEST_RECIPE, "r.yaml", 2, ov, err, sizeof err) == 0;
    CHECK(loaded, "%s", err);
    if (loaded) {
        CHECK(c.model.vocab_size == 261, "vocab_size defaults to the tokenizer's 261: %d", c.model.vocab_size);
        config_free(&c);
    }
    char *small[] = {"tokenizer.type=hf", pathkey, "model.vocab_size=100"};
    CHECK(config_load_string(&c, TEST_RECIPE, "r.yaml", 3, small, err, sizeof err) == -1, "vocab_size 100 accepted");
    CHECK_MSG(err, "model.vocab_size: 100 is smaller than the tokenizer's 261 ids");

    char *nopath[] = {"tokenizer.type=hf"};
    CHECK(config_load_string(&c, TEST_RECIPE, "r.yaml", 1, nopath, err, sizeof err) == -1, "hf without a path accepted");
    CHECK_MSG(err, "required key 'tokenizer.path' is missing");

    char *bytepath[] = {pathkey};
    CHECK(config_load_string(&c, TEST_RECIPE, "r.yaml", 1, bytepath, err, sizeof err) == -1, "byte with a path accepted");
    CHECK_MSG(err, "tokenizer.path: only tokenizer.type hf reads a file");

    /* the message names the recipe line of tokenizer.path and the file */
    const char *wp = test_write("wp.json", "{\"model\": {\"type\": \"WordPiece\"}}", -1);
    snprintf(recipe, sizeof recipe, TEST_RECIPE "tokenizer:\n  type: hf\n  path: %s\n", wp);
    CHECK(config_load_string(&c, recipe, "r.yaml", 0, NULL, err, sizeof err) == -1, "WordPiece accepted");
    CHECK_MSG(err, "r.yaml:12:9: tokenizer.path: ");
    CHECK_MSG(err, "wp.json: model.type 'WordPiece' is not supported");
}

int main(void)
{
    test_tmpdir();
    test_encode();
    test_refused();
    test_config();
    return test_result("test_tokenizer_hf_unit");
}
