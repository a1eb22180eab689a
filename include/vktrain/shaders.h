/* shaders: the kernel table, the SPIR-V modules embedded at build time
 * (cmake/Shaders.cmake). A module is named after its file, plus _VARIANT
 * for files that declare "// variant:" lines, and C code names it by its
 * constant SHADER_<module> (vktrain/shader_ids.h, generated). */
#ifndef VKTRAIN_SHADERS_H
#define VKTRAIN_SHADERS_H

#include <stddef.h>
#include <stdint.h>

#include "vktrain/shader_ids.h"

struct shader_blob {
    const char *name;    /* the module: <file>[_<variant>] */
    const char *file;    /* under shaders/: <family>/<file>.comp */
    const char *family;  /* common, default or reproducible */
    const char *defines; /* the variant's glslc -D options */
    const char *needs;   /* the compiler feature it needs ("" none) */
    const uint32_t *code; /* NULL: left out of this build (its need unmet) */
    const size_t *size;  /* bytes */
};

extern const struct shader_blob shader_blobs[SHADER_COUNT];

/* The module named `name`, or SHADER_NONE (for names given at run time:
 * tests, --list-kernels). */
enum shader_id shader_lookup(const char *name);

#endif
