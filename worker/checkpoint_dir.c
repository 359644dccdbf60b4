// checkpoint_dir.c: a checkpoint directory: the file names, the listing and
// pruning of its checkpoints, and the claim a run holds on it (the mode
// check, the lock, the clean-up of files a run that died while saving left).
// The files' format is checkpoint.c's.
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "status.h"
#include "util.h"

#define CKPT_NAME_DIGITS 10      // zero-padded step in file names
#define CKPT_LOCK_NAME ".vgpu-checkpoint.lock"

// ---- names ----

int checkpoint_path(const char *dir, int64_t step, char *buf, size_t buf_bytes)
{
    if (step < 0)
        return VGPU_EINVAL;
    int n = snprintf(buf, buf_bytes, "%s/ckpt-%0*lld.bin", dir, CKPT_NAME_DIGITS, (long long)step);
    if (n < 0 || (size_t)n >= buf_bytes)
        return VGPU_EINVAL;
    return 0;
}

// The step in a name made by checkpoint_path, or -1 for any other name.
static int64_t parse_name_(const char *name)
{
    if (strncmp(name, "ckpt-", 5) != 0)
        return -1;
    const char *p = name + 5;
    int64_t step = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (digits >= 18) // keeps step within int64
            return -1;
        step = step * 10 + (*p - '0');
    }
    if (digits < CKPT_NAME_DIGITS || strcmp(p, ".bin") != 0)
        return -1;
    return step;
}

int checkpoint_make_dir(const char *dir, char *err, size_t err_bytes)
{
    char path[4096];
    size_t len = strlen(dir);
    if (len == 0 || len >= sizeof path) {
        snprintf(err, err_bytes, "checkpoint directory '%s': empty or too long", dir);
        return VGPU_EINVAL;
    }
    memcpy(path, dir, len + 1);
    // Each parent in turn, as mkdir -p: "a/b/c" makes a, a/b, a/b/c.
    for (size_t i = 1; i <= len; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        char keep = path[i];
        path[i] = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) {
            int e = errno;
            snprintf(err, err_bytes, "cannot create checkpoint directory %s: %s", path, strerror(e));
            return -e;
        }
        path[i] = keep;
    }
    struct stat st;
    int e = stat(dir, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR; // a file: EEXIST above
    if (e) {
        snprintf(err, err_bytes, "checkpoint directory %s: %s", dir, strerror(e));
        return -e;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        e = errno;
        snprintf(err, err_bytes, "checkpoint directory %s is not writable: %s", dir, strerror(e));
        return -e;
    }
    return 0;
}

static int steps_descending_(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int checkpoint_list(const char *dir, int64_t **steps, int *count)
{
    *steps = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    int64_t *v = NULL;
    int n = 0, cap = 0, rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int64_t step = parse_name_(e->d_name);
        char canonical[64];
        // Only the names checkpoint_path makes (not "ckpt-000000000007.bin"),
        // so a step is one file.
        if (step < 0 || snprintf(canonical, sizeof canonical, "ckpt-%0*lld.bin", CKPT_NAME_DIGITS,
                                 (long long)step) < 0 || strcmp(canonical, e->d_name) != 0)
            continue;
        if (n == cap) {
            int64_t *grown = realloc(v, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *v);
            if (!grown) {
                rc = VGPU_ENOMEM;
                break;
            }
            v = grown;
        }
        v[n++] = step;
    }
    closedir(d);
    if (rc < 0) {
        free(v);
        return rc;
    }
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, steps_descending_);
    *steps = v;
    *count = n;
    return 0;
}

int checkpoint_prune(const char *dir, int keep)
{
    if (keep < 1)
        return VGPU_EINVAL;
    int64_t *steps;
    int n, removed = 0;
    int rc = checkpoint_list(dir, &steps, &n);
    for (int i = keep; rc == 0 && i < n; i++) {
        char path[4096];
        if (checkpoint_path(dir, steps[i], path, sizeof path) == 0 && unlink(path) == 0)
            removed++;
        else if (errno != ENOENT)
            rc = -errno;
    }
    free(steps);
    return rc < 0 ? rc : removed;
}

// An unfinished checkpoint_save's file: "ckpt-<digits>.bin.tmp.<6 characters>".
static int is_temp_name_(const char *name)
{
    const char *tmp = strstr(name, ".bin.tmp.");
    if (!tmp || strlen(tmp + 9) != 6)
        return 0;
    char base[256];
    snprintf(base, sizeof base, "%.*s.bin", (int)(tmp - name), name);
    return parse_name_(base) >= 0;
}

int checkpoint_claim_dir(const char *dir, int *removed, char *err, size_t err_bytes)
{
    *removed = 0;
    int rc = checkpoint_make_dir(dir, err, err_bytes);
    if (rc < 0)
        return rc;
    struct stat st;
    if (stat(dir, &st) != 0)
        return util_errorf(err, err_bytes, -errno, "checkpoint directory %s: %s", dir,
                           strerror(errno));
    // Anyone who can write here could plant the "newest" checkpoint that
    // --resume DIR would take, or fill the directory.
    if (st.st_mode & S_IWOTH)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "checkpoint directory %s is writable by every user (mode %03o): "
                           "anyone could plant a checkpoint there; use a directory of your own "
                           "(chmod o-w)",
                           dir, (unsigned)(st.st_mode & 0777));
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, CKPT_LOCK_NAME);
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return util_errorf(err, err_bytes, -errno, "cannot create %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char owner[32] = "";
        ssize_t got = pread(fd, owner, sizeof owner - 1, 0);
        owner[got > 0 ? got : 0] = '\0';
        owner[strcspn(owner, "\n")] = '\0';
        close(fd);
        if (e == EWOULDBLOCK)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "checkpoint directory %s is in use by another running job%s%s%s; "
                               "give each job its own checkpoint.dir",
                               dir, owner[0] ? " (pid " : "", owner, owner[0] ? ")" : "");
        return util_errorf(err, err_bytes, -e, "cannot lock %s: %s", path, strerror(e));
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        // The pid is only a courtesy for the message above.
    }
    // Under the lock no other job writes here: a temporary file is what a
    // run that died in checkpoint_save left.
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (is_temp_name_(e->d_name) && unlinkat(dirfd(d), e->d_name, 0) == 0)
            (*removed)++;
    if (d)
        closedir(d);
    return fd;
}

int checkpoint_find_latest(const char *dir, char *buf, size_t buf_bytes)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    int64_t best = -1;
    char best_name[256] = "";
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int64_t step = parse_name_(e->d_name);
        // On equal steps (different zero padding) the name decides, so the
        // answer does not depend on directory order.
        if (step > best || (step == best && step >= 0 && strcmp(e->d_name, best_name) < 0)) {
            best = step;
            snprintf(best_name, sizeof(best_name), "%s", e->d_name);
        }
    }
    closedir(d);
    if (best < 0)
        return -ENOENT;
    int n = snprintf(buf, buf_bytes, "%s/%s", dir, best_name);
    if (n < 0 || (size_t)n >= buf_bytes)
        return VGPU_EINVAL;
    return 0;
}
