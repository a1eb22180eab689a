/* repro_probe: the reproducible mode's start-up check.
 * A known-answer shader (shaders/reproducible/repro_probe.comp) does, on the device,
 * the arithmetic the profile relies on: rounding to nearest even, signed
 * zeros, Inf and NaN, subnormal results and operands of add and multiply,
 * and `precise` honoured (no fused multiply-add, no reassociation, no
 * factoring). The answers below are IEEE 754 binary32 with round to
 * nearest even, worked out exactly; test_repro_probe checks that the host's
 * own C arithmetic gives them too. This file never decides what to do with
 * a failing device: its caller refuses the mode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vktrain/gpu.h"
#include "vktrain/repro.h"
#include "vktrain/util.h"

enum { OP_ADD, OP_SUB, OP_MUL, OP_MUL_ADD, OP_MUL_MUL, OP_FACTOR, OP_ADD_ADD, OP_LESS, OP_EQUAL };

const struct repro_probe_case repro_probe_cases[] = {
    {"add rounds to nearest, ties to even (down)", OP_ADD, 0x3f800000u, 0x33800000u, 0x00000000u, 0x3f800000u},
    {"add rounds to nearest, ties to even (up)", OP_ADD, 0x3f800001u, 0x33800000u, 0x00000000u, 0x3f800002u},
    {"add rounds to nearest (not toward zero)", OP_ADD, 0x3f800000u, 0x33c00000u, 0x00000000u, 0x3f800001u},
    {"sub rounds to nearest (not toward zero or -Inf)", OP_SUB, 0xbf800000u, 0x33c00000u, 0x00000000u, 0xbf800001u},
    {"mul rounds to nearest, ties to even", OP_MUL, 0x3f800800u, 0x3f800800u, 0x00000000u, 0x3f801000u},
    {"mul rounds to nearest (not up)", OP_MUL, 0x40400000u, 0x3eaaaaabu, 0x00000000u, 0x3f800000u},
    {"mul gives a subnormal result", OP_MUL, 0x00800000u, 0x3f000000u, 0x00000000u, 0x00400000u},
    {"mul of a subnormal operand", OP_MUL, 0x00000001u, 0x40800000u, 0x00000000u, 0x00000004u},
    {"mul rounds a subnormal result to even", OP_MUL, 0x00000003u, 0x3f000000u, 0x00000000u, 0x00000002u},
    {"mul underflows a tie to zero", OP_MUL, 0x00000001u, 0x3f000000u, 0x00000000u, 0x00000000u},
    {"add of subnormals", OP_ADD, 0x00000001u, 0x00000001u, 0x00000000u, 0x00000002u},
    {"sub gives a subnormal result", OP_SUB, 0x00c00000u, 0x00800000u, 0x00000000u, 0x00400000u},
    {"-0 + -0 is -0", OP_ADD, 0x80000000u, 0x80000000u, 0x00000000u, 0x80000000u},
    {"+0 + -0 is +0", OP_ADD, 0x00000000u, 0x80000000u, 0x00000000u, 0x00000000u},
    {"x - x is +0", OP_SUB, 0x3fc00000u, 0x3fc00000u, 0x00000000u, 0x00000000u},
    {"-1 * 0 is -0", OP_MUL, 0xbf800000u, 0x00000000u, 0x00000000u, 0x80000000u},
    {"-0 * -2 is +0", OP_MUL, 0x80000000u, 0xc0000000u, 0x00000000u, 0x00000000u},
    {"a negative underflow is -0", OP_MUL, 0x80000001u, 0x3e800000u, 0x00000000u, 0x80000000u},
    {"mul overflows to Inf", OP_MUL, 0x7f000000u, 0x40000000u, 0x00000000u, 0x7f800000u},
    {"add overflows on a tie to even", OP_ADD, 0x7f7fffffu, 0x73000000u, 0x00000000u, 0x7f800000u},
    {"add below the tie stays finite", OP_ADD, 0x7f7fffffu, 0x72ffffffu, 0x00000000u, 0x7f7fffffu},
    {"Inf - Inf is NaN", OP_SUB, 0x7f800000u, 0x7f800000u, 0x00000000u, 0xffc00000u},
    {"0 * Inf is NaN", OP_MUL, 0x00000000u, 0x7f800000u, 0x00000000u, 0xffc00000u},
    {"Inf * -1 is -Inf", OP_MUL, 0x7f800000u, 0xbf800000u, 0x00000000u, 0xff800000u},
    {"NaN + 1 is NaN", OP_ADD, 0x7fc00000u, 0x3f800000u, 0x00000000u, 0x7fc00000u},
    {"NaN == NaN is false", OP_EQUAL, 0x7fc00000u, 0x7fc00000u, 0x00000000u, 0x00000000u},
    {"NaN < 1 is false", OP_LESS, 0x7fc00000u, 0x3f800000u, 0x00000000u, 0x00000000u},
    {"FLT_MAX < Inf", OP_LESS, 0x7f7fffffu, 0x7f800000u, 0x00000000u, 0x3f800000u},
    {"a*b+c is not fused (tie)", OP_MUL_ADD, 0x3f800800u, 0x3f800800u, 0xbf801000u, 0x00000000u},
    {"a*b+c is not fused", OP_MUL_ADD, 0x3f800001u, 0x3f7ffffeu, 0xbf800000u, 0x00000000u},
    {"(a*b)*c is not reassociated", OP_MUL_MUL, 0x71800000u, 0x03800000u, 0x2b800000u, 0x21800000u},
    {"a*b+b*c is not factored", OP_FACTOR, 0x3f800000u, 0x40400000u, 0x33800000u, 0x40400001u},
    {"(a+b)+c is not reassociated", OP_ADD_ADD, 0x4e800000u, 0xce800000u, 0x3f800000u, 0x3f800000u},
};
const size_t repro_probe_case_count = sizeof repro_probe_cases / sizeof repro_probe_cases[0];

static int is_nan(uint32_t u)
{
    return (u & 0x7fffffffu) > 0x7f800000u;
}

/* NaN payloads are not portable: every NaN counts as the canonical one. */
static uint32_t canonical(uint32_t u)
{
    return is_nan(u) ? 0x7fc00000u : u;
}

uint32_t repro_probe_host(const struct repro_probe_case *c)
{
    float a = repro_float_of(c->a), b = repro_float_of(c->b), x = repro_float_of(c->c), t, u;
    switch (c->op) {
    case OP_ADD:
        return repro_bits_of(a + b);
    case OP_SUB:
        return repro_bits_of(a - b);
    case OP_MUL:
        return repro_bits_of(a * b);
    case OP_MUL_ADD:
        t = a * b;
        return repro_bits_of(t + x);
    case OP_MUL_MUL:
        t = a * b;
        return repro_bits_of(t * x);
    case OP_FACTOR:
        t = a * b;
        u = b * x;
        return repro_bits_of(t + u);
    case OP_ADD_ADD:
        t = a + b;
        return repro_bits_of(t + x);
    case OP_LESS:
        return repro_bits_of(a < b ? 1.0f : 0.0f);
    default:
        return repro_bits_of(a == b ? 1.0f : 0.0f);
    }
}

/* FNV-1a, 64 bits, over the results' bytes. */
static uint64_t digest_of(const uint32_t *r, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 4; k++) {
            h ^= (canonical(r[i]) >> (8 * k)) & 0xffu;
            h *= 0x100000001b3ull;
        }
    return h;
}

uint64_t repro_probe_expected_digest(void)
{
    uint32_t r[sizeof repro_probe_cases / sizeof repro_probe_cases[0]];
    for (size_t i = 0; i < repro_probe_case_count; i++)
        r[i] = repro_probe_cases[i].expect;
    return digest_of(r, repro_probe_case_count);
}

int repro_probe_run(struct gpu *g, const struct repro_probe_case *cases, size_t n, uint64_t *digest, char *why,
                    size_t why_size)
{
    uint32_t *in = vkt_malloc(n * 4 * sizeof *in, "repro probe cases");
    uint32_t *out = vkt_malloc(n * sizeof *out, "repro probe results");
    for (size_t i = 0; i < n; i++) {
        in[4 * i] = cases[i].op;
        in[4 * i + 1] = cases[i].a;
        in[4 * i + 2] = cases[i].b;
        in[4 * i + 3] = cases[i].c;
    }
    struct gpu_buffer *bc = gpu_buffer_create(g, n * 16, "repro probe cases");
    struct gpu_buffer *bo = gpu_buffer_create(g, n * 4, "repro probe results");
    gpu_upload(g, bc, 0, in, n * 16);
    struct gpu_kernel_desc d = {.shader = SHADER_repro_probe, .n_bindings = 2, .push_size = 4};
    struct gpu_arg args[2] = {{bc, 0, 0, 0}, {bo, 1, 0, 0}};
    uint32_t push = (uint32_t)n;
    gpu_dispatch(g, gpu_kernel_get(g, &d), args, &push, (uint32_t)((n + 63) / 64), 1, 1);
    gpu_submit(g);
    gpu_download(g, bo, 0, out, n * 4);
    gpu_buffer_destroy(g, bc);
    gpu_buffer_destroy(g, bo);

    int failed = 0;
    size_t len = 0;
    if (why_size)
        why[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (canonical(out[i]) == canonical(cases[i].expect))
            continue;
        if (failed++ < 4 && len < why_size)
            len += (size_t)snprintf(why + len, why_size - len, "%s%s: got 0x%08x, IEEE gives 0x%08x",
                                    failed > 1 ? "; " : "", cases[i].what, out[i], cases[i].expect);
    }
    if (failed > 4 && len < why_size)
        snprintf(why + len, why_size - len, "; and %d more", failed - 4);
    *digest = digest_of(out, n);
    free(in);
    free(out);
    return failed;
}

int repro_probe(struct gpu *g, uint64_t *digest, char *why, size_t why_size)
{
    return repro_probe_run(g, repro_probe_cases, repro_probe_case_count, digest, why, why_size);
}
