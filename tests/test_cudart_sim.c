// test_cudart_sim.c: the simulated CUDA runtime (launcher/cudart_sim/,
// libcudart.so.13 on the CPU) through CUDA's own API: devices and their
// properties for several VGPU_SIM_GPUS topologies, CUDA_VISIBLE_DEVICES,
// the memory limit (the free memory, an MPS client's limit), checked frees,
// pointer attributes, copies and memsets to the byte, events' times against
// a measured sleep, and CUDA's last-error rules.
//
// The library reads its topology once, at the first call: each scenario is
// a process of its own. With no argument the binary runs every scenario as
// a child (itself with the scenario's name), which sets the environment
// before its first CUDA call.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "test_util.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

// EXPECT(call, code): the call returns code; says both names when not.
#define EXPECT(expr, want) expect_((expr), (want), #expr, __FILE__, __LINE__)
static void expect_(cudaError_t got, cudaError_t want, const char *what, const char *file, int line)
{
    if (got == want)
        return;
    print_error("%s: %s (%d), expected %s (%d)\n", what, cudaGetErrorName(got), (int)got,
                cudaGetErrorName(want), (int)want);
    _fail(file, line);
}
#define OK(expr) EXPECT(expr, cudaSuccess)

static double now_ms_(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int setup_(void **state)
{
    (void)state;
    (void)cudaGetLastError(); // each test starts with no last error
    return 0;
}

// ---- devices ----

// The properties every simulated device has, and those of VGPU_SIM_GPUS's
// physical GPU `physical` (its bus and the last byte of its UUID).
static void expect_device_(int ordinal, int physical, const char *name, uint64_t total_bytes)
{
    struct cudaDeviceProp p;
    memset(&p, 0x5a, sizeof p);
    OK(cudaGetDeviceProperties(&p, ordinal));
    assert_string_equal(p.name, name);
    assert_int_equal(p.totalGlobalMem, total_bytes);
    assert_int_equal(p.major, 9);
    assert_int_equal(p.minor, 0);
    assert_int_equal(p.multiProcessorCount, 132);
    assert_int_equal(p.warpSize, 32);
    assert_int_equal(p.pciDomainID, 0);
    assert_int_equal(p.pciBusID, 0x10 + physical);
    assert_int_equal(p.pciDeviceID, 0);
    // "GPU-5117a000-0000-4000-8000-0000000000NN" as bytes
    const unsigned char want_uuid[16] = {0x51, 0x17, 0xa0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0,
                                         (unsigned char)physical};
    assert_memory_equal(p.uuid.bytes, want_uuid, 16);
    char bus[32], want_bus[32];
    snprintf(want_bus, sizeof want_bus, "0000:%02x:00.0", 0x10 + physical);
    OK(cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal));
    assert_string_equal(bus, want_bus);
    int v = -1;
    OK(cudaDeviceGetAttribute(&v, cudaDevAttrPciBusId, ordinal));
    assert_int_equal(v, 0x10 + physical);
    OK(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, ordinal));
    assert_int_equal(v, 9);
    OK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, ordinal));
    assert_int_equal(v, 132);
    OK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlock, ordinal)); // a size_t field
    assert_int_equal(v, 48 << 10);
}

static void test_default_device(void **state)
{
    (void)state;
    int n = -1, version = 0, dev = -1;
    OK(cudaGetDeviceCount(&n));
    assert_int_equal(n, 1);
    expect_device_(0, 0, "Simulated GPU 80.0 GiB", 80 * GiB);
    OK(cudaRuntimeGetVersion(&version));
    assert_int_equal(version, 13000);
    OK(cudaDriverGetVersion(&version));
    assert_int_equal(version, 13000);
    size_t free_bytes = 0, total_bytes = 0;
    OK(cudaMemGetInfo(&free_bytes, &total_bytes));
    assert_int_equal(free_bytes, 80 * GiB);
    assert_int_equal(total_bytes, 80 * GiB);
    // a wrong ordinal: refused, the current device unchanged
    EXPECT(cudaSetDevice(1), cudaErrorInvalidDevice);
    EXPECT(cudaSetDevice(-1), cudaErrorInvalidDevice);
    OK(cudaGetDevice(&dev));
    assert_int_equal(dev, 0);
    struct cudaDeviceProp p;
    EXPECT(cudaGetDeviceProperties(&p, 1), cudaErrorInvalidDevice);
    int v;
    EXPECT(cudaDeviceGetAttribute(&v, cudaDevAttrKernelExecTimeout, 0), cudaErrorInvalidValue);
    OK(cudaDeviceGetAttribute(&v, cudaDevAttrComputeMode, 0));
    assert_int_equal(v, cudaComputeModeDefault);
    OK(cudaDeviceSynchronize());
    char bus[8];
    OK(cudaDeviceGetPCIBusId(bus, sizeof bus, 0)); // cut to the room given, as CUDA
    assert_string_equal(bus, "0000:10");
}

static void *other_thread_device_(void *arg)
{
    int *dev = arg;
    if (cudaGetDevice(dev) != cudaSuccess)
        *dev = -1;
    return NULL;
}

static void test_multi_devices(void **state)
{
    (void)state;
    int n = -1;
    OK(cudaGetDeviceCount(&n));
    assert_int_equal(n, 3);
    expect_device_(0, 0, "Simulated GPU 24.0 GiB", 24 * GiB);
    expect_device_(1, 1, "Simulated GPU 24.0 GiB", 24 * GiB);
    expect_device_(2, 2, "sim", 80 * GiB);
    // the current device is the thread's: another thread still has 0
    OK(cudaSetDevice(2));
    int dev = -1, other = -2;
    OK(cudaGetDevice(&dev));
    assert_int_equal(dev, 2);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_thread_device_, &other), 0);
    pthread_join(t, NULL);
    assert_int_equal(other, 0);
    // memory on device 2 counts against its free memory (80G less used=8G)
    size_t free_bytes = 0, total_bytes = 0;
    void *p = NULL;
    OK(cudaMalloc(&p, 1000));
    OK(cudaMemGetInfo(&free_bytes, &total_bytes));
    assert_int_equal(free_bytes, 72 * GiB - 1000);
    assert_int_equal(total_bytes, 80 * GiB);
    struct cudaPointerAttributes a;
    OK(cudaPointerGetAttributes(&a, p));
    assert_int_equal(a.type, cudaMemoryTypeDevice);
    assert_int_equal(a.device, 2);
    OK(cudaFree(p));
    OK(cudaSetDevice(0));
}

static void test_visible_devices(void **state)
{
    (void)state;
    int n = -1;
    OK(cudaGetDeviceCount(&n));
    assert_int_equal(n, 2); // "2,0,9,1": up to the entry that names nothing
    expect_device_(0, 2, "Simulated GPU 1.0 GiB", 1 * GiB);
    expect_device_(1, 0, "Simulated GPU 1.0 GiB", 1 * GiB);
}

static void test_failing_and_prohibited(void **state)
{
    (void)state;
    int n = -1, v = -1;
    OK(cudaGetDeviceCount(&n));
    assert_int_equal(n, 3);
    struct cudaDeviceProp p;
    EXPECT(cudaGetDeviceProperties(&p, 1), cudaErrorLaunchFailure);
    EXPECT(cudaSetDevice(1), cudaErrorLaunchFailure);
    OK(cudaDeviceGetAttribute(&v, cudaDevAttrComputeMode, 2));
    assert_int_equal(v, cudaComputeModeProhibited);
    EXPECT(cudaSetDevice(2), cudaErrorDevicesUnavailable);
    OK(cudaGetDevice(&v));
    assert_int_equal(v, 0);
}

// VGPU_SIM_GPUS says there is no device to use: every device call says why.
static void expect_no_devices_(cudaError_t why, int driver_version)
{
    int n = -1, version = -1;
    EXPECT(cudaGetDeviceCount(&n), why);
    assert_int_equal(n, 0);
    void *p = NULL;
    EXPECT(cudaMalloc(&p, 16), why);
    EXPECT(cudaSetDevice(0), why);
    EXPECT(cudaGetLastError(), why);
    OK(cudaGetLastError());
    OK(cudaDriverGetVersion(&version));
    assert_int_equal(version, driver_version);
}

static void test_none(void **state) { (void)state; expect_no_devices_(cudaErrorNoDevice, 13000); }
static void test_nodriver(void **state) { (void)state; expect_no_devices_(cudaErrorInsufficientDriver, 0); }
static void test_old_driver(void **state)
{
    (void)state;
    expect_no_devices_(cudaErrorInsufficientDriver, 12080);
}
static void test_bad_spec(void **state)
{
    (void)state;
    expect_no_devices_(cudaErrorInitializationError, 13000);
}

// ---- memory ----

// The device may hold limit bytes in all: one byte more fails, exactly the
// limit succeeds, and a reset gives it all back.
static void expect_limit_(uint64_t limit, uint64_t total)
{
    void *p = NULL, *q = NULL;
    EXPECT(cudaMalloc(&p, limit + 1), cudaErrorMemoryAllocation);
    EXPECT(cudaGetLastError(), cudaErrorMemoryAllocation);
    OK(cudaMalloc(&p, limit));
    assert_non_null(p);
    EXPECT(cudaMalloc(&q, 1), cudaErrorMemoryAllocation);
    size_t free_bytes = 1, total_bytes = 0;
    OK(cudaMemGetInfo(&free_bytes, &total_bytes));
    assert_int_equal(free_bytes, 0);
    assert_int_equal(total_bytes, total);
    OK(cudaFree(p));
    OK(cudaMalloc(&p, limit - 256));
    OK(cudaMalloc(&q, 256));
    OK(cudaMemGetInfo(&free_bytes, &total_bytes));
    assert_int_equal(free_bytes, 0);
    OK(cudaDeviceReset()); // frees both
    OK(cudaMemGetInfo(&free_bytes, &total_bytes));
    assert_int_equal(free_bytes, limit);
    struct cudaPointerAttributes a;
    OK(cudaPointerGetAttributes(&a, q));
    assert_int_equal(a.type, cudaMemoryTypeUnregistered);
    EXPECT(cudaFree(q), cudaErrorInvalidValue);
}

// "1x4M/used=1M": 3 MiB free
static void test_limit_free(void **state) { (void)state; expect_limit_(3 * MiB, 4 * MiB); }
// "1x4M", an MPS client limited to 2 MiB on device 0
static void test_limit_mps(void **state) { (void)state; expect_limit_(2 * MiB, 2 * MiB); }
// the limit without MPS: not a client, no limit (as CUDA and gpu_sim's scan)
static void test_limit_not_mps(void **state) { (void)state; expect_limit_(4 * MiB, 4 * MiB); }

static void test_alloc_and_free(void **state)
{
    (void)state;
    void *p[5] = {0};
    const size_t sizes[5] = {1, 255, 257, 4096 + 3, 100000};
    for (int k = 0; k < 5; k++) {
        OK(cudaMalloc(&p[k], sizes[k]));
        assert_int_equal((uintptr_t)p[k] % 256, 0);
    }
    void *z = (void *)1;
    OK(cudaMalloc(&z, 0));
    assert_null(z);
    char stack[16];
    void *heap = malloc(64);
    EXPECT(cudaFree(heap), cudaErrorInvalidValue); // not CUDA's
    EXPECT(cudaFree(stack), cudaErrorInvalidValue);
    EXPECT(cudaFree((char *)p[4] + 1), cudaErrorInvalidValue); // inside, not the start
    EXPECT(cudaFreeHost(p[4]), cudaErrorInvalidValue);         // device memory
    OK(cudaFree(NULL));
    for (int k = 0; k < 5; k++)
        OK(cudaFree(p[k]));
    EXPECT(cudaFree(p[0]), cudaErrorInvalidValue); // twice
    void *h = NULL;
    OK(cudaMallocHost(&h, 300));
    EXPECT(cudaFree(h), cudaErrorInvalidValue); // host memory
    OK(cudaFreeHost(h));
    EXPECT(cudaHostAlloc(&h, 64, 0x80), cudaErrorInvalidValue);
    free(heap);
}

static void test_pointer_attributes(void **state)
{
    (void)state;
    void *d = NULL, *h = NULL, *m = NULL;
    OK(cudaMalloc(&d, 1000));
    OK(cudaHostAlloc(&h, 1000, cudaHostAllocMapped | cudaHostAllocPortable));
    m = malloc(1000);
    struct cudaPointerAttributes a;
    OK(cudaPointerGetAttributes(&a, (char *)d + 999)); // the last byte is still the allocation's
    assert_int_equal(a.type, cudaMemoryTypeDevice);
    assert_int_equal(a.device, 0);
    assert_ptr_equal(a.devicePointer, (char *)d + 999);
    assert_null(a.hostPointer);
    OK(cudaPointerGetAttributes(&a, (char *)d + 1000)); // one past it is not
    assert_int_not_equal(a.type, cudaMemoryTypeDevice);
    OK(cudaPointerGetAttributes(&a, h));
    assert_int_equal(a.type, cudaMemoryTypeHost);
    assert_int_equal(a.device, 0);
    assert_ptr_equal(a.hostPointer, h);
    assert_ptr_equal(a.devicePointer, h);
    OK(cudaPointerGetAttributes(&a, m));
    assert_int_equal(a.type, cudaMemoryTypeUnregistered);
    assert_int_equal(a.device, -2);
    assert_null(a.devicePointer);
    EXPECT(cudaPointerGetAttributes(NULL, m), cudaErrorInvalidValue);
    OK(cudaFree(d));
    OK(cudaFreeHost(h));
    free(m);
}

static void test_copies_and_memsets(void **state)
{
    (void)state;
    enum { N = 1000 };
    unsigned char src[N], want[N], *got = NULL, *d1 = NULL, *d2 = NULL;
    for (int i = 0; i < N; i++)
        src[i] = (unsigned char)(i * 7 + 3);
    OK(cudaMalloc((void **)&d1, N));
    OK(cudaMalloc((void **)&d2, N));
    OK(cudaMallocHost((void **)&got, N));
    cudaStream_t s;
    OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    // d1 = src; d1[100..300) = 0xAB; d2 = 0x11; d2[500..) = d1[0..500) (async)
    OK(cudaMemcpy(d1, src, N, cudaMemcpyHostToDevice));
    OK(cudaMemsetAsync(d1 + 100, 0x1AB, 200, s)); // the value's low byte, as CUDA
    OK(cudaMemset(d2, 0x11, N));
    OK(cudaMemcpyAsync(d2 + 500, d1, 500, cudaMemcpyDeviceToDevice, s));
    OK(cudaMemcpyAsync(got, d2, N, cudaMemcpyDeviceToHost, cudaStreamPerThread));
    OK(cudaStreamSynchronize(s));
    memset(want, 0x11, 500);
    memcpy(want + 500, src, 500);
    memset(want + 600, 0xAB, 200);
    assert_memory_equal(got, want, N);
    // overlapping, with the pointers' own kinds; pinned memory is the device's too
    OK(cudaMemcpy(d1 + 1, d1, 10, cudaMemcpyDefault));
    OK(cudaMemcpy(got, d1, 12, cudaMemcpyDeviceToHost));
    const unsigned char head[12] = {3, 3, 10, 17, 24, 31, 38, 45, 52, 59, 66, 80};
    assert_memory_equal(got, head, 12);
    OK(cudaMemcpy(d1, got, 1, cudaMemcpyHostToDevice));
    OK(cudaMemset(got, 0, N));
    // what CUDA refuses: the device side outside device memory, past an
    // allocation's end, an unknown direction, a made-up stream
    EXPECT(cudaMemcpy(src, d1, 10, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT(cudaMemcpy(src, src + 10, 10, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    EXPECT(cudaMemcpy(d1 + N - 10, src, 11, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    OK(cudaMemcpy(d1 + N - 10, src, 10, cudaMemcpyHostToDevice));
    EXPECT(cudaMemcpy(d1, src, 10, (enum cudaMemcpyKind)7), cudaErrorInvalidMemcpyDirection);
    EXPECT(cudaMemset(src, 0, 10), cudaErrorInvalidValue);
    EXPECT(cudaMemset(d2 + 1, 0, N), cudaErrorInvalidValue);
    EXPECT(cudaMemcpyAsync(d1, src, 10, cudaMemcpyHostToDevice, (cudaStream_t)(uintptr_t)0x1234),
           cudaErrorInvalidResourceHandle);
    OK(cudaStreamDestroy(s));
    OK(cudaFree(d1));
    OK(cudaFree(d2));
    OK(cudaFreeHost(got));
}

// ---- streams, events ----

static void test_streams(void **state)
{
    (void)state;
    cudaStream_t s = NULL;
    cudaEvent_t e = NULL;
    OK(cudaStreamCreate(&s));
    OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    OK(cudaStreamQuery(s));
    OK(cudaStreamQuery(NULL));
    OK(cudaStreamQuery(cudaStreamLegacy));
    OK(cudaStreamSynchronize(cudaStreamPerThread));
    OK(cudaEventRecord(e, s));
    OK(cudaStreamWaitEvent(NULL, e, 0));
    OK(cudaEventQuery(e));
    OK(cudaEventSynchronize(e));
    OK(cudaStreamDestroy(s));
    EXPECT(cudaStreamQuery(s), cudaErrorInvalidResourceHandle); // destroyed
    EXPECT(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
    EXPECT(cudaStreamCreateWithFlags(&s, 0x4), cudaErrorInvalidValue);
    EXPECT(cudaEventCreateWithFlags(&e, cudaEventInterprocess), cudaErrorInvalidValue);
    OK(cudaEventDestroy(e));
    EXPECT(cudaEventQuery(e), cudaErrorInvalidResourceHandle);
}

static void test_event_times(void **state)
{
    (void)state;
    cudaEvent_t a, b, untimed, unrecorded;
    OK(cudaEventCreate(&a));
    OK(cudaEventCreateWithFlags(&b, cudaEventBlockingSync));
    OK(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
    OK(cudaEventCreate(&unrecorded));
    // The events' interval lies between the sleep (inside) and the span
    // around both records (outside).
    const double t0 = now_ms_();
    OK(cudaEventRecord(a, NULL));
    const double t1 = now_ms_();
    const struct timespec nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL);
    const double t2 = now_ms_();
    OK(cudaEventRecord(b, NULL));
    const double t3 = now_ms_();
    float ms = -1;
    OK(cudaEventElapsedTime(&ms, a, b));
    const double slack = 1e-3; // the float's rounding of ~20 ms, with room
    if (ms < t2 - t1 - slack || ms > t3 - t0 + slack)
        fail_msg("elapsed %.6f ms, outside [%.6f, %.6f]", ms, t2 - t1, t3 - t0);
    assert_true(ms >= 20.0f);
    OK(cudaEventRecord(untimed, NULL));
    EXPECT(cudaEventElapsedTime(&ms, a, untimed), cudaErrorInvalidResourceHandle);
    EXPECT(cudaEventElapsedTime(&ms, a, unrecorded), cudaErrorInvalidResourceHandle);
    EXPECT(cudaEventElapsedTime(NULL, a, b), cudaErrorInvalidValue);
    OK(cudaEventDestroy(a));
    OK(cudaEventDestroy(b));
    OK(cudaEventDestroy(untimed));
    OK(cudaEventDestroy(unrecorded));
}

// ---- errors ----

static void *fail_in_thread_(void *arg)
{
    (void)arg;
    (void)cudaSetDevice(99);
    return NULL;
}

static void test_last_error(void **state)
{
    (void)state;
    OK(cudaPeekAtLastError());
    EXPECT(cudaSetDevice(7), cudaErrorInvalidDevice);
    void *p = NULL;
    OK(cudaMalloc(&p, 8)); // a success does not clear it
    EXPECT(cudaPeekAtLastError(), cudaErrorInvalidDevice);
    EXPECT(cudaPeekAtLastError(), cudaErrorInvalidDevice); // peeking leaves it
    EXPECT(cudaFree(stdout), cudaErrorInvalidValue);       // the latest failure wins
    EXPECT(cudaGetLastError(), cudaErrorInvalidValue);
    OK(cudaGetLastError()); // read: cleared
    // another thread's failure is that thread's
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fail_in_thread_, NULL), 0);
    pthread_join(t, NULL);
    OK(cudaGetLastError());
    OK(cudaFree(p));
    assert_string_equal(cudaGetErrorString(cudaSuccess), "no error");
    assert_string_equal(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
    assert_string_equal(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
    assert_string_equal(cudaGetErrorString(cudaErrorNoDevice), "no CUDA-capable device is detected");
    assert_string_equal(cudaGetErrorName(cudaErrorInvalidDevice), "cudaErrorInvalidDevice");
    assert_string_equal(cudaGetErrorName(cudaErrorInvalidResourceHandle),
                        "cudaErrorInvalidResourceHandle");
    assert_string_equal(cudaGetErrorString((cudaError_t)9999), "unrecognized error code");
    assert_string_equal(cudaGetErrorName((cudaError_t)9999), "unrecognized error code");
}

// ---- scenarios: a topology, and the tests that run on it ----

#define T(f) cmocka_unit_test_setup(f, setup_)
static const struct CMUnitTest default_tests[] = {
    T(test_default_device), T(test_alloc_and_free), T(test_pointer_attributes),
    T(test_copies_and_memsets), T(test_streams), T(test_event_times), T(test_last_error),
};
static const struct CMUnitTest multi_tests[] = {T(test_multi_devices)};
static const struct CMUnitTest visible_tests[] = {T(test_visible_devices)};
static const struct CMUnitTest failing_tests[] = {T(test_failing_and_prohibited)};
static const struct CMUnitTest none_tests[] = {T(test_none)};
static const struct CMUnitTest nodriver_tests[] = {T(test_nodriver)};
static const struct CMUnitTest old_driver_tests[] = {T(test_old_driver)};
static const struct CMUnitTest bad_spec_tests[] = {T(test_bad_spec)};
static const struct CMUnitTest limit_free_tests[] = {T(test_limit_free)};
static const struct CMUnitTest limit_mps_tests[] = {T(test_limit_mps)};
static const struct CMUnitTest limit_not_mps_tests[] = {T(test_limit_not_mps)};

struct scenario {
    const char *name;
    const char *sim_gpus;  // VGPU_SIM_GPUS (NULL: unset)
    const char *visible;   // CUDA_VISIBLE_DEVICES (NULL: unset)
    const char *mps_pipe;  // CUDA_MPS_PIPE_DIRECTORY (NULL: unset, not an MPS client)
    const char *mps_limit; // CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (NULL: unset)
    const struct CMUnitTest *tests;
    size_t count;
};

#define S(name, gpus, visible, pipe, limit, tests) \
    {name, gpus, visible, pipe, limit, tests, TEST_ARRAY_LEN(tests)}
static const struct scenario scenarios_[] = {
    S("default", NULL, NULL, NULL, NULL, default_tests),
    S("multi", "2x24G,1x80G/name=sim/used=8G", NULL, NULL, NULL, multi_tests),
    S("visible", "4x1G", "2,0,9,1", NULL, NULL, visible_tests),
    S("failing", "2x1G/failing=1,1x1G/prohibited", NULL, NULL, NULL, failing_tests),
    S("none", "none", NULL, NULL, NULL, none_tests),
    S("nodriver", "nodriver", NULL, NULL, NULL, nodriver_tests),
    S("old_driver", "driver=12.8,1x80G", NULL, NULL, NULL, old_driver_tests),
    S("bad_spec", "3X80G", NULL, NULL, NULL, bad_spec_tests),
    S("limit_free", "1x4M/used=1M", NULL, NULL, NULL, limit_free_tests),
    S("limit_mps", "1x4M", NULL, "/tmp/vgpu-test-mps", "1=1M,0=2MB", limit_mps_tests),
    S("limit_not_mps", "1x4M", NULL, NULL, "0=2M", limit_not_mps_tests),
};

static void set_env_(const char *name, const char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

static int run_scenario_(const struct scenario *s)
{
    set_env_("VGPU_SIM_GPUS", s->sim_gpus);
    set_env_("CUDA_VISIBLE_DEVICES", s->visible);
    set_env_("CUDA_MPS_PIPE_DIRECTORY", s->mps_pipe);
    set_env_("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", s->mps_limit);
    return _cmocka_run_group_tests(s->name, s->tests, s->count, NULL, NULL);
}

int main(int argc, char **argv)
{
    const size_t n = TEST_ARRAY_LEN(scenarios_);
    if (argc == 2) {
        for (size_t k = 0; k < n; k++)
            if (!strcmp(argv[1], scenarios_[k].name))
                return run_scenario_(&scenarios_[k]);
        fprintf(stderr, "%s: no scenario '%s'\n", argv[0], argv[1]);
        return 2;
    }
    int failed = 0;
    for (size_t k = 0; k < n; k++) {
        fflush(stdout);
        const pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], scenarios_[k].name, (char *)NULL);
            _exit(127);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            fprintf(stderr, "scenario %s failed (status 0x%x)\n", scenarios_[k].name, status);
            failed++;
        }
    }
    printf("%zu scenarios, %d failed\n", n, failed);
    return failed ? 1 : 0;
}
