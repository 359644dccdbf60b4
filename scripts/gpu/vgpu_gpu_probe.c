// vgpu_gpu_probe.c: the GPU check's measurements on libvgpu's public API
// (scripts/gpu/check.sh): all-reduce bandwidth on whatever device and backend
// the job binds (vgpu_allreduce_perf runs on CPU devices only), beside the
// device's own device-to-device copy bandwidth measured in the same run; and
// a rank that allocates past its cap.
//
//   vgpu_gpu_probe allreduce [-b MIN] [-e MAX] [-n ITERS] [-w WARMUP] [--set KEY=VALUE]...
//   vgpu_gpu_probe cap RANK [--set KEY=VALUE]...
//
// Run under mpirun or vgpurun. allreduce prints nccl-tests' columns (size,
// time, algbw, busbw, #wrong) and ends with OK or FAILED and the matching
// exit status; cap exits non-zero, after RANK's error, through vgpu_abort.
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vgpu/vgpu.h>

#define MAX_SETS 16

struct probe_opts {
    size_t min_bytes, max_bytes; // -b, -e
    int iters, warmup;           // -n, -w
    const char *sets[MAX_SETS];  // --set KEY=VALUE (vgpu_train's --set)
    int n_sets;
};

static double now_s_(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t parse_size_(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'G': case 'g': v *= 1024.0; // fall through
    case 'M': case 'm': v *= 1024.0; // fall through
    case 'K': case 'k': v *= 1024.0; end++; break;
    case '\0': break;
    default: return 0;
    }
    return *end || v < 4 ? 0 : (size_t)v;
}

static void usage_(FILE *f)
{
    fprintf(f, "usage: vgpu_gpu_probe allreduce [-b MIN] [-e MAX] [-n ITERS] [-w WARMUP] [--set K=V]...\n"
               "       vgpu_gpu_probe cap RANK [--set K=V]...\n"
               "  -b SIZE  smallest all-reduce (default 64K)   -e SIZE  largest (default 256M)\n"
               "  -n N     timed calls a size (default 20)     -w N     untimed calls (default 5)\n"
               "  --set    a configuration override, as vgpu_train's (comm.backend=nccl, ...)\n");
}

static int parse_(int argc, char **argv, struct probe_opts *o)
{
    *o = (struct probe_opts){.min_bytes = 64 << 10, .max_bytes = (size_t)256 << 20, .iters = 20,
                             .warmup = 5};
    static const struct option longopts[] = {{"set", required_argument, 0, 's'},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "b:e:n:w:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'b': o->min_bytes = parse_size_(optarg); break;
        case 'e': o->max_bytes = parse_size_(optarg); break;
        case 'n': o->iters = atoi(optarg); break;
        case 'w': o->warmup = atoi(optarg); break;
        case 's':
            if (o->n_sets == MAX_SETS)
                return -1;
            o->sets[o->n_sets++] = optarg;
            break;
        default: return -1;
        }
    }
    if (!o->min_bytes || o->max_bytes < o->min_bytes || o->iters < 1 || o->warmup < 0)
        return -1;
    return 0;
}

#define MUST(v, call)                                                                    \
    do {                                                                                 \
        int rc_ = (call);                                                                \
        if (rc_ < 0) {                                                                   \
            fprintf(stderr, "[rank %d] vgpu_gpu_probe: %s: %s\n", vgpu_rank(v), #call,   \
                    vgpu_status_string(rc_));                                            \
            vgpu_abort(v, 1);                                                            \
        }                                                                                \
    } while (0)

// The slowest rank's time (what a collective costs the job).
static double job_max_(vgpu_t *v, double s)
{
    double m = s;
    MUST(v, vgpu_host_all_reduce(&s, &m, 1, vgpu_float64, vgpu_max, v));
    return m;
}

// Device-to-device copy of `bytes` on rank 0's device while the others wait:
// bytes read plus bytes written per second, the bound a same-GPU collective
// moves its data against.
static double copy_gbps_(vgpu_t *v, void *dst, const void *src, size_t bytes, int iters)
{
    double gbps = 0;
    MUST(v, vgpu_barrier(v));
    if (vgpu_rank(v) == 0) {
        MUST(v, vgpu_memcpy_dtod(v, dst, src, bytes)); // warm-up
        MUST(v, vgpu_synchronize(v));
        double t0 = now_s_();
        for (int i = 0; i < iters; i++)
            MUST(v, vgpu_memcpy_dtod(v, dst, src, bytes));
        MUST(v, vgpu_synchronize(v));
        gbps = 2.0 * (double)bytes * iters / (now_s_() - t0) / 1e9;
    }
    MUST(v, vgpu_barrier(v));
    return gbps;
}

static int allreduce_(vgpu_t *v, const struct probe_opts *o)
{
    const int rank = vgpu_rank(v), n = vgpu_size(v);
    const size_t max_count = o->max_bytes / sizeof(float);
    float *host = malloc(max_count * sizeof(float)), *want = malloc(max_count * sizeof(float));
    float *send, *recv;
    if (!host || !want) {
        fprintf(stderr, "[rank %d] vgpu_gpu_probe: out of host memory\n", rank);
        vgpu_abort(v, 1);
    }
    MUST(v, vgpu_malloc(v, (void **)&send, max_count * sizeof(float)));
    MUST(v, vgpu_malloc(v, (void **)&recv, max_count * sizeof(float)));
    // Small integers: every order of summation gives the exact sum.
    for (size_t i = 0; i < max_count; i++) {
        host[i] = (float)((int)(i % 7) + 1) * (float)(rank + 1);
        want[i] = (float)((int)(i % 7) + 1) * (float)(n * (n + 1) / 2);
    }
    MUST(v, vgpu_memcpy_htod(v, send, host, max_count * sizeof(float)));
    const double d2d = copy_gbps_(v, recv, send, o->max_bytes, o->iters);
    if (rank == 0) {
        printf("# vgpu_gpu_probe allreduce: %d ranks, device %s, backend %s, %d physical device(s)\n",
               n, vgpu_device_kind(v), vgpu_backend(v), vgpu_physical_devices(v));
        printf("# device-to-device copy on rank 0's device: %.1f GB/s (read + write, %zu bytes)\n",
               d2d, o->max_bytes);
        printf("# %12s %12s %10s %10s %10s %8s\n", "size(B)", "count", "time(us)", "algbw", "busbw",
               "#wrong");
    }
    long long wrong_total = 0;
    for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= 2) {
        const size_t count = bytes / sizeof(float);
        for (int i = 0; i < o->warmup; i++)
            MUST(v, vgpu_all_reduce(send, recv, count, vgpu_float32, vgpu_sum, v));
        MUST(v, vgpu_barrier(v));
        double t0 = now_s_();
        for (int i = 0; i < o->iters; i++)
            MUST(v, vgpu_all_reduce(send, recv, count, vgpu_float32, vgpu_sum, v));
        const double us = job_max_(v, (now_s_() - t0) / o->iters) * 1e6;
        memset(host, 0, count * sizeof(float));
        MUST(v, vgpu_memcpy_dtoh(v, host, recv, count * sizeof(float)));
        long long wrong = 0, all = 0;
        for (size_t i = 0; i < count; i++)
            wrong += host[i] != want[i];
        MUST(v, vgpu_host_all_reduce(&wrong, &all, 1, vgpu_int64, vgpu_sum, v));
        wrong_total += all;
        const double algbw = (double)bytes / us / 1e3; // GB/s
        if (rank == 0)
            printf("  %12zu %12zu %10.1f %10.2f %10.2f %8lld\n", bytes, count, us, algbw,
                   algbw * 2.0 * (n - 1) / n, all);
    }
    MUST(v, vgpu_free(v, send));
    MUST(v, vgpu_free(v, recv));
    free(host);
    free(want);
    if (rank == 0)
        printf("# %s: #wrong %lld\n", wrong_total ? "FAILED" : "OK", wrong_total);
    return wrong_total ? 1 : 0;
}

// Every rank takes 40 MiB of a 64 MiB cap (the overrides' devices.memory_limit
// wins when given); `victim` then asks for 32 MiB more: vgpu's error names
// it, and the probe ends the job as a trainer would.
static int cap_(vgpu_t *v, int victim)
{
    void *a, *b;
    MUST(v, vgpu_malloc(v, &a, (size_t)40 << 20));
    MUST(v, vgpu_barrier(v));
    if (vgpu_rank(v) == victim) {
        int rc = vgpu_malloc(v, &b, (size_t)32 << 20);
        if (rc < 0) {
            fprintf(stderr, "[rank %d] vgpu_gpu_probe: vgpu_malloc returned: %s\n", victim,
                    vgpu_status_string(rc));
            vgpu_abort(v, 1);
        }
        fprintf(stderr, "[rank %d] vgpu_gpu_probe: 32 MiB more were granted past the cap\n", victim);
    }
    MUST(v, vgpu_barrier(v));
    if (vgpu_rank(v) == 0)
        printf("vgpu_gpu_probe: no rank exceeded its cap\n");
    return 0;
}

int main(int argc, char **argv)
{
    const int is_cap = argc > 1 && !strcmp(argv[1], "cap");
    if (argc < 2 || (strcmp(argv[1], "allreduce") && !is_cap) || (is_cap && argc < 3)) {
        if (vgpu_launcher_rank() == 0)
            usage_(stderr);
        return 2;
    }
    const int victim = is_cap ? atoi(argv[2]) : -1;
    struct probe_opts o;
    if (parse_(argc - (1 + is_cap), argv + 1 + is_cap, &o) < 0) {
        if (vgpu_launcher_rank() == 0)
            usage_(stderr);
        return 2;
    }
    const char *sets[MAX_SETS + 1];
    int n_sets = 0;
    if (is_cap)
        sets[n_sets++] = "devices.memory_limit=64M";
    for (int i = 0; i < o.n_sets; i++)
        sets[n_sets++] = o.sets[i];
    struct vgpu_options vo = {.overrides = sets, .n_overrides = n_sets,
                              .largest_collective_bytes = o.max_bytes};
    vgpu_t *v;
    int rc = vgpu_init(&v, &argc, &argv, &vo);
    if (rc < 0) {
        fprintf(stderr, "vgpu_gpu_probe: vgpu_init: %s\n", vgpu_status_string(rc));
        return 1;
    }
    rc = is_cap ? cap_(v, victim) : allreduce_(v, &o);
    int frc = vgpu_finalize(v);
    return rc ? rc : frc < 0;
}
