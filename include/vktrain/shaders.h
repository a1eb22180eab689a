/* shaders: the SPIR-V modules embedded at build time (cmake/Shaders.cmake).
 * A module is named after its file, plus _VARIANT for files that declare
 * "// variant:" lines. */
#ifndef VKTRAIN_SHADERS_H
#define VKTRAIN_SHADERS_H

#include <stddef.h>
#include <stdint.h>

struct shader_blob {
    const char *name;
    const uint32_t *code;
    const size_t *size; /* bytes */
};

extern const struct shader_blob shader_blobs[];
extern const size_t shader_blob_count;

#endif
