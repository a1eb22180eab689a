/* data_testing: opening a dataset from recipe text, for the data tests. */
#ifndef VKTRAIN_DATA_TESTING_H
#define VKTRAIN_DATA_TESTING_H

#include "test_util.h"
#include "vktrain/data.h"

/* The recipe the data tests open their datasets with; test_data_close
 * frees it. */
static struct config test_cfg;

/* Loads recipe (YAML text; `name` stands for its file in messages) with n
 * overrides and opens its dataset: 0, or -1 with the message in err (a
 * recipe error also fails the test). */
static inline int test_data_open(struct data *d, const char *recipe, const char *name, int n, char **ov, char *err,
                                 size_t errlen)
{
    if (config_load_string(&test_cfg, recipe, name, n, ov, err, errlen)) {
        CHECK(0, "recipe: %s", err);
        return -1;
    }
    int rc = data_open(d, &test_cfg, err, errlen);
    if (rc)
        config_free(&test_cfg);
    return rc;
}

static inline void test_data_close(struct data *d)
{
    data_close(d);
    config_free(&test_cfg);
}

#endif
