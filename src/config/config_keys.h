/* config_keys: the one table of recipe keys (name, type, place in struct
 * config, range, flags) that the loader, the checks, the printer and the hash
 * all walk, and the parse context they share. Internal to src/config. */
#ifndef VKTRAIN_CONFIG_KEYS_H
#define VKTRAIN_CONFIG_KEYS_H

#include "vktrain/config.h"

#include "vktrain/util.h"

enum key_type {
    KT_INT,     /* int */
    KT_I64,     /* int64_t */
    KT_FLOAT,   /* double */
    KT_BOOL,    /* bool */
    KT_STR,     /* char *, NULL when unset */
    KT_ENUM,    /* an enum, spelled by names[] */
    KT_PAIR,    /* double[2], written [a, b] */
    KT_STRLIST, /* char ** with an int count right after it in the struct */
};

enum {
    KF_NULL = 1,      /* `null` allowed: 0 for numbers, NULL for strings */
    KF_AUTO = 2,      /* `auto` allowed, stored as -1 */
    KF_NOHASH = 4,    /* left out of config_hash */
    KF_OPEN_MIN = 8,  /* value must be > min rather than >= min */
    KF_OPEN_MAX = 16, /* value must be < max rather than <= max */
    KF_PATH = 32,     /* a path: at most CONFIG_PATH_MAX bytes */
};

/* The longest path a recipe may give: vktrain appends file names to it
 * (config.json, checkpoints/step_N/...) within the system's 4096 bytes. */
#define CONFIG_PATH_MAX 3072

struct config_key {
    const char *name; /* "optimizer.lr" */
    enum key_type type;
    size_t offset;   /* offsetof(struct config, ...) */
    double min, max; /* numbers and each element of a pair */
    unsigned flags;
    const char *const *names; /* KT_ENUM */
};

extern const struct config_key config_keys[];
extern const int config_n_keys;
#define CONFIG_MAX_KEYS 96

/* Where each key got its value: "file:line:col" or "override 'k=v'". */
struct config_ctx {
    struct config *cfg;
    const char *name; /* the recipe file, for messages */
    bool set[CONFIG_MAX_KEYS];
    bool in_file[CONFIG_MAX_KEYS];
    char where[CONFIG_MAX_KEYS][192];
    char *err;
    size_t errlen;
};

/* Index of a key by full name, or -1. */
int config_key_find(const char *name);
/* 1 if name is a section ("model", "optimizer", ...). */
int config_is_section(const char *name);
/* The nearest key or section by edit distance, or NULL if none is close. */
const char *config_key_suggest(const char *name);

void config_defaults(struct config *cfg);
/* The value as YAML text that reads back as the same value, written to f
 * (any length: long strings and lists are never cut). */
void config_key_write(const struct config *cfg, int k, FILE *f);
/* The same in a string the caller frees. */
char *config_key_text(const struct config *cfg, int k);
/* Numeric view of INT, I64, FLOAT, BOOL and ENUM keys. */
double config_key_get(const struct config *cfg, int k);
void config_key_put(struct config *cfg, int k, double v);
/* 0 if v is inside the key's range, else -1 with "must be ..." in msg. */
int config_key_range(int k, double v, char *msg, size_t n);

/* Writes "<where>: <fmt...>" into ctx->err and returns -1. where_key picks
 * the location: the key's, or just the file name when it was never set. */
int config_fail(struct config_ctx *ctx, int where_key, const char *fmt, ...) VKT_PRINTF(3, 4);

/* Derived defaults, init_from, required keys and cross-key checks. */
int config_resolve(struct config_ctx *ctx);

#endif
