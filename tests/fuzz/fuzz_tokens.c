/* fuzz_tokens: the token-shard reader (src/data/data_tokens.c) and the
 * sequence lists built from it, through data_open.
 *
 * Input: one shard file, as it is. The header's int32 [3], unused by the
 * format, chooses the recipe: max_seq_len its low byte mod 64 (64 for 0),
 * and val_fraction 0.25 when its bit 8 is set. model.vocab_size is 1000,
 * so larger tokens are errors. Promises checked: fuzz_data.h's invariants of
 * what data_open accepts. */
#include "fuzz.h"

#include "fuzz_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned opt = size >= 14 ? (unsigned)data[12] % 64 | (data[13] & 1u) << 6 : 0;
    const struct config *cfg = fuzz_data_config(opt, "tokens", "data.bin", opt & 63 ? (int)(opt & 63) : 64, 1000,
                                                opt & 64 ? "  val_fraction: 0.25\n" : "");
    fuzz_write("data.bin", data, size);
    fuzz_data_open(cfg);
    return 0;
}
