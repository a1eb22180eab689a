/* test_repro_config: the precision key. fp32 is the default and leaves the
 * recipe hash of earlier versions alone; precision: reproducible is
 * accepted and hashed, and what it does not support is refused naming the
 * key: a batch_size that is not a power of two, dist.zero, LoRA,
 * model.base_dtype: bf16, per-head q/k norms (docs/reproducible.md). The
 * hash of model.head_dim and model.qk_norm at their defaults. */
#include <string.h>

#include "test_util.h"

#include "vktrain/config.h"

int main(void)
{
    char err[2048] = "";
    struct config c;
    CHECK(config_load_string(&c, TEST_RECIPE, "r.yaml", 0, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(c.precision == PRECISION_FP32, "default precision %d", (int)c.precision);
    uint64_t h = config_hash(&c);
    config_free(&c);

    char *fp32[] = {"precision=fp32"};
    CHECK(config_load_string(&c, TEST_RECIPE, "r.yaml", 1, fp32, err, sizeof err) == 0, "%s", err);
    CHECK(config_hash(&c) == h, "precision: fp32 changed the recipe hash");
    config_free(&c);

    char *repro[] = {"precision=reproducible"};
    CHECK(config_load_string(&c, TEST_RECIPE, "r.yaml", 1, repro, err, sizeof err) == 0, "%s", err);
    CHECK(c.precision == PRECISION_REPRODUCIBLE, "precision %d", (int)c.precision);
    CHECK(config_hash(&c) != h, "precision: reproducible left the recipe hash alone");
    config_free(&c);

    struct {
        const char *override, *key;
    } refused[] = {
        {"batch_size=6", "batch_size: 6 is not a power of two"},
        {"dist.zero=1", "dist.zero"},
        {"lora.rank=4", "lora"},
        {"model.qk_norm=true", "model.qk_norm"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        char *o[] = {"precision=reproducible", (char *)refused[i].override};
        CHECK(config_load_string(&c, TEST_RECIPE, "r.yaml", 2, o, err, sizeof err) == -1, "%s accepted",
              refused[i].override);
        CHECK_MSG(err, refused[i].key);
        CHECK_MSG(err, "precision: reproducible");
    }
    char *pow2[] = {"precision=reproducible", "batch_size=4"};
    CHECK(config_load_string(&c, TEST_RECIPE, "r.yaml", 2, pow2, err, sizeof err) == 0, "%s", err);
    config_free(&c);

    /* model.head_dim enters the hash only apart from dim / n_heads (64 / 4), qk_norm only when on */
    const char *heads[][2] = {{"model.head_dim=16", "same"}, {"model.head_dim=0", "same"}, {"model.qk_norm=false", "same"},
                              {"model.head_dim=32", "other"}, {"model.qk_norm=true", "other"}};
    for (size_t i = 0; i < sizeof heads / sizeof *heads; i++) {
        char *o[] = {(char *)heads[i][0]};
        CHECK(config_load_string(&c, TEST_RECIPE, "r.yaml", 1, o, err, sizeof err) == 0, "%s", err);
        CHECK((config_hash(&c) == h) == !strcmp(heads[i][1], "same"), "%s: the recipe hash %s", heads[i][0],
              config_hash(&c) == h ? "did not change" : "changed");
        config_free(&c);
    }

    char *bad[] = {"precision=fp16"};
    CHECK(config_load_string(&c, TEST_RECIPE, "r.yaml", 1, bad, err, sizeof err) == -1, "precision: fp16 accepted");
    CHECK_MSG(err, "precision");
    return test_failures ? 1 : 0;
}
