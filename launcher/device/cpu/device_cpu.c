// device_cpu.c: the CPU-simulated virtual GPU. Device memory is a memfd
// (shm_share.h) mapped twice: a PROT_NONE view whose addresses are handed out as
// device pointers (host code that dereferences one faults, as on a GPU, except
// inside a host function: cpu_host_func_) and a read-write view that the
// device's kernels (the math module's CPU bodies, math/cpu/) and same-host
// peers use.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <ucontext.h>
#include <unistd.h>

#include "devcoll.h"
#include "device_internal.h"
#include "hostmem.h"
#include "log.h"
#include "util.h"

struct cpu_impl {
    int fd;                 // the memfd, held open so that peers can map it
    struct shm_handle share; // what a peer needs to map it
    char *device_view;      // PROT_NONE: the device addresses
    char *host_view;        // read-write alias of the same pages
    size_t bytes;
};

// ---- discovery ----

static void read_cpu_name_(char *buf, size_t bytes)
{
    snprintf(buf, bytes, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *v = strchr(line, ':');
            if (v) {
                v += 1 + (v[1] == ' ');
                v[strcspn(v, "\n")] = '\0';
                snprintf(buf, bytes, "%s", v);
            }
            break;
        }
    }
    fclose(f);
}

// One device: the host.
static int cpu_discover_one_(struct device_info *out)
{
    memset(out, 0, sizeof *out);
    out->kind = DEVICE_KIND_CPU;
    out->index = 0;
    read_cpu_name_(out->name, sizeof out->name);
    out->total_bytes = hostmem_meminfo("MemTotal");
    // Arenas are memfds (no /dev/shm): the memory actually available bounds
    // the caps, and so does this process's memory cgroup (Slurm, Docker).
    out->free_bytes = hostmem_available();
    char boot_id[40] = "unknown";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (fgets(boot_id, sizeof boot_id, f))
            boot_id[strcspn(boot_id, "\n")] = '\0';
        fclose(f);
    }
    snprintf(out->uuid, sizeof out->uuid, "cpu-%.36s", boot_id);
    return 0;
}

// ---- a host access to device memory explains itself ----
//
// A GPU answers a host dereference of device memory with an illegal-address
// error; here the PROT_NONE view faults. Without a word that is "a rank was
// killed by signal 11", so a SIGSEGV handler looks at the fault's address:
// inside a virtual GPU's view it says so (rank, address, which virtual GPU,
// what to use instead), then hands the signal on to what was there before
// (Open MPI's backtrace, a sanitizer, the default death with a core). Any
// other fault goes to the previous handler untouched. Only async-signal-safe
// calls in the handler: the text is put together by hand and written with
// write(2).

#define FAULT_VIEWS_MAX 16 // open CPU devices a process can have (one a rank; tests open more)

struct fault_view_ {
    _Atomic uintptr_t base;   // the device view's first address; 0 = a free slot
    size_t bytes;             // its length
    char prefix[96];          // "[rank R@host] "
    char what[192];           // "virtual GPU vgpuN (...)"
};

static struct fault_view_ fault_views_[FAULT_VIEWS_MAX];
static struct sigaction previous_segv_; // SIGSEGV's action before ours

struct text_ {
    char buf[768];
    size_t len;
};

static void put_(struct text_ *t, const char *s)
{
    while (*s && t->len < sizeof t->buf - 1)
        t->buf[t->len++] = *s++;
}

static void put_hex_(struct text_ *t, uintptr_t v)
{
    char digits[2 + 2 * sizeof v + 1], *p = digits + sizeof digits - 1;
    *p = '\0';
    do
        *--p = "0123456789abcdef"[v & 15];
    while (v >>= 4);
    *--p = 'x';
    *--p = '0';
    put_(t, p);
}

static void put_dec_(struct text_ *t, uintmax_t v)
{
    char digits[24], *p = digits + sizeof digits - 1;
    *p = '\0';
    do
        *--p = (char)('0' + v % 10);
    while (v /= 10);
    put_(t, p);
}

// Hands the fault to what SIGSEGV did before ours. A handler is called; the
// default (or an ignored SIGSEGV, which the kernel does not honour for a
// fault) is restored, and the access, repeated on return, ends the process
// by SIGSEGV as it would have without us.
static void pass_on_(int sig, siginfo_t *info, void *uctx)
{
    const struct sigaction *prev = &previous_segv_;
    if (prev->sa_flags & SA_SIGINFO) {
        if (prev->sa_sigaction) {
            prev->sa_sigaction(sig, info, uctx);
            return;
        }
    } else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
        prev->sa_handler(sig);
        return;
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
}

static void on_segv_(int sig, siginfo_t *info, void *uctx)
{
    const int saved_errno = errno;
    const uintptr_t addr = (uintptr_t)info->si_addr;
    for (int i = 0; i < FAULT_VIEWS_MAX; i++) {
        const struct fault_view_ *v = &fault_views_[i];
        const uintptr_t base = atomic_load(&v->base);
        if (!base || addr < base || addr - base >= v->bytes)
            continue;
        struct text_ t = {.len = 0};
        put_(&t, v->prefix);
        put_(&t, "error: host access to device memory: the program ");
#if defined(__x86_64__) && defined(REG_ERR)
        const ucontext_t *uc = uctx;
        put_(&t, uc->uc_mcontext.gregs[REG_ERR] & 2 ? "wrote " : "read ");
#else
        put_(&t, "touched ");
#endif
        put_hex_(&t, addr);
        put_(&t, ", byte ");
        put_dec_(&t, addr - base);
        put_(&t, " of ");
        put_(&t, v->what);
        put_(&t, ". A virtual GPU's memory is not host memory (as on a GPU, where this is an "
                 "illegal address): copy it with vgpu_memcpy_dtoh / vgpu_memcpy_htod, or work on "
                 "it in a function run by vgpu_launch_host_func\n");
        for (size_t done = 0; done < t.len;) {
            ssize_t n = write(STDERR_FILENO, t.buf + done, t.len - done);
            if (n <= 0)
                break;
            done += (size_t)n;
        }
        break;
    }
    errno = saved_errno;
    pass_on_(sig, info, uctx);
}

// Whether SIGSEGV is ours now (a program, or a test framework, may have set
// its own since: then ours goes on top of it, and hands its faults on).
static void install_fault_handler_(void)
{
    struct sigaction now;
    if (sigaction(SIGSEGV, NULL, &now) != 0)
        return;
    if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_segv_)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv_;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK; // a handler's stack of its own, where there is one
    sigemptyset(&sa.sa_mask);
    previous_segv_ = now;
    sigaction(SIGSEGV, &sa, NULL);
}

// Makes faults in dev's device view explain themselves (a full table is
// silent: the fault is then a plain SIGSEGV).
static void watch_view_(const device_t *dev, const struct cpu_impl *im)
{
    for (int i = 0; i < FAULT_VIEWS_MAX; i++) {
        struct fault_view_ *v = &fault_views_[i];
        uintptr_t none = 0;
        // Claimed with a placeholder, filled, then published with its base.
        if (!atomic_compare_exchange_strong(&v->base, &none, UINTPTR_MAX))
            continue;
        char cap[32];
        v->bytes = im->bytes;
        snprintf(v->prefix, sizeof v->prefix, "[rank %d@%s] ", dev->rank, dev->host);
        snprintf(v->what, sizeof v->what, "virtual GPU vgpu%d (rank %d's, %s on %s%d %s%s)",
                 dev->virtual_id, dev->rank, util_format_bytes(im->bytes, cap, sizeof cap),
                 device_kind_name(dev->info.kind), dev->info.index, dev->info.name,
                 dev->info.simulated ? ", simulated" : "");
        atomic_store(&v->base, (uintptr_t)im->device_view);
        install_fault_handler_();
        return;
    }
}

static void unwatch_view_(const struct cpu_impl *im)
{
    for (int i = 0; i < FAULT_VIEWS_MAX; i++)
        if (atomic_load(&fault_views_[i].base) == (uintptr_t)im->device_view)
            atomic_store(&fault_views_[i].base, 0);
}

// ---- memory ----

static int cpu_reserve_(device_t *dev, uint64_t cap_bytes)
{
    if (cap_bytes == 0)
        return VGPU_EINVAL;
    struct cpu_impl *im = calloc(1, sizeof *im);
    if (!im)
        return VGPU_ENOMEM;
    im->fd = -1;
    im->bytes = cap_bytes;
    int rc = 0;
    // A memfd has no size limit of its own: committing more than the host
    // has would end in the OOM killer rather than an error, so check first.
    char need[32], have[32];
    util_format_bytes(cap_bytes, need, sizeof need);
    uint64_t avail = hostmem_available();
    const int simulated = dev->info.simulated; // a GPU's cap: pages only as used
    if (!simulated && cap_bytes > avail) {
        log_error("the cap needs %s of host memory and the host has %s available (MemAvailable, "
                  "memory cgroup)", need, util_format_bytes(avail, have, sizeof have));
        rc = VGPU_EDEVMEM;
        goto fail;
    }
    im->fd = shm_share_create("vgpu-arena", cap_bytes, !simulated, &im->share);
    if (im->fd < 0) {
        rc = im->fd;
        if (rc == VGPU_ENOMEM) {
            uint64_t room = hostmem_cgroup_room();
            if (room != UINT64_MAX)
                log_error("the cap needs %s of host memory and this process's memory cgroup "
                          "has %s left", need, util_format_bytes(room, have, sizeof have));
            rc = VGPU_EDEVMEM;
        }
        goto fail;
    }
    im->device_view = mmap(NULL, cap_bytes, PROT_NONE, MAP_SHARED, im->fd, 0);
    im->host_view = mmap(NULL, cap_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, im->fd, 0);
    if (im->device_view == MAP_FAILED || im->host_view == MAP_FAILED) {
        rc = -errno;
        goto fail;
    }
    dev->impl = im;
    rc = arena_init(&dev->arena, im->device_view, cap_bytes);
    if (rc < 0)
        goto fail;
    watch_view_(dev, im);
    return 0;
fail:
    dev->impl = im;
    dev->ops->release(dev);
    return rc;
}

static void cpu_release_(device_t *dev)
{
    struct cpu_impl *im = dev->impl;
    if (!im)
        return;
    if (im->device_view && im->device_view != MAP_FAILED) {
        unwatch_view_(im);
        munmap(im->device_view, im->bytes);
    }
    if (im->host_view && im->host_view != MAP_FAILED)
        munmap(im->host_view, im->bytes);
    if (im->fd >= 0)
        close(im->fd);
    free(im);
    dev->impl = NULL;
}

static const struct device_ops device_cpu_ops;

// The host view of a device pointer (device_ops.host_view); NULL outside
// this device's arena.
static void *cpu_view_(const device_t *dev, const void *ptr)
{
    if (!dev || dev->ops != &device_cpu_ops || !arena_contains(&dev->arena, ptr))
        return NULL;
    const struct cpu_impl *im = dev->impl;
    return im->host_view + ((const char *)ptr - im->device_view);
}

// What a same-host peer needs to map the arena (device_ops.share).
static int cpu_share_(const device_t *dev, struct shm_handle *out)
{
    const struct cpu_impl *im = dev && dev->ops == &device_cpu_ops ? dev->impl : NULL;
    if (!im)
        return VGPU_EINVAL;
    *out = im->share;
    return 0;
}


static int cpu_copy_h2d_(device_t *dev, void *dst, const void *src, size_t bytes)
{
    memcpy(cpu_view_(dev, dst), src, bytes);
    return 0;
}

static int cpu_copy_d2h_(device_t *dev, void *dst, const void *src, size_t bytes)
{
    memcpy(dst, cpu_view_(dev, src), bytes);
    return 0;
}

static int cpu_copy_d2d_(device_t *dev, void *dst, const void *src, size_t bytes)
{
    memmove(cpu_view_(dev, dst), cpu_view_(dev, src), bytes);
    return 0;
}

static int cpu_memset_zero_(device_t *dev, void *dst, size_t bytes)
{
    memset(cpu_view_(dev, dst), 0, bytes);
    return 0;
}

static int cpu_sync_(device_t *dev)
{
    (void)dev; // kernels run synchronously on the calling thread
    return 0;
}

// The program's own computation on device memory: the device view is made
// read-write for fn alone (to every thread of the process, while fn runs)
// and PROT_NONE again after, so a host access outside fn still faults and
// is explained. Kernels run synchronously, so fn runs now, in stream order.
static int cpu_host_func_(device_t *dev, void (*fn)(void *arg), void *arg)
{
    struct cpu_impl *im = dev->impl;
    if (mprotect(im->device_view, im->bytes, PROT_READ | PROT_WRITE) != 0) {
        const int rc = -errno;
        log_error("vgpu_launch_host_func: cannot open virtual GPU vgpu%d's memory to the host "
                  "(mprotect): %s; the function did not run", dev->virtual_id, strerror(-rc));
        return rc;
    }
    fn(arg);
    if (mprotect(im->device_view, im->bytes, PROT_NONE) != 0) {
        const int rc = -errno;
        log_error("vgpu_launch_host_func: cannot close virtual GPU vgpu%d's memory to the host "
                  "again (mprotect): %s", dev->virtual_id, strerror(-rc));
        return rc;
    }
    return 0;
}

static int cpu_discover_(struct device_info *out, int max, int *count, char *err, size_t err_bytes)
{
    (void)err, (void)err_bytes;
    if (max < 1)
        return VGPU_EINVAL;
    TRY(cpu_discover_one_(out));
    *count = 1;
    return 0;
}

static const struct device_ops device_cpu_ops = {
    .kind = DEVICE_KIND_CPU,
    .name = "cpu",
    .reserve = cpu_reserve_,
    .release = cpu_release_,
    .copy_h2d = cpu_copy_h2d_,
    .copy_d2h = cpu_copy_d2h_,
    .copy_d2d = cpu_copy_d2d_,
    .memset_zero = cpu_memset_zero_,
    .sync = cpu_sync_,
    .host_func = cpu_host_func_,
    .caps = 0, // host memory: a host view, shared with same-host peers
    .label = "CPU",
    .discover = cpu_discover_,
    .host_view = cpu_view_,
    .share = cpu_share_,
    // Only where VGPU_DEVCOLL=1 asks (the ring's host paths are faster
    // here): the device collectives' protocol end to end on a CPU.
    .devcoll = &devcoll_sim_exec,
};

const struct device_ops *device_cpu_backend(void) { return &device_cpu_ops; }
