// checkpoint.c: the checkpoint file: its format, the atomic write, the
// validating read, and whether a checkpoint fits a job. Where the files live
// (names, listing, the directory's claim) is checkpoint_dir.c's.
//
// Layout (all integers little-endian, floats as IEEE-754 binary32 bit
// patterns in little-endian order):
//   0   magic "VGPUCKPT"            8 bytes
//   8   version (2)                 u32
//   12  header bytes (200)          u32
//   16  n_dims                      i32
//   20  dims[18]                    i32 each
//   92  optimizer                   16 bytes, NUL-padded
//   108 param_count, opt_state_count, step, epoch, step_in_epoch   i64 each
//   148 seed                        u64
//   156 global_batch                i64
//   164 nranks                      i32
//   168 params bytes, opt_state bytes   u64 each
//   184 total_steps                 i64
//   192 CRC32 of the payload        u32
//   196 CRC32 of bytes [0, 196)     u32
//   200 payload: params, then opt_state
// Version 1 (still read) has no total_steps: its CRCs are at 184 and 188 and
// its payload starts at 192.
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "status.h"
#include "util.h"

#define CKPT_MAGIC "VGPUCKPT"
// Where a version's header ends and its CRCs sit (the header CRC covers
// every byte before it).
struct header_layout {
    uint32_t bytes, payload_crc_at, header_crc_at;
};
static const struct header_layout layouts_[] = {
    [1] = {192, 184, 188},
    [2] = {200, 192, 196},
};
#define CKPT_HEADER_MAX 200      // the largest header of any version read
#define CKPT_MIN_HEADER 192      // the smallest
#define CKPT_IO_FLOATS 16384     // floats converted per write/read call
// More steps than any run takes (a million steps a day for 2700 years):
// a larger count is a crafted or corrupt header, not a position.
#define CKPT_MAX_STEP 1000000000000LL

// ---- little-endian fields ----

static void put_u32_(unsigned char *p, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        p[k] = (unsigned char)(v >> (8 * k));
}

static void put_u64_(unsigned char *p, uint64_t v)
{
    for (int k = 0; k < 8; k++)
        p[k] = (unsigned char)(v >> (8 * k));
}

static uint32_t get_u32_(const unsigned char *p)
{
    uint32_t v = 0;
    for (int k = 0; k < 4; k++)
        v |= (uint32_t)p[k] << (8 * k);
    return v;
}

static uint64_t get_u64_(const unsigned char *p)
{
    uint64_t v = 0;
    for (int k = 0; k < 8; k++)
        v |= (uint64_t)p[k] << (8 * k);
    return v;
}

static void encode_header_(unsigned char *h, const struct ckpt_meta *m, uint64_t params_bytes,
                           uint64_t opt_bytes, uint32_t payload_crc)
{
    const struct header_layout *l = &layouts_[CKPT_VERSION];
    memset(h, 0, l->bytes);
    memcpy(h, CKPT_MAGIC, 8);
    put_u32_(h + 8, CKPT_VERSION);
    put_u32_(h + 12, l->bytes);
    put_u32_(h + 16, (uint32_t)m->n_dims);
    for (int k = 0; k < CKPT_MAX_LAYERS; k++)
        put_u32_(h + 20 + 4 * k, (uint32_t)m->dims[k]);
    memcpy(h + 92, m->optimizer, sizeof(m->optimizer));
    put_u64_(h + 108, (uint64_t)m->param_count);
    put_u64_(h + 116, (uint64_t)m->opt_state_count);
    put_u64_(h + 124, (uint64_t)m->step);
    put_u64_(h + 132, (uint64_t)m->epoch);
    put_u64_(h + 140, (uint64_t)m->step_in_epoch);
    put_u64_(h + 148, m->seed);
    put_u64_(h + 156, (uint64_t)m->global_batch);
    put_u32_(h + 164, (uint32_t)m->nranks);
    put_u64_(h + 168, params_bytes);
    put_u64_(h + 176, opt_bytes);
    put_u64_(h + 184, (uint64_t)m->total_steps);
    put_u32_(h + l->payload_crc_at, payload_crc);
    put_u32_(h + l->header_crc_at, util_crc32(0, h, l->header_crc_at));
}

static void decode_meta_(const unsigned char *h, struct ckpt_meta *m)
{
    memset(m, 0, sizeof(*m));
    m->version = get_u32_(h + 8);
    m->n_dims = (int32_t)get_u32_(h + 16);
    for (int k = 0; k < CKPT_MAX_LAYERS; k++)
        m->dims[k] = (int32_t)get_u32_(h + 20 + 4 * k);
    memcpy(m->optimizer, h + 92, sizeof(m->optimizer));
    m->param_count = (int64_t)get_u64_(h + 108);
    m->opt_state_count = (int64_t)get_u64_(h + 116);
    m->step = (int64_t)get_u64_(h + 124);
    m->epoch = (int64_t)get_u64_(h + 132);
    m->step_in_epoch = (int64_t)get_u64_(h + 140);
    m->seed = get_u64_(h + 148);
    m->global_batch = (int64_t)get_u64_(h + 156);
    m->nranks = (int32_t)get_u32_(h + 164);
    if (m->version >= 2)
        m->total_steps = (int64_t)get_u64_(h + 184);
}

// ---- raw I/O ----

static int write_all_(int fd, const void *buf, size_t bytes)
{
    const char *p = buf;
    while (bytes) {
        ssize_t n = write(fd, p, bytes);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        bytes -= (size_t)n;
    }
    return 0;
}

// Reads up to bytes; *got < bytes only at end of file.
static int read_all_(int fd, void *buf, size_t bytes, size_t *got)
{
    char *p = buf;
    size_t done = 0;
    while (done < bytes) {
        ssize_t n = read(fd, p + done, bytes - done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        done += (size_t)n;
    }
    *got = done;
    return 0;
}

// Writes floats little-endian through `scratch`, folding the bytes into *crc.
static int write_floats_(int fd, const float *v, int64_t count, unsigned char *scratch,
                         uint32_t *crc)
{
    for (int64_t at = 0; at < count; at += CKPT_IO_FLOATS) {
        int64_t n = count - at < CKPT_IO_FLOATS ? count - at : CKPT_IO_FLOATS;
        for (int64_t k = 0; k < n; k++) {
            uint32_t bits;
            memcpy(&bits, &v[at + k], 4);
            put_u32_(scratch + 4 * k, bits);
        }
        *crc = util_crc32(*crc, scratch, (size_t)n * 4);
        int rc = write_all_(fd, scratch, (size_t)n * 4);
        if (rc < 0)
            return rc;
    }
    return 0;
}

// Reads count floats; returns 1 when the file ends early, 0 when complete.
static int read_floats_(int fd, float *v, int64_t count, unsigned char *scratch, uint32_t *crc)
{
    for (int64_t at = 0; at < count; at += CKPT_IO_FLOATS) {
        int64_t n = count - at < CKPT_IO_FLOATS ? count - at : CKPT_IO_FLOATS;
        size_t got = 0;
        int rc = read_all_(fd, scratch, (size_t)n * 4, &got);
        if (rc < 0)
            return rc;
        if (got < (size_t)n * 4)
            return 1;
        *crc = util_crc32(*crc, scratch, (size_t)n * 4);
        for (int64_t k = 0; k < n; k++) {
            uint32_t bits = get_u32_(scratch + 4 * k);
            memcpy(&v[at + k], &bits, 4);
        }
    }
    return 0;
}

// fsync of the directory holding path, so the rename itself is durable.
static int sync_parent_dir_(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == path)
        snprintf(dir, sizeof(dir), "/");
    else if ((size_t)(slash - path) < sizeof(dir))
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    else
        return -ENAMETOOLONG;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    // Some file systems cannot sync a directory; the rename is all we can do there.
    if (rc == -EINVAL || rc == -ENOTSUP || rc == -EROFS)
        rc = 0;
    return rc;
}

// ---- save ----

static int check_meta_(const struct ckpt_meta *m, const float *params, const float *opt_state)
{
    if (m->n_dims < 1 || m->n_dims > CKPT_MAX_LAYERS || m->param_count < 0 ||
        m->opt_state_count < 0 || memchr(m->optimizer, '\0', sizeof(m->optimizer)) == NULL)
        return VGPU_EINVAL;
    if ((m->param_count > 0 && !params) || (m->opt_state_count > 0 && !opt_state))
        return VGPU_EINVAL;
    // Byte sizes must fit in int64 (and so in the u64 fields and off_t).
    if (m->param_count > INT64_MAX / 8 || m->opt_state_count > INT64_MAX / 8)
        return VGPU_EINVAL;
    return 0;
}

int checkpoint_save(const char *path, const struct ckpt_meta *meta, const float *params,
                    const float *opt_state, char *err, size_t err_bytes)
{
    if (err && err_bytes)
        err[0] = '\0';
    if (check_meta_(meta, params, opt_state) < 0)
        return util_errorf(err, err_bytes, VGPU_EINVAL,
                     "%s: invalid checkpoint contents (n_dims %d, %lld params, %lld state floats)",
                     path, meta->n_dims, (long long)meta->param_count,
                     (long long)meta->opt_state_count);
    // A fresh name no one could plant a symlink or file at in advance:
    // mkostemp creates it with O_EXCL (refusing anything already there,
    // symlinks included) and mode 0600, and the rename below replaces
    // whatever is at path (a symlink there is replaced, never followed).
    char tmp[4096];
    int n = snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path);
    if (n < 0 || (size_t)n >= sizeof(tmp))
        return util_errorf(err, err_bytes, -ENAMETOOLONG, "%s: path too long", path);

    unsigned char *scratch = malloc((size_t)CKPT_IO_FLOATS * 4);
    if (!scratch)
        return util_errorf(err, err_bytes, VGPU_ENOMEM, "%s: out of memory", path);
    unsigned char header[CKPT_HEADER_MAX];
    const size_t header_bytes = layouts_[CKPT_VERSION].bytes;
    uint64_t params_bytes = (uint64_t)meta->param_count * 4;
    uint64_t opt_bytes = (uint64_t)meta->opt_state_count * 4;
    uint32_t crc = 0;
    const char *stage = "create";
    int rc = 0;
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        goto fail_no_file;
    }
    // The header carries the payload CRC, so the payload goes first (after a
    // zeroed header-sized gap) and the header is filled in at the end.
    stage = "write";
    memset(header, 0, sizeof(header));
    rc = write_all_(fd, header, header_bytes);
    if (rc == 0)
        rc = write_floats_(fd, params, meta->param_count, scratch, &crc);
    if (rc == 0)
        rc = write_floats_(fd, opt_state, meta->opt_state_count, scratch, &crc);
    if (rc == 0) {
        encode_header_(header, meta, params_bytes, opt_bytes, crc);
        if (lseek(fd, 0, SEEK_SET) < 0)
            rc = -errno;
        else
            rc = write_all_(fd, header, header_bytes);
    }
    if (rc == 0) {
        stage = "fsync";
        if (fsync(fd) < 0)
            rc = -errno;
    }
    if (rc < 0)
        goto fail;
    stage = "close";
    if (close(fd) < 0) {
        fd = -1;
        rc = -errno;
        goto fail;
    }
    fd = -1;
    stage = "rename";
    if (rename(tmp, path) < 0) {
        rc = -errno;
        goto fail;
    }
    free(scratch);
    rc = sync_parent_dir_(path);
    if (rc < 0)
        return util_errorf(err, err_bytes, rc, "%s: written, but syncing its directory failed: %s", path,
                     status_str(rc));
    return 0;

fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
fail_no_file:
    free(scratch);
    return util_errorf(err, err_bytes, rc,
                 "%s: cannot %s %s: %s (the previous checkpoint, if any, is kept)", path, stage,
                 tmp, status_str(rc));
}

// ---- load ----

// A header read from a file and checked: its version's layout, what it says,
// the payload sizes it claims and the file's size.
struct header_read_ {
    unsigned char bytes[CKPT_HEADER_MAX];
    const struct header_layout *layout;
    struct ckpt_meta meta;
    uint64_t params_bytes, opt_bytes; // as the header claims them
    uint64_t file_bytes;              // the file's size when opened
};

// Reads the header and checks what identifies it: magic, version, header CRC.
static int read_header_(int fd, const char *path, struct header_read_ *h, char *err,
                        size_t err_bytes)
{
    struct stat st;
    size_t got = 0;
    int rc = fstat(fd, &st) < 0 ? -errno : 0;
    if (rc == 0)
        rc = read_all_(fd, h->bytes, sizeof(h->bytes), &got);
    if (rc < 0)
        return util_errorf(err, err_bytes, rc, "%s: cannot read: %s", path, status_str(rc));
    h->file_bytes = (uint64_t)st.st_size;
    // Magic first: a file that is not ours at all should say so, whatever its size.
    if (got < 8 || memcmp(h->bytes, CKPT_MAGIC, 8) != 0) {
        if (got >= 8 || memcmp(h->bytes, CKPT_MAGIC, got) != 0)
            return util_errorf(err, err_bytes, VGPU_EFORMAT, "%s: not a vgpu checkpoint (bad magic)",
                               path);
    }
    if (got < CKPT_MIN_HEADER)
        return util_errorf(err, err_bytes, VGPU_EFORMAT,
                           "%s: truncated: file holds %zu bytes, the header needs %d", path, got,
                           CKPT_MIN_HEADER);
    // Version before the header CRC: another version lays its header out
    // differently, so its CRC would fail for a reason that says nothing useful.
    uint32_t version = get_u32_(h->bytes + 8);
    if (version < 1 || version > CKPT_VERSION)
        return util_errorf(err, err_bytes, VGPU_EFORMAT,
                           "%s: unsupported checkpoint format version %u (this build reads 1 to %u)",
                           path, version, CKPT_VERSION);
    h->layout = &layouts_[version];
    if (got < h->layout->bytes)
        return util_errorf(err, err_bytes, VGPU_EFORMAT,
                           "%s: truncated: file holds %zu bytes, the header needs %u", path, got,
                           h->layout->bytes);
    uint32_t stored_hcrc = get_u32_(h->bytes + h->layout->header_crc_at);
    uint32_t hcrc = util_crc32(0, h->bytes, h->layout->header_crc_at);
    if (stored_hcrc != hcrc)
        return util_errorf(err, err_bytes, VGPU_EFORMAT,
                           "%s: header CRC mismatch (stored 0x%08x, computed 0x%08x): the header is "
                           "corrupt",
                           path, stored_hcrc, hcrc);
    decode_meta_(h->bytes, &h->meta);
    h->params_bytes = get_u64_(h->bytes + 168);
    h->opt_bytes = get_u64_(h->bytes + 176);
    return 0;
}

// Checks that what an intact header says means something: sizes that agree
// with each other and with the file, and a position a run can be at.
static int check_header_(const char *path, const struct header_read_ *h, char *err,
                         size_t err_bytes)
{
    const struct ckpt_meta *m = &h->meta;
    uint32_t header_bytes = get_u32_(h->bytes + 12);
    if (header_bytes != h->layout->bytes || m->n_dims < 1 || m->n_dims > CKPT_MAX_LAYERS ||
        m->param_count < 0 || m->opt_state_count < 0 || m->param_count > INT64_MAX / 8 ||
        m->opt_state_count > INT64_MAX / 8 || h->params_bytes != (uint64_t)m->param_count * 4 ||
        h->opt_bytes != (uint64_t)m->opt_state_count * 4 ||
        memchr(m->optimizer, '\0', sizeof(m->optimizer)) == NULL)
        return util_errorf(err, err_bytes, VGPU_EFORMAT,
                           "%s: inconsistent header (header %u bytes, n_dims %d, %lld params in %llu "
                           "bytes, %lld state floats in %llu bytes)",
                           path, header_bytes, m->n_dims, (long long)m->param_count,
                           (unsigned long long)h->params_bytes, (long long)m->opt_state_count,
                           (unsigned long long)h->opt_bytes);
    // A position a run can be at: nothing negative, no more epochs or
    // batches than steps, a writer, and a step count a run can reach. The
    // CRC protects against damage, not against a header made to mislead.
    if (m->step < 0 || m->step > CKPT_MAX_STEP || m->epoch < 0 || m->epoch > m->step ||
        m->step_in_epoch < 0 || m->step_in_epoch > m->step || m->nranks < 1 || m->total_steps < 0)
        return util_errorf(err, err_bytes, VGPU_EFORMAT,
                           "%s: a position no run can be at (step %lld, epoch %lld, batch %lld, "
                           "written by %d ranks, horizon %lld steps)",
                           path, (long long)m->step, (long long)m->epoch,
                           (long long)m->step_in_epoch, m->nranks, (long long)m->total_steps);
    uint64_t want_size = h->layout->bytes + h->params_bytes + h->opt_bytes;
    if (h->file_bytes != want_size)
        return util_errorf(err, err_bytes, VGPU_EFORMAT,
                           "%s: %s: header says %lld params + %lld state floats (%llu bytes in all), "
                           "file holds %llu bytes",
                           path, h->file_bytes < want_size ? "truncated" : "trailing data",
                           (long long)m->param_count, (long long)m->opt_state_count,
                           (unsigned long long)want_size, (unsigned long long)h->file_bytes);
    return 0;
}

// Reads the payload the header describes into *p and *o (malloc'ed; NULL
// for a count of 0) and checks its CRC. On error the caller frees them.
static int read_payload_(int fd, const char *path, const struct header_read_ *h, float **p,
                         float **o, char *err, size_t err_bytes)
{
    const struct ckpt_meta *m = &h->meta;
    unsigned char *scratch = malloc((size_t)CKPT_IO_FLOATS * 4);
    if (m->param_count)
        *p = malloc((size_t)h->params_bytes);
    if (m->opt_state_count)
        *o = malloc((size_t)h->opt_bytes);
    int rc = 0;
    if (!scratch || (m->param_count && !*p) || (m->opt_state_count && !*o)) {
        rc = util_errorf(err, err_bytes, VGPU_ENOMEM, "%s: out of memory for %llu bytes", path,
                         (unsigned long long)(h->params_bytes + h->opt_bytes));
        goto done;
    }
    uint32_t crc = 0;
    rc = lseek(fd, h->layout->bytes, SEEK_SET) < 0 ? -errno : 0; // the header read may overshoot
    if (rc == 0)
        rc = read_floats_(fd, *p, m->param_count, scratch, &crc);
    if (rc == 0)
        rc = read_floats_(fd, *o, m->opt_state_count, scratch, &crc);
    if (rc == 1) { // the file shrank between fstat and read
        rc = util_errorf(err, err_bytes, VGPU_EFORMAT, "%s: truncated while reading", path);
        goto done;
    }
    if (rc < 0) {
        rc = util_errorf(err, err_bytes, rc, "%s: cannot read: %s", path, status_str(rc));
        goto done;
    }
    uint32_t stored_pcrc = get_u32_(h->bytes + h->layout->payload_crc_at);
    if (crc != stored_pcrc)
        rc = util_errorf(err, err_bytes, VGPU_EFORMAT,
                         "%s: payload CRC mismatch (stored 0x%08x, computed 0x%08x): the data is "
                         "corrupt",
                         path, stored_pcrc, crc);
done:
    free(scratch);
    return rc;
}

// Parameters that are not finite train to nothing but NaN: the run that
// wrote them had diverged (or the file was made so).
static int check_finite_(const char *path, const struct ckpt_meta *m, const float *p,
                         const float *o, char *err, size_t err_bytes)
{
    int64_t bad_params = 0, bad_state = 0;
    for (int64_t i = 0; i < m->param_count; i++)
        bad_params += !isfinite(p[i]);
    for (int64_t i = 0; i < m->opt_state_count; i++)
        bad_state += !isfinite(o[i]);
    if (bad_params || bad_state)
        return util_errorf(err, err_bytes, VGPU_EFORMAT,
                           "%s: %lld of %lld parameters and %lld of %lld optimizer values are NaN "
                           "or infinite: the run that wrote it had diverged",
                           path, (long long)bad_params, (long long)m->param_count,
                           (long long)bad_state, (long long)m->opt_state_count);
    return 0;
}

int checkpoint_load(const char *path, struct ckpt_meta *meta, float **params, float **opt_state,
                    char *err, size_t err_bytes)
{
    memset(meta, 0, sizeof(*meta));
    *params = NULL;
    *opt_state = NULL;
    if (err && err_bytes)
        err[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int rc = -errno;
        return util_errorf(err, err_bytes, rc, "%s: cannot open: %s", path, status_str(rc));
    }
    struct header_read_ h;
    float *p = NULL, *o = NULL;
    int rc = read_header_(fd, path, &h, err, err_bytes);
    if (rc == 0)
        rc = check_header_(path, &h, err, err_bytes);
    if (rc == 0)
        rc = read_payload_(fd, path, &h, &p, &o, err, err_bytes);
    if (rc == 0)
        rc = check_finite_(path, &h.meta, p, o, err, err_bytes);
    close(fd);
    if (rc < 0) {
        free(p);
        free(o);
        return rc;
    }
    *meta = h.meta;
    *params = p;
    *opt_state = o;
    return 0;
}

// ---- compatibility ----

static void format_dims_(const struct ckpt_meta *m, char *buf, size_t buf_bytes)
{
    size_t used = 0;
    buf[0] = '\0';
    int n = m->n_dims < 0 ? 0 : m->n_dims > CKPT_MAX_LAYERS ? CKPT_MAX_LAYERS : m->n_dims;
    for (int k = 0; k < n && used < buf_bytes; k++) {
        int w = snprintf(buf + used, buf_bytes - used, "%s%d", k ? "-" : "", m->dims[k]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

static void append_(char *err, size_t err_bytes, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void append_(char *err, size_t err_bytes, size_t *used, const char *fmt, ...)
{
    if (!err || *used >= err_bytes)
        return;
    if (*used) {
        int w = snprintf(err + *used, err_bytes - *used, "; ");
        *used += w > 0 ? (size_t)w : 0;
        if (*used >= err_bytes)
            return;
    }
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(err + *used, err_bytes - *used, fmt, ap);
    va_end(ap);
    *used += w > 0 ? (size_t)w : 0;
}

int checkpoint_check_compatible(const struct ckpt_meta *have, const struct ckpt_meta *want,
                                char *err, size_t err_bytes)
{
    size_t used = 0;
    int differs = 0;
    if (err && err_bytes)
        err[0] = '\0';
    else
        err_bytes = 0;
    int same_dims = have->n_dims == want->n_dims && have->n_dims >= 0 &&
                    have->n_dims <= CKPT_MAX_LAYERS &&
                    memcmp(have->dims, want->dims, (size_t)have->n_dims * sizeof(int32_t)) == 0;
    if (!same_dims) {
        char h[256], w[256];
        format_dims_(have, h, sizeof(h));
        format_dims_(want, w, sizeof(w));
        append_(err, err_bytes, &used, "checkpoint model %s does not match configured %s", h, w);
        differs = 1;
    }
    if (strncmp(have->optimizer, want->optimizer, sizeof(have->optimizer)) != 0) {
        append_(err, err_bytes, &used, "checkpoint optimizer %.16s does not match configured %.16s",
                have->optimizer, want->optimizer);
        differs = 1;
    }
    if (have->global_batch != want->global_batch) {
        append_(err, err_bytes, &used,
                "checkpoint global batch %lld does not match configured %lld (resume must keep "
                "train.batch_size)",
                (long long)have->global_batch, (long long)want->global_batch);
        differs = 1;
    }
    if (have->seed != want->seed) {
        append_(err, err_bytes, &used,
                "checkpoint train.seed %llu does not match configured %llu (resume must keep "
                "train.seed: it fixes the data order)",
                (unsigned long long)have->seed, (unsigned long long)want->seed);
        differs = 1;
    }
    if (want->param_count > 0 && have->param_count != want->param_count) {
        append_(err, err_bytes, &used,
                "checkpoint holds %lld parameters, the configured model has %lld",
                (long long)have->param_count, (long long)want->param_count);
        differs = 1;
    }
    if (want->param_count > 0 && have->opt_state_count != want->opt_state_count) {
        append_(err, err_bytes, &used,
                "checkpoint holds %lld optimizer-state floats, the configured optimizer needs %lld",
                (long long)have->opt_state_count, (long long)want->opt_state_count);
        differs = 1;
    }
    return differs ? VGPU_ECONFIG : 0;
}

