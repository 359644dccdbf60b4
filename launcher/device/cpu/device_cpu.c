// device_cpu.c: the CPU-simulated virtual GPU. Device memory is a memfd
// (shm_share.h) mapped twice: a PROT_NONE view whose addresses are handed out as
// device pointers (host code that dereferences one faults, as on a GPU, except
// inside a host function: cpu_host_func_) and a read-write view that the
// device's kernels and same-host peers use.
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

#include "cpu_gemm.h"
#include "device_internal.h"
#include "kernels.h"
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

int device_cpu_discover_(struct device_info *out)
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
    cpu_gemm_set_threads(dev->blas_threads);
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

void *device_cpu_view(const device_t *dev, const void *ptr)
{
    if (!dev || dev->ops != &device_cpu_ops || !arena_contains(&dev->arena, ptr))
        return NULL;
    const struct cpu_impl *im = dev->impl;
    return im->host_view + ((const char *)ptr - im->device_view);
}

int device_cpu_share(const device_t *dev, struct shm_handle *out)
{
    const struct cpu_impl *im = dev && dev->ops == &device_cpu_ops ? dev->impl : NULL;
    if (!im)
        return VGPU_EINVAL;
    *out = im->share;
    return 0;
}

// Host view of a device pointer the public wrappers have already checked.
#define V_(p) ((float *)device_cpu_view(dev, (p)))
#define CV_(p) ((const float *)device_cpu_view(dev, (p)))

static int cpu_copy_h2d_(device_t *dev, void *dst, const void *src, size_t bytes)
{
    memcpy(device_cpu_view(dev, dst), src, bytes);
    return 0;
}

static int cpu_copy_d2h_(device_t *dev, void *dst, const void *src, size_t bytes)
{
    memcpy(dst, device_cpu_view(dev, src), bytes);
    return 0;
}

static int cpu_copy_d2d_(device_t *dev, void *dst, const void *src, size_t bytes)
{
    memmove(device_cpu_view(dev, dst), device_cpu_view(dev, src), bytes);
    return 0;
}

static int cpu_memset_zero_(device_t *dev, void *dst, size_t bytes)
{
    memset(device_cpu_view(dev, dst), 0, bytes);
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

// ---- math ----

static int cpu_gemm_(device_t *dev, int trans_a, int trans_b, int m, int n, int k, float alpha,
                     const float *a, const float *b, float beta, float *c)
{
    return cpu_gemm(trans_a, trans_b, m, n, k, alpha, CV_(a), CV_(b), beta, V_(c));
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CPU_X86_AVX512_ 1

// kernel_decode_u8 on 16 codes at a time, the table held in 16 registers:
// eight two-register permutes pick by the code's low 5 bits, and bits 5-7
// choose among them in three rounds of blends; only bits move, so the values
// are the table's exactly. Returns how many it did. Half the time of the
// scalar loop (perf, np=1 on Fashion-MNIST: 2.3% of the run against 4.7%).
__attribute__((target("avx512f"))) static size_t
decode_u8_avx512_(float *out, const uint8_t *codes, const float *table, size_t n)
{
    __m512 t[16];
    for (int k = 0; k < 16; k++)
        t[k] = _mm512_loadu_ps(table + 16 * k);
    const __m512i bit5 = _mm512_set1_epi32(32), bit6 = _mm512_set1_epi32(64),
                  bit7 = _mm512_set1_epi32(128);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i c8;
        memcpy(&c8, codes + i, sizeof c8);
        const __m512i idx = _mm512_cvtepu8_epi32(c8);
        __m512 r[8];
        for (int k = 0; k < 8; k++)
            r[k] = _mm512_permutex2var_ps(t[2 * k], idx, t[2 * k + 1]);
        const __mmask16 m5 = _mm512_test_epi32_mask(idx, bit5),
                        m6 = _mm512_test_epi32_mask(idx, bit6),
                        m7 = _mm512_test_epi32_mask(idx, bit7);
        for (int k = 0; k < 4; k++)
            r[k] = _mm512_mask_blend_ps(m5, r[2 * k], r[2 * k + 1]);
        for (int k = 0; k < 2; k++)
            r[k] = _mm512_mask_blend_ps(m6, r[2 * k], r[2 * k + 1]);
        _mm512_storeu_ps(out + i, _mm512_mask_blend_ps(m7, r[0], r[1]));
    }
    return i;
}
#endif

static int cpu_decode_u8_(device_t *dev, float *out, const uint8_t *codes, const float *table,
                          size_t n)
{
    float *o = V_(out);
    const uint8_t *c = device_cpu_view(dev, codes);
    const float *tb = CV_(table);
    size_t i = 0;
#ifdef CPU_X86_AVX512_
    if (__builtin_cpu_supports("avx512f"))
        i = decode_u8_avx512_(o, c, tb, n);
#endif
    for (; i < n; i++)
        kernel_decode_u8(i, o, c, tb);
    return 0;
}

// The elementwise loops call the kernels.h kernels, except where a per-element
// kernel keeps the compiler from vectorising: bias_add (a modulo per element)
// and bias_grad (strided column sums) are the same arithmetic, row by row.

static int cpu_bias_add_(device_t *dev, float *out, const float *bias, int rows, int cols, int relu)
{
    float *o = V_(out);
    const float *bv = CV_(bias);
    for (size_t r = 0; r < (size_t)rows; r++) { // as kernel_bias_add
        float *restrict row = o + r * (size_t)cols;
        if (relu)
            for (size_t c = 0; c < (size_t)cols; c++) {
                float x = row[c] + bv[c];
                row[c] = x > 0.0f ? x : 0.0f;
            }
        else
            for (size_t c = 0; c < (size_t)cols; c++)
                row[c] += bv[c];
    }
    return 0;
}

static int cpu_bias_grad_(device_t *dev, float *dbias, const float *dout, int rows, int cols)
{
    float *restrict db = V_(dbias);
    const float *d = CV_(dout);
    // As kernel_bias_grad: per column, rows added in order from 0; but
    // reading dout row by row (contiguous, vectorisable).
    memset(db, 0, (size_t)cols * sizeof(float));
    for (size_t r = 0; r < (size_t)rows; r++) {
        const float *row = d + r * (size_t)cols;
        for (size_t c = 0; c < (size_t)cols; c++)
            db[c] += row[c];
    }
    return 0;
}

static int cpu_relu_backward_(device_t *dev, float *din, const float *dout, const float *out,
                              size_t n)
{
    float *di = V_(din);
    const float *d = CV_(dout), *o = CV_(out);
    for (size_t i = 0; i < n; i++)
        kernel_relu_backward(i, di, d, o);
    return 0;
}

static int cpu_softmax_xent_(device_t *dev, float *dlogits, float *stats, const float *logits,
                             const int32_t *labels, int rows, int classes, float grad_scale)
{
    float *dl = dlogits ? V_(dlogits) : NULL, *st = V_(stats);
    const float *z = CV_(logits);
    const int32_t *y = device_cpu_view(dev, labels);
    for (size_t r = 0; r < (size_t)rows; r++)
        if (kernel_softmax_xent(r, dl, st, z, y, classes, grad_scale) < 0) {
            log_error("softmax_xent: label %d of row %zu is outside [0, %d)", y[r], r, classes);
            return VGPU_EINVAL;
        }
    return 0;
}

static int cpu_axpby_(device_t *dev, float *y, float a, const float *x, float b, size_t n)
{
    float *yv = V_(y);
    const float *xv = CV_(x);
    for (size_t i = 0; i < n; i++)
        kernel_axpby(i, yv, a, xv, b);
    return 0;
}

static int cpu_sgd_step_(device_t *dev, float *param, const float *grad, float *velocity, size_t n,
                         float lr, float momentum, float weight_decay)
{
    float *p = V_(param), *v = V_(velocity);
    const float *g = CV_(grad);
    for (size_t i = 0; i < n; i++)
        kernel_sgd_step(i, p, g, v, lr, momentum, weight_decay);
    return 0;
}

#ifdef CPU_X86_AVX512_
// kernel_adam_step on 16 floats at a time; returns how many it did (the
// caller finishes the tail). The compiler keeps the kernel's loop scalar
// (sqrtf may set errno), and Adam took 1.6 ms of an 8.6 ms step (np=1,
// batch 256); this takes about 0.3 ms, the time to stream the four arrays.
// Same operations in the same order as the kernel (mul and add kept apart,
// correctly rounded sqrt and div): bitwise the kernel's results
// (tests/test_device_cpu.c checks). GCC would contract mul and add into FMA
// across statements; clang contracts only within one expression and has no
// optimize attribute.
#ifdef __clang__
#define ADAM_AVX512_FN_ __attribute__((target("avx512f")))
#else
#define ADAM_AVX512_FN_ __attribute__((target("avx512f"), optimize("fp-contract=off")))
#endif
ADAM_AVX512_FN_ static size_t
adam_avx512_(float *p, const float *g, float *m, float *v, size_t n, float beta1, float beta2,
             float eps, float weight_decay, struct adam_coefs c, int decoupled)
{
    const __m512 b1 = _mm512_set1_ps(beta1), b2 = _mm512_set1_ps(beta2);
    const __m512 one_b1 = _mm512_set1_ps(1.0f - beta1), one_b2 = _mm512_set1_ps(1.0f - beta2);
    const __m512 ve = _mm512_set1_ps(eps), wd = _mm512_set1_ps(weight_decay);
    const __m512 step = _mm512_set1_ps(c.step_size), rs2 = _mm512_set1_ps(c.inv_sqrt_bc2);
    const __m512 lr_wd = _mm512_set1_ps(c.lr_decay);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 gi = _mm512_loadu_ps(g + i), pi = _mm512_loadu_ps(p + i);
        if (!decoupled)
            gi = _mm512_add_ps(gi, _mm512_mul_ps(wd, pi));
        __m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(m + i)),
                                  _mm512_mul_ps(one_b1, gi));
        __m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(v + i)),
                                  _mm512_mul_ps(_mm512_mul_ps(one_b2, gi), gi));
        _mm512_storeu_ps(m + i, mi);
        _mm512_storeu_ps(v + i, vi);
        __m512 den = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vi), rs2), ve);
        __m512 delta = _mm512_mul_ps(step, _mm512_div_ps(mi, den));
        if (decoupled)
            delta = _mm512_add_ps(delta, _mm512_mul_ps(lr_wd, pi));
        _mm512_storeu_ps(p + i, _mm512_sub_ps(pi, delta));
    }
    return i;
}
#endif

static int cpu_adam_step_(device_t *dev, float *param, const float *grad, float *m, float *v,
                          size_t n, float lr, float beta1, float beta2, float eps,
                          float weight_decay, float bias_corr1, float bias_corr2, int decoupled)
{
    float *p = V_(param), *mv = V_(m), *vv = V_(v);
    const float *g = CV_(grad);
    const struct adam_coefs c = kernel_adam_coefs(lr, weight_decay, bias_corr1, bias_corr2);
    size_t i = 0;
#ifdef CPU_X86_AVX512_
    if (__builtin_cpu_supports("avx512f"))
        i = adam_avx512_(p, g, mv, vv, n, beta1, beta2, eps, weight_decay, c, decoupled);
#endif
    for (; i < n; i++)
        kernel_adam_step(i, p, g, mv, vv, beta1, beta2, eps, weight_decay, c, decoupled);
    return 0;
}

const struct device_ops device_cpu_ops = {
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
    .gemm = cpu_gemm_,
    .decode_u8 = cpu_decode_u8_,
    .bias_add = cpu_bias_add_,
    .bias_grad = cpu_bias_grad_,
    .relu_backward = cpu_relu_backward_,
    .softmax_xent = cpu_softmax_xent_,
    .axpby = cpu_axpby_,
    .sgd_step = cpu_sgd_step_,
    .adam_step = cpu_adam_step_,
};
