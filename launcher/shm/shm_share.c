// shm_share.c: see shm_share.h.
#include "shm_share.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "status.h"

int shm_share_create(const char *tag, uint64_t bytes, int commit, struct shm_handle *h)
{
    memset(h, 0, sizeof *h);
    if (bytes == 0 || bytes > (uint64_t)INT64_MAX)
        return VGPU_EINVAL;
    int fd = memfd_create(tag, MFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    // posix_fallocate commits the pages: a memory cgroup or host that cannot
    // hold them answers ENOMEM/ENOSPC now.
    int err = commit ? posix_fallocate(fd, 0, (off_t)bytes)
                     : ftruncate(fd, (off_t)bytes) == 0 ? 0 : errno;
    struct stat st;
    if (!err && fstat(fd, &st) < 0)
        err = errno;
    if (err) {
        close(fd);
        return err == ENOSPC || err == ENOMEM ? VGPU_ENOMEM : -err;
    }
    *h = (struct shm_handle){.pid = (int32_t)getpid(), .fd = fd, .dev = (uint64_t)st.st_dev,
                             .ino = (uint64_t)st.st_ino, .bytes = bytes};
    return fd;
}

int shm_share_map(const struct shm_handle *h, int writable, void **map)
{
    *map = NULL;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)h->pid, (int)h->fd);
    int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        log_error("cannot open the shared memory of process %d (%s): %s; the ranks of a host "
                  "must run as one user in one PID namespace (or set comm.backend = mpi)",
                  (int)h->pid, path, strerror(err));
        return -err;
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
    } else if ((uint64_t)st.st_dev != h->dev || (uint64_t)st.st_ino != h->ino) {
        log_error("%s is not the segment process %d announced (another PID namespace?)", path,
                  (int)h->pid);
        rc = VGPU_ECOMM;
    } else if ((uint64_t)st.st_size < h->bytes) {
        log_error("the segment of process %d is smaller than announced (%llu < %llu bytes)",
                  (int)h->pid, (unsigned long long)st.st_size, (unsigned long long)h->bytes);
        rc = VGPU_ECOMM;
    } else {
        void *m = mmap(NULL, h->bytes, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
            rc = -errno;
        else
            *map = m;
    }
    close(fd);
    return rc;
}
