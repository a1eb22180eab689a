/* test_repro_probe: the reproducible mode's start-up probe.
 *  1. the host's C arithmetic gives every case's written IEEE answer (the
 *     table is right, and this host can feed the mode);
 *  2. on this device every case passes and the digest is the expected one
 *     (lavapipe rounds to nearest even, keeps subnormals and signed zeros,
 *     and honours NoContraction);
 *  3. negative control: a case given a wrong answer fails, the message
 *     names it with both bit patterns, and the digest is still the
 *     device's (it hashes what the device computed, not the answers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_testing.h"
#include "vktrain/repro.h"

int main(void)
{
    for (size_t i = 0; i < repro_probe_case_count; i++) {
        const struct repro_probe_case *c = &repro_probe_cases[i];
        uint32_t h = repro_probe_host(c);
        int nan = (h & 0x7fffffffu) > 0x7f800000u && (c->expect & 0x7fffffffu) > 0x7f800000u;
        CHECK(h == c->expect || nan, "host: %s: 0x%08x, the table says 0x%08x", c->what, h, c->expect);
    }

    struct gpu *g = test_gpu();
    char why[1024];
    uint64_t digest = 0;
    int failed = repro_probe(g, &digest, why, sizeof why);
    printf("probe: %zu cases, %d failed%s%s; digest %016llx\n", repro_probe_case_count, failed, failed ? ": " : "",
           failed ? why : "", (unsigned long long)digest);
    CHECK(failed == 0, "the device fails the probe: %s", why);
    CHECK(digest == repro_probe_expected_digest(), "digest %016llx, expected %016llx", (unsigned long long)digest,
          (unsigned long long)repro_probe_expected_digest());

    struct repro_probe_case *bad = vkt_malloc(repro_probe_case_count * sizeof *bad, "cases");
    memcpy(bad, repro_probe_cases, repro_probe_case_count * sizeof *bad);
    size_t k = 0;
    while (k < repro_probe_case_count && strcmp(bad[k].what, "a*b+c is not fused") != 0)
        k++;
    CHECK(k < repro_probe_case_count, "no case 'a*b+c is not fused'");
    if (k < repro_probe_case_count) {
        bad[k].expect = 0xa8800000u; /* −2^-46: the fused answer, as if the table were written from an FMA */
        uint64_t d2 = 0;
        int f2 = repro_probe_run(g, bad, repro_probe_case_count, &d2, why, sizeof why);
        printf("negative control: %d failed: %s\n", f2, why);
        CHECK(f2 == 1, "the wrong answer is not caught (%d failures)", f2);
        CHECK_MSG(why, "a*b+c is not fused: got 0x00000000, IEEE gives 0xa8800000");
        CHECK(d2 == digest, "the digest depends on the answers, not only on the device's results");
    }
    free(bad);
    gpu_destroy(g);
    return test_failures ? 1 : 0;
}
