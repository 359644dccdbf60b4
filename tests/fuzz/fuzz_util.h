// fuzz_util.h: helpers for the libFuzzer targets (header-only): readers that
// take a path get the fuzz input as an in-memory file.
#ifndef VGPU_FUZZ_UTIL_H
#define VGPU_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

// Puts bytes into a fresh memfd and writes "/proc/self/fd/N" into path.
// Returns the fd (the caller closes it); aborts when the system refuses,
// which is a broken harness, not a finding.
static inline int fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t path_bytes)
{
    int fd = memfd_create("vgpu-fuzz", MFD_CLOEXEC);
    if (fd < 0) {
        perror("memfd_create");
        abort();
    }
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) {
            perror("write");
            abort();
        }
        done += (size_t)n;
    }
    snprintf(path, path_bytes, "/proc/self/fd/%d", fd);
    return fd;
}

#endif
