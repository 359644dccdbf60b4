// test_device_cpu.c: the virtual GPU (device.h): capped allocation, copies
// and their counters, pointer checks, the host-fault guarantee; and every
// math operation on it (math_ops.h) against a naive double-precision
// reference.
//
// `test_device_cpu` runs everything on the CPU backend. `test_device_cpu cuda`
// runs the backend-independent part on the first GPU; it exits 77 (skipped)
// when the CUDA backend is not built or no GPU is visible.
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "device.h"
#include "device_internal.h"
#include "kernels.h"
#include "log.h"
#include "math_ops.h"
#include "status.h"
#include "test_util.h"

#define CAP_BYTES (1u << 20)

static enum device_kind g_kind = DEVICE_KIND_CPU;

// ---- fixture ----

static int setup_dev(void **state) { return test_device_setup(state, g_kind, CAP_BYTES); }

static int teardown_dev(void **state) { return test_device_teardown(state); }

// Device copy of n host floats.
static float *upload_(device_t *dev, const float *host, size_t n)
{
    float *d = NULL;
    assert_int_equal(device_alloc_floats(dev, n, &d), 0);
    if (n)
        assert_int_equal(device_copy_to_device(dev, d, host, n * sizeof(float)), 0);
    return d;
}

static void download_(device_t *dev, float *host, const float *d, size_t n)
{
    assert_int_equal(device_copy_to_host(dev, host, d, n * sizeof(float)), 0);
}

// ---- discovery, open, close ----

static void test_discover(void **state)
{
    (void)state;
    struct device_info info[4];
    int count = -1;
    assert_int_equal(device_discover(DEVICE_KIND_CPU, info, 4, &count, NULL, 0), 0);
    assert_int_equal(count, 1);
    assert_int_equal(info[0].kind, DEVICE_KIND_CPU);
    assert_int_equal(info[0].index, 0);
    assert_true(info[0].total_bytes > 0);
    assert_true(info[0].free_bytes > 0);
    assert_true(info[0].name[0] != '\0');
    assert_int_equal(strncmp(info[0].uuid, "cpu-", 4), 0);
    assert_int_equal(device_discover(DEVICE_KIND_CPU, info, 0, &count, NULL, 0), VGPU_EINVAL);
    assert_int_equal(device_discover((enum device_kind)99, info, 4, &count, NULL, 0), VGPU_EINVAL);
    assert_int_equal(count, 0);
    assert_non_null(device_backend(DEVICE_KIND_CPU));
    assert_null(device_backend((enum device_kind)99));
    // What each kind is, built or not (the registry, device.c): CUDA is the
    // GPU auto looks for, its memory has no host view; the CPU's has.
    assert_string_equal(device_kind_name(DEVICE_KIND_CUDA), "cuda");
    assert_string_equal(device_kind_name(DEVICE_KIND_AUTO), "auto");
    assert_string_equal(device_kind_name((enum device_kind)99), "?");
    assert_int_equal(device_kind_caps(DEVICE_KIND_CUDA), DEVICE_CAP_GPU | DEVICE_CAP_CUDA);
    assert_int_equal(device_kind_caps(DEVICE_KIND_CPU), 0);
    assert_int_equal(device_kind_with(DEVICE_CAP_GPU), DEVICE_KIND_CUDA);
    assert_true(device_kind_host_addressable(DEVICE_KIND_CPU));
    assert_false(device_kind_host_addressable(DEVICE_KIND_CUDA));
    // The test-only device stands for the CPU only where VGPU_TEST_DEVICE
    // names it (a build with the tests has it).
    setenv("VGPU_TEST_DEVICE", "testmem", 1);
    assert_string_equal(device_kind_name(DEVICE_KIND_CPU), "testmem");
    assert_false(device_kind_host_addressable(DEVICE_KIND_CPU));
    assert_int_equal(device_kind_caps(DEVICE_KIND_CPU), DEVICE_CAP_TEST);
    assert_int_equal(device_kind_with(DEVICE_CAP_TEST), DEVICE_KIND_CPU);
    setenv("VGPU_TEST_DEVICE", "nosuch", 1);
    assert_string_equal(device_kind_name(DEVICE_KIND_CPU), "cpu");
    unsetenv("VGPU_TEST_DEVICE");
    assert_string_equal(device_kind_name(DEVICE_KIND_CPU), "cpu");
    assert_int_equal(device_kind_with(DEVICE_CAP_TEST), DEVICE_KIND_AUTO);

    count = -1;
    int rc = device_discover(DEVICE_KIND_CUDA, info, 4, &count, NULL, 0);
#ifdef VGPU_HAVE_CUDA
    // Built: no GPU (or no driver) is 0 devices, not an error.
    assert_int_equal(rc, 0);
    assert_true(count >= 0);
    for (int i = 0; i < count; i++)
        assert_int_equal(info[i].kind, DEVICE_KIND_CUDA);
#else
    assert_int_equal(rc, VGPU_EUNSUPPORTED);
    assert_int_equal(count, 0);
#endif
}

static void test_open_close(void **state)
{
    (void)state;
    struct device_info info;
    int count;
    assert_int_equal(device_discover(DEVICE_KIND_CPU, &info, 1, &count, NULL, 0), 0);
    device_t dev;
    // The cap is rounded down to the arena alignment.
    assert_int_equal(device_open(&dev, &info, 3, "h", 1000, 1), 0);
    assert_int_equal(dev.cap_bytes, 768);
    assert_int_equal(dev.virtual_id, 3);
    assert_int_equal(arena_get_stats(&dev.arena).cap_bytes, 768);
    device_close(&dev);
    device_close(&dev); // second close is harmless
    device_close(NULL);

    // A cap that cannot be reserved fails cleanly.
    assert_true(device_open(&dev, &info, 0, "h", 0, 1) < 0);
    device_close(&dev);
    // More than the host has: refused up front (committing it would summon
    // the OOM killer, as a private memfd has no size limit of its own).
    assert_int_equal(device_open(&dev, &info, 0, "h", 2 * info.total_bytes, 1), VGPU_EDEVMEM);
    device_close(&dev);
    assert_int_equal(device_open(&dev, &info, 0, "h", UINT64_MAX / 2, 1), VGPU_EDEVMEM);
    device_close(&dev);

    // An unknown backend is refused.
    struct device_info bogus = info;
    bogus.kind = (enum device_kind)99; // no backend has it
    assert_int_equal(device_open(&dev, &bogus, 0, "h", CAP_BYTES, 1), VGPU_EUNSUPPORTED);
}

// A named segment appears in /dev/shm, is exclusive, and goes away on close.
// The arena is shared with no name: a peer process maps it through the
// handle (shm_share.h) and sees the owner's writes; a handle that names
// another file, or a process that is gone, is refused; /dev/shm stays empty.
static void test_shared_arena(void **state)
{
    (void)state;
    struct device_info info;
    int count;
    assert_int_equal(device_discover(DEVICE_KIND_CPU, &info, 1, &count, NULL, 0), 0);
    device_t a;
    assert_int_equal(device_open(&a, &info, 0, "h", CAP_BYTES, 1), 0);
    struct shm_handle h;
    assert_int_equal(device_share(&a, &h), 0);
    assert_int_equal(h.pid, getpid());
    assert_int_equal(h.bytes, CAP_BYTES);
    float *view = device_host_view(&a, a.arena.base);
    view[7] = 42.0f;
    pid_t child = fork();
    if (child == 0) {
        void *m = NULL;
        int ok = shm_share_map(&h, 1, &m) == 0 && ((float *)m)[7] == 42.0f;
        if (ok)
            ((float *)m)[8] = 7.0f;
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    waitpid(child, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_true(view[8] == 7.0f);

    void *m = NULL;
    struct shm_handle other = h;
    other.ino ^= 1;
    fprintf(stderr, "  (three expected 'shared memory' messages follow)\n");
    assert_int_equal(shm_share_map(&other, 0, &m), VGPU_ECOMM);
    other = h;
    other.bytes = 2 * h.bytes;
    assert_int_equal(shm_share_map(&other, 0, &m), VGPU_ECOMM);
    other = h;
    other.pid = child; // reaped: gone
    assert_true(shm_share_map(&other, 0, &m) < 0);
    assert_null(m);
    device_close(&a);
    assert_int_equal(device_share(&a, &h), VGPU_EINVAL);
}

// ---- memory ----

static void test_alloc_cap(void **state)
{
    device_t *dev = *state;
    void *p, *q, *r = (void *)1;
    assert_int_equal(device_alloc(dev, CAP_BYTES / 2, &p), 0);
    assert_int_equal(device_alloc(dev, CAP_BYTES / 4, &q), 0);
    assert_int_equal((uintptr_t)p % ARENA_ALIGN, 0);
    // Over the cap: refused (the message goes to stderr), nothing changes.
    fprintf(stderr, "  (an expected 'device memory cap exceeded' message follows)\n");
    assert_int_equal(device_alloc(dev, CAP_BYTES / 4 + 1, &r), VGPU_EDEVMEM);
    assert_null(r);
    assert_int_equal(dev->arena.stats.in_use_bytes, CAP_BYTES / 2 + CAP_BYTES / 4);
    assert_int_equal(device_alloc(dev, CAP_BYTES / 4, &r), 0); // exactly full
    assert_int_equal(dev->arena.stats.in_use_bytes, CAP_BYTES);
    float *f = (float *)1;
    assert_int_equal(device_alloc_floats(dev, 1, &f), VGPU_EDEVMEM);
    assert_int_equal(device_alloc_floats(dev, SIZE_MAX / 2, &f), VGPU_EDEVMEM);
    assert_int_equal(device_free(dev, q), 0);
    assert_int_equal(device_free(dev, p), 0);
    assert_int_equal(device_free(dev, r), 0);
    assert_int_equal(device_free(dev, p), VGPU_EINVAL); // double free
    int host;
    assert_int_equal(device_free(dev, &host), VGPU_EINVAL);
    assert_int_equal(device_free(dev, NULL), 0);
    // All free again: the whole cap in one piece.
    assert_int_equal(device_alloc(dev, CAP_BYTES, &p), 0);
    assert_int_equal(device_free(dev, p), 0);
}

// device_alloc_floats hands out zeroed memory even where old data was.
static void test_alloc_floats_zeroed(void **state)
{
    device_t *dev = *state;
    enum { N = 1000 };
    static float ones[N], back[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1.0f;
    float *d = upload_(dev, ones, N);
    assert_int_equal(device_free(dev, d), 0);
    float *z;
    assert_int_equal(device_alloc_floats(dev, N, &z), 0);
    assert_ptr_equal(z, d); // first fit reuses the same place
    download_(dev, back, z, N);
    for (int i = 0; i < N; i++)
        assert_true(back[i] == 0.0f);
    // device_zero clears a sub-range only.
    assert_int_equal(device_copy_to_device(dev, z, ones, sizeof ones), 0);
    assert_int_equal(device_zero(dev, z + 10, 20 * sizeof(float)), 0);
    download_(dev, back, z, N);
    for (int i = 0; i < N; i++)
        assert_true(back[i] == (i >= 10 && i < 30 ? 0.0f : 1.0f));
    assert_int_equal(device_free(dev, z), 0);
}

static void test_copies_and_counters(void **state)
{
    device_t *dev = *state;
    enum { N = 333 };
    float src[N], back[N];
    for (int i = 0; i < N; i++)
        src[i] = (float)i * 0.5f - 7.0f;
    void *a, *b;
    assert_int_equal(device_alloc(dev, N * sizeof(float), &a), 0);
    assert_int_equal(device_alloc(dev, N * sizeof(float), &b), 0);
    struct device_counters c0 = dev->counters;
    assert_int_equal(device_copy_to_device(dev, a, src, sizeof src), 0);
    assert_int_equal(device_copy(dev, b, a, sizeof src), 0);
    memset(back, 0, sizeof back);
    assert_int_equal(device_copy_to_host(dev, back, b, sizeof back), 0);
    assert_memory_equal(back, src, sizeof src);
    // Partial copies at an offset.
    assert_int_equal(device_copy(dev, (float *)b + 100, (float *)a + 5, 10 * sizeof(float)), 0);
    assert_int_equal(device_copy_to_host(dev, back, (float *)b + 100, 10 * sizeof(float)), 0);
    assert_memory_equal(back, src + 5, 10 * sizeof(float));
    // Zero-byte copies are fine.
    assert_int_equal(device_copy_to_device(dev, a, src, 0), 0);

    struct device_counters c = dev->counters;
    assert_int_equal(c.h2d_calls - c0.h2d_calls, 2);
    assert_int_equal(c.h2d_bytes - c0.h2d_bytes, sizeof src);
    assert_int_equal(c.d2d_calls - c0.d2d_calls, 2);
    assert_int_equal(c.d2d_bytes - c0.d2d_bytes, sizeof src + 10 * sizeof(float));
    assert_int_equal(c.d2h_calls - c0.d2h_calls, 2);
    assert_int_equal(c.d2h_bytes - c0.d2h_bytes, sizeof back + 10 * sizeof(float));
    assert_int_equal(device_sync(dev), 0);
    device_free(dev, a);
    device_free(dev, b);
}

// Asynchronous uploads: with a backend that queues them (a stand-in that
// counts its queued copies and syncs), their host sources stay pending until
// a sync or a copy to the host, and device_wait_host_reads syncs only then.
static int syncs_, queued_;
static int counted_sync_(device_t *dev)
{
    (void)dev;
    syncs_++;
    return 0;
}
static int queued_copy_(device_t *dev, void *dst, const void *src, size_t bytes)
{
    (void)dev, (void)dst, (void)src, (void)bytes;
    queued_++;
    return 0;
}

static void test_async_uploads(void **state)
{
    device_t *dev = *state;
    float src[64], back[64];
    for (int i = 0; i < 64; i++)
        src[i] = (float)i;
    void *a;
    assert_int_equal(device_alloc(dev, sizeof src, &a), 0);
    // The CPU backend copies at once: nothing is ever pending. CUDA's queues
    // the copy on its stream (pending until the copy back, which waits).
    int queues = dev->ops->copy_h2d_async != NULL;
    assert_int_equal(queues, dev->ops->kind == DEVICE_KIND_CUDA);
    assert_int_equal(device_copy_to_device_async(dev, a, src, sizeof src), 0);
    assert_int_equal(dev->host_reads_pending, queues);
    assert_int_equal(device_copy_to_host(dev, back, a, sizeof back), 0);
    assert_int_equal(dev->host_reads_pending, 0);
    assert_memory_equal(back, src, sizeof src);

    const struct device_ops *real = dev->ops;
    struct device_ops queued = *real;
    queued.copy_h2d_async = queued_copy_;
    queued.sync = counted_sync_;
    dev->ops = &queued;
    syncs_ = queued_ = 0;
    assert_int_equal(device_wait_host_reads(dev), 0);
    assert_int_equal(syncs_, 0); // nothing pending, no wait
    assert_int_equal(device_copy_to_device_async(dev, a, src, sizeof src), 0);
    assert_int_equal(queued_, 1);
    assert_int_equal(dev->host_reads_pending, 1);
    assert_int_equal(device_wait_host_reads(dev), 0);
    assert_int_equal(syncs_, 1);
    assert_int_equal(dev->host_reads_pending, 0);
    assert_int_equal(device_wait_host_reads(dev), 0);
    assert_int_equal(syncs_, 1);
    assert_int_equal(device_copy_to_device_async(dev, a, src, 0), 0); // nothing to copy
    assert_int_equal(dev->host_reads_pending, 0);
    assert_int_equal(device_copy_to_device_async(dev, a, src, sizeof src), 0);
    dev->ops = real;
    // A copy to the host waits for the stream, so it clears them too.
    assert_int_equal(device_copy_to_host(dev, back, a, sizeof back), 0);
    assert_int_equal(dev->host_reads_pending, 0);
    device_free(dev, a);
}

// Host pointers where device pointers belong (and the reverse) are refused,
// as are ranges that run past the end of an allocation's arena.
static void test_pointer_checks(void **state)
{
    device_t *dev = *state;
    float host[64] = {0}, host2[64];
    float *d = upload_(dev, host, 64);
    float *d2 = upload_(dev, host, 64);
    struct device_counters c0 = dev->counters;
    fprintf(stderr, "  (expected pointer-check messages follow)\n");
    assert_int_equal(device_copy_to_device(dev, host2, host, sizeof host), VGPU_EINVAL);
    assert_int_equal(device_copy_to_device(dev, d, d2, sizeof host), VGPU_EINVAL); // src is device
    assert_int_equal(device_copy_to_device(dev, d, NULL, sizeof host), VGPU_EINVAL);
    assert_int_equal(device_copy_to_host(dev, host2, host, sizeof host), VGPU_EINVAL);
    assert_int_equal(device_copy_to_host(dev, d2, d, sizeof host), VGPU_EINVAL); // dst is device
    assert_int_equal(device_copy(dev, host2, d, sizeof host), VGPU_EINVAL);
    assert_int_equal(device_copy(dev, d, host, sizeof host), VGPU_EINVAL);
    assert_int_equal(device_zero(dev, host2, sizeof host2), VGPU_EINVAL);
    // Past the end of the region.
    char *end = (char *)dev->arena.base + dev->arena.cap_bytes;
    assert_int_equal(device_copy_to_device(dev, end - 8, host, 16), VGPU_EINVAL);
    // Kernels.
    assert_int_equal(math_gemm(dev, 0, 0, 8, 8, 1, 1.0f, host, d, 0.0f, d2), VGPU_EINVAL);
    assert_int_equal(math_gemm(dev, 0, 0, 8, 8, 1, 1.0f, d, host, 0.0f, d2), VGPU_EINVAL);
    assert_int_equal(math_gemm(dev, 0, 0, 8, 8, 1, 1.0f, d, d2, 0.0f, host2), VGPU_EINVAL);
    assert_int_equal(math_decode_u8(dev, d, (const uint8_t *)host, d2, 64), VGPU_EINVAL);
    assert_int_equal(math_decode_u8(dev, d, (const uint8_t *)d2, host, 64), VGPU_EINVAL);
    assert_int_equal(math_bias_add(dev, d, host, 8, 8, 0), VGPU_EINVAL);
    assert_int_equal(math_bias_add(dev, host2, d, 8, 8, 1), VGPU_EINVAL);
    assert_int_equal(math_bias_grad(dev, host2, d, 8, 8), VGPU_EINVAL);
    assert_int_equal(math_relu_backward(dev, d, d2, host, 64), VGPU_EINVAL);
    assert_int_equal(math_axpby(dev, host2, 1.0f, d, 1.0f, 64), VGPU_EINVAL);
    assert_int_equal(math_sgd_step(dev, d, host, d2, 64, 0.1f, 0.9f, 0.0f), VGPU_EINVAL);
    assert_int_equal(math_adam_step(dev, d, d2, host2, d, 32, 0.1f, 0.9f, 0.99f, 1e-8f, 0.0f, 0.1f,
                                      0.01f, 1),
                     VGPU_EINVAL);
    int32_t labels[8] = {0};
    assert_int_equal(math_softmax_xent(dev, NULL, d, d2, labels, 8, 4, 1.0f), VGPU_EINVAL);
    // Refused calls are not counted as copies.
    struct device_counters c = dev->counters;
    assert_memory_equal(&c, &c0, sizeof c);
    // Nothing was written into the device buffers.
    download_(dev, host2, d, 64);
    for (int i = 0; i < 64; i++)
        assert_true(host2[i] == 0.0f);
    device_free(dev, d);
    device_free(dev, d2);
}

// On the CPU backend device memory is not host-addressable: dereferencing a
// device pointer from host code must fault, as on a GPU.
static void test_host_dereference_faults(void **state)
{
    device_t *dev = *state;
    float one = 1.0f;
    float *d = upload_(dev, &one, 1);
    for (int write = 0; write < 2; write++) {
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            struct rlimit no_core = {0, 0};
            setrlimit(RLIMIT_CORE, &no_core);
            signal(SIGSEGV, SIG_DFL); // cmocka's handler must not catch it here
            signal(SIGBUS, SIG_DFL);
            if (write)
                *(volatile float *)d = 2.0f;
            else
                (void)*(volatile float *)d;
            _exit(0); // survived: the test fails
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV)
            fail_msg("%s of a device pointer from the host: child %s %d, want SIGSEGV",
                     write ? "write" : "read", WIFSIGNALED(status) ? "died of signal" : "exited with",
                     WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
    // The device's own view still holds the value.
    float back = 0;
    download_(dev, &back, d, 1);
    assert_true(back == 1.0f);
    device_free(dev, d);
}

// device_host_func's function: on a CPU device it doubles n floats of
// device memory in place through their device pointer; on a GPU (where it
// must not touch device memory) it only counts.
struct host_func_arg_ {
    float *data;
    size_t n;
    int touch, calls;
};

static void host_func_double_(void *arg)
{
    struct host_func_arg_ *a = arg;
    a->calls++;
    if (a->touch)
        for (size_t i = 0; i < a->n; i++)
            a->data[i] *= 2.0f;
}

// device_host_func runs in stream order: after the upload before it, before
// the copy after it; on a CPU device it reads and writes device memory.
static void test_host_func(void **state)
{
    device_t *dev = *state;
    float host[5] = {1, 2, 3, 4, 5}, back[5] = {0};
    float *d = upload_(dev, host, 5);
    struct host_func_arg_ a = {d, 5, device_host_addressable(dev), 0};
    assert_int_equal(device_host_func(dev, host_func_double_, &a), 0);
    assert_int_equal(device_sync(dev), 0);
    assert_int_equal(a.calls, 1);
    download_(dev, back, d, 5);
    for (int i = 0; i < 5; i++)
        assert_true(back[i] == (a.touch ? 2 : 1) * host[i]);
    assert_int_equal(device_host_func(dev, NULL, &a), VGPU_EINVAL);
    device_free(dev, d);
}

// A host access to a virtual GPU's memory says what happened before the
// rank dies of it: the rank, the address, read or write, the virtual GPU and
// what to use instead (device_cpu.c's SIGSEGV handler); a fault anywhere
// else stays a plain SIGSEGV, without that line. A host function opens the
// memory only while it runs: a read after one faults, explained, too.
static void test_host_access_explained(void **state)
{
    (void)state;
    struct device_info infos[8];
    int count = 0;
    assert_int_equal(device_discover(DEVICE_KIND_CPU, infos, 8, &count, NULL, 0), 0);
    static const char *const cases[] = {"read", "write", "elsewhere", "read after a host function"};
    for (int c = 0; c < 4; c++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            struct rlimit no_core = {0, 0};
            setrlimit(RLIMIT_CORE, &no_core);
            close(fds[0]);
            dup2(fds[1], STDERR_FILENO);
            signal(SIGSEGV, SIG_DFL); // cmocka's handler must not catch it here
            device_t dev;
            float *d = NULL;
            if (device_open(&dev, &infos[0], 3, "testhost", CAP_BYTES, 1) ||
                device_alloc_floats(&dev, 64, &d))
                _exit(2);
            volatile char *p = (char *)d + 100;
            if (c == 3) { // inside the function the same address is host memory
                struct host_func_arg_ a = {d, 64, 1, 0};
                if (device_host_func(&dev, host_func_double_, &a) || a.calls != 1)
                    _exit(3);
            }
            dprintf(fds[1], "address %p\n", (void *)p);
            if (c == 0 || c == 3)
                (void)*p;
            else if (c == 1)
                *p = 1;
            else
                (void)*(volatile char *)(uintptr_t)getpagesize(); // the first page: never mapped
            _exit(0); // survived: the test fails
        }
        close(fds[1]);
        char out[4096];
        size_t len = 0;
        ssize_t n;
        while (len < sizeof out - 1 && (n = read(fds[0], out + len, sizeof out - 1 - len)) > 0)
            len += (size_t)n;
        out[len] = '\0';
        close(fds[0]);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        print_message("%s: %s", cases[c], out);
        if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV)
            fail_msg("%s: child %s %d, want SIGSEGV", cases[c],
                     WIFSIGNALED(status) ? "died of signal" : "exited with",
                     WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        const char *addr = strstr(out, "address ");
        assert_non_null(addr);
        char want[256];
        int alen = (int)strcspn(addr + 8, "\n");
        if (c != 2) {
            snprintf(want, sizeof want,
                     "[rank 3@testhost] error: host access to device memory: the program %s %.*s, "
                     "byte ", c == 1 ? "wrote" : "read", alen, addr + 8);
            if (!strstr(out, want))
                fail_msg("%s: no '%s' in: %s", cases[c], want, out);
            assert_non_null(strstr(out, " of virtual GPU vgpu3 (rank 3's, 1.0 MiB on cpu0 "));
            assert_non_null(strstr(out, "copy it with vgpu_memcpy_dtoh / vgpu_memcpy_htod"));
            assert_non_null(strstr(out, "vgpu_launch_host_func"));
        } else if (strstr(out, "host access to device memory")) {
            fail_msg("a fault outside device memory was explained as one inside: %s", out);
        }
    }
}

// ---- kernels vs references ----

static double op_a_(const float *a, int trans_a, int m, int k, int i, int p)
{
    return trans_a ? a[(size_t)p * m + i] : a[(size_t)i * k + p];
}

static double op_b_(const float *b, int trans_b, int k, int n, int p, int j)
{
    return trans_b ? b[(size_t)j * k + p] : b[(size_t)p * n + j];
}

static void test_gemm(void **state)
{
    device_t *dev = *state;
    static const int shapes[][3] = {{7, 5, 3}, {1, 1, 1}, {3, 8, 17}, {16, 16, 16}, {33, 9, 65},
                                    {1, 40, 2}, {40, 1, 7}};
    static const float alphas[] = {1.0f, -0.5f};
    static const float betas[] = {0.0f, 1.0f, 0.25f};
    uint64_t seed = 7;
    for (size_t s = 0; s < TEST_ARRAY_LEN(shapes); s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (size_t ia = 0; ia < TEST_ARRAY_LEN(alphas); ia++)
                    for (size_t ib = 0; ib < TEST_ARRAY_LEN(betas); ib++) {
                        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                        float alpha = alphas[ia], beta = betas[ib];
                        size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
                        float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4);
                        double *want = malloc(nc * 8);
                        test_fill_uniform(a, na, &seed, -1, 1);
                        test_fill_uniform(b, nb, &seed, -1, 1);
                        test_fill_uniform(c, nc, &seed, -1, 1);
                        if (beta == 0.0f) // beta = 0 must ignore C, even NaN garbage
                            for (size_t i = 0; i < nc; i++)
                                c[i] = NAN;
                        for (int i = 0; i < m; i++)
                            for (int j = 0; j < n; j++) {
                                double acc = 0;
                                for (int p = 0; p < k; p++)
                                    acc += op_a_(a, ta, m, k, i, p) * op_b_(b, tb, k, n, p, j);
                                want[(size_t)i * n + j] =
                                    alpha * acc + (beta != 0.0f ? beta * (double)c[(size_t)i * n + j] : 0.0);
                            }
                        float *da = upload_(dev, a, na), *db = upload_(dev, b, nb),
                              *dc = upload_(dev, c, nc);
                        assert_int_equal(math_gemm(dev, ta, tb, m, n, k, alpha, da, db, beta, dc), 0);
                        download_(dev, c, dc, nc);
                        if (test_count_mismatches_f("C", c, want, nc, 1e-5, 1e-5))
                            fail_msg("gemm m=%d n=%d k=%d trans_a=%d trans_b=%d alpha=%g beta=%g", m,
                                     n, k, ta, tb, alpha, beta);
                        device_free(dev, dc);
                        device_free(dev, db);
                        device_free(dev, da);
                        free(a), free(b), free(c), free(want);
                    }
}

// k = 0: op(a) @ op(b) is an empty sum, so C = beta * C.
static void test_gemm_empty_inner(void **state)
{
    device_t *dev = *state;
    float c[6] = {1, 2, 3, 4, 5, 6}, back[6], dummy = 0;
    float *da = upload_(dev, &dummy, 1), *db = upload_(dev, &dummy, 1);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int beta_one = 0; beta_one < 2; beta_one++) {
                float *dc = upload_(dev, c, 6);
                float beta = beta_one ? 1.0f : 0.0f;
                assert_int_equal(math_gemm(dev, ta, tb, 2, 3, 0, 1.0f, da, db, beta, dc), 0);
                download_(dev, back, dc, 6);
                double want[6];
                for (int i = 0; i < 6; i++)
                    want[i] = beta * c[i];
                if (test_count_mismatches_f("C", back, want, 6, 0, 0))
                    fail_msg("gemm with k=0, trans_a=%d trans_b=%d beta=%g", ta, tb, beta);
                device_free(dev, dc);
            }
    // m = 0 or n = 0: nothing to do, no error.
    assert_int_equal(math_gemm(dev, 0, 0, 0, 3, 2, 1.0f, da, db, 0.0f, da), 0);
    assert_int_equal(math_gemm(dev, 0, 0, 3, 0, 2, 1.0f, da, db, 0.0f, da), 0);
    assert_int_equal(math_gemm(dev, 0, 0, -1, 3, 2, 1.0f, da, db, 0.0f, da), VGPU_EINVAL);
    device_free(dev, db);
    device_free(dev, da);
}

// decode_u8: every code to its table entry, exactly (a table of distinct
// values, negatives included, and all 256 codes in a scrambled order).
static void test_decode_u8(void **state)
{
    device_t *dev = *state;
    enum { N = 1000 };
    float table[256], out[N];
    uint8_t codes[N];
    for (int c = 0; c < 256; c++)
        table[c] = ((float)c - 100.5f) / 3.0f;
    for (int i = 0; i < N; i++)
        codes[i] = (uint8_t)(37 * i + 11);
    float *d_table = upload_(dev, table, 256), *d_out;
    uint8_t *d_codes;
    assert_int_equal(device_alloc(dev, N, (void **)&d_codes), 0);
    assert_int_equal(device_copy_to_device(dev, d_codes, codes, N), 0);
    assert_int_equal(device_alloc_floats(dev, N, &d_out), 0);
    assert_int_equal(math_decode_u8(dev, d_out, d_codes, d_table, N), 0);
    download_(dev, out, d_out, N);
    for (int i = 0; i < N; i++)
        assert_memory_equal(&out[i], &table[codes[i]], sizeof(float));
    assert_int_equal(math_decode_u8(dev, d_out, d_codes, d_table, 0), 0);
    device_free(dev, d_out), device_free(dev, d_codes), device_free(dev, d_table);
#if defined(__x86_64__) && defined(__GNUC__)
    if (!strcmp(dev->ops->name, "cpu") && !__builtin_cpu_supports("avx512f"))
        print_message("skipped: the CPU backend's AVX-512 decode_u8 (this CPU lacks AVX-512; "
                      "the scalar loop was checked)\n");
#endif
}

static void test_bias_add_and_grad(void **state)
{
    device_t *dev = *state;
    static const int shapes[][2] = {{1, 1}, {6, 5}, {3, 17}, {64, 10}, {37, 300}, {5, 513}};
    uint64_t seed = 11;
    for (size_t s = 0; s < TEST_ARRAY_LEN(shapes); s++)
        for (int relu = 0; relu <= 1; relu++) {
            int rows = shapes[s][0], cols = shapes[s][1];
            size_t n = (size_t)rows * cols;
            float *out = malloc(n * 4), *bias = malloc(cols * 4), *db = malloc(cols * 4);
            double *want = malloc(n * 8), *want_db = malloc(cols * 8);
            test_fill_uniform(out, n, &seed, -2, 2);
            test_fill_uniform(bias, cols, &seed, -2, 2);
            for (size_t i = 0; i < n; i++) {
                want[i] = (double)out[i] + bias[i % cols];
                if (relu && want[i] < 0)
                    want[i] = 0;
            }
            for (int c = 0; c < cols; c++) {
                want_db[c] = 0;
                for (int r = 0; r < rows; r++)
                    want_db[c] += out[(size_t)r * cols + c];
            }
            // dbias starts as garbage: bias_grad overwrites it.
            float *dout = upload_(dev, out, n), *dbias = upload_(dev, bias, cols),
                  *ddb = upload_(dev, bias, cols);
            // bias_grad first (it reads the original out).
            assert_int_equal(math_bias_grad(dev, ddb, dout, rows, cols), 0);
            assert_int_equal(math_bias_add(dev, dout, dbias, rows, cols, relu), 0);
            download_(dev, out, dout, n);
            download_(dev, db, ddb, cols);
            assert_allclose(out, want, n, 1e-6, 1e-6);
            assert_allclose(db, want_db, cols, 1e-5, 1e-5);
            // The sum of no rows is zero.
            assert_int_equal(math_bias_grad(dev, ddb, dout, 0, cols), 0);
            download_(dev, db, ddb, cols);
            for (int c = 0; c < cols; c++)
                assert_true(db[c] == 0.0f);
            device_free(dev, ddb), device_free(dev, dbias), device_free(dev, dout);
            free(out), free(bias), free(db), free(want), free(want_db);
        }
}

// ReLU forward (bias_add with relu on a zero bias) and backward, exact, with
// the edge cases at zero.
static void test_relu(void **state)
{
    device_t *dev = *state;
    enum { N = 301 };
    float in[N], dout[N], out[N], din[N], zero[N] = {0};
    double want_out[N], want_din[N];
    uint64_t seed = 3;
    test_fill_uniform(in, N, &seed, -1, 1);
    test_fill_uniform(dout, N, &seed, -1, 1);
    in[0] = 0.0f;
    in[1] = -0.0f;
    zero[1] = -0.0f; // so that the ReLU sees -0
    in[2] = 1e-30f;
    in[3] = NAN;
    for (int i = 0; i < N; i++) {
        want_out[i] = in[i] > 0 ? in[i] : 0.0;
        want_din[i] = want_out[i] > 0 ? dout[i] : 0.0;
    }
    float *d_out = upload_(dev, in, N), *d_bias = upload_(dev, zero, N),
          *d_dout = upload_(dev, dout, N), *d_din;
    assert_int_equal(device_alloc_floats(dev, N, &d_din), 0);
    assert_int_equal(math_bias_add(dev, d_out, d_bias, 1, N, 1), 0);
    download_(dev, out, d_out, N);
    assert_allclose(out, want_out, N, 0, 0);
    assert_int_equal(math_relu_backward(dev, d_din, d_dout, d_out, N), 0);
    download_(dev, din, d_din, N);
    assert_allclose(din, want_din, N, 0, 0);
    // In place on dout.
    assert_int_equal(math_relu_backward(dev, d_dout, d_dout, d_out, N), 0);
    download_(dev, din, d_dout, N);
    assert_allclose(din, want_din, N, 0, 0);
    assert_int_equal(math_bias_add(dev, d_out, d_bias, 0, N, 1), 0);
    device_free(dev, d_din), device_free(dev, d_dout), device_free(dev, d_bias),
        device_free(dev, d_out);
}

// Reference softmax cross-entropy of one row, in double.
static void xent_ref_(const float *z, int classes, int y, double scale, double *loss, double *correct,
                      double *top5, double *dz)
{
    double zmax = z[0];
    for (int j = 1; j < classes; j++)
        zmax = z[j] > zmax ? z[j] : zmax;
    double sum = 0;
    for (int j = 0; j < classes; j++)
        sum += exp((double)z[j] - zmax);
    double lse = zmax + log(sum);
    *loss = lse - z[y];
    int argmax = 0;
    for (int j = 1; j < classes; j++)
        if (z[j] > z[argmax])
            argmax = j;
    *correct = argmax == y;
    int better = 0; // classes ranked ahead of y (ties: the lower index first)
    for (int j = 0; j < classes; j++)
        better += z[j] > z[y] || (z[j] == z[y] && j < y);
    *top5 = better < 5;
    if (dz)
        for (int j = 0; j < classes; j++)
            dz[j] = (exp((double)z[j] - lse) - (j == y)) * scale;
}

struct xent_case {
    const char *name;
    int rows, classes;
    double lo, hi;   // logits uniform in [lo, hi)
    float scale;
    int with_dlogits;
    int ties;        // all logits in a row equal
};

static void test_softmax_xent(void **state)
{
    device_t *dev = *state;
    static const struct xent_case cases[] = {
        {"10 classes", 9, 10, -3, 3, 0.125f, 1, 0},
        {"3 classes: top-5 always", 7, 3, -2, 2, 1.0f, 1, 0},
        {"one class", 4, 1, -2, 2, 1.0f, 1, 0},
        {"evaluation (no dlogits)", 5, 10, -3, 3, 0.0f, 0, 0},
        {"large logits ~1e4", 6, 10, 9990, 10010, 0.5f, 1, 0},
        {"large negative logits", 6, 10, -10010, -9990, 0.5f, 1, 0},
        {"huge spread", 6, 12, -1e4, 1e4, 1.0f, 1, 0},
        {"ties", 6, 8, 1.5, 1.5, 1.0f, 1, 1},
    };
    uint64_t seed = 5;
    for (size_t t = 0; t < TEST_ARRAY_LEN(cases); t++) {
        const struct xent_case *c = &cases[t];
        size_t n = (size_t)c->rows * c->classes;
        float *z = malloc(n * 4), *dz = malloc(n * 4), *st = malloc(c->rows * 3 * 4);
        double *want_dz = malloc(n * 8), *want_st = malloc(c->rows * 3 * 8);
        int32_t *y = malloc(c->rows * sizeof *y);
        test_fill_uniform(z, n, &seed, c->lo, c->hi);
        for (int r = 0; r < c->rows; r++) {
            y[r] = (int32_t)(test_rand_u64(&seed) % (uint64_t)c->classes);
            if (r == 0) // make sure one row is classified correctly
                z[(size_t)r * c->classes + y[r]] = (float)c->hi + 1.0f;
            if (c->ties)
                y[r] = r % c->classes;
            xent_ref_(z + (size_t)r * c->classes, c->classes, y[r], c->scale, &want_st[r * 3],
                      &want_st[r * 3 + 1], &want_st[r * 3 + 2], want_dz + (size_t)r * c->classes);
        }
        float *d_z = upload_(dev, z, n), *d_dz = NULL, *d_st;
        if (c->with_dlogits)
            assert_int_equal(device_alloc_floats(dev, n, &d_dz), 0);
        assert_int_equal(device_alloc_floats(dev, (size_t)c->rows * 3, &d_st), 0);
        void *d_y;
        assert_int_equal(device_alloc(dev, c->rows * sizeof *y, &d_y), 0);
        assert_int_equal(device_copy_to_device(dev, d_y, y, c->rows * sizeof *y), 0);
        int rc = math_softmax_xent(dev, d_dz, d_st, d_z, d_y, c->rows, c->classes, c->scale);
        if (rc)
            fail_msg("case '%s': rc %d", c->name, rc);
        download_(dev, st, d_st, (size_t)c->rows * 3);
        fprintf(stderr, "  case '%s'\n", c->name);
        for (int r = 0; r < c->rows * 3; r++)
            assert_true(isfinite(st[r]));
        // Loss: the float kernel subtracts the max first, so it stays accurate.
        double tol = c->hi > 1000 || c->lo < -1000 ? 2e-3 : 1e-5;
        assert_allclose(st, want_st, (size_t)c->rows * 3, tol, 1e-5);
        if (c->with_dlogits) {
            download_(dev, dz, d_dz, n);
            assert_allclose(dz, want_dz, n, 1e-6, 1e-5);
        }
        device_free(dev, d_y), device_free(dev, d_st), device_free(dev, d_dz),
            device_free(dev, d_z);
        free(z), free(dz), free(st), free(want_dz), free(want_st), free(y);
    }
}

static void test_softmax_xent_bad_label(void **state)
{
    device_t *dev = *state;
    float z[2 * 4] = {0};
    float *d_z = upload_(dev, z, 8), *d_st, *d_dz;
    assert_int_equal(device_alloc_floats(dev, 6, &d_st), 0);
    assert_int_equal(device_alloc_floats(dev, 8, &d_dz), 0);
    void *d_y;
    assert_int_equal(device_alloc(dev, 2 * sizeof(int32_t), &d_y), 0);
    static const int32_t bad[][2] = {{0, 4}, {-1, 0}, {3, 1000}};
    fprintf(stderr, "  (expected label messages follow)\n");
    for (size_t i = 0; i < TEST_ARRAY_LEN(bad); i++) {
        assert_int_equal(device_copy_to_device(dev, d_y, bad[i], sizeof bad[i]), 0);
        assert_int_equal(math_softmax_xent(dev, d_dz, d_st, d_z, d_y, 2, 4, 1.0f), VGPU_EINVAL);
    }
    // A good call after the bad ones works (no sticky error).
    static const int32_t good[2] = {0, 3};
    assert_int_equal(device_copy_to_device(dev, d_y, good, sizeof good), 0);
    assert_int_equal(math_softmax_xent(dev, d_dz, d_st, d_z, d_y, 2, 4, 1.0f), 0);
    float st[6];
    download_(dev, st, d_st, 6);
    assert_true(fabsf(st[0] - logf(4.0f)) < 1e-6f);
    assert_int_equal(math_softmax_xent(dev, d_dz, d_st, d_z, d_y, 2, 0, 1.0f), VGPU_EINVAL);
    assert_int_equal(math_softmax_xent(dev, d_dz, d_st, d_z, d_y, 0, 4, 1.0f), 0);
    device_free(dev, d_y), device_free(dev, d_dz), device_free(dev, d_st), device_free(dev, d_z);
}

// Rows with a NaN or infinite logit count as wrong, for top-1 and top-5 (a
// NaN compares false, so a diverged model would otherwise score 100%).
static void test_softmax_xent_nonfinite(void **state)
{
    device_t *dev = *state;
    enum { ROWS = 4, C = 3 };
    const float nan = NAN, inf = INFINITY;
    const float z[ROWS * C] = {nan, nan, nan, 0.0f, nan, 1.0f, inf, 0.0f, 0.0f, 2.0f, 0.0f, 0.0f};
    const int32_t y[ROWS] = {0, 0, 0, 0};
    float *d_z = upload_(dev, z, ROWS * C), *d_st;
    assert_int_equal(device_alloc_floats(dev, ROWS * 3, &d_st), 0);
    void *d_y;
    assert_int_equal(device_alloc(dev, sizeof y, &d_y), 0);
    assert_int_equal(device_copy_to_device(dev, d_y, y, sizeof y), 0);
    assert_int_equal(math_softmax_xent(dev, NULL, d_st, d_z, d_y, ROWS, C, 0.0f), 0);
    float st[ROWS * 3];
    download_(dev, st, d_st, ROWS * 3);
    for (int r = 0; r < 3; r++) {
        assert_false(isfinite(st[r * 3]));
        assert_true(st[r * 3 + 1] == 0.0f && st[r * 3 + 2] == 0.0f);
    }
    assert_true(isfinite(st[9]) && st[10] == 1.0f && st[11] == 1.0f); // a finite row still counts
    device_free(dev, d_y), device_free(dev, d_st), device_free(dev, d_z);
}

static void test_axpby(void **state)
{
    device_t *dev = *state;
    enum { N = 257 };
    static const float ab[][2] = {{1, 1}, {2, 0}, {0, 1}, {-0.5f, 3}, {0.25f, -1}};
    uint64_t seed = 9;
    for (size_t t = 0; t < TEST_ARRAY_LEN(ab); t++) {
        float x[N], y[N];
        double want[N];
        test_fill_uniform(x, N, &seed, -4, 4);
        test_fill_uniform(y, N, &seed, -4, 4);
        for (int i = 0; i < N; i++)
            want[i] = (double)ab[t][0] * x[i] + (double)ab[t][1] * y[i];
        float *dx = upload_(dev, x, N), *dy = upload_(dev, y, N);
        assert_int_equal(math_axpby(dev, dy, ab[t][0], dx, ab[t][1], N), 0);
        download_(dev, y, dy, N);
        assert_allclose(y, want, N, 1e-6, 1e-6);
        device_free(dev, dy), device_free(dev, dx);
    }
}

// SGD with momentum, PyTorch's form, over three steps.
static void test_sgd_step(void **state)
{
    device_t *dev = *state;
    enum { N = 50, STEPS = 3 };
    static const float hyper[][3] = {{0.1f, 0.0f, 0.0f}, {0.1f, 0.9f, 0.0f}, {0.05f, 0.9f, 0.01f}};
    uint64_t seed = 21;
    for (size_t h = 0; h < TEST_ARRAY_LEN(hyper); h++) {
        float lr = hyper[h][0], mu = hyper[h][1], wd = hyper[h][2];
        float p[N], g[N], v[N] = {0};
        double rp[N], rv[N] = {0};
        test_fill_uniform(p, N, &seed, -1, 1);
        for (int i = 0; i < N; i++)
            rp[i] = p[i];
        float *dp = upload_(dev, p, N), *dg = upload_(dev, p, N), *dv = upload_(dev, v, N);
        for (int s = 0; s < STEPS; s++) {
            test_fill_uniform(g, N, &seed, -1, 1);
            assert_int_equal(device_copy_to_device(dev, dg, g, sizeof g), 0);
            for (int i = 0; i < N; i++) {
                double gi = g[i] + (double)wd * rp[i];
                rv[i] = mu * rv[i] + gi;
                rp[i] -= lr * rv[i];
            }
            assert_int_equal(math_sgd_step(dev, dp, dg, dv, N, lr, mu, wd), 0);
        }
        download_(dev, p, dp, N);
        download_(dev, v, dv, N);
        assert_allclose(p, rp, N, 1e-6, 1e-5);
        assert_allclose(v, rv, N, 1e-6, 1e-5);
        device_free(dev, dv), device_free(dev, dg), device_free(dev, dp);
    }
}

// Adam and AdamW over three steps against a hand-written reference.
static void test_adam_step(void **state)
{
    device_t *dev = *state;
    enum { N = 40, STEPS = 3 };
    const float lr = 0.01f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    static const float decays[] = {0.0f, 0.1f};
    uint64_t seed = 33;
    for (int decoupled = 0; decoupled < 2; decoupled++)
        for (size_t w = 0; w < TEST_ARRAY_LEN(decays); w++) {
            float wd = decays[w];
            float p[N], g[N], zero[N] = {0}, m[N], v[N];
            double rp[N], rm[N] = {0}, rv[N] = {0};
            test_fill_uniform(p, N, &seed, -1, 1);
            for (int i = 0; i < N; i++)
                rp[i] = p[i];
            float *dp = upload_(dev, p, N), *dg = upload_(dev, zero, N), *dm = upload_(dev, zero, N),
                  *dv = upload_(dev, zero, N);
            for (int t = 1; t <= STEPS; t++) {
                test_fill_uniform(g, N, &seed, -1, 1);
                if (t == 2)
                    g[0] = 0.0f; // a zero gradient still moves by the momentum
                assert_int_equal(device_copy_to_device(dev, dg, g, sizeof g), 0);
                double c1 = 1 - pow(b1, t), c2 = 1 - pow(b2, t);
                for (int i = 0; i < N; i++) {
                    double gi = g[i] + (decoupled ? 0.0 : (double)wd * rp[i]);
                    rm[i] = b1 * rm[i] + (1 - (double)b1) * gi;
                    rv[i] = b2 * rv[i] + (1 - (double)b2) * gi * gi;
                    double upd = (rm[i] / c1) / (sqrt(rv[i] / c2) + eps);
                    if (decoupled)
                        upd += wd * rp[i];
                    rp[i] -= lr * upd;
                }
                assert_int_equal(math_adam_step(dev, dp, dg, dm, dv, N, lr, b1, b2, eps, wd,
                                                  (float)c1, (float)c2, decoupled),
                                 0);
            }
            download_(dev, p, dp, N);
            download_(dev, m, dm, N);
            download_(dev, v, dv, N);
            if (test_count_mismatches_f("param", p, rp, N, 1e-6, 1e-5) ||
                test_count_mismatches_f("m", m, rm, N, 1e-7, 1e-5) ||
                test_count_mismatches_f("v", v, rv, N, 1e-9, 1e-4))
                fail_msg("adam decoupled=%d weight_decay=%g", decoupled, wd);
            device_free(dev, dv), device_free(dev, dm), device_free(dev, dg), device_free(dev, dp);
        }
}

// Decoupled and L2 decay differ (else one of the two paths is not applied).
static void test_adam_decay_modes_differ(void **state)
{
    device_t *dev = *state;
    float p[4] = {1, -2, 3, -4}, g[4] = {0.1f, 0.1f, -0.1f, 0.2f}, zero[4] = {0}, out[2][4];
    for (int decoupled = 0; decoupled < 2; decoupled++) {
        float *dp = upload_(dev, p, 4), *dg = upload_(dev, g, 4), *dm = upload_(dev, zero, 4),
              *dv = upload_(dev, zero, 4);
        assert_int_equal(math_adam_step(dev, dp, dg, dm, dv, 4, 0.1f, 0.9f, 0.999f, 1e-8f, 0.5f,
                                          0.1f, 0.001f, decoupled),
                         0);
        download_(dev, out[decoupled], dp, 4);
        device_free(dev, dv), device_free(dev, dm), device_free(dev, dg), device_free(dev, dp);
    }
    // AdamW: p -= lr * (sign-like step + wd * p): for p = 1: 1 - 0.1 * (1 + 0.5) = 0.85.
    assert_true(fabsf(out[1][0] - 0.85f) < 1e-5f);
    // Adam with L2: g = 0.1 + 0.5 = 0.6, first step moves by lr: 1 - 0.1 = 0.9.
    assert_true(fabsf(out[0][0] - 0.9f) < 1e-5f);
}

// The CPU backend's vectorised Adam (16 lanes, then the kernel for the tail)
// must give exactly what kernel_adam_step gives element by element.
static void test_adam_vector_matches_kernel(void **state)
{
    device_t *dev = *state;
    enum { N = 16 * 37 + 11 };
    static float p[N], g[N], m[N], v[N], rp[N], rm[N], rv[N], back[N];
    uint64_t seed = 41;
    for (int decoupled = 0; decoupled < 2; decoupled++) {
        test_fill_uniform(p, N, &seed, -1, 1);
        test_fill_uniform(g, N, &seed, -1, 1);
        test_fill_uniform(m, N, &seed, -0.1, 0.1);
        test_fill_uniform(v, N, &seed, 0, 0.01);
        memcpy(rp, p, sizeof p), memcpy(rm, m, sizeof m), memcpy(rv, v, sizeof v);
        const float lr = 0.003f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f;
        const float c1 = 1.0f - powf(b1, 7.0f), c2 = 1.0f - powf(b2, 7.0f);
        const struct adam_coefs coefs = kernel_adam_coefs(lr, wd, c1, c2);
        for (size_t i = 0; i < N; i++)
            kernel_adam_step(i, rp, g, rm, rv, b1, b2, eps, wd, coefs, decoupled);
        float *dp = upload_(dev, p, N), *dg = upload_(dev, g, N), *dm = upload_(dev, m, N),
              *dv = upload_(dev, v, N);
        assert_int_equal(math_adam_step(dev, dp, dg, dm, dv, N, lr, b1, b2, eps, wd, c1, c2,
                                          decoupled),
                         0);
        const struct { const char *what; const float *dev_ptr, *want; } out[] = {
            {"param", dp, rp}, {"m", dm, rm}, {"v", dv, rv}};
        for (size_t k = 0; k < TEST_ARRAY_LEN(out); k++) {
            download_(dev, back, out[k].dev_ptr, N);
            size_t i = 0;
            while (i < N && !memcmp(&back[i], &out[k].want[i], sizeof(float)))
                i++;
            if (i < N)
                fail_msg("adam decoupled=%d: %s[%zu] = %.9g, kernel gives %.9g", decoupled,
                         out[k].what, i, back[i], out[k].want[i]);
        }
        device_free(dev, dv), device_free(dev, dm), device_free(dev, dg), device_free(dev, dp);
    }
}

int main(int argc, char **argv)
{
    log_set_trace(0);
    const struct CMUnitTest kernel_tests[] = {
        cmocka_unit_test_setup_teardown(test_alloc_cap, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_alloc_floats_zeroed, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_copies_and_counters, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_async_uploads, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_pointer_checks, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_host_func, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_gemm, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_gemm_empty_inner, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_decode_u8, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_bias_add_and_grad, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_relu, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_softmax_xent, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_softmax_xent_bad_label, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_softmax_xent_nonfinite, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_axpby, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_sgd_step, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_adam_step, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_adam_decay_modes_differ, setup_dev, teardown_dev),
    };
    if (argc > 1 && !strcmp(argv[1], "cuda")) {
        struct device_info info[8];
        int count = 0;
        int rc = device_discover(DEVICE_KIND_CUDA, info, 8, &count, NULL, 0);
        if (rc == VGPU_EUNSUPPORTED) {
            printf("SKIP: the CUDA backend is not built\n");
            return 77;
        }
        if (rc || count == 0) {
            printf("SKIP: no GPU visible (rc %d)\n", rc);
            return 77;
        }
        printf("CUDA device: %s (%s)\n", info[0].name, info[0].pci_bus_id);
        g_kind = DEVICE_KIND_CUDA;
        return cmocka_run_group_tests_name("device_cuda", kernel_tests, NULL, NULL);
    }
    const struct CMUnitTest cpu_tests[] = {
        cmocka_unit_test(test_discover),
        cmocka_unit_test(test_open_close),
        cmocka_unit_test(test_shared_arena),
        cmocka_unit_test_setup_teardown(test_host_dereference_faults, setup_dev, teardown_dev),
        cmocka_unit_test(test_host_access_explained),
        cmocka_unit_test_setup_teardown(test_adam_vector_matches_kernel, setup_dev, teardown_dev),
    };
    int failed = cmocka_run_group_tests_name("device_cpu", cpu_tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("device_cpu_kernels", kernel_tests, NULL, NULL);
    return failed ? 1 : 0;
}
