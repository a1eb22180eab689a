/* safetensors: the Hugging Face tensor file format, read and written.
 *
 * Format: an 8-byte little-endian header length N, N bytes of JSON header
 * {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 * "__metadata__": {str: str}}, then the data buffer (offsets relative to its
 * start, row-major, little-endian). Reading converts F32, F16 and BF16 to
 * f32 and validates every header field; writing stores F32 (or BF16) with a header
 * padded to 8 bytes, atomically. Owns the tensors it reads. Never prints,
 * never exits: errors come back as -1 and a message naming the file and the
 * tensor. Knows nothing of models or parameter names. */
#ifndef VKTRAIN_SAFETENSORS_H
#define VKTRAIN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 4
#define ST_NAME_MAX 128            /* including the terminating NUL */
#define ST_HEADER_MAX (100u << 20) /* largest header accepted on read */

struct st_tensor {
    char name[ST_NAME_MAX];
    int ndim; /* 0..ST_MAX_DIMS; 0 is a scalar */
    int64_t shape[ST_MAX_DIMS];
    float *data;    /* numel floats; owned by st_file on read */
    uint8_t *bytes; /* instead, a U8 tensor's numel bytes (st_read_u8); NULL otherwise */
};

struct st_file {
    int n;
    struct st_tensor *t; /* in data-offset order */
    char *metadata_json; /* compact "__metadata__" object, or NULL */
};

/* Product of the first ndim dims (1 for a scalar). */
int64_t st_numel(const struct st_tensor *t);

/* Reads path into out (zeroed first). F32, F16, BF16 become f32; any other
 * dtype is an error naming the tensor and the dtype. Returns 0 or -1. */
int st_read(const char *path, struct st_file *out, char *err, size_t errlen);
/* The same, U8 tensors kept as bytes (st_tensor.bytes, data NULL): a
 * bitsandbytes folder's packed weights and quantization states. */
int st_read_u8(const char *path, struct st_file *out, char *err, size_t errlen);
/* The tensor called name, or NULL. */
const struct st_tensor *st_find(const struct st_file *f, const char *name);
void st_free(struct st_file *f);

/* Writes n F32 tensors in the given order. metadata_json is NULL or a JSON
 * object of string values, e.g. {"format":"pt"}. Atomic (ckpt_write_atomic).
 * Returns 0 or -1. */
int st_write(const char *path, const struct st_tensor *t, int n, const char *metadata_json, char *err, size_t errlen);
/* The same, stored as BF16 (rounded to nearest even) when bf16 is set. */
int st_write_dtype(const char *path, const struct st_tensor *t, int n, const char *metadata_json, int bf16, char *err,
                   size_t errlen);

/* Produces tensor i's st_numel floats into buf. */
typedef void (*st_fill_fn)(void *ctx, int i, float *buf);
/* st_write_dtype for tensors made one at a time: with fill set, t[i].data
 * is not read and fill(ctx, i, buf) writes tensor i into a buffer of the
 * largest tensor's size just before it goes to the file, so the host holds
 * one tensor at a time (saving a model or its optimizer state from device
 * memory). fill NULL: t[i].data, as st_write_dtype. */
int st_write_fill(const char *path, const struct st_tensor *t, int n, const char *metadata_json, int bf16,
                  st_fill_fn fill, void *ctx, char *err, size_t errlen);

/* Writes the n chunks to path.tmp, flushes and fsyncs it, renames it to path
 * and fsyncs the directory, so path holds the old or the new content, never
 * a half-written file. On error path.tmp is removed. Returns 0 or -1. */
int ckpt_write_atomic(const char *path, int n, const void *const *bufs, const size_t *lens, char *err, size_t errlen);
/* For the tests' fault injection (src/train/faults.c): when set, called
 * after each chunk is handed to the file (before the flush and rename). */
extern void (*ckpt_write_hook)(const char *path, int chunk);

#endif
