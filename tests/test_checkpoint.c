// test_checkpoint.c: checkpoint round trip, on-disk layout, every validation,
// atomic replacement under write failures, compatibility and naming.
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "checkpoint.h"
#include "status.h"
#include "util.h"

#define N_PARAMS 1000
#define N_STATE 2000
#define HEADER_BYTES 200 // version 2
#define PAYLOAD_CRC_AT 192
#define HEADER_CRC_AT 196

// Stores v little-endian at b + at.
static void put32_(unsigned char *b, long at, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        b[at + k] = (unsigned char)(v >> (8 * k));
}

static uint32_t get32_(const unsigned char *b, long at)
{
    return b[at] | b[at + 1] << 8 | b[at + 2] << 16 | (uint32_t)b[at + 3] << 24;
}

static char root_[256]; // private temporary directory of this run

static int rm_tree_(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return -1;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d)
            return -1;
        struct dirent *e;
        char sub[1024];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
            rm_tree_(sub);
        }
        closedir(d);
        return rmdir(path);
    }
    return unlink(path);
}

static int setup_(void **state)
{
    (void)state;
    snprintf(root_, sizeof(root_), "/tmp/vgpu_test_ckpt.XXXXXX");
    return mkdtemp(root_) ? 0 : -1;
}

static int teardown_(void **state)
{
    (void)state;
    return rm_tree_(root_);
}

// A fresh, empty directory for one test.
static void test_dir_(char *dir, const char *name)
{
    snprintf(dir, 512, "%s/%s", root_, name);
    assert_int_equal(mkdir(dir, 0700), 0);
}

static void fill_meta_(struct ckpt_meta *m)
{
    memset(m, 0, sizeof(*m));
    m->n_dims = 4;
    m->dims[0] = 784, m->dims[1] = 256, m->dims[2] = 128, m->dims[3] = 10;
    snprintf(m->optimizer, sizeof(m->optimizer), "adam");
    m->param_count = N_PARAMS;
    m->opt_state_count = N_STATE;
    m->step = 1234;
    m->epoch = 3;
    m->step_in_epoch = 17;
    m->seed = 0xDEADBEEFCAFEF00Dull;
    m->total_steps = 200000;
    m->global_batch = 256;
    m->nranks = 4;
}

// Values whose bits must survive exactly: signed zero, the largest floats,
// denormals, and ordinary numbers. (NaN and infinities are refused on load:
// test_meaningless_refused.)
static float *make_values_(long n, float scale)
{
    float *v = malloc((size_t)n * sizeof(float));
    assert_non_null(v);
    for (long i = 0; i < n; i++)
        v[i] = scale * sinf((float)i * 0.37f);
    v[1] = 1e-45f; // the smallest denormal
    v[2] = -0.0f;
    v[3] = FLT_MAX;
    v[4] = -FLT_MAX;
    v[5] = 1e-42f;
    v[6] = 1.0f;
    return v;
}

static long file_size_(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (long)st.st_size;
}

static unsigned char *read_bytes_(const char *path, long *n)
{
    *n = file_size_(path);
    unsigned char *b = malloc((size_t)*n + 1);
    assert_non_null(b);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(b, 1, (size_t)*n, f), (size_t)*n);
    fclose(f);
    return b;
}

static void write_bytes_(const char *path, const unsigned char *b, long n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, (size_t)n, f), (size_t)n);
    assert_int_equal(fclose(f), 0);
}

// Number of names in dir containing ".tmp.".
static int count_tmp_files_(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

// Loading must fail with `want` and a message naming the file and containing needle.
static void expect_load_error_(const char *path, int want, const char *needle)
{
    struct ckpt_meta m;
    float *p = (float *)1, *o = (float *)1;
    char err[512] = "";
    int rc = checkpoint_load(path, &m, &p, &o, err, sizeof(err));
    if (rc != want || !strstr(err, needle))
        print_error("rc %d (want %d), message \"%s\" (want \"%s\")\n", rc, want, err, needle);
    assert_int_equal(rc, want);
    assert_non_null(strstr(err, needle));
    assert_non_null(strstr(err, path));
    assert_null(p);
    assert_null(o);
}

// Writes a good checkpoint at dir/name and returns its path in path.
static void save_good_(const char *dir, const char *name, char *path)
{
    struct ckpt_meta m;
    fill_meta_(&m);
    float *p = make_values_(N_PARAMS, 1.0f), *o = make_values_(N_STATE, 0.01f);
    char err[512];
    snprintf(path, 600, "%s/%s", dir, name);
    int rc = checkpoint_save(path, &m, p, o, err, sizeof(err));
    if (rc)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    free(p);
    free(o);
}

// Nothing planted in the checkpoint directory is followed: symlinks at the
// temporary names an older writer used ("<path>.tmp.<pid>") and at the final
// name, all pointing at a file outside the directory, leave that file
// untouched; the checkpoint is a regular file of mode 0600.
static void test_planted_symlinks_are_not_followed(void **state)
{
    (void)state;
    char dir[512], victim[600], path[600], link[700], err[512];
    test_dir_(dir, "planted");
    snprintf(victim, sizeof(victim), "%s/victim.txt", root_);
    FILE *f = fopen(victim, "w");
    assert_non_null(f);
    fputs("precious\n", f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/ckpt-0000000064.bin", dir);
    const long me = (long)getpid();
    for (long pid = me - 50; pid <= me + 50; pid++) {
        snprintf(link, sizeof(link), "%s.tmp.%ld", path, pid);
        assert_int_equal(symlink(victim, link), 0);
    }
    assert_int_equal(symlink(victim, path), 0);

    struct ckpt_meta m;
    fill_meta_(&m);
    float *p = make_values_(N_PARAMS, 1.0f), *o = make_values_(N_STATE, 0.01f);
    int rc = checkpoint_save(path, &m, p, o, err, sizeof(err));
    if (rc)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);

    long n;
    unsigned char *text = read_bytes_(victim, &n);
    assert_int_equal(n, 9);
    assert_memory_equal(text, "precious\n", 9);
    free(text);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    struct ckpt_meta back;
    float *bp, *bo;
    assert_int_equal(checkpoint_load(path, &back, &bp, &bo, err, sizeof(err)), 0);
    free(bp);
    free(bo);
    // Only the planted links are left beside it, no temporary file of ours.
    assert_int_equal(count_tmp_files_(dir), 101);
    free(p);
    free(o);
}

// ---- round trip and layout ----

static void test_round_trip(void **state)
{
    (void)state;
    char dir[512], path[600], err[512];
    test_dir_(dir, "roundtrip");
    struct ckpt_meta m, got;
    fill_meta_(&m);
    m.version = 77; // ignored by the writer
    float *p = make_values_(N_PARAMS, 1.0f), *o = make_values_(N_STATE, 0.01f);
    snprintf(path, sizeof(path), "%s/ckpt.bin", dir);
    assert_int_equal(checkpoint_save(path, &m, p, o, err, sizeof(err)), 0);
    assert_int_equal(count_tmp_files_(dir), 0);
    assert_int_equal(file_size_(path), HEADER_BYTES + 4 * (N_PARAMS + N_STATE));

    float *lp, *lo;
    assert_int_equal(checkpoint_load(path, &got, &lp, &lo, err, sizeof(err)), 0);
    assert_int_equal(got.version, CKPT_VERSION);
    m.version = CKPT_VERSION;
    assert_memory_equal(&got, &m, sizeof(m)); // every field, padding zeroed by both
    assert_memory_equal(lp, p, N_PARAMS * sizeof(float));
    assert_memory_equal(lo, o, N_STATE * sizeof(float));
    free(lp);
    free(lo);

    // Saving again replaces the file.
    m.step = 5000;
    p[0] = 42.0f;
    assert_int_equal(checkpoint_save(path, &m, p, o, err, sizeof(err)), 0);
    assert_int_equal(checkpoint_load(path, &got, &lp, &lo, err, sizeof(err)), 0);
    assert_int_equal(got.step, 5000);
    assert_true(lp[0] == 42.0f);
    free(lp);
    free(lo);

    // No optimizer state (plain SGD): NULL in, NULL out.
    m.opt_state_count = 0;
    snprintf(m.optimizer, sizeof(m.optimizer), "sgd");
    assert_int_equal(checkpoint_save(path, &m, p, NULL, err, sizeof(err)), 0);
    assert_int_equal(file_size_(path), HEADER_BYTES + 4 * N_PARAMS);
    assert_int_equal(checkpoint_load(path, &got, &lp, &lo, err, sizeof(err)), 0);
    assert_null(lo);
    assert_string_equal(got.optimizer, "sgd");
    assert_memory_equal(lp, p, N_PARAMS * sizeof(float));
    free(lp);
    assert_int_equal(count_tmp_files_(dir), 0);
    free(p);
    free(o);
}

// The documented little-endian layout, byte for byte where it matters.
static void test_layout(void **state)
{
    (void)state;
    char dir[512], path[600];
    test_dir_(dir, "layout");
    save_good_(dir, "c.bin", path);
    long n;
    unsigned char *b = read_bytes_(path, &n);
    assert_memory_equal(b, "VGPUCKPT", 8);
    const unsigned char version[4] = {2, 0, 0, 0}, hbytes[4] = {200, 0, 0, 0};
    assert_memory_equal(b + 8, version, 4);
    assert_memory_equal(b + 12, hbytes, 4);
    const unsigned char dims0[4] = {0x10, 0x03, 0, 0}; // 784
    assert_memory_equal(b + 20, dims0, 4);
    assert_string_equal((const char *)b + 92, "adam");
    const unsigned char params[8] = {0xe8, 0x03, 0, 0, 0, 0, 0, 0}; // 1000
    assert_memory_equal(b + 108, params, 8);
    const unsigned char seed[8] = {0x0d, 0xf0, 0xfe, 0xca, 0xef, 0xbe, 0xad, 0xde};
    assert_memory_equal(b + 148, seed, 8);
    const unsigned char total[8] = {0x40, 0x0d, 0x03, 0, 0, 0, 0, 0}; // 200000
    assert_memory_equal(b + 184, total, 8);
    const unsigned char one[4] = {0x00, 0x00, 0x80, 0x3f}; // params[6] = 1.0f
    assert_memory_equal(b + HEADER_BYTES + 6 * 4, one, 4);
    assert_int_equal(get32_(b, HEADER_CRC_AT), util_crc32(0, b, HEADER_CRC_AT));
    uint32_t pcrc = util_crc32(0, b + HEADER_BYTES, (size_t)(n - HEADER_BYTES));
    assert_int_equal(get32_(b, PAYLOAD_CRC_AT), pcrc);
    free(b);
}

// ---- validation ----

static void test_truncated(void **state)
{
    (void)state;
    char dir[512], path[600], cut[700];
    test_dir_(dir, "truncated");
    save_good_(dir, "good.bin", path);
    long n;
    unsigned char *b = read_bytes_(path, &n);
    const long cuts[] = {0, 5, 8, 100, 191, 192, HEADER_BYTES - 1, HEADER_BYTES, HEADER_BYTES + 1,
                         HEADER_BYTES + 4 * N_PARAMS, n - 1};
    snprintf(cut, sizeof(cut), "%s/cut.bin", dir);
    for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
        write_bytes_(cut, b, cuts[k]);
        expect_load_error_(cut, VGPU_EFORMAT, "truncated");
    }
    // And one byte too many.
    b[n] = 0;
    write_bytes_(cut, b, n + 1);
    expect_load_error_(cut, VGPU_EFORMAT, "trailing data");
    free(b);
}

static void test_bad_magic_and_version(void **state)
{
    (void)state;
    char dir[512], path[600];
    test_dir_(dir, "magic");
    save_good_(dir, "c.bin", path);
    long n;
    unsigned char *b = read_bytes_(path, &n);
    b[3] ^= 0x20;
    write_bytes_(path, b, n);
    expect_load_error_(path, VGPU_EFORMAT, "not a vgpu checkpoint (bad magic)");
    b[3] ^= 0x20;
    // A short file that is not ours at all says so too.
    write_bytes_(path, (const unsigned char *)"hello, world\n", 13);
    expect_load_error_(path, VGPU_EFORMAT, "bad magic");

    // A well-formed header of another version (CRC valid) is refused by version.
    b[8] = 3;
    put32_(b, HEADER_CRC_AT, util_crc32(0, b, HEADER_CRC_AT));
    write_bytes_(path, b, n);
    expect_load_error_(path, VGPU_EFORMAT,
                       "unsupported checkpoint format version 3 (this build reads 1 to 2)");
    free(b);
}

static void test_flipped_bytes(void **state)
{
    (void)state;
    char dir[512], path[600];
    test_dir_(dir, "flips");
    save_good_(dir, "c.bin", path);
    long n;
    unsigned char *b = read_bytes_(path, &n);
    // Payload: parameters and optimizer state, first and last bytes.
    const long payload_at[] = {HEADER_BYTES, HEADER_BYTES + 4 * 500 + 1,
                               HEADER_BYTES + 4 * N_PARAMS + 7, n - 1};
    for (size_t k = 0; k < sizeof(payload_at) / sizeof(payload_at[0]); k++) {
        b[payload_at[k]] ^= 0x01;
        write_bytes_(path, b, n);
        expect_load_error_(path, VGPU_EFORMAT, "payload CRC mismatch");
        b[payload_at[k]] ^= 0x01;
    }
    // Header: a dimension, the optimizer name, the step, a size field, the
    // stored payload CRC (covered by the header CRC) and the header CRC itself.
    const long header_at[] = {20, 95, 124, 170, 186, 193, 197};
    for (size_t k = 0; k < sizeof(header_at) / sizeof(header_at[0]); k++) {
        b[header_at[k]] ^= 0x40;
        write_bytes_(path, b, n);
        expect_load_error_(path, VGPU_EFORMAT, "header CRC mismatch");
        b[header_at[k]] ^= 0x40;
    }
    // Restored, the same bytes load again.
    write_bytes_(path, b, n);
    struct ckpt_meta m;
    float *p, *o;
    char err[512];
    assert_int_equal(checkpoint_load(path, &m, &p, &o, err, sizeof(err)), 0);
    free(p);
    free(o);

    // Sizes that disagree with the counts, under a valid header CRC.
    b[168] ^= 0x04;
    put32_(b, HEADER_CRC_AT, util_crc32(0, b, HEADER_CRC_AT));
    write_bytes_(path, b, n);
    expect_load_error_(path, VGPU_EFORMAT, "inconsistent header");
    free(b);
}

// The payload CRC on a payload small enough to check by hand: 3 parameters
// and 2 state floats, 20 bytes. The stored CRC is zlib's CRC-32 of exactly
// those 20 bytes, worked out apart from this code base (Python:
// zlib.crc32(struct.pack("<5f", 1, -2.5, 0, 0.5, 3)) = 0x2b9908f8), so a CRC
// over one byte less, or over the parameters only, shows. Every single-bit
// change of every payload byte, low bit and high bit, is then refused as a
// payload CRC mismatch, and so is a stored CRC off in any one bit; a changed payload with the CRCs made to match
// loads, so it is the CRC that refuses the others.
static void test_payload_crc_by_hand(void **state)
{
    (void)state;
    char dir[512], path[600], err[512];
    test_dir_(dir, "crc_by_hand");
    snprintf(path, sizeof path, "%s/c.bin", dir);
    struct ckpt_meta m;
    fill_meta_(&m);
    m.param_count = 3, m.opt_state_count = 2;
    const float params[3] = {1.0f, -2.5f, 0.0f}, opt[2] = {0.5f, 3.0f};
    assert_int_equal(checkpoint_save(path, &m, params, opt, err, sizeof err), 0);
    long n;
    unsigned char *b = read_bytes_(path, &n);
    assert_int_equal(n, HEADER_BYTES + 20);
    // 1.0, -2.5, 0.0, then 0.5, 3.0: IEEE-754 bits, little-endian.
    const unsigned char payload[20] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0,
                                       0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3f,
                                       0x00, 0x00, 0x40, 0x40};
    assert_memory_equal(b + HEADER_BYTES, payload, 20);
    assert_int_equal(get32_(b, PAYLOAD_CRC_AT), 0x2b9908f8u);

    for (long at = HEADER_BYTES; at < n; at++) {
        for (int bit = 0; bit < 8; bit += 7) {
            b[at] ^= (unsigned char)(1u << bit);
            write_bytes_(path, b, n);
            expect_load_error_(path, VGPU_EFORMAT, "payload CRC mismatch");
            b[at] ^= (unsigned char)(1u << bit);
        }
    }
    // A stored CRC off in any one of its 32 bits (the header CRC made to
    // match): the whole CRC is compared.
    for (int bit = 0; bit < 32; bit++) {
        put32_(b, PAYLOAD_CRC_AT, 0x2b9908f8u ^ (1u << bit));
        put32_(b, HEADER_CRC_AT, util_crc32(0, b, HEADER_CRC_AT));
        write_bytes_(path, b, n);
        expect_load_error_(path, VGPU_EFORMAT, "payload CRC mismatch");
    }

    // -2.5 becomes 2.5 (the sign bit), with both CRCs updated to match.
    b[HEADER_BYTES + 7] ^= 0x80;
    put32_(b, PAYLOAD_CRC_AT, util_crc32(0, b + HEADER_BYTES, 20));
    put32_(b, HEADER_CRC_AT, util_crc32(0, b, HEADER_CRC_AT));
    write_bytes_(path, b, n);
    float *p, *o;
    assert_int_equal(checkpoint_load(path, &m, &p, &o, err, sizeof err), 0);
    assert_true(p[1] == 2.5f);
    assert_true(o[1] == 3.0f);
    free(p);
    free(o);
    free(b);
}

// A version 1 file (written before total_steps was recorded: a 192-byte
// header, CRCs at 184 and 188) still loads, with total_steps 0.
static void test_reads_version_1(void **state)
{
    (void)state;
    char dir[512], path[600], err[512];
    test_dir_(dir, "v1");
    save_good_(dir, "v2.bin", path);
    long n;
    unsigned char *b = read_bytes_(path, &n);
    const long v1_bytes = 192, payload = n - HEADER_BYTES;
    unsigned char *v1 = malloc((size_t)(v1_bytes + payload));
    assert_non_null(v1);
    memcpy(v1, b, 184);
    memcpy(v1 + v1_bytes, b + HEADER_BYTES, (size_t)payload);
    put32_(v1, 8, 1);
    put32_(v1, 12, 192);
    put32_(v1, 184, get32_(b, PAYLOAD_CRC_AT));
    put32_(v1, 188, util_crc32(0, v1, 188));
    snprintf(path, sizeof(path), "%s/v1.bin", dir);
    write_bytes_(path, v1, v1_bytes + payload);
    struct ckpt_meta m;
    float *p, *o;
    int rc = checkpoint_load(path, &m, &p, &o, err, sizeof(err));
    if (rc)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(m.version, 1);
    assert_int_equal(m.total_steps, 0);
    assert_int_equal(m.step, 1234);
    assert_true(p[6] == 1.0f);
    free(p);
    free(o);
    free(v1);
    free(b);
}

static void test_missing_and_invalid(void **state)
{
    (void)state;
    char dir[512], path[600], err[512];
    test_dir_(dir, "invalid");
    snprintf(path, sizeof(path), "%s/none.bin", dir);
    expect_load_error_(path, -ENOENT, "cannot open");

    struct ckpt_meta m;
    float *p = make_values_(N_PARAMS, 1.0f);
    fill_meta_(&m);
    m.n_dims = 0;
    assert_int_equal(checkpoint_save(path, &m, p, p, err, sizeof(err)), VGPU_EINVAL);
    m.n_dims = CKPT_MAX_LAYERS + 1;
    assert_int_equal(checkpoint_save(path, &m, p, p, err, sizeof(err)), VGPU_EINVAL);
    fill_meta_(&m);
    m.param_count = -1;
    assert_int_equal(checkpoint_save(path, &m, p, p, err, sizeof(err)), VGPU_EINVAL);
    fill_meta_(&m);
    memset(m.optimizer, 'x', sizeof(m.optimizer));
    assert_int_equal(checkpoint_save(path, &m, p, p, err, sizeof(err)), VGPU_EINVAL);
    fill_meta_(&m);
    assert_int_equal(checkpoint_save(path, &m, NULL, p, err, sizeof(err)), VGPU_EINVAL);
    assert_int_equal(checkpoint_save(path, &m, p, NULL, err, sizeof(err)), VGPU_EINVAL);
    assert_non_null(strstr(err, path));
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(count_tmp_files_(dir), 0);
    free(p);
}

// ---- atomicity ----

static void assert_unchanged_(const char *path, const unsigned char *before, long n)
{
    long n2;
    unsigned char *after = read_bytes_(path, &n2);
    assert_int_equal(n2, n);
    assert_memory_equal(after, before, (size_t)n);
    free(after);
    struct ckpt_meta m;
    float *p, *o;
    char err[512];
    assert_int_equal(checkpoint_load(path, &m, &p, &o, err, sizeof(err)), 0);
    assert_int_equal(m.step, 1234);
    free(p);
    free(o);
}

static void test_failed_write_keeps_old(void **state)
{
    (void)state;
    char dir[512], path[600], err[1024];
    test_dir_(dir, "atomic");
    save_good_(dir, "ckpt.bin", path);
    long n;
    unsigned char *before = read_bytes_(path, &n);
    struct ckpt_meta m;
    fill_meta_(&m);
    m.step = 9999;
    float *p = make_values_(N_PARAMS, 2.0f), *o = make_values_(N_STATE, 3.0f);

    // 1. The temporary file cannot be created: no file descriptor is left
    //    (the soft limit at the lowest free one; root cannot bypass it).
    struct rlimit old_files, no_files;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old_files), 0);
    int lowest_free = dup(0);
    assert_true(lowest_free >= 0);
    close(lowest_free);
    no_files = old_files;
    no_files.rlim_cur = (rlim_t)lowest_free;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &no_files), 0);
    int rc = checkpoint_save(path, &m, p, o, err, sizeof(err));
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old_files), 0);
    assert_int_equal(rc, -EMFILE);
    assert_non_null(strstr(err, "cannot create"));
    assert_non_null(strstr(err, "previous checkpoint, if any, is kept"));
    assert_unchanged_(path, before, n);
    assert_int_equal(count_tmp_files_(dir), 0);

    // 2. The disk "fills" half-way through the payload: a file-size limit
    //    makes write() fail with EFBIG (SIGXFSZ ignored so we see the error).
    struct rlimit old_limit, small;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    small = old_limit;
    small.rlim_cur = HEADER_BYTES + 4 * N_PARAMS / 2;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    rc = checkpoint_save(path, &m, p, o, err, sizeof(err));
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old_limit), 0);
    signal(SIGXFSZ, old_handler);
    assert_int_equal(rc, -EFBIG);
    assert_non_null(strstr(err, "cannot write"));
    assert_unchanged_(path, before, n);
    assert_int_equal(count_tmp_files_(dir), 0);

    // 3. The directory does not exist: nothing is created anywhere.
    char lost[700];
    snprintf(lost, sizeof(lost), "%s/no-such-dir/ckpt.bin", dir);
    rc = checkpoint_save(lost, &m, p, o, err, sizeof(err));
    assert_int_equal(rc, -ENOENT);
    assert_non_null(strstr(err, lost));
    assert_unchanged_(path, before, n);

    // 4. Everything is written but the rename fails (the target is a
    //    non-empty directory): an error, and the temporary file is removed.
    char blocked[700], inside[800];
    snprintf(blocked, sizeof(blocked), "%s/blocked", dir);
    assert_int_equal(mkdir(blocked, 0700), 0);
    snprintf(inside, sizeof(inside), "%s/keep", blocked);
    write_bytes_(inside, (const unsigned char *)"x", 1);
    rc = checkpoint_save(blocked, &m, p, o, err, sizeof(err));
    assert_true(rc == -EISDIR || rc == -ENOTEMPTY || rc == -EEXIST);
    assert_non_null(strstr(err, "cannot rename"));
    assert_int_equal(count_tmp_files_(dir), 0);
    assert_unchanged_(path, before, n);

    // And after all that, a normal save still replaces it.
    assert_int_equal(checkpoint_save(path, &m, p, o, err, sizeof(err)), 0);
    float *lp, *lo;
    struct ckpt_meta got;
    assert_int_equal(checkpoint_load(path, &got, &lp, &lo, err, sizeof(err)), 0);
    assert_int_equal(got.step, 9999);
    assert_memory_equal(lp, p, N_PARAMS * sizeof(float));
    free(lp);
    free(lo);
    free(before);
    free(p);
    free(o);
}

// ---- compatibility ----

static void test_compatible(void **state)
{
    (void)state;
    struct ckpt_meta have, want;
    char err[512];
    fill_meta_(&have);
    fill_meta_(&want);
    // Position and rank count may differ on resume.
    want.step = 0, want.epoch = 0, want.step_in_epoch = 0, want.nranks = 2;
    assert_int_equal(checkpoint_check_compatible(&have, &want, err, sizeof(err)), 0);
    assert_string_equal(err, "");

    have.n_dims = 3;
    have.dims[1] = 256, have.dims[2] = 10;
    assert_int_equal(checkpoint_check_compatible(&have, &want, err, sizeof(err)), VGPU_ECONFIG);
    assert_string_equal(err,
                        "checkpoint model 784-256-10 does not match configured 784-256-128-10");

    fill_meta_(&have);
    have.dims[2] = 64;
    snprintf(have.optimizer, sizeof(have.optimizer), "sgd");
    have.global_batch = 128;
    assert_int_equal(checkpoint_check_compatible(&have, &want, err, sizeof(err)), VGPU_ECONFIG);
    assert_string_equal(err, "checkpoint model 784-256-64-10 does not match configured "
                             "784-256-128-10; checkpoint optimizer sgd does not match configured "
                             "adam; checkpoint global batch 128 does not match configured 256 "
                             "(resume must keep train.batch_size)");

    // The seed fixes the data order (and a synthetic set): it must match.
    fill_meta_(&have);
    have.seed = want.seed + 1;
    assert_int_equal(checkpoint_check_compatible(&have, &want, err, sizeof(err)), VGPU_ECONFIG);
    assert_non_null(strstr(err, "train.seed"));

    // Counts are compared only when the caller fills them in.
    fill_meta_(&have);
    have.opt_state_count = 1000;
    assert_int_equal(checkpoint_check_compatible(&have, &want, err, sizeof(err)), VGPU_ECONFIG);
    assert_non_null(
        strstr(err, "1000 optimizer-state floats, the configured optimizer needs 2000"));
    want.param_count = 0;
    assert_int_equal(checkpoint_check_compatible(&have, &want, err, sizeof(err)), 0);
    // A message buffer too small still gives the status.
    have.global_batch = 1;
    assert_int_equal(checkpoint_check_compatible(&have, &want, err, 8), VGPU_ECONFIG);
    assert_int_equal(strlen(err), 7);
    assert_int_equal(checkpoint_check_compatible(&have, &want, NULL, 0), VGPU_ECONFIG);
}

// ---- naming ----

static void touch_(const char *dir, const char *name)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    write_bytes_(path, (const unsigned char *)"x", 1);
}

static void test_naming(void **state)
{
    (void)state;
    char dir[512], buf[700], want[700];
    test_dir_(dir, "naming");
    assert_int_equal(checkpoint_path(dir, 1234, buf, sizeof(buf)), 0);
    snprintf(want, sizeof(want), "%s/ckpt-0000001234.bin", dir);
    assert_string_equal(buf, want);
    assert_int_equal(checkpoint_path(dir, -1, buf, sizeof(buf)), VGPU_EINVAL);
    assert_int_equal(checkpoint_path(dir, 1, buf, 10), VGPU_EINVAL);

    assert_int_equal(checkpoint_find_latest(dir, buf, sizeof(buf)), -ENOENT);
    char missing[700];
    snprintf(missing, sizeof(missing), "%s/absent", dir);
    assert_int_equal(checkpoint_find_latest(missing, buf, sizeof(buf)), -ENOENT);

    touch_(dir, "ckpt-0000000005.bin");
    touch_(dir, "ckpt-0000000100.bin");
    touch_(dir, "ckpt-0000000020.bin");
    touch_(dir, "ckpt-0000000999.bin.tmp.123"); // an interrupted write
    touch_(dir, "ckpt-999.bin");                // not our name
    touch_(dir, "ckpt-00000009x9.bin");
    touch_(dir, "ckpt-0000000998.bin.bak");
    touch_(dir, "other.txt");
    assert_int_equal(checkpoint_find_latest(dir, buf, sizeof(buf)), 0);
    snprintf(want, sizeof(want), "%s/ckpt-0000000100.bin", dir);
    assert_string_equal(buf, want);
    assert_int_equal(checkpoint_find_latest(dir, buf, 10), VGPU_EINVAL);

    // Steps beyond 10 digits still sort numerically.
    assert_int_equal(checkpoint_path(dir, 12345678901LL, buf, sizeof(buf)), 0);
    touch_(dir, strrchr(buf, '/') + 1);
    assert_int_equal(checkpoint_find_latest(dir, buf, sizeof(buf)), 0);
    snprintf(want, sizeof(want), "%s/ckpt-12345678901.bin", dir);
    assert_string_equal(buf, want);
}

// Checkpoints whose CRCs are right but whose content means nothing are
// refused, each with its reason: positions no run reaches, and parameters or
// optimizer state that are not finite.
static void test_meaningless_refused(void **state)
{
    (void)state;
    char dir[512], path[700], err[512];
    test_dir_(dir, "meaningless");
    struct {
        const char *what;
        int64_t step, epoch, batch, total;
        int32_t nranks;
    } cases[] = {
        {"step 2^62", (int64_t)1 << 62, 3, 17, 0, 4},
        {"negative epoch", 1234, -1, 17, 0, 4},
        {"negative batch", 1234, 3, -5, 0, 4},
        {"no writer", 1234, 3, 17, 0, 0},
        {"more epochs than steps", 10, 11, 0, 0, 4},
        {"more batches than steps", 10, 0, 11, 0, 4},
        {"negative horizon", 1234, 3, 17, -1, 4},
    };
    float *p = make_values_(N_PARAMS, 1.0f), *o = make_values_(N_STATE, 0.01f);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ckpt_meta m;
        fill_meta_(&m);
        m.step = cases[i].step, m.epoch = cases[i].epoch, m.step_in_epoch = cases[i].batch;
        m.total_steps = cases[i].total, m.nranks = cases[i].nranks;
        snprintf(path, sizeof path, "%s/case%zu.bin", dir, i);
        assert_int_equal(checkpoint_save(path, &m, p, o, err, sizeof err), 0);
        print_message("  %s\n", cases[i].what);
        expect_load_error_(path, VGPU_EFORMAT, "a position no run can be at");
    }
    struct ckpt_meta m;
    fill_meta_(&m);
    p[N_PARAMS / 2] = NAN;
    snprintf(path, sizeof path, "%s/nan.bin", dir);
    assert_int_equal(checkpoint_save(path, &m, p, o, err, sizeof err), 0);
    expect_load_error_(path, VGPU_EFORMAT, "1 of 1000 parameters and 0 of");
    p[N_PARAMS / 2] = 0;
    for (long i = 0; i < N_STATE; i++)
        o[i] = INFINITY;
    snprintf(path, sizeof path, "%s/inf.bin", dir);
    assert_int_equal(checkpoint_save(path, &m, p, o, err, sizeof err), 0);
    expect_load_error_(path, VGPU_EFORMAT, "are NaN or infinite: the run that wrote it had diverged");
    free(p);
    free(o);
}

// Listing sorts newest first and counts only the names checkpoint_path
// makes; pruning keeps the newest.
static void test_list_and_prune(void **state)
{
    (void)state;
    char dir[512];
    test_dir_(dir, "prune");
    touch_(dir, "ckpt-0000000005.bin");
    touch_(dir, "ckpt-0000000100.bin");
    touch_(dir, "ckpt-0000000020.bin");
    touch_(dir, "ckpt-00000000007.bin"); // another padding: not one of ours
    touch_(dir, "ckpt-0000000999.bin.tmp.abcdef");
    int64_t *steps;
    int n;
    assert_int_equal(checkpoint_list(dir, &steps, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(steps[0], 100);
    assert_int_equal(steps[1], 20);
    assert_int_equal(steps[2], 5);
    free(steps);
    assert_int_equal(checkpoint_prune(dir, 2), 1);
    assert_int_equal(checkpoint_list(dir, &steps, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(steps[1], 20);
    free(steps);
    assert_int_equal(checkpoint_prune(dir, 5), 0);
    assert_int_equal(checkpoint_prune(dir, 0), VGPU_EINVAL);
    char missing[700];
    snprintf(missing, sizeof missing, "%s/absent", dir);
    assert_int_equal(checkpoint_list(missing, &steps, &n), -ENOENT);
}

// Claiming a directory: temporary files a dead writer left go, a second
// claim while the first is held is refused naming the holder, and a
// directory every user may write is refused.
static void test_claim_dir(void **state)
{
    (void)state;
    char dir[512], err[512];
    test_dir_(dir, "claim");
    touch_(dir, "ckpt-0000000040.bin.tmp.Ab12Cd");
    touch_(dir, "ckpt-0000000060.bin.tmp.zzzzzz");
    touch_(dir, "ckpt-0000000060.bin.tmp.toolong"); // not one of ours: kept
    touch_(dir, "notes.tmp.abcdef");                // nor this
    int removed = -1;
    int fd = checkpoint_claim_dir(dir, &removed, err, sizeof err);
    assert_true(fd >= 0);
    assert_int_equal(removed, 2);
    assert_int_equal(count_tmp_files_(dir), 2);
    int second = checkpoint_claim_dir(dir, &removed, err, sizeof err);
    assert_int_equal(second, VGPU_ECONFIG);
    char pid[64];
    snprintf(pid, sizeof pid, "in use by another running job (pid %d)", (int)getpid());
    assert_non_null(strstr(err, pid));
    close(fd);
    fd = checkpoint_claim_dir(dir, &removed, err, sizeof err); // released: free again
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(chmod(dir, 0777), 0);
    assert_int_equal(checkpoint_claim_dir(dir, &removed, err, sizeof err), VGPU_ECONFIG);
    assert_non_null(strstr(err, "writable by every user (mode 777)"));
    assert_int_equal(chmod(dir, 01777), 0); // sticky or not: others can still plant
    assert_int_equal(checkpoint_claim_dir(dir, &removed, err, sizeof err), VGPU_ECONFIG);
}

// The checkpoint directory is made with its parents; a file in the way, or
// an empty name, is an error naming the path.
static void test_make_dir(void **state)
{
    (void)state;
    char dir[512], deep[600], file[600], err[512];
    test_dir_(dir, "make_dir");
    snprintf(deep, sizeof deep, "%s/a/b/c/", dir);
    assert_int_equal(checkpoint_make_dir(deep, err, sizeof err), 0);
    struct stat st;
    assert_int_equal(stat(deep, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(checkpoint_make_dir(deep, err, sizeof err), 0); // exists: fine

    snprintf(file, sizeof file, "%s/plain", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(checkpoint_make_dir(file, err, sizeof err), -ENOTDIR);
    assert_non_null(strstr(err, "plain: Not a directory"));
    snprintf(deep, sizeof deep, "%s/plain/sub", dir);
    assert_int_equal(checkpoint_make_dir(deep, err, sizeof err), -ENOTDIR);
    assert_non_null(strstr(err, "cannot create checkpoint directory"));
    assert_int_equal(checkpoint_make_dir("", err, sizeof err), VGPU_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_bad_magic_and_version),
        cmocka_unit_test(test_flipped_bytes),
        cmocka_unit_test(test_payload_crc_by_hand),
        cmocka_unit_test(test_reads_version_1),
        cmocka_unit_test(test_missing_and_invalid),
        cmocka_unit_test(test_failed_write_keeps_old),
        cmocka_unit_test(test_planted_symlinks_are_not_followed),
        cmocka_unit_test(test_compatible),
        cmocka_unit_test(test_naming),
        cmocka_unit_test(test_make_dir),
        cmocka_unit_test(test_meaningless_refused),
        cmocka_unit_test(test_list_and_prune),
        cmocka_unit_test(test_claim_dir),
    };
    return cmocka_run_group_tests_name("checkpoint", tests, setup_, teardown_);
}
