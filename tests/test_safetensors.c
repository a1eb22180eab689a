/* test_safetensors: write/read round trips bit-exact, F16/BF16 decoding
 * against known bit patterns, every class of header error with the tensor
 * named, and the atomic write. `test_safetensors convert IN OUT` reads IN and
 * writes it back as F32, for test_safetensors_py's cross-check. */
#include "test_util.h"

#include "vktrain/safetensors.h"

#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[1024];

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* A file made by hand: the 8-byte length, the header (padded with pad
 * spaces) and len bytes of data. */
static const char *handmade(const char *name, const char *header, int pad, const void *data, size_t len)
{
    size_t h = strlen(header) + (size_t)pad, n = 8 + h + len;
    uint8_t *buf = malloc(n);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(buf + 8, header, strlen(header));
    memset(buf + 8 + strlen(header), ' ', (size_t)pad);
    memcpy(buf + 8 + h, data, len);
    const char *path = test_write(name, buf, (long)n);
    free(buf);
    return path;
}

static void test_round_trip(void)
{
    static float a[3], b[2 * 5], c[1] = {-0.0f}, d[1] = {3.5f}, e[2 * 1 * 3 * 1];
    for (int i = 0; i < 3; i++)
        a[i] = 0.1f * (float)i - 1.0f;
    for (int i = 0; i < 10; i++)
        b[i] = (float)i / 7.0f;
    b[3] = from_bits(0x7fc12345); /* NaN with a payload */
    b[4] = from_bits(0x00000001); /* smallest subnormal */
    b[5] = -INFINITY;
    for (int i = 0; i < 6; i++)
        e[i] = (float)(i * i) * 1e-30f;
    struct st_tensor t[] = {
        {"model.layers.0.w", 1, {3}, a, NULL}, {"b", 2, {2, 5}, b, NULL},       {"c", 1, {1}, c, NULL},
        {"scalar", 0, {0}, d, NULL},           {"e", 4, {2, 1, 3, 1}, e, NULL}, {"empty", 2, {0, 4}, NULL, NULL},
    };
    int n = (int)(sizeof t / sizeof t[0]);
    char path[512];
    snprintf(path, sizeof path, "%s/rt.safetensors", test_dir);
    CHECK(st_write(path, t, n, "{\"format\":\"pt\"}", err, sizeof err) == 0, "%s", err);

    FILE *f = fopen(path, "rb");
    uint8_t len8[8] = {0};
    CHECK(f && fread(len8, 1, 8, f) == 8, "reading the length");
    if (f)
        fclose(f);
    CHECK(len8[0] % 8 == 0, "header length %u is not a multiple of 8", len8[0]);

    struct st_file r;
    CHECK(st_read(path, &r, err, sizeof err) == 0, "%s", err);
    CHECK(r.n == n, "read %d tensors, wrote %d", r.n, n);
    CHECK(r.metadata_json && !strcmp(r.metadata_json, "{\"format\":\"pt\"}"), "metadata '%s'",
          r.metadata_json ? r.metadata_json : "(null)");
    for (int i = 0; i < n && i < r.n; i++) {
        const struct st_tensor *x = st_find(&r, t[i].name);
        CHECK(x, "tensor '%s' missing", t[i].name);
        if (!x)
            continue;
        CHECK(x->ndim == t[i].ndim, "'%s' ndim %d", x->name, x->ndim);
        CHECK(!memcmp(x->shape, t[i].shape, (size_t)t[i].ndim * sizeof x->shape[0]), "'%s' shape", x->name);
        int64_t k = st_numel(x);
        CHECK(k == st_numel(&t[i]), "'%s' numel %lld", x->name, (long long)k);
        CHECK(k == 0 || !memcmp(x->data, t[i].data, (size_t)k * 4), "'%s' data differs", x->name);
        CHECK(!strcmp(r.t[i].name, t[i].name), "order: '%s' at %d, want '%s'", r.t[i].name, i, t[i].name);
    }
    CHECK(!st_find(&r, "nope"), "found a tensor never written");
    st_free(&r);
    CHECK(r.n == 0 && !r.t && !r.metadata_json, "st_free left state");

    /* Overwriting an existing file leaves the new content and no .tmp. */
    CHECK(st_write(path, t, 2, NULL, err, sizeof err) == 0, "%s", err);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(!exists(tmp), "%s left behind", tmp);
    CHECK(st_read(path, &r, err, sizeof err) == 0, "%s", err);
    CHECK(r.n == 2 && !r.metadata_json, "overwrite: %d tensors", r.n);
    st_free(&r);
}

static void test_half_formats(void)
{
    /* f16 bit patterns and the f32 bits each must become. */
    static const uint16_t h[] = {0x3c00, 0xc000, 0x0001, 0x8001, 0x03ff, 0x0400,
                                 0x7bff, 0x7c00, 0xfc00, 0x8000, 0x0000, 0x7e00};
    static const uint32_t hw[] = {0x3f800000, 0xc0000000, 0x33800000, 0xb3800000, 0x387fc000, 0x38800000,
                                  0x477fe000, 0x7f800000, 0xff800000, 0x80000000, 0x00000000, 0x7fc00000};
    static const uint16_t b[] = {0x3f80, 0x8000, 0x7f80, 0xff80, 0x0001, 0xc049, 0x7fc0};
    enum { NH = sizeof h / 2, NB = sizeof b / 2 };
    uint8_t data[2 * (NH + NB) + 4] = {0};
    for (int i = 0; i < NH + NB; i++) {
        uint16_t v = i < NH ? h[i] : b[i - NH];
        data[2 * i] = (uint8_t)v;
        data[2 * i + 1] = (uint8_t)(v >> 8);
    }
    char header[256];
    /* A 4-byte hole at the end and a space-padded header are both allowed. */
    snprintf(header, sizeof header,
             "{\"h\":{\"dtype\":\"F16\",\"shape\":[3,4],\"data_offsets\":[0,%d]},"
             "\"b\":{\"dtype\":\"BF16\",\"shape\":[%d],\"data_offsets\":[%d,%d]}}",
             2 * NH, NB, 2 * NH, 2 * (NH + NB));
    const char *path = handmade("half.safetensors", header, 5, data, sizeof data);
    struct st_file r;
    CHECK(st_read(path, &r, err, sizeof err) == 0, "%s", err);
    const struct st_tensor *th = st_find(&r, "h"), *tb = st_find(&r, "b");
    CHECK(th && tb && th->ndim == 2 && th->shape[1] == 4, "tensors h and b");
    for (int i = 0; th && i < NH; i++)
        CHECK(bits(th->data[i]) == hw[i], "f16 0x%04x -> 0x%08x, want 0x%08x", h[i], bits(th->data[i]), hw[i]);
    for (int i = 0; tb && i < NB; i++)
        CHECK(bits(tb->data[i]) == (uint32_t)b[i] << 16, "bf16 0x%04x -> 0x%08x", b[i], bits(tb->data[i]));
    CHECK(tb && fabsf(tb->data[5] + 3.140625f) == 0.0f, "bf16 0xc049 is -3.140625");
    st_free(&r);

    /* Every finite f16, by a second formula: (-1)^s * m' * 2^(e-25). */
    uint8_t all[2 * 65536];
    for (int i = 0; i < 65536; i++) {
        all[2 * i] = (uint8_t)i;
        all[2 * i + 1] = (uint8_t)(i >> 8);
    }
    path = handmade("all.safetensors", "{\"x\":{\"dtype\":\"F16\",\"shape\":[65536],\"data_offsets\":[0,131072]}}", 0,
                    all, sizeof all);
    CHECK(st_read(path, &r, err, sizeof err) == 0, "%s", err);
    int bad = 0;
    for (int i = 0; r.n && i < 65536; i++) {
        int e = (i >> 10) & 31, m = i & 1023;
        if (e == 31)
            bad += m ? !isnan(r.t[0].data[i]) : !isinf(r.t[0].data[i]);
        else {
            double v = ldexp(e ? 1024 + m : m, (e ? e : 1) - 25) * (i & 0x8000 ? -1 : 1);
            bad += (double)r.t[0].data[i] != v || !signbit(r.t[0].data[i]) != !(i & 0x8000);
        }
    }
    CHECK(bad == 0, "%d of 65536 f16 values decode wrong", bad);
    st_free(&r);
}

/* st_read of a handmade file must fail with a message containing want and
 * want2 (NULL: not checked), and leave out empty. */
static void expect_read_error(const char *header, size_t data_len, const char *want, const char *want2)
{
    static uint8_t zeros[64];
    const char *path = handmade("bad.safetensors", header, 0, zeros, data_len);
    struct st_file r;
    err[0] = 0;
    int rc = st_read(path, &r, err, sizeof err);
    CHECK(rc == -1, "accepted header %s", header);
    if (rc == 0)
        st_free(&r);
    CHECK_MSG(err, want);
    if (want2)
        CHECK_MSG(err, want2);
    CHECK_MSG(err, "bad.safetensors");
    CHECK(r.n == 0 && !r.t && !r.metadata_json, "failed read left tensors");
}

static void test_header_errors(void)
{
    struct st_file r;
    const char *p = test_write("short.safetensors", "\x10\0\0\0", 4);
    CHECK(st_read(p, &r, err, sizeof err) == -1, "accepted a 4-byte file");
    CHECK_MSG(err, "too short");
    p = handmade("long.safetensors", "{}", 0, "", 0);
    FILE *f = fopen(p, "r+b");
    fputc(200, f); /* header length 200 in a 10-byte file */
    fclose(f);
    CHECK(st_read(p, &r, err, sizeof err) == -1, "accepted a header beyond the file");
    CHECK_MSG(err, "header length 200 exceeds");
    CHECK(st_read("/nonexistent/x.safetensors", &r, err, sizeof err) == -1, "read a missing file");
    CHECK_MSG(err, "cannot open");

    expect_read_error("{\"w\": {\"dtype\": \"F32\",", 0, "not valid JSON", NULL);
    expect_read_error("[1, 2]", 0, "not a JSON object", NULL);
    expect_read_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                      8, "not valid JSON", "duplicate");
    expect_read_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "'w'", "data_offsets");
    expect_read_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "'w'", "data_offsets");
    expect_read_error("{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "'w'", "dtype");
    expect_read_error("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "'w'", "shape");
    expect_read_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,8]}}", 8, "'w'", "shape[1]");
    expect_read_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,2],\"data_offsets\":[0,8]}}", 8, "'w'", "5 dims");
    expect_read_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, "'w'", "out of range");
    expect_read_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, "'w'", "out of range");
    expect_read_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 12, "'w'", "needs 12");
    expect_read_error("{\"w\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,12]}}", 12, "'w'", "needs 6");
    /* a shape whose byte size overflows 64 bits (2^96 x 4 bytes): refused, never
     * wrapped to a small size that the offsets could match */
    expect_read_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
                      "\"data_offsets\":[0,0]}}",
                      0, "'w'", "shape overflows");
    expect_read_error("{\"w\":{\"dtype\":\"F16\",\"shape\":[9223372036854775807,2],\"data_offsets\":[0,4]}}",
                      8, "'w'", "shape overflows");
    expect_read_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                      12, "'a' [0, 8) and 'b' [4, 12) overlap", NULL);
    expect_read_error("{\"ids\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, "'ids'",
                      "unsupported dtype 'I64'");
    expect_read_error("{\"w\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "'w'", "unknown dtype");
    expect_read_error("{\"__metadata__\":{\"format\":1}}", 0, "__metadata__", "'format'");
    expect_read_error("{\"w\":[1]}", 0, "'w'", "not an object");
    char hdr[400];
    snprintf(hdr, sizeof hdr, "{\"%0200d\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 7);
    expect_read_error(hdr, 4, "name longer than 127", NULL);
}

static void test_write_errors(void)
{
    float x[2] = {1, 2};
    struct st_tensor t[] = {{"w", 1, {2}, x, NULL}, {"w", 1, {2}, x, NULL}};
    char path[512], tmp[600];
    snprintf(path, sizeof path, "%s/w.safetensors", test_dir);
    CHECK(st_write(path, t, 2, NULL, err, sizeof err) == -1, "wrote duplicate names");
    CHECK_MSG(err, "'w'");
    CHECK(st_write(path, t, 1, "{\"format\":", err, sizeof err) == -1, "wrote bad metadata");
    CHECK_MSG(err, "metadata");
    CHECK(st_write(path, t, 1, "{\"n\":3}", err, sizeof err) == -1, "wrote non-string metadata");
    CHECK(!exists(path), "a failed write created %s", path);

    snprintf(path, sizeof path, "%s/no/such/dir/w.safetensors", test_dir);
    CHECK(st_write(path, t, 1, NULL, err, sizeof err) == -1, "wrote into a missing directory");
    CHECK_MSG(err, "cannot create");
    CHECK(!exists(path), "created %s", path);

    /* The rename fails (a directory is in the way): no .tmp stays behind. */
    snprintf(path, sizeof path, "%s/isdir.safetensors", test_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    mkdir(path, 0755);
    CHECK(st_write(path, t, 1, NULL, err, sizeof err) == -1, "renamed over a directory");
    CHECK_MSG(err, "write failed");
    CHECK(!exists(tmp), "%s left behind", tmp);

    if (geteuid() != 0) { /* root writes anywhere */
        char dir[300];
        snprintf(dir, sizeof dir, "%s/ro", test_dir);
        mkdir(dir, 0555);
        snprintf(path, sizeof path, "%s/w.safetensors", dir);
        CHECK(st_write(path, t, 1, NULL, err, sizeof err) == -1, "wrote into a read-only directory");
        CHECK(!exists(path), "created %s", path);
        chmod(dir, 0755);
    }
}

/* Reads in and writes its tensors as F32 to out, metadata kept. */
static int convert(const char *in, const char *out)
{
    struct st_file r;
    if (st_read(in, &r, err, sizeof err) || st_write(out, r.t, r.n, r.metadata_json, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    st_free(&r);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "convert"))
        return convert(argv[2], argv[3]);
    test_tmpdir();
    test_round_trip();
    test_half_formats();
    test_header_errors();
    test_write_errors();
    return test_result("test_safetensors");
}
