// util.c: clocks, hashing, size formatting.
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <zlib.h>

__thread int util_waits_beside_compute;

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
