/* test_tokenizer: the byte tokenizer's ids and its round trip for every byte
 * string, invalid UTF-8 included. */
#include "test_util.h"

#include "vktrain/tokenizer.h"

int main(void)
{
    struct tokenizer t;
    struct config_tokenizer cfg = {.type = TOKENIZER_BYTE};
    char err[256];
    CHECK(tokenizer_open(&t, &cfg, err, sizeof err) == 0, "%s", err);
    CHECK(t.size == 259 && t.bos == 256 && t.eos == 257 && t.pad == 258, "special ids");

    /* Every byte value, then invalid UTF-8: a lone continuation byte, a
     * truncated sequence, an overlong encoding, a surrogate, 0xff. */
    unsigned char text[256 + 16];
    for (int i = 0; i < 256; i++)
        text[i] = (unsigned char)i;
    const unsigned char bad[16] = {0x80, 0xc3, 0x28, 0xc0, 0xaf, 0xed, 0xa0, 0x80,
                                   0xff, 0xfe, 0xe2, 0x82, 'x',  0xf0, 0x9f, 0x98};
    memcpy(text + 256, bad, sizeof bad);
    vkt_token ids[sizeof text];
    CHECK(tokenizer_encode(&t, text, sizeof text, ids, sizeof text) == sizeof text, "count");
    for (size_t i = 0; i < sizeof text; i++)
        CHECK(ids[i] == text[i], "byte %zu -> id %u", i, ids[i]);
    char back[sizeof text + 1];
    CHECK(tokenizer_decode(&t, ids, sizeof text, back, sizeof back) == sizeof text, "decode length");
    CHECK(!memcmp(back, text, sizeof text), "round trip differs");

    const char *utf8 = "héllo, wörld ✓ 🙂";
    vkt_token u[64];
    size_t n = tokenizer_encode(&t, utf8, strlen(utf8), u, 64);
    CHECK(n == strlen(utf8), "one id per byte");
    /* too little room: the count, and as many ids as fit */
    vkt_token few[3] = {0, 0, 999};
    CHECK(tokenizer_encode(&t, "abcd", 4, few, 2) == 4 && few[0] == 'a' && few[1] == 'b' && few[2] == 999,
          "encode with room for 2 of 4 ids");
    CHECK(tokenizer_decode(&t, u, n, back, sizeof back) == n && !strcmp(back, utf8), "utf-8 round trip");

    vkt_token special[] = {256, 'a', 257, 258, 300};
    char s[64];
    CHECK(tokenizer_decode(&t, special, 5, s, sizeof s) == strlen("<|bos|>a<|eos|><|pad|><|id:300|>") &&
              !strcmp(s, "<|bos|>a<|eos|><|pad|><|id:300|>"),
          "specials: %s", s);
    CHECK(tokenizer_decode(&t, special, 5, s, 4) == 32 && !strcmp(s, "<|b"), "truncated: %s", s);

    struct config_tokenizer hf = {.type = TOKENIZER_HF};
    CHECK(tokenizer_open(&t, &hf, err, sizeof err) == -1 && strstr(err, "tokenizer.path"), "hf without a path: %s",
          err);
    return test_result("test_tokenizer");
}
