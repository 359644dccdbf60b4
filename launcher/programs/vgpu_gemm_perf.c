// vgpu_gemm_perf.c: single-precision GEMM throughput of the CPU libraries
// Debian offers (OpenBLAS, BLIS, oneDNN) and of this build's device op, on
// the exact shapes the MLP trainer runs, so the library is chosen by
// measurement. Libraries are loaded with dlopen, so one binary compares all
// that are installed, whichever one the build links.
#include <dlfcn.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_gemm.h"
#include "device_internal.h"
#include "log.h"
#include "math_ops.h"
#include "util.h"

#define MAX_LIBS 4
#define MAX_TRIALS 64
#define MAX_BATCHES 8

// ---- the libraries, behind one row-major sgemm signature ----

struct lib;
typedef void gemm_fn(const struct lib *l, int trans_a, int trans_b, int m, int n, int k,
                     float alpha, const float *a, const float *b, float beta, float *c);

struct lib {
    const char *name;   // column header
    char about[160];    // version / kernel set, printed once
    void *handle;       // dlopen handle (NULL for the device op)
    void *fn;           // the library's gemm symbol
    gemm_fn *call;
    void *ctx;          // device_t for the device op
};

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };
typedef void cblas_sgemm_t(int, int, int, int, int, int, float, const float *, int, const float *,
                           int, float, float *, int);
typedef int dnnl_sgemm_t(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t,
                         const float *, int64_t, float, float *, int64_t);

static void call_cblas_(const struct lib *l, int ta, int tb, int m, int n, int k, float alpha,
                        const float *a, const float *b, float beta, float *c)
{
    ((cblas_sgemm_t *)l->fn)(CBLAS_ROW_MAJOR, ta ? CBLAS_TRANS : CBLAS_NO_TRANS,
                                    tb ? CBLAS_TRANS : CBLAS_NO_TRANS, m, n, k, alpha, a,
                                    ta ? m : k, b, tb ? k : n, beta, c, n);
}

static void call_dnnl_(const struct lib *l, int ta, int tb, int m, int n, int k, float alpha,
                       const float *a, const float *b, float beta, float *c)
{
    // dnnl_sgemm is row-major (dnnl.h)
    ((dnnl_sgemm_t *)l->fn)(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, ta ? m : k,
                                   b, tb ? k : n, beta, c, n);
}

static void call_device_(const struct lib *l, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, const float *b, float beta, float *c)
{
    if (math_gemm(l->ctx, ta, tb, m, n, k, alpha, a, b, beta, c) < 0)
        abort();
}

// RTLD_DEEPBIND: OpenBLAS and BLIS both export cblas_sgemm and sgemm_; each
// library must resolve its own, not the one this binary already links.
static void *open_(const char *soname)
{
    return dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
}

static int load_openblas_(struct lib *l, int threads)
{
    if (!(l->handle = open_("libopenblas.so.0")) || !(l->fn = dlsym(l->handle, "cblas_sgemm")))
        return -1;
    void (*set)(int) = (void (*)(int))dlsym(l->handle, "openblas_set_num_threads");
    char *(*core)(void) = (char *(*)(void))dlsym(l->handle, "openblas_get_corename");
    char *(*conf)(void) = (char *(*)(void))dlsym(l->handle, "openblas_get_config");
    if (set)
        set(threads);
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    snprintf(l->about, sizeof l->about, "%s; kernels %s%s%s%s", conf ? conf() : "?",
             core ? core() : "?", coretype ? " (OPENBLAS_CORETYPE=" : "",
             coretype ? coretype : "", coretype ? ")" : "");
    l->call = call_cblas_;
    return 0;
}

static int load_blis_(struct lib *l, int threads)
{
    if (!(l->handle = open_("libblis.so.4")) || !(l->fn = dlsym(l->handle, "cblas_sgemm")))
        return -1;
    void (*set)(int64_t) = (void (*)(int64_t))dlsym(l->handle, "bli_thread_set_num_threads");
    char *(*ver)(void) = (char *(*)(void))dlsym(l->handle, "bli_info_get_version_str");
    int (*arch_id)(void) = (int (*)(void))dlsym(l->handle, "bli_arch_query_id");
    const char *(*arch_str)(int) = (const char *(*)(int))dlsym(l->handle, "bli_arch_string");
    if (set)
        set(threads);
    Dl_info where = {0};
    dladdr(l->fn, &where);
    snprintf(l->about, sizeof l->about, "BLIS %s; kernels %s; %s", ver ? ver() : "?",
             arch_id && arch_str ? arch_str(arch_id()) : "?",
             where.dli_fname ? where.dli_fname : "?");
    l->call = call_cblas_;
    return 0;
}

static int load_dnnl_(struct lib *l, int threads)
{
    if (!(l->handle = open_("libdnnl.so.2")) || !(l->fn = dlsym(l->handle, "dnnl_sgemm")))
        return -1;
    // Debian's oneDNN uses the OpenMP runtime: its thread count is OpenMP's.
    void *gomp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
    void (*set)(int) = gomp ? (void (*)(int))dlsym(gomp, "omp_set_num_threads") : NULL;
    if (set)
        set(threads);
    struct { int major, minor, patch; const char *hash; } const *(*ver)(void) =
        dlsym(l->handle, "dnnl_version");
    int (*isa)(void) = (int (*)(void))dlsym(l->handle, "dnnl_get_effective_cpu_isa");
    if (ver)
        snprintf(l->about, sizeof l->about, "oneDNN %d.%d.%d; effective ISA code 0x%x%s",
                 ver()->major, ver()->minor, ver()->patch, isa ? isa() : 0,
                 set ? "" : " (OpenMP threads not set)");
    l->call = call_dnnl_;
    return 0;
}

// ---- shapes: what worker/mlp.c runs per step, per layer ----

struct shape {
    char what[16];      // "fwd L0", "dW  L1", "dX  L2"
    int ta, tb, m, n, k;
    float beta;         // as the model calls it (0 everywhere: products overwrite)
};

#define MAX_SHAPES 16

// The GEMMs of one training step: per layer the forward product, the weight
// gradient, and (except for the first layer) the input gradient.
static int mlp_shapes_(const int *dims, int n_dims, int batch, struct shape *out)
{
    int count = 0;
    for (int l = 0; l < n_dims - 1 && count + 3 <= MAX_SHAPES; l++) {
        int in = dims[l], o = dims[l + 1];
        out[count] = (struct shape){"", 0, 0, batch, o, in, 0.0f}; // acts @ W
        snprintf(out[count++].what, 16, "fwd L%d", l);
        out[count] = (struct shape){"", 1, 0, in, o, batch, 0.0f}; // acts^T @ dout
        snprintf(out[count++].what, 16, "dW  L%d", l);
        if (l > 0) {
            out[count] = (struct shape){"", 0, 1, batch, in, o, 0.0f}; // dout @ W^T
            snprintf(out[count++].what, 16, "dX  L%d", l);
        }
    }
    return count;
}

// ---- measurement ----

struct opts {
    int batches[MAX_BATCHES], n_batches;
    int threads;
    int trials;          // interleaved trials per shape; the median is reported
    double min_trial_s;  // each trial repeats the call for at least this long
    char libs[64];
};

static int cmp_double_(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// Seconds per call: repeats until min_s has passed (after one untimed call).
static double time_call_(struct lib *l, const struct shape *s, const float *a, const float *b,
                         float *c, double min_s)
{
    l->call(l, s->ta, s->tb, s->m, s->n, s->k, 1.0f, a, b, s->beta, c);
    long reps = 0;
    double t0 = util_now_s(), t;
    do {
        for (int i = 0; i < 8; i++)
            l->call(l, s->ta, s->tb, s->m, s->n, s->k, 1.0f, a, b, s->beta, c);
        reps += 8;
    } while ((t = util_now_s() - t0) < min_s);
    return t / (double)reps;
}

// Max |got - want| / (1 + |want|) against a double-precision reference.
static double check_(struct lib *l, const struct shape *s, const float *a, const float *b,
                     float *c, float *c_host, const double *want, device_t *dev)
{
    size_t mn = (size_t)s->m * s->n;
    for (size_t i = 0; i < mn; i++)
        c_host[i] = 0.5f;
    if (l->ctx) {
        device_copy_to_device(dev, c, c_host, mn * sizeof(float));
    } else {
        memcpy(c, c_host, mn * sizeof(float));
    }
    l->call(l, s->ta, s->tb, s->m, s->n, s->k, 1.0f, a, b, s->beta, c);
    if (l->ctx)
        device_copy_to_host(dev, c_host, c, mn * sizeof(float));
    else
        memcpy(c_host, c, mn * sizeof(float));
    double worst = 0;
    for (size_t i = 0; i < mn; i++) {
        double e = fabs(c_host[i] - want[i]) / (1.0 + fabs(want[i]));
        worst = e > worst || isnan(e) ? (isnan(e) ? INFINITY : e) : worst;
    }
    return worst;
}

static void reference_(const struct shape *s, const float *a, const float *b, double *want)
{
    for (int i = 0; i < s->m; i++)
        for (int j = 0; j < s->n; j++) {
            double sum = 0;
            for (int p = 0; p < s->k; p++) {
                double av = s->ta ? a[(size_t)p * s->m + i] : a[(size_t)i * s->k + p];
                double bv = s->tb ? b[(size_t)j * s->k + p] : b[(size_t)p * s->n + j];
                sum += av * bv;
            }
            want[(size_t)i * s->n + j] = sum + s->beta * 0.5;
        }
}

static void usage_(FILE *f)
{
    fprintf(f,
            "usage: vgpu_gemm_perf [options]\n"
            "  -b, --batch LIST     per-rank batch sizes (default 256,128)\n"
            "  -t, --threads N      library threads (default 1, as devices.cpu_threads=1)\n"
            "  -n, --trials N       interleaved trials per shape, median reported (default 7)\n"
            "  -m, --min-ms MS      each trial runs a shape for at least MS ms (default 20)\n"
            "  -l, --libs LIST      any of openblas,blis,dnnl,device (default all)\n"
            "  -h, --help\n"
            "Shapes: MLP 784-256-128-10 as worker/mlp.c calls them (row-major).\n"
            "OPENBLAS_CORETYPE is honoured as OpenBLAS reads it (at load).\n");
}

static int parse_(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.batches = {256, 128}, .n_batches = 2, .threads = 1, .trials = 7,
                       .min_trial_s = 0.02, .libs = "openblas,blis,dnnl,device"};
    static const struct option longopts[] = {
        {"batch", required_argument, 0, 'b'}, {"threads", required_argument, 0, 't'},
        {"trials", required_argument, 0, 'n'}, {"min-ms", required_argument, 0, 'm'},
        {"libs", required_argument, 0, 'l'},  {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "b:t:n:m:l:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'b': {
            o->n_batches = 0;
            for (char *tok = strtok(optarg, ","); tok && o->n_batches < MAX_BATCHES;
                 tok = strtok(NULL, ","))
                o->batches[o->n_batches++] = atoi(tok);
            break;
        }
        case 't': o->threads = atoi(optarg); break;
        case 'n': o->trials = atoi(optarg); break;
        case 'm': o->min_trial_s = atof(optarg) / 1000.0; break;
        case 'l': snprintf(o->libs, sizeof o->libs, "%s", optarg); break;
        case 'h': usage_(stdout); exit(0);
        default: usage_(stderr); return VGPU_EINVAL;
        }
    }
    int ok = optind == argc && o->threads >= 1 && o->trials >= 1 && o->trials <= MAX_TRIALS &&
             o->min_trial_s > 0 && o->n_batches > 0;
    for (int i = 0; i < o->n_batches; i++)
        ok = ok && o->batches[i] > 0;
    if (!ok) {
        fprintf(stderr, "vgpu_gemm_perf: need batches > 0, threads >= 1, 1 <= trials <= %d, "
                        "min-ms > 0 and no extra arguments\n", MAX_TRIALS);
        return VGPU_EINVAL;
    }
    return 0;
}

static int wants_(const struct opts *o, const char *name)
{
    char list[64];
    snprintf(list, sizeof list, "%s", o->libs);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ","))
        if (!strcmp(tok, name))
            return 1;
    return 0;
}

// ---- the run ----

// What is measured, and the operands every library multiplies.
struct bench {
    struct opts o;
    struct lib libs[MAX_LIBS];
    int n_libs;
    device_t dev;           // the CPU virtual GPU behind the device op
    int use_dev;            // the device op is measured
    size_t max_elems;       // floats in each operand buffer
    float *a, *b, *c, *c_host; // host operands (for the libraries) and C read back
    double *want;           // the reference product
    float *da, *db, *dc;    // the device op's operands, in device memory
};

static const int mlp_dims_[] = {784, 256, 128, 10};

// The libraries asked for that are installed, and the device op. Returns 0,
// or 1 (the exit status) with the reason printed.
static int open_libs_(struct bench *bn)
{
    static const struct {
        const char *name;
        int (*load)(struct lib *, int);
    } loaders[] = {{"openblas", load_openblas_}, {"blis", load_blis_}, {"dnnl", load_dnnl_}};
    for (size_t i = 0; i < sizeof loaders / sizeof loaders[0]; i++) {
        if (!wants_(&bn->o, loaders[i].name))
            continue;
        struct lib *l = &bn->libs[bn->n_libs];
        memset(l, 0, sizeof *l);
        l->name = loaders[i].name;
        if (loaders[i].load(l, bn->o.threads) == 0)
            bn->n_libs++;
        else
            printf("# %-8s: not installed (%s)\n", l->name, dlerror());
    }

    // The device op: this build's library behind math_gemm, on a CPU
    // virtual GPU (operands must live in device memory).
    bn->use_dev = wants_(&bn->o, "device");
    int maxb = 0;
    for (int i = 0; i < bn->o.n_batches; i++)
        maxb = bn->o.batches[i] > maxb ? bn->o.batches[i] : maxb;
    bn->max_elems = (size_t)(maxb > 784 ? maxb : 784) * 784;
    if (bn->use_dev) {
        struct device_info info;
        int count = 0;
        if (device_discover(DEVICE_KIND_CPU, &info, 1, &count, NULL, 0) < 0 ||
            device_open(&bn->dev, &info, 0, "local", 3 * bn->max_elems * sizeof(float) + (1 << 20),
                        bn->o.threads) < 0) {
            fprintf(stderr, "vgpu_gemm_perf: cannot open a CPU virtual GPU\n");
            return 1;
        }
        struct lib *l = &bn->libs[bn->n_libs++];
        memset(l, 0, sizeof *l);
        l->name = "device";
        l->call = call_device_;
        l->ctx = &bn->dev;
        snprintf(l->about, sizeof l->about, "math_gemm of this build: %s", cpu_gemm_library());
    }
    if (!bn->n_libs) {
        fprintf(stderr, "vgpu_gemm_perf: no library to measure\n");
        return 1;
    }
    return 0;
}

// Operands: host buffers for the libraries, device buffers for the op, with
// the same values in [-1, 1). Returns 0, or -1 when out of memory.
static int make_operands_(struct bench *bn)
{
    const size_t n = bn->max_elems;
    bn->a = malloc(n * sizeof(float)), bn->b = malloc(n * sizeof(float));
    bn->c = malloc(n * sizeof(float)), bn->c_host = malloc(n * sizeof(float));
    bn->want = malloc(n * sizeof(double));
    if (!bn->a || !bn->b || !bn->c || !bn->c_host || !bn->want)
        return -1;
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u; // values in [-1, 1)
        bn->a[i] = (float)(x >> 8) / (float)(1 << 23) - 1.0f;
        x = x * 1664525u + 1013904223u;
        bn->b[i] = (float)(x >> 8) / (float)(1 << 23) - 1.0f;
    }
    if (!bn->use_dev)
        return 0;
    if (device_alloc_floats(&bn->dev, n, &bn->da) < 0 || device_alloc_floats(&bn->dev, n, &bn->db) < 0 ||
        device_alloc_floats(&bn->dev, n, &bn->dc) < 0)
        return -1;
    device_copy_to_device(&bn->dev, bn->da, bn->a, n * sizeof(float));
    device_copy_to_device(&bn->dev, bn->db, bn->b, n * sizeof(float));
    return 0;
}

static void print_header_(const struct bench *bn)
{
    printf("# vgpu_gemm_perf: sgemm GFLOP/s, row-major, %d thread(s), median of %d interleaved "
           "trials of >= %.0f ms\n", bn->o.threads, bn->o.trials, bn->o.min_trial_s * 1000);
    printf("# host: %s\n", bn->dev.info.name[0] ? bn->dev.info.name : "(cpu)");
    for (int i = 0; i < bn->n_libs; i++)
        printf("# %-8s: %s\n", bn->libs[i].name, bn->libs[i].about);
    printf("%5s %-7s %2s %2s %5s %5s %5s", "batch", "gemm", "tA", "tB", "M", "N", "K");
    for (int i = 0; i < bn->n_libs; i++)
        printf(" %9s", bn->libs[i].name);
    printf("\n");
}

// One shape: each library checked against the reference, then timed in
// interleaved trials; prints its row and adds each median to batch_s.
// Returns 1 when a library got it wrong.
static int measure_shape_(struct bench *bn, int batch, const struct shape *s, double *batch_s)
{
    int failed = 0;
    reference_(s, bn->a, bn->b, bn->want);
    double times[MAX_LIBS][MAX_TRIALS];
    for (int li = 0; li < bn->n_libs; li++) {
        struct lib *l = &bn->libs[li];
        double err = check_(l, s, l->ctx ? bn->da : bn->a, l->ctx ? bn->db : bn->b,
                            l->ctx ? bn->dc : bn->c, bn->c_host, bn->want, &bn->dev);
        if (!(err < 1e-4)) {
            printf("# %s %s: max relative error %.3g: FAILED\n", l->name, s->what, err);
            failed = 1;
        }
    }
    for (int t = 0; t < bn->o.trials; t++) // interleaved: noise hits every library alike
        for (int li = 0; li < bn->n_libs; li++) {
            struct lib *l = &bn->libs[li];
            times[li][t] = time_call_(l, s, l->ctx ? bn->da : bn->a, l->ctx ? bn->db : bn->b,
                                      l->ctx ? bn->dc : bn->c, bn->o.min_trial_s);
        }
    double flops = 2.0 * s->m * s->n * s->k;
    printf("%5d %-7s %2s %2s %5d %5d %5d", batch, s->what, s->ta ? "T" : "N", s->tb ? "T" : "N",
           s->m, s->n, s->k);
    for (int li = 0; li < bn->n_libs; li++) {
        qsort(times[li], (size_t)bn->o.trials, sizeof(double), cmp_double_);
        double med = times[li][bn->o.trials / 2];
        batch_s[li] += med;
        printf(" %9.1f", flops / med * 1e-9);
    }
    printf("\n");
    return failed;
}

// Every shape of one training step at this batch size, then the step's
// totals. Returns 1 when a library got a shape wrong.
static int measure_batch_(struct bench *bn, int batch)
{
    struct shape shapes[MAX_SHAPES];
    int n_shapes = mlp_shapes_(mlp_dims_, 4, batch, shapes);
    double batch_s[MAX_LIBS] = {0};
    int failed = 0;
    for (int si = 0; si < n_shapes; si++)
        failed |= measure_shape_(bn, batch, &shapes[si], batch_s);
    printf("%5d %-22s", batch, "all (time-weighted)");
    double flops = 0;
    for (int si = 0; si < n_shapes; si++)
        flops += 2.0 * shapes[si].m * shapes[si].n * shapes[si].k;
    printf("%14s", "");
    for (int li = 0; li < bn->n_libs; li++)
        printf(" %9.1f", flops / batch_s[li] * 1e-9);
    printf("\n%5d %-36s", batch, "GEMM us per step");
    for (int li = 0; li < bn->n_libs; li++)
        printf(" %9.0f", batch_s[li] * 1e6);
    printf("\n");
    return failed;
}

int main(int argc, char **argv)
{
    static struct bench bn;
    if (parse_(argc, argv, &bn.o) < 0)
        return 2;
    int rc = open_libs_(&bn);
    if (rc)
        return rc;
    if (make_operands_(&bn) < 0)
        return 1;
    print_header_(&bn);
    int failed = 0;
    for (int bi = 0; bi < bn.o.n_batches; bi++)
        failed |= measure_batch_(&bn, bn.o.batches[bi]);
    if (bn.use_dev)
        device_close(&bn.dev);
    free(bn.a), free(bn.b), free(bn.c), free(bn.c_host), free(bn.want);
    printf("# %s\n", failed ? "FAILED" : "OK");
    return failed;
}
