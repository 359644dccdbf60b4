// test_dataset.c: IDX loading (plain and gzip, every validation path), synthetic
// data, preprocessing, text (reading, the split); and, with argument
// "fashion-mnist", the real data set.
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "dataset.h"
#include "rng.h"
#include "status.h"

#define FASHION_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define LIMIT (64ull << 20)         // max_bytes for the small fixture files
#define DEFAULT_LIMIT (1ull << 30)  // vgpu_train's default data.max_bytes (1G)

// ---- fixture files, made at run time in a private temporary directory ----

static char tmpdir_[256];

static int make_tmpdir_(void **state)
{
    (void)state;
    snprintf(tmpdir_, sizeof(tmpdir_), "/tmp/vgpu_test_data.XXXXXX");
    return mkdtemp(tmpdir_) ? 0 : -1;
}

static int remove_entry_(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

// The directory and everything in it (the text tests make a directory in it).
static int remove_tmpdir_(void **state)
{
    (void)state;
    return nftw(tmpdir_, remove_entry_, 8, FTW_DEPTH | FTW_PHYS);
}

static const char *tmp_path_(char *buf, const char *name)
{
    snprintf(buf, 512, "%s/%s", tmpdir_, name);
    return buf;
}

static void write_file_(const char *path, const void *bytes, size_t n, int gzip)
{
    if (gzip) {
        gzFile gz = gzopen(path, "wb");
        assert_non_null(gz);
        if (n)
            assert_int_equal(gzwrite(gz, bytes, (unsigned)n), (int)n);
        assert_int_equal(gzclose(gz), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(bytes, 1, n, f), n);
        assert_int_equal(fclose(f), 0);
    }
}

static void put_be32_(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

// An IDX3 image file: header (magic, count, rows, cols) and `pixel_bytes`
// bytes of pixels (pixel k = (7 k + 3) mod 256, so values are checkable).
static void write_images_(const char *path, uint32_t magic, uint32_t count, uint32_t rows,
                          uint32_t cols, size_t pixel_bytes, int gzip)
{
    unsigned char *buf = malloc(16 + pixel_bytes);
    assert_non_null(buf);
    put_be32_(buf, magic);
    put_be32_(buf + 4, count);
    put_be32_(buf + 8, rows);
    put_be32_(buf + 12, cols);
    for (size_t k = 0; k < pixel_bytes; k++)
        buf[16 + k] = (unsigned char)((7 * k + 3) % 256);
    write_file_(path, buf, 16 + pixel_bytes, gzip);
    free(buf);
}

// An IDX1 label file with the given labels; `count` goes in the header.
static void write_labels_(const char *path, uint32_t magic, uint32_t count,
                          const unsigned char *labels, size_t n, int gzip)
{
    unsigned char *buf = malloc(8 + n);
    assert_non_null(buf);
    put_be32_(buf, magic);
    put_be32_(buf + 4, count);
    memcpy(buf + 8, labels, n);
    write_file_(path, buf, 8 + n, gzip);
    free(buf);
}

static const unsigned char labels5_[5] = {3, 0, 9, 7, 1};

// The standard valid pair: 5 images of 3x2 and their labels.
static void write_good_pair_(const char *images, const char *labels, int gzip)
{
    write_images_(images, 0x803, 5, 3, 2, 30, gzip);
    write_labels_(labels, 0x801, 5, labels5_, 5, gzip);
}

static void assert_good_pair_(const struct dataset *ds)
{
    assert_int_equal(ds->count, 5);
    assert_int_equal(ds->rows, 3);
    assert_int_equal(ds->cols, 2);
    assert_int_equal(ds->features, 6);
    assert_int_equal(ds->classes, 10);
    for (int k = 0; k < 30; k++)
        assert_true(dataset_value(ds, (size_t)k) == (float)((7 * k + 3) % 256) / 255.0f);
    assert_null(ds->images); // held as codes: a quarter of the memory
    assert_non_null(ds->codes);
    for (int i = 0; i < 5; i++)
        assert_int_equal(ds->labels[i], labels5_[i]);
}

// Loads, expects `want` and an error message containing `needle` (and the file).
static void expect_load_error_(const char *images, const char *labels, int want,
                               const char *needle, const char *file_named)
{
    struct dataset ds;
    char err[512];
    int rc = dataset_load_idx(&ds, images, labels, LIMIT, err, sizeof(err));
    if (rc != want || !strstr(err, needle) || !strstr(err, file_named))
        print_error("rc %d (want %d), message \"%s\" (want \"%s\" naming %s)\n", rc, want, err,
                    needle, file_named);
    assert_int_equal(rc, want);
    assert_non_null(strstr(err, needle));
    assert_non_null(strstr(err, file_named));
    assert_null(ds.images);
    assert_null(ds.codes);
    assert_null(ds.labels);
    assert_int_equal(ds.count, 0);
}

// ---- IDX: valid files ----

static void test_load_plain(void **state)
{
    (void)state;
    char im[512], lb[512];
    write_good_pair_(tmp_path_(im, "p-images"), tmp_path_(lb, "p-labels"), 0);
    struct dataset ds;
    char err[256];
    assert_int_equal(dataset_load_idx(&ds, im, lb, LIMIT, err, sizeof(err)), 0);
    assert_good_pair_(&ds);
    dataset_free(&ds);
}

static void test_load_gzip(void **state)
{
    (void)state;
    char im[512], lb[512];
    write_good_pair_(tmp_path_(im, "g-images.gz"), tmp_path_(lb, "g-labels.gz"), 1);
    struct dataset ds;
    char err[256];
    assert_int_equal(dataset_load_idx(&ds, im, lb, LIMIT, err, sizeof(err)), 0);
    assert_good_pair_(&ds);
    dataset_free(&ds);
}

// ---- IDX: every validation ----

static void test_bad_magic(void **state)
{
    (void)state;
    char im[512], lb[512];
    write_images_(tmp_path_(im, "m-images"), 0x804, 5, 3, 2, 30, 0);
    write_labels_(tmp_path_(lb, "m-labels"), 0x801, 5, labels5_, 5, 0);
    expect_load_error_(im, lb, VGPU_EFORMAT, "bad magic 0x00000804", im);
    write_images_(im, 0x803, 5, 3, 2, 30, 0);
    write_labels_(lb, 0x901, 5, labels5_, 5, 0);
    expect_load_error_(im, lb, VGPU_EFORMAT, "bad magic 0x00000901", lb);
}

static void test_files_swapped(void **state)
{
    (void)state;
    char im[512], lb[512];
    write_good_pair_(tmp_path_(im, "s-images"), tmp_path_(lb, "s-labels"), 0);
    expect_load_error_(lb, im, VGPU_EFORMAT, "this is an IDX1 label file, expected images", lb);
}

static void test_bad_dimensions(void **state)
{
    (void)state;
    char im[512], lb[512];
    tmp_path_(im, "d-images");
    write_labels_(tmp_path_(lb, "d-labels"), 0x801, 5, labels5_, 5, 0);
    write_images_(im, 0x803, 5, 0, 2, 0, 0);
    expect_load_error_(im, lb, VGPU_EFORMAT, "image size 0x2 out of range", im);
    write_images_(im, 0x803, 5, 3, 4097, 0, 0);
    expect_load_error_(im, lb, VGPU_EFORMAT, "image size 3x4097 out of range", im);
    write_images_(im, 0x803, 0, 3, 2, 0, 0);
    expect_load_error_(im, lb, VGPU_EFORMAT, "holds 0 images", im);
}

static void test_count_mismatch(void **state)
{
    (void)state;
    char im[512], lb[512];
    write_images_(tmp_path_(im, "c-images"), 0x803, 5, 3, 2, 30, 0);
    write_labels_(tmp_path_(lb, "c-labels"), 0x801, 4, labels5_, 4, 0);
    expect_load_error_(im, lb, VGPU_EFORMAT, "holds 4 labels but", lb);
}

static void test_truncated(void **state)
{
    (void)state;
    char im[512], lb[512];
    write_labels_(tmp_path_(lb, "t-labels"), 0x801, 5, labels5_, 5, 0);
    for (int gzip = 0; gzip <= 1; gzip++) {
        tmp_path_(im, gzip ? "t-images.gz" : "t-images");
        write_images_(im, 0x803, 5, 3, 2, 29, gzip);
        expect_load_error_(im, lb, VGPU_EFORMAT,
                           "truncated: header says 5 images of 3x2 (30 bytes of pixels), file "
                           "holds 29 bytes of pixels",
                           im);
        write_images_(im, 0x803, 5, 3, 2, 0, gzip);
        expect_load_error_(im, lb, VGPU_EFORMAT, "file holds 0 bytes of pixels", im);
    }
    // A header cut short, and labels cut short.
    unsigned char hdr[10] = {0, 0, 8, 3, 0, 0, 0, 5, 0, 0};
    write_file_(im, hdr, sizeof(hdr), 0);
    expect_load_error_(im, lb, VGPU_EFORMAT,
                       "truncated: file holds 10 bytes, an IDX3 header needs 16", im);
    write_images_(im, 0x803, 5, 3, 2, 30, 0);
    write_labels_(lb, 0x801, 5, labels5_, 3, 0);
    expect_load_error_(im, lb, VGPU_EFORMAT, "truncated: header says 5 labels, file holds 3", lb);
}

static void test_trailing_data(void **state)
{
    (void)state;
    char im[512], lb[512];
    write_images_(tmp_path_(im, "x-images"), 0x803, 5, 3, 2, 31, 0);
    write_labels_(tmp_path_(lb, "x-labels"), 0x801, 5, labels5_, 5, 0);
    expect_load_error_(im, lb, VGPU_EFORMAT, "trailing data", im);
    write_images_(im, 0x803, 5, 3, 2, 30, 1);
    const unsigned char six[6] = {1, 2, 3, 4, 5, 6};
    write_labels_(lb, 0x801, 5, six, 6, 1);
    expect_load_error_(im, lb, VGPU_EFORMAT,
                       "trailing data: file is longer than the header's 5 labels", lb);
}

static void test_label_out_of_range(void **state)
{
    (void)state;
    char im[512], lb[512], want[600];
    const unsigned char bad[5] = {1, 2, 9, 12, 10};
    write_images_(tmp_path_(im, "r-images"), 0x803, 5, 3, 2, 30, 0);
    write_labels_(tmp_path_(lb, "r-labels.gz"), 0x801, 5, bad, 5, 1);
    snprintf(want, sizeof(want), "%s: label 12 at index 3 out of range [0, 10)", lb);
    struct dataset ds;
    char err[600];
    assert_int_equal(dataset_load_idx(&ds, im, lb, LIMIT, err, sizeof(err)), VGPU_EFORMAT);
    assert_string_equal(err, want);
    // The bound itself is out: classes are [0, 10).
    const unsigned char edge[5] = {0, 9, 9, 0, 10};
    write_labels_(lb, 0x801, 5, edge, 5, 1);
    snprintf(want, sizeof(want), "%s: label 10 at index 4 out of range [0, 10)", lb);
    assert_int_equal(dataset_load_idx(&ds, im, lb, LIMIT, err, sizeof(err)), VGPU_EFORMAT);
    assert_string_equal(err, want);
}

static void test_missing_file(void **state)
{
    (void)state;
    char im[512], lb[512];
    write_labels_(tmp_path_(lb, "n-labels"), 0x801, 5, labels5_, 5, 0);
    expect_load_error_(tmp_path_(im, "no-such-images"), lb, -ENOENT, "cannot open", im);
}

// Random (incompressible) pixels, so cutting the .gz lands inside the deflate data.
static void write_random_gz_images_(const char *path, size_t *gz_bytes)
{
    enum { count = 40, side = 10 };
    unsigned char buf[16 + count * side * side];
    put_be32_(buf, 0x803);
    put_be32_(buf + 4, count);
    put_be32_(buf + 8, side);
    put_be32_(buf + 12, side);
    rng_t r;
    rng_init(&r, 42, 0);
    for (size_t k = 16; k < sizeof(buf); k++)
        buf[k] = (unsigned char)rng_next_u32(&r);
    write_file_(path, buf, sizeof(buf), 1);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    *gz_bytes = (size_t)st.st_size;
}

static void test_corrupt_gzip(void **state)
{
    (void)state;
    char im[512], lb[512];
    unsigned char labels40[40] = {0};
    write_labels_(tmp_path_(lb, "z-labels"), 0x801, 40, labels40, 40, 0);
    tmp_path_(im, "z-images.gz");
    size_t n;
    write_random_gz_images_(im, &n);
    struct dataset ds;
    char err[512];
    assert_int_equal(dataset_load_idx(&ds, im, lb, LIMIT, err, sizeof(err)), 0);
    dataset_free(&ds);

    // Cut off in the middle of the compressed stream.
    assert_int_equal(truncate(im, (off_t)(n / 2)), 0);
    expect_load_error_(im, lb, VGPU_EFORMAT, "truncated gzip stream", im);

    // One flipped bit in the compressed data: either inflate rejects the
    // stream or the gzip CRC does; both must be errors, never wrong pixels.
    write_random_gz_images_(im, &n);
    FILE *f = fopen(im, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, (long)(n / 2), SEEK_SET), 0);
    int c = fgetc(f);
    assert_int_equal(fseek(f, (long)(n / 2), SEEK_SET), 0);
    fputc(c ^ 0x10, f);
    assert_int_equal(fclose(f), 0);
    expect_load_error_(im, lb, VGPU_EFORMAT, "corrupt gzip data", im);
}

// ---- directories ----

static void make_dir_(char *dir, const char *name)
{
    tmp_path_(dir, name);
    assert_int_equal(mkdir(dir, 0700), 0);
}

static void write_in_dir_(const char *dir, const char *name, int images, int gzip, uint32_t count)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/%s%s", dir, name, gzip ? ".gz" : "");
    unsigned char labels[16];
    for (uint32_t i = 0; i < count; i++)
        labels[i] = (unsigned char)(i % 10);
    if (images)
        write_images_(path, 0x803, count, 3, 2, (size_t)count * 6, gzip);
    else
        write_labels_(path, 0x801, count, labels, count, gzip);
}

static void remove_dir_(const char *dir)
{
    static const char *names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                  "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    char path[600];
    for (int k = 0; k < 4; k++)
        for (int gz = 0; gz <= 1; gz++) {
            snprintf(path, sizeof(path), "%s/%s%s", dir, names[k], gz ? ".gz" : "");
            unlink(path);
        }
    assert_int_equal(rmdir(dir), 0);
}

static void test_load_dir(void **state)
{
    (void)state;
    char dir[512];
    make_dir_(dir, "ds");
    write_in_dir_(dir, "train-images-idx3-ubyte", 1, 1, 8);
    write_in_dir_(dir, "train-labels-idx1-ubyte", 0, 0, 8);
    write_in_dir_(dir, "t10k-images-idx3-ubyte", 1, 0, 3);
    write_in_dir_(dir, "t10k-labels-idx1-ubyte", 0, 1, 3);
    struct dataset train, test;
    char err[1024];
    assert_int_equal(dataset_load_dir(&train, &test, dir, LIMIT, err, sizeof(err)), 0);
    assert_int_equal(train.count, 8);
    assert_int_equal(test.count, 3);
    assert_int_equal(train.labels[7], 7);
    dataset_free(&train);
    dataset_free(&test);

    // With both a plain and a .gz file, the plain one is read: make the .gz
    // one unreadable as IDX to see which was taken.
    write_in_dir_(dir, "train-labels-idx1-ubyte", 0, 1, 5);
    assert_int_equal(dataset_load_dir(&train, &test, dir, LIMIT, err, sizeof(err)), 0);
    assert_int_equal(train.count, 8);
    dataset_free(&train);
    dataset_free(&test);

    // A bad test file fails the whole load and leaves nothing to free.
    write_in_dir_(dir, "t10k-labels-idx1-ubyte", 0, 1, 2);
    assert_int_equal(dataset_load_dir(&train, &test, dir, LIMIT, err, sizeof(err)), VGPU_EFORMAT);
    assert_non_null(strstr(err, "t10k-labels-idx1-ubyte.gz: holds 2 labels"));
    assert_null(train.codes);
    assert_null(test.codes);
    remove_dir_(dir);
}

static void test_load_dir_missing(void **state)
{
    (void)state;
    char dir[512];
    make_dir_(dir, "partial");
    write_in_dir_(dir, "train-images-idx3-ubyte", 1, 1, 8);
    write_in_dir_(dir, "t10k-images-idx3-ubyte", 1, 0, 3);
    struct dataset train, test;
    char err[1024];
    assert_int_equal(dataset_load_dir(&train, &test, dir, LIMIT, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, dir));
    assert_non_null(strstr(err, "train-labels-idx1-ubyte[.gz], t10k-labels-idx1-ubyte[.gz]"));
    assert_null(strstr(err, "train-images"));
    remove_dir_(dir);

    assert_int_equal(dataset_load_dir(&train, &test, "/nonexistent/vgpu", LIMIT, err, sizeof(err)),
                     -ENOENT);
    assert_non_null(strstr(err, "train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], "
                                "t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz]"));
}

// A header pair that claims more than max_bytes fails before any payload is
// read: the images here hold 30 of the 120 bytes they claim, so reading
// first would report them truncated. max_bytes 0 is no limit.
static void test_claims_over_limit(void **state)
{
    (void)state;
    char im[512], lb[512];
    write_images_(tmp_path_(im, "l-images"), 0x803, 20, 3, 2, 30, 0);
    write_labels_(tmp_path_(lb, "l-labels"), 0x801, 20, labels5_, 5, 0);
    struct dataset ds;
    char err[512];
    assert_int_equal(dataset_load_idx(&ds, im, lb, 139, err, sizeof(err)), VGPU_EFORMAT);
    assert_non_null(strstr(err, im));
    assert_non_null(strstr(err, "header claims 20 images of 3x2, 120 bytes; the dataset's 2 "
                                "files claim 140 bytes, over the limit of 139 (data.max_bytes)"));
    assert_null(ds.codes);
    // At the limit the claims pass, and the short file is found out.
    assert_int_equal(dataset_load_idx(&ds, im, lb, 140, err, sizeof(err)), VGPU_EFORMAT);
    assert_non_null(strstr(err, "truncated: header says 20 images"));
    assert_int_equal(dataset_load_idx(&ds, im, lb, 0, err, sizeof(err)), VGPU_EFORMAT);
    assert_non_null(strstr(err, "truncated"));
}

// A header mismatch is reported before any payload is read, even when the
// payload is cut short: the mismatch, not a read error. In a directory the
// test pair's counts are checked before the train set is decompressed.
static void test_mismatch_before_payload(void **state)
{
    (void)state;
    char im[512], lb[512];
    write_images_(tmp_path_(im, "h-images.gz"), 0x803, 5, 3, 2, 7, 1); // 7 of 30 bytes
    write_labels_(tmp_path_(lb, "h-labels"), 0x801, 4, labels5_, 4, 0);
    expect_load_error_(im, lb, VGPU_EFORMAT, "holds 4 labels but", lb);

    char dir[512], path[600];
    make_dir_(dir, "mismatch");
    snprintf(path, sizeof(path), "%s/train-images-idx3-ubyte.gz", dir);
    write_images_(path, 0x803, 8, 3, 2, 12, 1); // 12 of 48 bytes
    write_in_dir_(dir, "train-labels-idx1-ubyte", 0, 1, 8);
    write_in_dir_(dir, "t10k-images-idx3-ubyte", 1, 1, 3);
    write_in_dir_(dir, "t10k-labels-idx1-ubyte", 0, 1, 2);
    struct dataset train, test;
    char err[1024];
    assert_int_equal(dataset_load_dir(&train, &test, dir, LIMIT, err, sizeof(err)), VGPU_EFORMAT);
    if (!strstr(err, "t10k-labels-idx1-ubyte.gz: holds 2 labels but"))
        fail_msg("message \"%s\": want the test pair's count mismatch", err);
    assert_null(train.codes);
    assert_null(test.codes);
    remove_dir_(dir);
}

// The audit's gzip bomb, scaled down: a train image header claiming 1048576
// images of 32x32 (1 GiB) in a few kilobytes of gzip. Only 4 MiB of the
// zeros are there, so a loader that decompressed before checking would end
// with "truncated"; the checks on the headers alone must fail first: the
// train/test size mismatch, then, with the sizes agreeing, the limit.
static void test_gzip_bomb(void **state)
{
    (void)state;
    enum { claimed = 1048576, side = 32, present = 4 << 20 };
    char dir[512], path[600];
    make_dir_(dir, "bomb");
    snprintf(path, sizeof(path), "%s/train-images-idx3-ubyte.gz", dir);
    unsigned char *bomb = calloc(1, 16 + present);
    assert_non_null(bomb);
    put_be32_(bomb, 0x803);
    put_be32_(bomb + 4, claimed);
    put_be32_(bomb + 8, side);
    put_be32_(bomb + 12, side);
    write_file_(path, bomb, 16 + present, 1);
    free(bomb);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size < 64 * 1024);
    char labels_path[600];
    snprintf(labels_path, sizeof(labels_path), "%s/train-labels-idx1-ubyte.gz", dir);
    write_labels_(labels_path, 0x801, claimed, labels5_, 5, 1);
    char test_path[600];
    snprintf(test_path, sizeof(test_path), "%s/t10k-images-idx3-ubyte.gz", dir);
    write_images_(test_path, 0x803, 3, 28, 28, 3 * 28 * 28, 1);
    write_in_dir_(dir, "t10k-labels-idx1-ubyte", 0, 1, 3);

    struct dataset train, test;
    char err[1024];
    assert_int_equal(dataset_load_dir(&train, &test, dir, DEFAULT_LIMIT, err, sizeof(err)),
                     VGPU_EFORMAT);
    if (!strstr(err, "test images are 28x28 but") || !strstr(err, path))
        fail_msg("message \"%s\": want the train/test size mismatch naming %s", err, path);
    assert_null(train.codes);

    write_images_(test_path, 0x803, 3, side, side, 3 * side * side, 1);
    assert_int_equal(dataset_load_dir(&train, &test, dir, DEFAULT_LIMIT, err, sizeof(err)),
                     VGPU_EFORMAT);
    char want[900];
    snprintf(want, sizeof(want),
             "%s: header claims 1048576 images of 32x32, 1073741824 bytes; the dataset's 4 files "
             "claim 1074793475 bytes, over the limit of 1073741824 (data.max_bytes)",
             path);
    assert_string_equal(err, want);
    assert_null(train.codes);
    assert_null(test.codes);
    // vgpu_train's bound can be the host's memory: the message names it.
    assert_int_equal(dataset_load_dir_bounded(&train, &test, dir, 1u << 20,
                                              "a rank's share of the host's memory", err,
                                              sizeof(err)),
                     VGPU_EFORMAT);
    assert_non_null(strstr(err, "over the limit of 1048576 (a rank's share of the host's memory)"));
    remove_dir_(dir);
}

// ---- synthetic ----

static void test_synthetic_deterministic(void **state)
{
    (void)state;
    struct dataset a, b, c, other_seed, test_split;
    assert_int_equal(dataset_make_synthetic(&a, 300, 16, 5, 7, 0), 0);
    assert_int_equal(dataset_make_synthetic(&b, 300, 16, 5, 7, 0), 0);
    assert_int_equal(dataset_make_synthetic(&c, 120, 16, 5, 7, 0), 0);
    assert_int_equal(dataset_make_synthetic(&other_seed, 300, 16, 5, 8, 0), 0);
    assert_int_equal(dataset_make_synthetic(&test_split, 300, 16, 5, 7, 1), 0);
    assert_int_equal(a.rows, 1);
    assert_int_equal(a.cols, 16);
    assert_int_equal(a.features, 16);
    assert_int_equal(a.classes, 5);
    assert_memory_equal(a.images, b.images, 300 * 16 * sizeof(float));
    assert_memory_equal(a.labels, b.labels, 300 * sizeof(int32_t));
    // Sample i does not depend on how many were asked for.
    assert_memory_equal(a.images, c.images, 120 * 16 * sizeof(float));
    assert_memory_equal(a.labels, c.labels, 120 * sizeof(int32_t));
    assert_memory_not_equal(a.images, other_seed.images, 300 * 16 * sizeof(float));
    assert_memory_not_equal(a.images, test_split.images, 300 * 16 * sizeof(float));

    int seen[5] = {0};
    for (long k = 0; k < 300 * 16; k++)
        assert_true(a.images[k] >= 0.0f && a.images[k] <= 1.0f);
    for (long i = 0; i < 300; i++) {
        assert_in_range(a.labels[i], 0, 4);
        seen[a.labels[i]]++;
    }
    for (int k = 0; k < 5; k++)
        assert_true(seen[k] > 30); // 60 expected each
    dataset_free(&a);
    dataset_free(&b);
    dataset_free(&c);
    dataset_free(&other_seed);
    dataset_free(&test_split);
}

// Nearest class mean, fitted on train, must classify the test split well:
// the clusters are learnable and both splits share their means.
static void test_synthetic_learnable(void **state)
{
    (void)state;
    enum { features = 32, classes = 10 };
    struct dataset train, test;
    assert_int_equal(dataset_make_synthetic(&train, 2000, features, classes, 123, 0), 0);
    assert_int_equal(dataset_make_synthetic(&test, 500, features, classes, 123, 1), 0);
    double means[classes][features] = {{0}};
    long n[classes] = {0};
    for (long i = 0; i < train.count; i++) {
        n[train.labels[i]]++;
        for (int j = 0; j < features; j++)
            means[train.labels[i]][j] += train.images[i * features + j];
    }
    for (int c = 0; c < classes; c++)
        for (int j = 0; j < features; j++)
            means[c][j] /= (double)n[c];
    long correct = 0;
    for (long i = 0; i < test.count; i++) {
        int best = 0;
        double best_d = INFINITY;
        for (int c = 0; c < classes; c++) {
            double d = 0;
            for (int j = 0; j < features; j++) {
                double e = test.images[i * features + j] - means[c][j];
                d += e * e;
            }
            if (d < best_d)
                best_d = d, best = c;
        }
        correct += best == test.labels[i];
    }
    double accuracy = (double)correct / (double)test.count;
    print_message("nearest-mean accuracy on synthetic test split: %.3f\n", accuracy);
    assert_true(accuracy > 0.95);
    dataset_free(&train);
    dataset_free(&test);
}

static void test_synthetic_bad_args(void **state)
{
    (void)state;
    struct dataset ds;
    assert_int_equal(dataset_make_synthetic(&ds, 0, 4, 3, 1, 0), VGPU_EINVAL);
    assert_int_equal(dataset_make_synthetic(&ds, 10, 0, 3, 1, 0), VGPU_EINVAL);
    assert_int_equal(dataset_make_synthetic(&ds, 10, 4, 1, 1, 0), VGPU_EINVAL);
    assert_int_equal(dataset_make_synthetic(&ds, 10, 4, 3, 1, 2), VGPU_EINVAL);
    assert_null(ds.images);
}

// ---- preprocessing ----

static void test_standardize(void **state)
{
    (void)state;
    struct dataset train, test;
    assert_int_equal(dataset_make_synthetic(&train, 500, 20, 4, 9, 0), 0);
    assert_int_equal(dataset_make_synthetic(&test, 100, 20, 4, 9, 1), 0);
    double m0, s0;
    dataset_pixel_stats(&train, &m0, &s0);
    assert_true(s0 > 0.05);
    float test_before = test.images[37];
    dataset_standardize(&train, &test);
    double m1, s1;
    dataset_pixel_stats(&train, &m1, &s1);
    assert_true(fabs(m1) < 1e-6);
    assert_true(fabs(s1 - 1.0) < 1e-5);
    // The test set moves by the TRAIN statistics, not its own.
    assert_true(fabsf(test.images[37] - (float)((test_before - m0) / s0)) < 1e-6f);
    double mt, st;
    dataset_pixel_stats(&test, &mt, &st);
    assert_true(mt != 0.0);
    dataset_free(&train);
    dataset_free(&test);

    // A constant set is only centred: no division by zero.
    struct dataset flat;
    assert_int_equal(dataset_make_synthetic(&flat, 4, 3, 2, 1, 0), 0);
    for (int k = 0; k < 12; k++)
        flat.images[k] = 0.5f;
    dataset_standardize(&flat, NULL);
    for (int k = 0; k < 12; k++)
        assert_true(flat.images[k] == 0.0f);
    dataset_free(&flat);
}

// Coded (IDX) data: dataset_gather decodes rows in the order asked for, as the
// float path copies them; standardising transforms the table with the same
// bits a per-value transform gives; truncation keeps the codes;
// dataset_gather_codes moves the codes themselves.
static void test_coded_values(void **state)
{
    (void)state;
    char im[512], lb[512];
    write_good_pair_(tmp_path_(im, "c-images"), tmp_path_(lb, "c-labels"), 0);
    struct dataset train, test;
    char err[256];
    assert_int_equal(dataset_load_idx(&train, im, lb, LIMIT, err, sizeof(err)), 0);
    assert_int_equal(dataset_load_idx(&test, im, lb, LIMIT, err, sizeof(err)), 0);
    const uint32_t idx[3] = {4, 0, 2};
    float rows[3 * 6];
    dataset_gather(&train, idx, 3, rows);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 6; j++)
            assert_true(rows[i * 6 + j] == (float)((7 * ((int)idx[i] * 6 + j) + 3) % 256) / 255.0f);

    // The same values as floats (what a float-held set would hold), standardised per value.
    double mean, std;
    dataset_pixel_stats(&train, &mean, &std);
    float expect[30];
    for (int k = 0; k < 30; k++)
        expect[k] = (float)((dataset_value(&train, (size_t)k) - mean) / std);
    dataset_standardize(&train, &test);
    assert_non_null(train.codes);
    for (int k = 0; k < 30; k++) {
        assert_memory_equal(&expect[k], &(float){dataset_value(&train, (size_t)k)}, sizeof(float));
        assert_memory_equal(&expect[k], &(float){dataset_value(&test, (size_t)k)}, sizeof(float));
    }
    double m1, s1;
    dataset_pixel_stats(&train, &m1, &s1);
    assert_true(fabs(m1) < 1e-6 && fabs(s1 - 1.0) < 1e-5);

    dataset_truncate(&train, 2);
    assert_int_equal(train.count, 2);
    dataset_gather(&train, (const uint32_t[]){1}, 1, rows);
    assert_memory_equal(rows, expect + 6, 6 * sizeof(float));
    dataset_free(&train);
    dataset_free(&test);
    assert_null(train.codes);

    // dataset_gather_codes moves the codes of the rows asked for, in order;
    // decoded by the table they are dataset_gather's values, bit for bit,
    // before and after standardising. Every code 0..255 occurs.
    write_images_(tmp_path_(im, "w-images"), 0x803, 5, 7, 9, 5 * 63, 0);
    write_labels_(tmp_path_(lb, "w-labels"), 0x801, 5, labels5_, 5, 0);
    struct dataset wide;
    assert_int_equal(dataset_load_idx(&wide, im, lb, LIMIT, err, sizeof(err)), 0);
    const uint32_t order[5] = {3, 0, 4, 1, 2};
    uint8_t codes[5 * 63];
    float got[5 * 63];
    dataset_gather_codes(&wide, order, 5, codes);
    for (int i = 0; i < 5; i++)
        assert_memory_equal(codes + i * 63, wide.codes + order[i] * 63, 63);
    for (int round = 0; round < 2; round++) {
        if (round > 0)
            dataset_standardize(&wide, NULL);
        dataset_gather(&wide, order, 5, got);
        for (int k = 0; k < 5 * 63; k++)
            assert_memory_equal(&got[k], &wide.lut[codes[k]], sizeof(float));
    }
    dataset_free(&wide);
}

static void test_truncate_and_free(void **state)
{
    (void)state;
    struct dataset ds, ref;
    assert_int_equal(dataset_make_synthetic(&ds, 50, 6, 3, 5, 0), 0);
    assert_int_equal(dataset_make_synthetic(&ref, 50, 6, 3, 5, 0), 0);
    dataset_truncate(&ds, 0);
    assert_int_equal(ds.count, 50);
    dataset_truncate(&ds, 50);
    assert_int_equal(ds.count, 50);
    dataset_truncate(&ds, 999);
    assert_int_equal(ds.count, 50);
    dataset_truncate(&ds, 17);
    assert_int_equal(ds.count, 17);
    assert_memory_equal(ds.images, ref.images, 17 * 6 * sizeof(float));
    assert_memory_equal(ds.labels, ref.labels, 17 * sizeof(int32_t));
    dataset_free(&ds);
    assert_null(ds.images);
    assert_int_equal(ds.count, 0);
    dataset_free(&ds);
    dataset_free(NULL);
    dataset_free(&ref);
}

// ---- sequences ----

// Byte sequences with next-byte labels: sample i is bytes [i * context, ...)
// and its labels the bytes one further on; gathered by any sampler's
// indices as tokens (bytes or widened) with a label a position.
static void test_sequences(void **state)
{
    (void)state;
    const char *text = "the quick brown fox jumps over the lazy dog"; // 43 bytes
    const size_t bytes = strlen(text);
    const int context = 8;
    struct dataset ds;
    assert_int_equal(dataset_make_sequences(&ds, (const uint8_t *)text, bytes, context), 0);
    assert_int_equal(ds.count, (long)((bytes - 1) / context)); // 5: the last byte only a label
    assert_int_equal(ds.features, context);
    assert_int_equal(ds.label_width, context);
    assert_int_equal(dataset_label_width(&ds), context);
    assert_int_equal(ds.classes, 256);
    assert_true(ds.tokens && ds.codes && !ds.images);
    const uint32_t idx[3] = {4, 0, 2};
    uint8_t codes[3 * 8];
    int32_t tokens[3 * 8], labels[3 * 8];
    dataset_gather_codes(&ds, idx, 3, codes);
    dataset_gather_tokens(&ds, idx, 3, tokens);
    dataset_gather_labels(&ds, idx, 3, labels);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < context; j++) {
            const size_t at = (size_t)idx[i] * context + (size_t)j;
            assert_int_equal(codes[i * context + j], (uint8_t)text[at]);
            assert_int_equal(tokens[i * context + j], (uint8_t)text[at]);
            assert_int_equal(labels[i * context + j], (uint8_t)text[at + 1]);
        }
    // A token's value is the token; standardising leaves token sets alone.
    assert_true(dataset_value(&ds, 1) == (float)'h');
    dataset_standardize(&ds, NULL);
    assert_true(dataset_value(&ds, 1) == (float)'h');
    // Truncation keeps whole rows of labels.
    dataset_truncate(&ds, 2);
    const uint32_t kept[2] = {1, 0};
    dataset_gather_labels(&ds, kept, 2, labels);
    assert_int_equal(labels[context - 1], (uint8_t)text[2 * context]);
    assert_int_equal(labels[2 * context - 1], (uint8_t)text[context]);
    dataset_free(&ds);
    // Too little text for one sample, or no context.
    assert_int_equal(dataset_make_sequences(&ds, (const uint8_t *)text, 8, 8), VGPU_EINVAL);
    assert_null(ds.codes);
    assert_int_equal(dataset_make_sequences(&ds, (const uint8_t *)text, 9, 8), 0);
    assert_int_equal(ds.count, 1);
    dataset_free(&ds);
    assert_int_equal(dataset_make_sequences(&ds, (const uint8_t *)text, bytes, 0), VGPU_EINVAL);
    // Image sets have one label a sample.
    assert_int_equal(dataset_make_synthetic(&ds, 10, 4, 3, 1, 0), 0);
    assert_int_equal(dataset_label_width(&ds), 1);
    dataset_gather_labels(&ds, idx + 1, 2, labels);
    assert_int_equal(labels[0], ds.labels[0]);
    assert_int_equal(labels[1], ds.labels[2]);
    dataset_free(&ds);
}

// ---- text ----

// "<dir>/<name>" into buf[PATH_BYTES].
#define PATH_BYTES 1024
static const char *in_dir_(char *buf, const char *dir, const char *name)
{
    snprintf(buf, PATH_BYTES, "%s/%s", dir, name);
    return buf;
}

// A directory of text: two files read in byte order of their names ("B" <
// "a" < "b", whatever the locale), skipping a .dat index, a symbolic link
// (fortunes' .u8 names), a subdirectory; an empty file adds nothing.
static void test_text_dir(void **state)
{
    (void)state;
    char dir[512], path[PATH_BYTES], target[PATH_BYTES];
    assert_int_equal(mkdir(tmp_path_(dir, "text"), 0700), 0);
    write_file_(in_dir_(path, dir, "b-second"), "second\n", 7, 0);
    write_file_(in_dir_(path, dir, "a-first"), "first\n", 6, 0);
    write_file_(in_dir_(path, dir, "B-upper"), "upper\n", 6, 0);
    write_file_(in_dir_(path, dir, "a-first.dat"), "\x00\x01index", 7, 0);
    write_file_(in_dir_(path, dir, "c-empty"), "", 0, 0);
    assert_int_equal(symlink(in_dir_(target, dir, "a-first"), in_dir_(path, dir, "a-first.u8")), 0);
    assert_int_equal(mkdir(in_dir_(path, dir, "d-sub"), 0700), 0);

    uint8_t *text = NULL;
    size_t bytes = 0;
    char err[1024] = "";
    int rc = dataset_read_text(dir, LIMIT, "limit", &text, &bytes, err, sizeof err);
    if (rc)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(bytes, 19);
    assert_memory_equal(text, "upper\nfirst\nsecond\n", 19);
    free(text);
    // A file alone, and a link named as the path (only links inside a
    // directory are skipped).
    assert_int_equal(dataset_read_text(in_dir_(path, dir, "b-second"), 0, "none", &text, &bytes,
                                       err, sizeof err),
                     0);
    assert_int_equal(bytes, 7);
    assert_memory_equal(text, "second\n", 7);
    free(text);
    assert_int_equal(dataset_read_text(in_dir_(path, dir, "a-first.u8"), 0, "none", &text, &bytes,
                                       err, sizeof err),
                     0);
    assert_memory_equal(text, "first\n", 6);
    free(text);
}

// 1000 bytes, context 8, fraction 0.1: validation's share is the last 100
// bytes; the training part is the first 112 * 8 + 1 = 897 bytes (112
// sequences), validation the last 103 (12 sequences, 6 bytes unused).
static void test_text_split(void **state)
{
    (void)state;
    uint8_t text[1000];
    for (int k = 0; k < 1000; k++)
        text[k] = (uint8_t)(k * 7 + 3);
    struct dataset train, test;
    char err[1024] = "";
    assert_int_equal(dataset_split_text(&train, &test, text, 1000, 8, 0.1, "t", err, sizeof err), 0);
    assert_int_equal(train.count, 112);
    assert_int_equal(test.count, 12);
    assert_true(train.tokens && test.tokens);
    assert_int_equal(train.features, 8);
    assert_int_equal(test.label_width, 8);
    assert_memory_equal(train.codes, text, 8);
    assert_int_equal(train.labels[112 * 8 - 1], text[896]); // the training part's last byte
    assert_memory_equal(test.codes, text + 897, 12 * 8);    // validation starts one byte on
    assert_int_equal(test.labels[0], text[898]);
    assert_int_equal(test.labels[12 * 8 - 1], text[897 + 96]);
    dataset_free(&train);
    dataset_free(&test);
    // A share that ends where a sequence's label does: 899 = 31 * 29, so the
    // training part is exactly the first 900 bytes and validation the 100.
    assert_int_equal(dataset_split_text(&train, &test, text, 1000, 29, 0.1, "t", err, sizeof err), 0);
    assert_int_equal(train.count, 31);
    assert_int_equal(test.count, 3); // (100 - 1) / 29
    assert_int_equal(train.labels[31 * 29 - 1], text[899]);
    assert_int_equal(test.codes[0], text[900]);
    dataset_free(&train);
    dataset_free(&test);
    // The smallest text: context + 1 bytes each part.
    assert_int_equal(dataset_split_text(&train, &test, text, 18, 8, 0.5, "t", err, sizeof err), 0);
    assert_int_equal(train.count, 1);
    assert_int_equal(test.count, 1);
    assert_memory_equal(test.codes, text + 9, 8);
    dataset_free(&train);
    dataset_free(&test);
    // Through a file: the same counts.
    char path[512];
    write_file_(tmp_path_(path, "split.txt"), text, sizeof text, 0);
    assert_int_equal(dataset_load_text(&train, &test, path, 8, 0.1, LIMIT, "limit", err, sizeof err), 0);
    assert_int_equal(train.count, 112);
    assert_int_equal(test.count, 12);
    assert_memory_equal(test.codes, text + 897, 8);
    dataset_free(&train);
    dataset_free(&test);
}

// Text errors: rc, and a message that names the path and what is needed.
static void expect_text_error_(const char *path, int context, double fraction, uint64_t limit,
                               int want_rc, const char *want1, const char *want2)
{
    struct dataset train, test;
    char err[1024] = "";
    assert_int_equal(dataset_load_text(&train, &test, path, context, fraction, limit, "the limit",
                                       err, sizeof err),
                     want_rc);
    print_message("%s\n", err);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, want1));
    assert_non_null(strstr(err, want2));
    assert_null(strchr(err, '\n'));
    assert_null(train.codes);
    assert_null(test.codes);
}

static void test_text_errors(void **state)
{
    (void)state;
    char path[PATH_BYTES], dir[512], link[PATH_BYTES];
    expect_text_error_(tmp_path_(path, "no-such-text"), 8, 0.1, 0, -ENOENT, "cannot open",
                       "No such file");
    write_file_(tmp_path_(path, "empty.txt"), "", 0, 0);
    expect_text_error_(path, 8, 0.1, 0, VGPU_EFORMAT, "empty file", "no text");
    // A directory of nothing that is read: an index and a link.
    assert_int_equal(mkdir(tmp_path_(dir, "no-text"), 0700), 0);
    write_file_(in_dir_(path, dir, "cookie.dat"), "index", 5, 0);
    assert_int_equal(symlink(path, in_dir_(link, dir, "cookie.u8")), 0);
    expect_text_error_(dir, 8, 0.1, 0, VGPU_EFORMAT, "no text", "no non-empty regular file");
    // 9 bytes, context 8: training takes all 9 and leaves validation none.
    write_file_(tmp_path_(path, "short.txt"), "abcdefghi", 9, 0);
    expect_text_error_(path, 8, 0.1, 0, VGPU_EFORMAT, "the validation part (the last 0 bytes)",
                       "context + 1 = 9 bytes");
    // 20 bytes, fraction 0.9: 2 bytes for training.
    write_file_(tmp_path_(path, "short2.txt"), "abcdefghijklmnopqrst", 20, 0);
    expect_text_error_(path, 8, 0.9, 0, VGPU_EFORMAT, "the training part (the first 2 bytes)",
                       "context + 1 = 9 bytes");
    // 1000 bytes take 6000 as sequences: over a limit of 5000, before reading.
    uint8_t text[1000] = {0};
    write_file_(tmp_path_(path, "big.txt"), text, sizeof text, 0);
    expect_text_error_(path, 8, 0.1, 5000, VGPU_EFORMAT, "over the limit of", "(the limit)");
    expect_text_error_(path, 8, 1.0, 0, VGPU_EINVAL, "fraction", "(0, 1)");
}

// ---- the real Fashion-MNIST ----

static const char *fashion_dir_(void)
{
    const char *dir = getenv("VGPU_FASHION_MNIST_DIR");
    return dir && *dir ? dir : FASHION_DEFAULT_DIR;
}

static void test_fashion_mnist(void **state)
{
    (void)state;
    struct stat st;
    if (stat(fashion_dir_(), &st) != 0) {
        print_message("%s missing: install dataset-fashion-mnist\n", fashion_dir_());
        skip();
    }
    struct dataset train, test;
    char err[1024] = "";
    int rc = dataset_load_dir(&train, &test, fashion_dir_(), DEFAULT_LIMIT, err,
                              sizeof(err));
    if (rc)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(train.count, 60000);
    assert_int_equal(test.count, 10000);
    assert_int_equal(train.rows, 28);
    assert_int_equal(train.cols, 28);
    assert_int_equal(train.features, 784);
    assert_int_equal(test.features, 784);
    assert_int_equal(train.classes, 10);

    // Balanced classes: 6000 of each in train, 1000 in test.
    long per_train[10] = {0}, per_test[10] = {0};
    for (long i = 0; i < train.count; i++)
        per_train[train.labels[i]]++;
    for (long i = 0; i < test.count; i++)
        per_test[test.labels[i]]++;
    for (int c = 0; c < 10; c++) {
        assert_int_equal(per_train[c], 6000);
        assert_int_equal(per_test[c], 1000);
    }
    // The first labels of each file (ankle boot, T-shirt, T-shirt, dress, ...).
    const int first_train[10] = {9, 0, 0, 3, 0, 2, 7, 2, 5, 5};
    const int first_test[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
    for (int i = 0; i < 10; i++) {
        assert_int_equal(train.labels[i], first_train[i]);
        assert_int_equal(test.labels[i], first_test[i]);
    }
    // Pixels span [0, 1]; the usual normalisation constants are mean 0.2860,
    // std 0.3530 over the training pixels.
    float lo = 1.0f, hi = 0.0f;
    for (long k = 0; k < train.count * 784; k++) {
        float v = dataset_value(&train, (size_t)k);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    assert_true(lo == 0.0f && hi == 1.0f);
    double mean, std;
    dataset_pixel_stats(&train, &mean, &std);
    print_message("train pixels: mean %.4f std %.4f\n", mean, std);
    assert_true(fabs(mean - 0.2860) < 5e-4);
    assert_true(fabs(std - 0.3530) < 5e-4);

    dataset_standardize(&train, &test);
    dataset_pixel_stats(&train, &mean, &std);
    assert_true(fabs(mean) < 1e-5 && fabs(std - 1.0) < 1e-4);
    dataset_truncate(&train, 1000);
    assert_int_equal(train.count, 1000);
    dataset_free(&train);
    dataset_free(&test);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "fashion-mnist") == 0) {
        struct stat st;
        if (stat(fashion_dir_(), &st) != 0) {
            printf("SKIP: %s missing (install dataset-fashion-mnist or set "
                   "VGPU_FASHION_MNIST_DIR)\n",
                   fashion_dir_());
            return 77;
        }
        const struct CMUnitTest real[] = {cmocka_unit_test(test_fashion_mnist)};
        return cmocka_run_group_tests_name("fashion_mnist", real, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_plain),
        cmocka_unit_test(test_load_gzip),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_files_swapped),
        cmocka_unit_test(test_bad_dimensions),
        cmocka_unit_test(test_count_mismatch),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_trailing_data),
        cmocka_unit_test(test_label_out_of_range),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_corrupt_gzip),
        cmocka_unit_test(test_load_dir),
        cmocka_unit_test(test_load_dir_missing),
        cmocka_unit_test(test_claims_over_limit),
        cmocka_unit_test(test_mismatch_before_payload),
        cmocka_unit_test(test_gzip_bomb),
        cmocka_unit_test(test_synthetic_deterministic),
        cmocka_unit_test(test_synthetic_learnable),
        cmocka_unit_test(test_synthetic_bad_args),
        cmocka_unit_test(test_standardize),
        cmocka_unit_test(test_coded_values),
        cmocka_unit_test(test_truncate_and_free),
        cmocka_unit_test(test_sequences),
        cmocka_unit_test(test_text_dir),
        cmocka_unit_test(test_text_split),
        cmocka_unit_test(test_text_errors),
    };
    return cmocka_run_group_tests_name("data", tests, make_tmpdir_, remove_tmpdir_);
}
