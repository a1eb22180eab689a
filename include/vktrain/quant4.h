/* quant4: frozen weights in 4 bits (QLoRA's NF4, and bitsandbytes' FP4 in
 * its folders), in the one buffer layout every matmul kernel reads (shaders/common/
 * quant4.glsl) and the host writes here.
 *
 * A weight of n elements (row-major, as the fp32 tensor) is cut into
 * blocks of `block` consecutive elements (64 unless a pre-quantized
 * folder says otherwise); each block keeps its largest magnitude, absmax,
 * and each element a 4-bit index q into a code of 16 values, two per
 * byte, the even element in the high nibble (bitsandbytes' packing). An
 * element's value is exactly code[q] · absmax in fp32, then rounded to
 * bf16 or f16 (nearest even) where the flags say so: a bitsandbytes
 * folder's weights dequantize to the dtype they were quantized from, as
 * bitsandbytes' kernels do. With double
 * quantization (bitsandbytes' compress_statistics) the absmax values are
 * themselves stored in 8 bits:
 * absmax = code8[q8] · nested[b / 256] + offset, two fp32 roundings.
 *
 * The buffer, in 32-bit words:
 *   [0] flags (Q4_FLAG_*)      [1] log2(block)         [2] n
 *   [3] absmax (word index)    [4] data (word index)   [5] nested absmax
 *   [6] offset (fp32 bits)     [7] code8 (word index)  [8..15] 0
 *   [16..31] the 16 code values (fp32)
 * then, with double quantization, code8 (256 fp32), the nested absmax
 * values (fp32, one per 256 blocks) and the 8-bit absmax indices (one
 * byte per block); without it the absmax values (fp32); then the nibbles,
 * ceil(n / 2) bytes. Every section starts on a word. */
#ifndef VKTRAIN_QUANT4_H
#define VKTRAIN_QUANT4_H

#include <stddef.h>
#include <stdint.h>

#define Q4_FLAG_NESTED 1u
#define Q4_FLAG_BF16 2u /* values rounded to bf16 */
#define Q4_FLAG_F16 4u  /* values rounded to f16 */
#define Q4_CODE_WORD 16u
#define Q4_NESTED_BLOCK 256u
enum { Q4_W_FLAGS, Q4_W_LOG2_BLOCK, Q4_W_NUMEL, Q4_W_ABSMAX, Q4_W_DATA, Q4_W_NESTED, Q4_W_OFFSET, Q4_W_CODE8 };

/* Where the sections of a weight of n elements lie (word indices), and
 * its words in all. */
struct q4_layout {
    size_t n, blocks, nested_blocks, words;
    uint32_t log2_block, absmax, data, nested, code8;
    int double_quant;
};
/* The layout for n elements in blocks of `block` (a power of two, 32 to
 * 4096 as bitsandbytes allows; others are fatal). */
void q4_layout(struct q4_layout *l, size_t n, uint32_t block, int double_quant);
size_t q4_bytes(size_t n, uint32_t block, int double_quant);

/* bitsandbytes' 4-bit codes as its kernels hold them: NF4 (NormalFloat4,
 * quantiles of N(0, 1) scaled to [-1, 1]) and FP4 (e2m1 values
 * {0, 0.0625, 8, 12, 4, 6, 2, 3} / 12 in index order, bit 3 the sign:
 * index 8 is -0, as its CUDA kernel computes it). */
enum q4_code { Q4_NF4, Q4_FP4 };
const float *q4_code(enum q4_code c);

/* bitsandbytes' signed 8-bit dynamic code (create_dynamic_map), sorted;
 * its float32 linspace rounded from the real values (a torch build's own
 * linspace may differ in the last bit of a few entries: a folder's stored
 * code8 is what its dequantization uses). */
void q4_dynamic_code(float code[256]);

/* Quantizes x (n floats) into buf (q4_bytes words, zeroed by the caller or
 * not): absmax per block, each element's nearest code value as
 * bitsandbytes' kernel picks it (x · (1 / absmax) against the midpoints
 * of the sorted code, a value on a midpoint taking the lower one; a block
 * of zeros gets absmax 0 and the code's 0). double_quant: the absmax
 * values less their mean (offset), in blocks of 256 scaled by their
 * largest magnitude, to the nearest code8 value as bitsandbytes' binary
 * search picks it. */
void q4_quantize(uint32_t *buf, const float *x, size_t n, uint32_t block, int double_quant);
/* A weight as bitsandbytes stores it (a Linear4bit's weight and its
 * quant_state): the packed nibbles (element e in byte e / 2, the high
 * nibble for even e), one fp32 absmax per block, or with double
 * quantization one 8-bit index per block into code8 (the folder's
 * nested_quant_map) scaled by nested (one per 256 blocks) plus offset. */
struct q4_bnb {
    const uint8_t *packed;
    const float *absmax;
    const uint8_t *absmax8;
    const float *nested, *code8;
    float offset;
    enum q4_code code;
    uint32_t block, round; /* round: 0, Q4_FLAG_BF16 or Q4_FLAG_F16 */
};
/* Fills buf (q4_bytes(n, w->block, w->absmax8 != NULL) bytes) with the n
 * elements of w from element e0 on, a multiple of the block (with double
 * quantization of 256 blocks: model_io checks it): the same nibbles,
 * scales and codes, so the buffer's values are bitsandbytes'. */
void q4_from_bnb(uint32_t *buf, const struct q4_bnb *w, size_t e0, size_t n);
/* Every element's value (n of them) as the kernels compute it. */
void q4_dequantize(float *out, const uint32_t *buf);

#endif
