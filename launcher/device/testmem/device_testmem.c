// device_testmem.c: a test-only device (issue 45): plain host memory behind
// a GPU's contract. It has no host view and no share operation, so the
// runtime and the collectives treat its memory as they treat a GPU's (the
// ring and the mpi backend copy through host staging) while it runs
// anywhere; it proves that they ask the device, not a backend's name. It
// stands for the CPU kind where VGPU_TEST_DEVICE=testmem (device.c's
// registry); its math operations are NULL (the collectives need none).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "devcoll.h"
#include "device.h"
#include "hostmem.h"
#include "log.h"
#include "status.h"

struct testmem_impl {
    void *base;   // the arena's memory (anonymous, read-write)
    size_t bytes; // its length
};

// One device, the host, as the CPU's discovery gives it.
static int testmem_discover_(struct device_info *out, int max, int *count, char *err,
                             size_t err_bytes)
{
    (void)err, (void)err_bytes;
    if (max < 1)
        return VGPU_EINVAL;
    memset(out, 0, sizeof *out);
    out->kind = DEVICE_KIND_CPU;
    snprintf(out->name, sizeof out->name, "host memory (test device)");
    out->total_bytes = hostmem_meminfo("MemTotal");
    out->free_bytes = hostmem_available();
    char host[40] = "?";
    gethostname(host, sizeof host - 1);
    snprintf(out->uuid, sizeof out->uuid, "testmem-%s", host);
    *count = 1;
    return 0;
}

static void testmem_release_(device_t *dev)
{
    struct testmem_impl *im = dev->impl;
    if (im && im->base)
        munmap(im->base, im->bytes);
    free(im);
    dev->impl = NULL;
}

static int testmem_reserve_(device_t *dev, uint64_t cap_bytes)
{
    struct testmem_impl *im = calloc(1, sizeof *im);
    if (!im)
        return VGPU_ENOMEM;
    dev->impl = im;
    if (cap_bytes == 0 || cap_bytes > SIZE_MAX)
        return VGPU_EINVAL;
    void *p = mmap(NULL, (size_t)cap_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED)
        return VGPU_EDEVMEM;
    im->base = p;
    im->bytes = (size_t)cap_bytes;
    return arena_init(&dev->arena, p, cap_bytes);
}

static int testmem_copy_(device_t *dev, void *dst, const void *src, size_t bytes)
{
    (void)dev;
    memmove(dst, src, bytes);
    return 0;
}

static int testmem_memset_zero_(device_t *dev, void *dst, size_t bytes)
{
    (void)dev;
    memset(dst, 0, bytes);
    return 0;
}

static int testmem_sync_(device_t *dev)
{
    (void)dev; // every operation has finished when it returns
    return 0;
}

static int testmem_host_func_(device_t *dev, void (*fn)(void *arg), void *arg)
{
    (void)dev;
    fn(arg);
    return 0;
}

static const struct device_ops device_testmem_ops = {
    .kind = DEVICE_KIND_CPU,
    .name = "testmem",
    .reserve = testmem_reserve_,
    .release = testmem_release_,
    .copy_h2d = testmem_copy_,
    .copy_d2h = testmem_copy_,
    .copy_d2d = testmem_copy_,
    .memset_zero = testmem_memset_zero_,
    .sync = testmem_sync_,
    .host_func = testmem_host_func_,
    .caps = DEVICE_CAP_TEST,
    .label = "test memory",
    .discover = testmem_discover_,
    // Its memory is this process's: the simulated device collectives read
    // it in place, as a GPU's kernel reads its own.
    .devcoll = &devcoll_sim_exec,
};

const struct device_ops *device_testmem_backend(void) { return &device_testmem_ops; }
