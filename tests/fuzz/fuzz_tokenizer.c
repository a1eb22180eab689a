/* fuzz_tokenizer: a Hugging Face tokenizer.json (src/tokenizer) through
 * the public API of include/vktrain/tokenizer.h.
 *
 * Input: the tokenizer.json up to the first NUL byte; what follows it, if
 * anything, is the tokenizer_config.json beside it (special ids). Promises
 * checked for a tokenizer that opens: its size is at least 1 and its
 * special ids are below it; every text (a fixed set covering ASCII, other
 * scripts, digits, white space, invalid UTF-8 and the special tokens'
 * names, and the bytes of the input itself) encodes to ids below the size,
 * the same ids again (the piece cache), and the same count with a smaller
 * cap; the ids decode, and decode again to the same text. */
#include "fuzz.h"

#include "vktrain/tokenizer.h"

static const char *const texts[] = {
    "Hello, world! It's 2024: 3.14159 and 1234567 apples.",
    "  leading and  double  spaces\tand\ttabs\r\nnew lines\n\n",
    ("caf\xc3\xa9 cafe\xcc\x81 na\xc3\xafve \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xe4\xbd\xa0\xe5\xa5\xbd "
     "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d"),
    "invalid \xff\xfe \xc3 \xe4\xbd \xed\xa0\x80 \xc0\xaf bytes",
    "<|endoftext|><s></s><unk><|begin_of_text|>x<|eot_id|> <|im_start|>user\n",
    "\xe2\x96\x81meta\xe2\x96\x81space words",
    "",
};

static void check_text(const struct tokenizer *t, const char *text, size_t n)
{
    size_t cap = 0, cap2 = 0;
    vkt_token *ids = NULL, *again = NULL;
    size_t k = tokenizer_encode_all(t, text, n, &ids, &cap);
    if (tokenizer_encode_all(t, text, n, &again, &cap2) != k || (k && memcmp(ids, again, k * sizeof *ids)))
        fuzz_fail("encoding a text twice gives other ids");
    for (size_t i = 0; i < k; i++)
        if (ids[i] >= (vkt_token)t->size)
            fuzz_fail("id %u at %zu is not below the size %d", (unsigned)ids[i], i, t->size);
    if (k > 1 && (tokenizer_encode(t, text, n, again, k / 2) != k || memcmp(ids, again, k / 2 * sizeof *ids)))
        fuzz_fail("encoding with room for %zu of %zu ids gives another count or prefix", k / 2, k);
    size_t len = tokenizer_decode(t, ids, k, NULL, 0);
    char *out = malloc(len + 1), *out2 = malloc(len + 1);
    if (tokenizer_decode(t, ids, k, out, len + 1) != len || strlen(out) > len ||
        tokenizer_decode(t, ids, k, out2, len + 1) != len || strcmp(out, out2))
        fuzz_fail("decoding %zu ids gives another length or text the second time", k);
    if (k)
        tokenizer_decode_next(t, ids + k - 1, 1, out, len + 1);
    free(out);
    free(out2);
    free(ids);
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    char path[512], config[512];
    fuzz_write("tok/tokenizer.json", data, json_len);
    fuzz_path(config, sizeof config, "tok/tokenizer_config.json");
    if (nul)
        fuzz_write("tok/tokenizer_config.json", nul + 1, size - json_len - 1);
    else
        remove(config);
    fuzz_path(path, sizeof path, "tok/tokenizer.json");
    struct config_tokenizer cfg = {.type = TOKENIZER_HF, .path = path};
    struct tokenizer t;
    char err[2048] = "";
    if (tokenizer_open(&t, &cfg, err, sizeof err)) {
        fuzz_refused("tokenizer_open", err);
        return 0;
    }
    if (t.size < 1 || t.bos < 0 || t.bos >= t.size || t.eos < 0 || t.eos >= t.size || t.pad < 0 || t.pad >= t.size)
        fuzz_fail("size %d, special ids bos %d eos %d pad %d", t.size, t.bos, t.eos, t.pad);
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        check_text(&t, texts[i], strlen(texts[i]));
    check_text(&t, (const char *)data, size < 512 ? size : 512);
    tokenizer_close(&t);
    return 0;
}
