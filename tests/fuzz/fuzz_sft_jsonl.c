/* fuzz_sft_jsonl: the sft_jsonl dataset reader (src/data/data_sft.c) and
 * the sequence lists built from it, through data_open.
 *
 * Input: byte 0 chooses the recipe (bit 0 dataset.packed, bit 1
 * train_on_input, bit 2 skip_bad_lines, bit 3 val_fraction 0.25, bits 4-6
 * max_seq_len 1, 2, 3, 4, 7, 16, 64 or 512); the rest is the .jsonl file.
 * Promises checked: fuzz_data.h's invariants of what data_open accepts. */
#include "fuzz.h"

#include "fuzz_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int T[] = {1, 2, 3, 4, 7, 16, 64, 512};
    if (size < 1)
        return 0;
    unsigned opt = data[0] & 127u;
    char extra[256];
    snprintf(extra, sizeof extra, "  packed: %s\n  train_on_input: %s\n  skip_bad_lines: %s\n  val_fraction: %s\n",
             opt & 1 ? "true" : "false", opt & 2 ? "true" : "false", opt & 4 ? "true" : "false",
             opt & 8 ? "0.25" : "0");
    const struct config *cfg = fuzz_data_config(opt, "sft_jsonl", "data.jsonl", T[opt >> 4], 300, extra);
    fuzz_write("data.jsonl", data + 1, size - 1);
    fuzz_data_open(cfg);
    return 0;
}
