// util.c: clocks, processes, hashing, size formatting, whole files.
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "status.h"

__thread int util_waits_beside_compute;

void util_machine_id(char *out, size_t bytes, const char *host)
{
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f || !fgets(out, (int)bytes, f))
        snprintf(out, bytes, "host:%s", host);
    if (f)
        fclose(f);
    out[strcspn(out, "\n")] = 0;
}

int util_proc_stat(long pid, char *state, long *ppid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *after = strrchr(buf, ')');
    long parent = 0;
    char letter = 0;
    if (!after || sscanf(after + 1, " %c %ld", &letter, &parent) != 2)
        return -1;
    *state = letter;
    if (ppid)
        *ppid = parent;
    return 0;
}

int util_proc_gone(long pid)
{
    char state;
    if (pid <= 0)
        return 0;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return 1;
    return util_proc_stat(pid, &state, NULL) == 0 && (state == 'Z' || state == 'X');
}

double util_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

uint32_t util_crc32(uint32_t crc, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    while (bytes) { // zlib takes uInt lengths
        uInt n = bytes > (1u << 30) ? (1u << 30) : (uInt)bytes;
        crc = (uint32_t)crc32(crc, p, n);
        p += n;
        bytes -= n;
    }
    return crc;
}

uint64_t util_hash64(uint64_t h, const void *data, size_t bytes)
{
    // FNV-1a over 8-byte words, then a murmur finaliser: fast and good enough
    // to tell replicas apart (not cryptographic).
    const unsigned char *p = data;
    if (!h)
        h = 0xcbf29ce484222325ull;
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        uint64_t w;
        __builtin_memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < bytes; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

char *util_format_bytes(uint64_t bytes, char *buf, size_t buf_bytes)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, buf_bytes, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, buf_bytes, "%.1f %s", v, units[u]);
    return buf;
}

int util_errorf(char *err, size_t err_bytes, int status, const char *fmt, ...)
{
    if (err && err_bytes) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_bytes, fmt, ap);
        va_end(ap);
    }
    return status;
}

int util_read_file(const char *path, const char *what, size_t max_bytes, void **data,
                   size_t *bytes, char *err, size_t err_bytes)
{
    *data = NULL;
    *bytes = 0;
    // Non-blocking, so that a FIFO cannot hang the open.
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return util_errorf(err, err_bytes, -e, "%s: cannot open %s: %s", path, what, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return util_errorf(err, err_bytes, VGPU_EIO, "%s: %s, not a %s file", path,
                           S_ISDIR(st.st_mode) ? "a directory" : "not a regular file", what);
    }
    // Read to the end rather than trust st_size (a file may grow, and some
    // say 0), into room for max_bytes + 1 at most: one byte more is too many.
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (cap - len < 2) { // room for a byte and the NUL
            if (cap > max_bytes) {
                char limit[32];
                if (max_bytes % (1u << 20) == 0)
                    snprintf(limit, sizeof limit, "%zu MiB", max_bytes >> 20);
                else
                    util_format_bytes(max_bytes, limit, sizeof limit);
                rc = util_errorf(err, err_bytes, VGPU_EIO, "%s: %s file larger than %s", path,
                                 what, limit);
                break;
            }
            size_t next = cap ? 2 * cap : (size_t)st.st_size + 8192;
            next = next < max_bytes + 2 ? next : max_bytes + 2;
            char *grown = realloc(buf, next);
            if (!grown) {
                rc = util_errorf(err, err_bytes, VGPU_ENOMEM, "%s: no memory for its %zu bytes",
                                 path, next);
                break;
            }
            buf = grown;
            cap = next;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = util_errorf(err, err_bytes, VGPU_EIO, "%s: read error: %s", path, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[len] = '\0';
    *data = buf;
    *bytes = len;
    return 0;
}
