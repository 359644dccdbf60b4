// dataset_text.c: text for byte-level models: a file, or a directory's files
// in name order, read whole and split into training and validation sequences.
#include "dataset.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "status.h"
#include "util.h"

#define TEXT_PATH_MAX 4096

// The files of a text source, in reading order.
struct text_files_ {
    char (*paths)[TEXT_PATH_MAX]; // [count], owned
    size_t *sizes;                // [count] bytes, as listed
    size_t count;
    uint64_t total;               // bytes of all of them
};

static void text_files_free_(struct text_files_ *f)
{
    free(f->paths);
    free(f->sizes);
    memset(f, 0, sizeof *f);
}

static int add_file_(struct text_files_ *f, const char *path, size_t bytes)
{
    void *paths = realloc(f->paths, (f->count + 1) * sizeof *f->paths);
    if (paths)
        f->paths = paths;
    void *sizes = realloc(f->sizes, (f->count + 1) * sizeof *f->sizes);
    if (sizes)
        f->sizes = sizes;
    if (!paths || !sizes)
        return VGPU_ENOMEM;
    snprintf(f->paths[f->count], TEXT_PATH_MAX, "%s", path);
    f->sizes[f->count++] = bytes;
    f->total += bytes;
    return 0;
}

// Byte order, not the locale's collation: the same order on every host.
static int by_name_(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int ends_with_(const char *s, const char *tail)
{
    const size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

// The directory's text files: regular files in name order, without names
// ending ".dat" (fortunes' indexes), symbolic links (fortunes' .u8 names of
// the same files) and anything else that is not a regular file.
static int list_dir_(struct text_files_ *f, const char *dir, char *err, size_t err_bytes)
{
    struct dirent **names = NULL;
    const int n = scandir(dir, &names, NULL, by_name_);
    if (n < 0)
        return util_errorf(err, err_bytes, -errno, "%s: cannot list the directory: %s", dir,
                           strerror(errno));
    int rc = 0;
    for (int k = 0; k < n; k++) {
        char path[TEXT_PATH_MAX];
        struct stat st;
        const char *name = names[k]->d_name;
        const int len = snprintf(path, sizeof path, "%s/%s", dir, name);
        if (rc == 0 && (len < 0 || (size_t)len >= sizeof path))
            rc = util_errorf(err, err_bytes, -ENAMETOOLONG, "%s/%s: path too long", dir, name);
        else if (rc == 0 && !ends_with_(name, ".dat") && lstat(path, &st) == 0 &&
                 S_ISREG(st.st_mode))
            rc = add_file_(f, path, (size_t)st.st_size);
        free(names[k]);
    }
    free(names);
    return rc;
}

// Reads exactly `bytes` of path into out.
static int read_file_(const char *path, uint8_t *out, size_t bytes, char *err, size_t err_bytes)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return util_errorf(err, err_bytes, -errno, "%s: cannot open: %s", path, strerror(errno));
    size_t got = 0;
    int rc = 0;
    while (got < bytes && rc == 0) {
        const ssize_t n = read(fd, out + got, bytes - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = util_errorf(err, err_bytes, -errno, "%s: read failed: %s", path, strerror(errno));
        else if (n == 0)
            rc = util_errorf(err, err_bytes, VGPU_EFORMAT,
                             "%s: %zu bytes where %zu were listed (changed while read?)", path,
                             got, bytes);
        else
            got += (size_t)n;
    }
    close(fd);
    return rc;
}

int dataset_read_text(const char *path, uint64_t max_bytes, const char *limit_name, uint8_t **text,
                      size_t *bytes, char *err, size_t err_bytes)
{
    *text = NULL;
    *bytes = 0;
    struct stat st;
    if (stat(path, &st) != 0)
        return util_errorf(err, err_bytes, -errno, "%s: cannot open: %s", path, strerror(errno));
    struct text_files_ f = {0};
    int rc = 0;
    if (S_ISDIR(st.st_mode))
        rc = list_dir_(&f, path, err, err_bytes);
    else if (S_ISREG(st.st_mode))
        rc = add_file_(&f, path, (size_t)st.st_size);
    else
        rc = util_errorf(err, err_bytes, VGPU_EFORMAT,
                         "%s: neither a regular file nor a directory", path);
    if (rc == 0 && f.total == 0)
        rc = util_errorf(err, err_bytes, VGPU_EFORMAT,
                         S_ISDIR(st.st_mode)
                             ? "%s: no text: the directory holds no non-empty regular file (names "
                               "ending .dat and symbolic links are skipped)"
                             : "%s: empty file: no text to train on",
                         path);
    char have[32], bound[32];
    if (rc == 0 && max_bytes && f.total > max_bytes / DATA_TEXT_COST)
        rc = util_errorf(err, err_bytes, VGPU_EFORMAT,
                         "%s: %s of text takes %d bytes a byte as sequences (the text, its tokens "
                         "and int32 labels), over the limit of %s (%s)",
                         path, util_format_bytes(f.total, have, sizeof have), DATA_TEXT_COST,
                         util_format_bytes(max_bytes, bound, sizeof bound), limit_name);
    uint8_t *buf = rc == 0 ? malloc(f.total) : NULL;
    if (rc == 0 && !buf)
        rc = VGPU_ENOMEM;
    for (size_t k = 0, at = 0; rc == 0 && k < f.count; at += f.sizes[k++])
        rc = read_file_(f.paths[k], buf + at, f.sizes[k], err, err_bytes);
    if (rc == 0) {
        *text = buf;
        *bytes = (size_t)f.total;
    } else {
        free(buf);
    }
    text_files_free_(&f);
    return rc;
}

int dataset_split_text(struct dataset *train, struct dataset *test, const uint8_t *text,
                       size_t bytes, int context, double val_fraction, const char *origin,
                       char *err, size_t err_bytes)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (context < 1 || !(val_fraction > 0.0 && val_fraction < 1.0))
        return util_errorf(err, err_bytes, VGPU_EINVAL,
                           "%s: context %d and validation fraction %g: need context >= 1 and a "
                           "fraction in (0, 1)", origin, context, val_fraction);
    const size_t need = (size_t)context + 1;
    const size_t val_share = (size_t)((double)bytes * val_fraction); // rounded down
    const size_t train_share = bytes - val_share;
    // The training part ends one byte past its last whole sequence (that byte
    // only a label), so the parts share no byte and validation gets at least
    // its share.
    const size_t cut = train_share >= need ? (train_share - 1) / (size_t)context * (size_t)context + 1
                                           : train_share;
    const char *part = cut < need ? "training" : bytes - cut < need ? "validation" : NULL;
    if (part)
        return util_errorf(err, err_bytes, VGPU_EFORMAT,
                           "%s: %zu bytes of text is too short: the %s part (%s %zu bytes) needs "
                           "at least context + 1 = %zu bytes; give more text or a shorter context",
                           origin, bytes, part, cut < need ? "the first" : "the last",
                           cut < need ? cut : bytes - cut, need);
    int rc = dataset_make_sequences(train, text, cut, context);
    if (rc == 0)
        rc = dataset_make_sequences(test, text + cut, bytes - cut, context);
    if (rc < 0) {
        dataset_free(train);
        dataset_free(test);
        return util_errorf(err, err_bytes, rc, "%s: cannot make the sequences: %s", origin,
                           status_str(rc));
    }
    return 0;
}

int dataset_load_text(struct dataset *train, struct dataset *test, const char *path, int context,
                      double val_fraction, uint64_t max_bytes, const char *limit_name, char *err,
                      size_t err_bytes)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    uint8_t *text;
    size_t bytes;
    int rc = dataset_read_text(path, max_bytes, limit_name, &text, &bytes, err, err_bytes);
    if (rc == 0)
        rc = dataset_split_text(train, test, text, bytes, context, val_fraction, path, err,
                                err_bytes);
    free(text);
    return rc;
}
