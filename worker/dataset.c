// dataset.c: IDX (MNIST format) loading through zlib, synthetic clusters, preprocessing.
#include "dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "rng.h"
#include "status.h"
#include "util.h"

#define IDX3_MAGIC 0x00000803u // unsigned bytes, 3 dimensions
#define IDX1_MAGIC 0x00000801u // unsigned bytes, 1 dimension
#define IDX_CHUNK_BYTES (1u << 20) // read granularity; also bounds memory before sizes are proven

// Streams of the synthetic generator; the tag in the top byte keeps them
// apart from each other for any sample index below 2^56.
#define SYNTH_STREAM_MEANS (3ull << 56)
#define SYNTH_STREAM_SPLIT(split) ((uint64_t)((split) + 1) << 56)


static uint32_t be32_(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

// ---- reading through zlib (plain files pass through gzread unchanged) ----

static int open_gz_(const char *path, gzFile *out, char *err, size_t err_bytes)
{
    // open() first so a missing file reports its real errno, not zlib's guess.
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int rc = -errno;
        return util_errorf(err, err_bytes, rc, "%s: cannot open: %s", path, strerror(-rc));
    }
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        return util_errorf(err, err_bytes, VGPU_ENOMEM, "%s: cannot start zlib reader", path);
    }
    gzbuffer(gz, 256u << 10);
    *out = gz;
    return 0;
}

// Reads up to `bytes`; *got < bytes means a clean end of data. A damaged or
// cut-off gzip stream is an error (VGPU_EFORMAT), not an end of data.
static int read_full_(gzFile gz, void *buf, size_t bytes, size_t *got, const char *path, char *err,
                      size_t err_bytes)
{
    size_t done = 0;
    while (done < bytes) {
        size_t want = bytes - done;
        if (want > (1u << 30)) // gzread takes and returns int-sized lengths
            want = 1u << 30;
        int n = gzread(gz, (char *)buf + done, (unsigned)want);
        int errnum = Z_OK;
        const char *why = gzerror(gz, &errnum);
        if (n < 0 || (errnum != Z_OK && errnum != Z_BUF_ERROR)) {
            if (errnum == Z_ERRNO) {
                int rc = errno ? -errno : VGPU_EIO;
                return util_errorf(err, err_bytes, rc, "%s: read error: %s", path, strerror(-rc));
            }
            return util_errorf(err, err_bytes, VGPU_EFORMAT, "%s: corrupt gzip data: %s", path, why);
        }
        if (errnum == Z_BUF_ERROR) // zlib's "unexpected end of file" inside the stream
            return util_errorf(err, err_bytes, VGPU_EFORMAT,
                         "%s: truncated gzip stream (ends after %zu bytes of data)", path,
                         done + (size_t)n);
        done += (size_t)n;
        if ((size_t)n < want)
            break;
    }
    *got = done;
    return 0;
}

// Fails when anything follows the data the header announced.
static int expect_end_(gzFile gz, const char *path, const char *what, char *err, size_t err_bytes)
{
    unsigned char extra;
    size_t got = 0;
    int rc = read_full_(gz, &extra, 1, &got, path, err, err_bytes);
    if (rc < 0)
        return rc;
    if (got)
        return util_errorf(err, err_bytes, VGPU_EFORMAT,
                     "%s: trailing data: file is longer than the header's %s", path, what);
    return 0;
}

struct idx_header_ {
    uint32_t count; // items (images or labels)
    int rows, cols; // pixels; 1 x 1 for label files
};

static int read_header_(gzFile gz, const char *path, int want_images, struct idx_header_ *h,
                        char *err, size_t err_bytes)
{
    unsigned char buf[16];
    size_t need = want_images ? 16 : 8, got = 0;
    int rc = read_full_(gz, buf, need, &got, path, err, err_bytes);
    if (rc < 0)
        return rc;
    // Magic before length: a label file passed as images (8-byte header) is
    // better reported as the wrong kind of file than as a short one.
    uint32_t magic = got >= 4 ? be32_(buf) : 0, want_magic = want_images ? IDX3_MAGIC : IDX1_MAGIC;
    if (got >= 4 && magic != want_magic) {
        if (magic == (want_images ? IDX1_MAGIC : IDX3_MAGIC))
            return util_errorf(err, err_bytes, VGPU_EFORMAT, "%s: this is an IDX%d %s file, expected %s",
                         path, want_images ? 1 : 3, want_images ? "label" : "image",
                         want_images ? "images" : "labels");
        return util_errorf(err, err_bytes, VGPU_EFORMAT,
                     "%s: bad magic 0x%08x (expected 0x%08x: IDX%d unsigned-byte %s)", path, magic,
                     want_magic, want_images ? 3 : 1, want_images ? "images" : "labels");
    }
    if (got < need)
        return util_errorf(err, err_bytes, VGPU_EFORMAT,
                     "%s: truncated: file holds %zu bytes, an IDX%d header needs %zu", path, got,
                     want_images ? 3 : 1, need);
    h->count = be32_(buf + 4);
    h->rows = h->cols = 1;
    if (h->count == 0)
        return util_errorf(err, err_bytes, VGPU_EFORMAT, "%s: header says the file holds 0 %s", path,
                     want_images ? "images" : "labels");
    if (want_images) {
        uint32_t rows = be32_(buf + 8), cols = be32_(buf + 12);
        if (rows == 0 || cols == 0 || rows > DATA_MAX_SIDE || cols > DATA_MAX_SIDE)
            return util_errorf(err, err_bytes, VGPU_EFORMAT,
                         "%s: image size %ux%u out of range (1 to %d per side)", path, rows, cols,
                         DATA_MAX_SIDE);
        h->rows = (int)rows;
        h->cols = (int)cols;
    }
    return 0;
}

// Reads count x rows x cols 8-bit pixels. The array grows with the data
// actually present, so a lying header cannot make us allocate more than the
// file holds (plus one doubling).
static int read_pixels_(gzFile gz, const char *path, const struct idx_header_ *h, uint8_t **out,
                        char *err, size_t err_bytes)
{
    uint64_t total = (uint64_t)h->count * (uint64_t)h->rows * (uint64_t)h->cols;
    if (total > SIZE_MAX / 2)
        return util_errorf(err, err_bytes, VGPU_ENOMEM, "%s: %llu pixels do not fit in memory", path,
                     (unsigned long long)total);
    unsigned char *chunk = malloc(IDX_CHUNK_BYTES);
    if (!chunk)
        return util_errorf(err, err_bytes, VGPU_ENOMEM, "%s: out of memory", path);
    uint8_t *pixels = NULL;
    uint64_t done = 0, cap = 0;
    int rc = 0;
    while (done < total) {
        size_t want = total - done < IDX_CHUNK_BYTES ? (size_t)(total - done) : IDX_CHUNK_BYTES;
        size_t got = 0;
        rc = read_full_(gz, chunk, want, &got, path, err, err_bytes);
        if (rc < 0)
            break;
        if (done + got > cap) {
            uint64_t new_cap = cap ? cap * 2 : (uint64_t)16 * IDX_CHUNK_BYTES;
            if (new_cap > total)
                new_cap = total;
            uint8_t *grown = realloc(pixels, (size_t)new_cap);
            if (!grown) {
                rc = util_errorf(err, err_bytes, VGPU_ENOMEM, "%s: out of memory for %llu pixels", path,
                           (unsigned long long)new_cap);
                break;
            }
            pixels = grown;
            cap = new_cap;
        }
        if (got) // pixels is still NULL after an empty first read
            memcpy(pixels + done, chunk, got);
        done += got;
        if (got < want) {
            rc = util_errorf(err, err_bytes, VGPU_EFORMAT,
                       "%s: truncated: header says %u images of %dx%d (%llu bytes of pixels), "
                       "file holds %llu bytes of pixels",
                       path, h->count, h->rows, h->cols, (unsigned long long)total,
                       (unsigned long long)done);
            break;
        }
    }
    free(chunk);
    if (rc < 0) {
        free(pixels);
        return rc;
    }
    *out = pixels;
    return 0;
}

static int read_labels_(gzFile gz, const char *path, uint32_t count, int classes, int32_t **out,
                        char *err, size_t err_bytes)
{
    unsigned char *raw = malloc(count);
    int32_t *labels = malloc((size_t)count * sizeof(*labels));
    int rc = 0;
    size_t got = 0;
    if (!raw || !labels) {
        rc = util_errorf(err, err_bytes, VGPU_ENOMEM, "%s: out of memory for %u labels", path, count);
        goto done;
    }
    rc = read_full_(gz, raw, count, &got, path, err, err_bytes);
    if (rc < 0)
        goto done;
    if (got < count) {
        rc = util_errorf(err, err_bytes, VGPU_EFORMAT,
                   "%s: truncated: header says %u labels, file holds %zu", path, count, got);
        goto done;
    }
    for (uint32_t i = 0; i < count; i++) {
        if (raw[i] >= classes) {
            rc = util_errorf(err, err_bytes, VGPU_EFORMAT,
                       "%s: label %u at index %u out of range [0, %d)", path, raw[i], i, classes);
            goto done;
        }
        labels[i] = raw[i];
    }
done:
    free(raw);
    if (rc < 0) {
        free(labels);
        return rc;
    }
    *out = labels;
    return 0;
}

// ---- one IDX file: its header first, its payload later ----

struct idx_file_ {
    const char *path;
    gzFile gz;          // positioned after the header
    int images;         // an IDX3 image file; else IDX1 labels
    struct idx_header_ h;
};

static int idx_open_(struct idx_file_ *f, const char *path, int images, char *err, size_t err_bytes)
{
    *f = (struct idx_file_){.path = path, .images = images};
    int rc = open_gz_(path, &f->gz, err, err_bytes);
    if (rc == 0)
        rc = read_header_(f->gz, path, images, &f->h, err, err_bytes);
    return rc;
}

static void idx_close_(struct idx_file_ *f)
{
    if (f->gz)
        gzclose(f->gz);
    f->gz = NULL;
}

// Bytes of pixels or labels the header announces (labels: 1 x 1 each).
static uint64_t idx_payload_bytes_(const struct idx_file_ *f)
{
    return (uint64_t)f->h.count * (uint64_t)f->h.rows * (uint64_t)f->h.cols;
}

static int check_counts_(const struct idx_file_ *im, const struct idx_file_ *lb, char *err,
                         size_t err_bytes)
{
    if (im->h.count == lb->h.count)
        return 0;
    return util_errorf(err, err_bytes, VGPU_EFORMAT, "%s: holds %u labels but %s holds %u images",
                       lb->path, lb->h.count, im->path, im->h.count);
}

// Fails when the headers of files[0..n) claim more than max_bytes together
// (0 = no limit), naming the file that claims the most. Decompressing is
// what costs (a 1 MB .gz can hold a gigabyte of zeros), so this comes before
// any payload is read.
static int check_claims_(const struct idx_file_ *files, int n, uint64_t max_bytes,
                         const char *limit_name, char *err, size_t err_bytes)
{
    uint64_t total = 0;
    int big = 0;
    for (int k = 0; k < n; k++) {
        total += idx_payload_bytes_(&files[k]); // < 2^58: no overflow
        if (idx_payload_bytes_(&files[k]) > idx_payload_bytes_(&files[big]))
            big = k;
    }
    if (!max_bytes || total <= max_bytes)
        return 0;
    const struct idx_file_ *f = &files[big];
    char what[96];
    if (f->images)
        snprintf(what, sizeof what, "%u images of %dx%d", f->h.count, f->h.rows, f->h.cols);
    else
        snprintf(what, sizeof what, "%u labels", f->h.count);
    return util_errorf(err, err_bytes, VGPU_EFORMAT,
                       "%s: header claims %s, %llu bytes; the dataset's %d files claim %llu "
                       "bytes, over the limit of %llu (%s)",
                       f->path, what, (unsigned long long)idx_payload_bytes_(f), n,
                       (unsigned long long)total, (unsigned long long)max_bytes, limit_name);
}

// Reads the payloads of a checked image/label pair into *ds (zeroed on error).
static int load_pair_(struct dataset *ds, const struct idx_file_ *im, const struct idx_file_ *lb,
                      char *err, size_t err_bytes)
{
    memset(ds, 0, sizeof(*ds));
    uint8_t *pixels = NULL;
    int32_t *labels = NULL;
    char what[96];
    int rc = read_pixels_(im->gz, im->path, &im->h, &pixels, err, err_bytes);
    if (rc == 0) {
        snprintf(what, sizeof(what), "%u images of %dx%d", im->h.count, im->h.rows, im->h.cols);
        rc = expect_end_(im->gz, im->path, what, err, err_bytes);
    }
    if (rc == 0)
        rc = read_labels_(lb->gz, lb->path, lb->h.count, DATA_IDX_CLASSES, &labels, err, err_bytes);
    if (rc == 0) {
        snprintf(what, sizeof(what), "%u labels", lb->h.count);
        rc = expect_end_(lb->gz, lb->path, what, err, err_bytes);
    }
    if (rc < 0) {
        free(pixels);
        free(labels);
        return rc;
    }
    ds->count = (long)im->h.count;
    ds->rows = im->h.rows;
    ds->cols = im->h.cols;
    ds->features = im->h.rows * im->h.cols;
    ds->classes = DATA_IDX_CLASSES;
    ds->label_width = 1;
    ds->codes = pixels;
    for (int b = 0; b < 256; b++)
        ds->lut[b] = (float)b / 255.0f;
    ds->labels = labels;
    return 0;
}

// ---- public: IDX ----

int dataset_load_idx(struct dataset *ds, const char *images_path, const char *labels_path,
                     uint64_t max_bytes, char *err, size_t err_bytes)
{
    memset(ds, 0, sizeof(*ds));
    if (err && err_bytes)
        err[0] = '\0';
    struct idx_file_ f[2] = {{0}};
    // Both headers before any payload: a count mismatch fails in microseconds.
    int rc = idx_open_(&f[0], images_path, 1, err, err_bytes);
    if (rc == 0)
        rc = idx_open_(&f[1], labels_path, 0, err, err_bytes);
    if (rc == 0)
        rc = check_counts_(&f[0], &f[1], err, err_bytes);
    if (rc == 0)
        rc = check_claims_(f, 2, max_bytes, "data.max_bytes", err, err_bytes);
    if (rc == 0)
        rc = load_pair_(ds, &f[0], &f[1], err, err_bytes);
    idx_close_(&f[0]);
    idx_close_(&f[1]);
    return rc;
}

// Picks "<dir>/<name>" or "<dir>/<name>.gz"; returns 0, -ENOENT or -ENAMETOOLONG.
static int find_idx_file_(const char *dir, const char *name, char *path, size_t path_bytes)
{
    static const char *suffixes[] = {"", ".gz"};
    for (int k = 0; k < 2; k++) {
        int n = snprintf(path, path_bytes, "%s/%s%s", dir, name, suffixes[k]);
        if (n < 0 || (size_t)n >= path_bytes)
            return -ENAMETOOLONG;
        struct stat st;
        if (stat(path, &st) == 0)
            return 0;
    }
    return -ENOENT;
}

int dataset_load_dir(struct dataset *train, struct dataset *test, const char *dir,
                     uint64_t max_bytes, char *err, size_t err_bytes)
{
    return dataset_load_dir_bounded(train, test, dir, max_bytes, "data.max_bytes", err, err_bytes);
}

int dataset_load_dir_bounded(struct dataset *train, struct dataset *test, const char *dir,
                             uint64_t max_bytes, const char *limit_name, char *err,
                             size_t err_bytes)
{
    static const char *names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                   "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    char paths[4][4096];
    char missing[512] = "";
    memset(train, 0, sizeof(*train));
    memset(test, 0, sizeof(*test));
    for (int k = 0; k < 4; k++) {
        int rc = find_idx_file_(dir, names[k], paths[k], sizeof(paths[k]));
        if (rc == -ENAMETOOLONG)
            return util_errorf(err, err_bytes, rc, "%s: directory name too long", dir);
        if (rc < 0) {
            size_t used = strlen(missing);
            snprintf(missing + used, sizeof(missing) - used, "%s%s[.gz]", used ? ", " : "",
                     names[k]);
        }
    }
    if (missing[0])
        return util_errorf(err, err_bytes, -ENOENT,
                     "%s: dataset files not found: %s (each looked for plain and with .gz)", dir,
                     missing);
    // All four headers before any payload: the pairs' counts, train against
    // test and the total claimed are checked before anything is decompressed.
    struct idx_file_ f[4] = {{0}};
    int rc = 0;
    for (int k = 0; k < 4 && rc == 0; k++)
        rc = idx_open_(&f[k], paths[k], k % 2 == 0, err, err_bytes);
    if (rc == 0)
        rc = check_counts_(&f[0], &f[1], err, err_bytes);
    if (rc == 0)
        rc = check_counts_(&f[2], &f[3], err, err_bytes);
    if (rc == 0 && (f[2].h.rows != f[0].h.rows || f[2].h.cols != f[0].h.cols))
        rc = util_errorf(err, err_bytes, VGPU_EFORMAT, "%s: test images are %dx%d but %s holds %dx%d",
                         paths[2], f[2].h.rows, f[2].h.cols, paths[0], f[0].h.rows, f[0].h.cols);
    if (rc == 0)
        rc = check_claims_(f, 4, max_bytes, limit_name, err, err_bytes);
    if (rc == 0)
        rc = load_pair_(train, &f[0], &f[1], err, err_bytes);
    if (rc == 0)
        rc = load_pair_(test, &f[2], &f[3], err, err_bytes);
    for (int k = 0; k < 4; k++)
        idx_close_(&f[k]);
    if (rc < 0) {
        dataset_free(train);
        dataset_free(test);
    }
    return rc;
}

// ---- public: synthetic ----

// Approximately standard normal: the sum of 12 uniforms minus 6 (Irwin-Hall).
// Only IEEE float additions, no libm, so every machine in a cluster makes the
// same bits for the same (seed, split, index); rng_normal's logf/cosf may
// differ in the last ulp between C libraries.
static float normal_approx_(rng_t *r)
{
    float sum = 0.0f;
    for (int k = 0; k < 12; k++)
        sum += rng_uniform(r);
    return sum - 6.0f;
}

int dataset_make_synthetic(struct dataset *ds, long count, int features, int classes,
                           uint64_t seed, int split)
{
    memset(ds, 0, sizeof(*ds));
    if (count < 1 || features < 1 || classes < 2 || (split != 0 && split != 1) ||
        (uint64_t)count >= (1ull << 56))
        return VGPU_EINVAL;
    size_t n_values = (size_t)count * (size_t)features;
    if ((size_t)count > SIZE_MAX / sizeof(float) / (size_t)features)
        return VGPU_ENOMEM;
    float *means = malloc((size_t)classes * (size_t)features * sizeof(float));
    float *images = malloc(n_values * sizeof(float));
    int32_t *labels = malloc((size_t)count * sizeof(int32_t));
    if (!means || !images || !labels) {
        free(means);
        free(images);
        free(labels);
        return VGPU_ENOMEM;
    }
    // Means in [0.2, 0.8] keep most of each cluster inside the [0, 1] clamp,
    // so the clusters stay separable rather than piling up on the bounds.
    for (int c = 0; c < classes; c++) {
        rng_t r;
        rng_init(&r, seed, SYNTH_STREAM_MEANS + (uint64_t)c);
        for (int j = 0; j < features; j++)
            means[(size_t)c * features + j] = 0.2f + 0.6f * rng_uniform(&r);
    }
    for (long i = 0; i < count; i++) {
        rng_t r;
        rng_init(&r, seed, SYNTH_STREAM_SPLIT(split) + (uint64_t)i);
        int c = (int)rng_below(&r, (uint32_t)classes);
        const float *mean = means + (size_t)c * features;
        float *x = images + (size_t)i * features;
        for (int j = 0; j < features; j++) {
            float v = mean[j] + DATA_SYNTH_NOISE * normal_approx_(&r);
            x[j] = v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
        }
        labels[i] = c;
    }
    free(means);
    ds->count = count;
    ds->rows = 1;
    ds->cols = features;
    ds->features = features;
    ds->classes = classes;
    ds->label_width = 1;
    ds->images = images;
    ds->labels = labels;
    return 0;
}

// ---- public: access ----

// Copies samples indices[0..n) of an array of `bytes`-long rows into dst, in
// order. Rows are scattered over the whole set: row i+2 is fetched while row
// i is copied.
static void gather_rows_(const void *base, size_t bytes, const uint32_t *indices, long n, void *dst)
{
    for (long i = 0; i < n; i++) {
        if (i + 2 < n) {
            const char *next = (const char *)base + (size_t)indices[i + 2] * bytes;
            for (size_t b = 0; b < bytes; b += 64)
                __builtin_prefetch(next + b);
        }
        memcpy((char *)dst + (size_t)i * bytes, (const char *)base + (size_t)indices[i] * bytes,
               bytes);
    }
}

void dataset_gather(const struct dataset *ds, const uint32_t *indices, long n, float *out)
{
    const size_t f = (size_t)ds->features;
    if (!ds->codes) {
        gather_rows_(ds->images, f * sizeof(float), indices, n, out);
        return;
    }
    for (long i = 0; i < n; i++) {
        const uint8_t *row = ds->codes + (size_t)indices[i] * f;
        for (size_t j = 0; j < f; j++)
            out[(size_t)i * f + j] = ds->lut[row[j]];
    }
}

void dataset_gather_codes(const struct dataset *ds, const uint32_t *indices, long n, uint8_t *out)
{
    gather_rows_(ds->codes, (size_t)ds->features, indices, n, out);
}

void dataset_gather_tokens(const struct dataset *ds, const uint32_t *indices, long n, int32_t *out)
{
    const size_t f = (size_t)ds->features;
    for (long i = 0; i < n; i++) {
        const uint8_t *row = ds->codes + (size_t)indices[i] * f;
        for (size_t j = 0; j < f; j++)
            out[(size_t)i * f + j] = row[j];
    }
}

void dataset_gather_labels(const struct dataset *ds, const uint32_t *indices, long n, int32_t *out)
{
    const int width = dataset_label_width(ds);
    if (width > 1) {
        gather_rows_(ds->labels, (size_t)width * sizeof(int32_t), indices, n, out);
        return;
    }
    for (long i = 0; i < n; i++)
        out[i] = ds->labels[indices[i]];
}

int dataset_make_sequences(struct dataset *ds, const uint8_t *text, size_t bytes, int context)
{
    memset(ds, 0, sizeof(*ds));
    if (context < 1 || bytes < (size_t)context + 1)
        return VGPU_EINVAL;
    const long count = (long)((bytes - 1) / (size_t)context);
    const size_t n = (size_t)count * (size_t)context;
    uint8_t *codes = malloc(n);
    int32_t *labels = malloc(n * sizeof(int32_t));
    if (!codes || !labels) {
        free(codes);
        free(labels);
        return VGPU_ENOMEM;
    }
    memcpy(codes, text, n);
    for (size_t k = 0; k < n; k++)
        labels[k] = text[k + 1];
    ds->count = count;
    ds->rows = 1;
    ds->cols = context;
    ds->features = context;
    ds->classes = 256;
    ds->codes = codes;
    ds->tokens = 1;
    ds->label_width = context;
    for (int b = 0; b < 256; b++)
        ds->lut[b] = (float)b;
    ds->labels = labels;
    return 0;
}

// ---- public: preprocessing ----

void dataset_pixel_stats(const struct dataset *ds, double *mean, double *std)
{
    size_t n = (size_t)ds->count * (size_t)ds->features;
    double sum = 0.0, sq = 0.0;
    if (n == 0) {
        *mean = 0.0;
        *std = 0.0;
        return;
    }
    // Two passes: the centred sum of squares does not cancel catastrophically.
    for (size_t k = 0; k < n; k++)
        sum += dataset_value(ds, k);
    double m = sum / (double)n;
    for (size_t k = 0; k < n; k++) {
        double d = dataset_value(ds, k) - m;
        sq += d * d;
    }
    *mean = m;
    *std = sqrt(sq / (double)n);
}

static void apply_standardize_(struct dataset *ds, double mean, double std)
{
    if (!ds)
        return;
    // A coded value depends on its code alone: transforming the table is
    // transforming every value, with the same bits.
    for (int b = 0; ds->codes && b < 256; b++)
        ds->lut[b] = (float)((ds->lut[b] - mean) / std);
    if (!ds->images)
        return;
    size_t n = (size_t)ds->count * (size_t)ds->features;
    for (size_t k = 0; k < n; k++)
        ds->images[k] = (float)((ds->images[k] - mean) / std);
}

void dataset_standardize(struct dataset *train, struct dataset *test)
{
    if (train->tokens) // token ids are not measurements
        return;
    double mean, std;
    dataset_pixel_stats(train, &mean, &std);
    if (!(std > 0.0))
        std = 1.0;
    apply_standardize_(train, mean, std);
    apply_standardize_(test, mean, std);
}

void dataset_truncate(struct dataset *ds, long count)
{
    if (count <= 0 || count >= ds->count)
        return;
    ds->count = count;
    // Give the tail back; keeping the old block is fine if realloc declines.
    const size_t values = (size_t)count * (size_t)ds->features;
    float *images = ds->images ? realloc(ds->images, values * sizeof(float)) : NULL;
    if (images)
        ds->images = images;
    uint8_t *codes = ds->codes ? realloc(ds->codes, values) : NULL;
    if (codes)
        ds->codes = codes;
    int32_t *labels =
        realloc(ds->labels, (size_t)count * (size_t)dataset_label_width(ds) * sizeof(int32_t));
    if (labels)
        ds->labels = labels;
}

void dataset_free(struct dataset *ds)
{
    if (!ds)
        return;
    free(ds->images);
    free(ds->codes);
    free(ds->labels);
    memset(ds, 0, sizeof(*ds));
}
