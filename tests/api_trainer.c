// api_trainer.c: libvgpu's API beyond NCCL's calls, as a trainer uses it
// (tests/e2e/api_comm.sh runs it on 1-4 ranks): start-up in two steps, the
// host collectives before and after vgpu_open, calls that need a device
// refused before it, a host function computing on device memory (CPU
// devices), vgpu_math.h's operations against host arithmetic, the fused update
// and the tree all-reduce against their definitions, statistics and marks.
//
//   api_trainer            every check; prints "api_trainer: N ranks (kind,
//                          backend): K checks a rank, F failed"
//   api_trainer too-small  vgpu_open with a least device memory no cap can
//                          give: every rank returns the same verdict
//
// Exit status: 0 the checks held, 1 a check failed, 2 vgpu failed.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vgpu/vgpu_ext.h>
#include <vgpu/vgpu_math.h>

static int checks_, failed_, rank_;

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        checks_++;                                                                        \
        if (!(cond)) {                                                                    \
            failed_++;                                                                    \
            fprintf(stderr, "api_trainer: rank %d: %s:%d: %s\n", rank_, __FILE__, __LINE__, \
                    #cond);                                                               \
        }                                                                                 \
    } while (0)

// Host all-reduce of rank + 1 over n ranks, every type and operation,
// in place and not.
static void host_reductions_(vgpu_t *v, int n)
{
    long long sum = (long long)n * (n + 1) / 2, prod = 1;
    for (int r = 1; r <= n; r++)
        prod *= r;
    const vgpu_op_t ops[] = {vgpu_sum, vgpu_avg, vgpu_prod, vgpu_min, vgpu_max};
    const double want[] = {(double)sum, (double)sum / n, (double)prod, 1, n};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        float f = (float)(rank_ + 1), fo = 0;
        double d = rank_ + 1;
        int32_t i = rank_ + 1, io = 0;
        int64_t l = rank_ + 1;
        CHECK(vgpu_ctrl_all_reduce(&f, &fo, 1, vgpu_float32, ops[o], v) == 0);
        CHECK(vgpu_ctrl_all_reduce(&d, &d, 1, vgpu_float64, ops[o], v) == 0);
        CHECK(vgpu_ctrl_all_reduce(&i, &io, 1, vgpu_int32, ops[o], v) == 0);
        CHECK(vgpu_ctrl_all_reduce(&l, &l, 1, vgpu_int64, ops[o], v) == 0);
        const double w = want[o];
        CHECK(fo == (float)w && d == w);
        // integers: avg rounds toward zero
        CHECK(io == (int32_t)(long long)w && l == (int64_t)(long long)w);
    }
    // Not a host type or op: refused before anything is sent.
    int32_t x = 0;
    CHECK(vgpu_ctrl_all_reduce(&x, &x, 1, (vgpu_datatype_t)99, vgpu_sum, v) == VGPU_EINVAL);
    CHECK(vgpu_ctrl_all_reduce(&x, &x, 1, vgpu_int32, (vgpu_op_t)99, v) == VGPU_EINVAL);
}

static void host_moves_(vgpu_t *v, int n)
{
    struct { int32_t a; double b; char s[8]; } msg = {0}, want = {n - 1, 0.25 * (n - 1), "root"};
    if (rank_ == n - 1)
        msg = want;
    CHECK(vgpu_ctrl_broadcast(&msg, sizeof msg, n - 1, v) == 0);
    CHECK(msg.a == want.a && msg.b == want.b && !strcmp(msg.s, "root"));
    CHECK(vgpu_ctrl_broadcast(&msg, sizeof msg, n, v) == VGPU_EINVAL); // no such root
    int32_t mine[2] = {rank_, -rank_}, all[2 * 8];
    CHECK(vgpu_ctrl_all_gather(mine, all, sizeof mine, v) == 0);
    for (int r = 0; r < n; r++)
        CHECK(all[2 * r] == r && all[2 * r + 1] == -r);
}

static void kernels_(vgpu_t *v)
{
    device_t *d = vgpu_math_device(v);
    CHECK(d != NULL);
    // c[2,3] = a[2,4] @ b[4,3], then c += a @ b again with beta = 1.
    const float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[12] = {1, 0, 2, 0, 1, 0, 3, 0, 1, 0, 1, 1};
    float want[6] = {0}, c[6];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                want[i * 3 + j] += a[i * 4 + k] * b[k * 3 + j];
    float *da, *db, *dc;
    CHECK(vgpu_malloc(v, (void **)&da, sizeof a) == 0);
    CHECK(vgpu_malloc(v, (void **)&db, sizeof b) == 0);
    CHECK(vgpu_malloc(v, (void **)&dc, sizeof c) == 0);
    CHECK(vgpu_memcpy_htod(v, da, a, sizeof a) == 0);
    CHECK(vgpu_host_register(v, (void *)b, sizeof b) == 0);
    CHECK(vgpu_memcpy_htod_async(v, db, b, sizeof b) == 0);
    CHECK(vgpu_wait_host_reads(v) == 0);
    vgpu_host_unregister(v, (void *)b);
    CHECK(math_gemm(d, 0, 0, 2, 3, 4, 1.0f, da, db, 0.0f, dc) == 0);
    CHECK(math_gemm(d, 0, 0, 2, 3, 4, 1.0f, da, db, 1.0f, dc) == 0);
    CHECK(vgpu_memcpy_dtoh(v, c, dc, sizeof c) == 0);
    for (int i = 0; i < 6; i++)
        CHECK(c[i] == 2 * want[i]);
    // c = relu(c + bias) with a bias that makes some negative; its gradient.
    const float bias[3] = {-100, 0, 5};
    float *dbias;
    CHECK(vgpu_malloc(v, (void **)&dbias, sizeof bias) == 0);
    CHECK(vgpu_memcpy_htod(v, dbias, bias, sizeof bias) == 0);
    CHECK(math_bias_add(d, dc, dbias, 2, 3, 1) == 0);
    CHECK(vgpu_memcpy_dtoh(v, c, dc, sizeof c) == 0);
    for (int i = 0; i < 6; i++)
        CHECK(c[i] == fmaxf(2 * want[i] + bias[i % 3], 0));
    CHECK(math_bias_grad(d, dbias, dc, 2, 3) == 0);
    float g[3];
    CHECK(vgpu_memcpy_dtoh(v, g, dbias, sizeof g) == 0);
    for (int j = 0; j < 3; j++)
        CHECK(g[j] == c[j] + c[3 + j]);
    CHECK(vgpu_memzero(v, dc, sizeof c) == 0);
    CHECK(vgpu_memcpy_dtoh(v, c, dc, sizeof c) == 0);
    CHECK(c[0] == 0 && c[5] == 0);
    // Adam's first step moves each parameter by lr against its gradient's
    // sign (the bias corrections cancel the moments' (1 - beta) factors).
    const float p0[3] = {1, 2, 3}, g0[3] = {0.5f, -4, 2};
    float *dp, *dg, *dm, *dvar, p1[3];
    CHECK(vgpu_malloc(v, (void **)&dp, sizeof p0) == 0);
    CHECK(vgpu_malloc(v, (void **)&dg, sizeof g0) == 0);
    CHECK(vgpu_malloc(v, (void **)&dm, sizeof p0) == 0);
    CHECK(vgpu_malloc(v, (void **)&dvar, sizeof p0) == 0);
    CHECK(vgpu_memcpy_htod(v, dp, p0, sizeof p0) == 0);
    CHECK(vgpu_memcpy_htod(v, dg, g0, sizeof g0) == 0);
    CHECK(vgpu_memzero(v, dm, sizeof p0) == 0 && vgpu_memzero(v, dvar, sizeof p0) == 0);
    // step 1: bias corrections 1 - 0.9 and 1 - 0.999
    CHECK(math_adam_step(d, dp, dg, dm, dvar, 3, 0.01f, 0.9f, 0.999f, 1e-8f, 0.0f, 1.0f - 0.9f,
                         1.0f - 0.999f, 0) == 0);
    CHECK(vgpu_memcpy_dtoh(v, p1, dp, sizeof p1) == 0);
    for (int i = 0; i < 3; i++)
        CHECK(fabsf(p1[i] - (p0[i] - (g0[i] > 0 ? 0.01f : -0.01f))) < 1e-5f);
    vgpu_free(v, dvar);
    vgpu_free(v, dm);
    vgpu_free(v, dg);
    vgpu_free(v, dp);
    // A host pointer is not device memory: refused, as a GPU would fault.
    CHECK(math_gemm(d, 0, 0, 2, 3, 4, 1.0f, a, db, 0.0f, dc) == VGPU_EINVAL);
    vgpu_free(v, dbias);
    vgpu_free(v, dc);
    vgpu_free(v, db);
    vgpu_free(v, da);
}

// vgpu_launch_host_func's function: y[i] = 3 * x[i] + rank on device memory
// (CPU devices, where it is host memory while the function runs); on a GPU
// it must not touch device memory and only counts.
struct host_fn_arg {
    const float *x;
    float *y;
    int n, touch, calls;
};

static void host_fn_(void *arg)
{
    struct host_fn_arg *a = arg;
    a->calls++;
    for (int i = 0; a->touch && i < a->n; i++)
        a->y[i] = 3 * a->x[i] + (float)rank_;
}

static void host_function_(vgpu_t *v)
{
    enum { N = 300 };
    float host[N], back[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)i;
    float *x, *y;
    CHECK(vgpu_malloc(v, (void **)&x, sizeof host) == 0);
    CHECK(vgpu_malloc(v, (void **)&y, sizeof host) == 0);
    CHECK(vgpu_memcpy_htod(v, x, host, sizeof host) == 0);
    CHECK(vgpu_memzero(v, y, sizeof host) == 0);
    struct host_fn_arg a = {x, y, N, vgpu_cuda_device(v) < 0, 0};
    // In stream order: after the upload and the zeroing, before the copy back.
    CHECK(vgpu_launch_host_func(v, host_fn_, &a) == 0);
    CHECK(vgpu_memcpy_dtoh(v, back, y, sizeof back) == 0);
    CHECK(vgpu_synchronize(v) == 0 && a.calls == 1);
    int right = 1;
    for (int i = 0; i < N; i++)
        right &= back[i] == (a.touch ? 3 * host[i] + (float)rank_ : 0.0f);
    CHECK(right);
    CHECK(vgpu_launch_host_func(v, NULL, &a) == VGPU_EINVAL);
    vgpu_free(v, y);
    vgpu_free(v, x);
}

// update(first, count): params[i] -= grads[i] (the summed gradient) in the ranges this rank gets.
struct update_ctx {
    vgpu_t *v;
    float *params, *grads;
    size_t updated;
};

static int update_(void *arg, size_t first, size_t count)
{
    struct update_ctx *u = arg;
    u->updated += count;
    return math_axpby(vgpu_math_device(u->v), u->params + first, -1.0f, u->grads + first, 1.0f,
                      count);
}

static void beyond_nccl_(vgpu_t *v, int n)
{
    enum { COUNT = 1000 };
    float *params, *grads, host[COUNT];
    CHECK(vgpu_malloc(v, (void **)&params, sizeof host) == 0);
    CHECK(vgpu_malloc(v, (void **)&grads, sizeof host) == 0);
    for (int i = 0; i < COUNT; i++)
        host[i] = (float)(i % 7);
    CHECK(vgpu_memcpy_htod(v, params, host, sizeof host) == 0);
    for (int i = 0; i < COUNT; i++)
        host[i] = (float)(rank_ + 1);
    CHECK(vgpu_memcpy_htod(v, grads, host, sizeof host) == 0);
    struct update_ctx u = {v, params, grads, 0};
    struct vgpu_comm_stats before, after;
    CHECK(vgpu_get_comm_stats(v, &before) == 0);
    vgpu_mark_step(v, 1);
    vgpu_mark_phase(v, vgpu_phase_optimizer);
    const uint64_t t0 = vgpu_span_begin();
    CHECK(vgpu_all_reduce_update(grads, params, COUNT, update_, &u, v) == 0);
    vgpu_span_end(v, vgpu_span_optimizer, t0, 0, 0);
    CHECK(vgpu_get_comm_stats(v, &after) == 0);
    CHECK(after.calls > before.calls && after.bytes > before.bytes);
    // Every element updated once over the job, from the summed gradient.
    double total = (double)u.updated;
    CHECK(vgpu_ctrl_all_reduce(&total, &total, 1, vgpu_float64, vgpu_sum, v) == 0);
    // the ring shards the update; mpi and nccl update everything everywhere
    CHECK(total == (strcmp(vgpu_backend(v), "ring") ? (double)COUNT * n : COUNT));
    CHECK(vgpu_memcpy_dtoh(v, host, params, sizeof host) == 0);
    const float sum = (float)n * (n + 1) / 2;
    int equal = 1;
    for (int i = 0; i < COUNT; i++)
        equal &= host[i] == (float)(i % 7) - sum;
    CHECK(equal);

    // The tree: rank r holds r + 1 partials whose value is their global index.
    int per[8], first = 0, total_parts = 0;
    for (int r = 0; r < n; r++) {
        per[r] = r + 1;
        first += r < rank_ ? per[r] : 0;
        total_parts += per[r];
    }
    float *parts, *out;
    const size_t mine = (size_t)per[rank_];
    CHECK(vgpu_malloc(v, (void **)&parts, mine * COUNT * sizeof(float)) == 0);
    CHECK(vgpu_malloc(v, (void **)&out, COUNT * sizeof(float)) == 0);
    for (size_t p = 0; p < mine; p++) {
        for (int i = 0; i < COUNT; i++)
            host[i] = (float)(first + (int)p);
        CHECK(vgpu_memcpy_htod(v, parts + p * COUNT, host, sizeof host) == 0);
    }
    CHECK(vgpu_all_reduce_tree(parts, per, out, COUNT, v) == 0);
    CHECK(vgpu_memcpy_dtoh(v, host, out, sizeof host) == 0);
    const float want = (float)total_parts * (total_parts - 1) / 2;
    CHECK(host[0] == want && host[COUNT - 1] == want);
    vgpu_free(v, out);
    vgpu_free(v, parts);
    vgpu_free(v, grads);
    vgpu_free(v, params);
}

int main(int argc, char **argv)
{
    const int too_small = argc > 1 && !strcmp(argv[1], "too-small");
    const struct vgpu_options options = {.quiet = 1};
    vgpu_t *v;
    int rc = vgpu_join(&v, &argc, &argv, &options);
    if (rc < 0) {
        fprintf(stderr, "api_trainer: vgpu_join: %s\n", vgpu_status_string(rc));
        return 2;
    }
    rank_ = vgpu_rank(v);
    const int n = vgpu_size(v);
    if (n > 8) {
        fprintf(stderr, "api_trainer: at most 8 ranks\n");
        return 2;
    }
    // Joined, not open: the host collectives work, device calls are refused.
    void *p = NULL;
    CHECK(vgpu_malloc(v, &p, 64) == VGPU_EINVAL);
    CHECK(vgpu_barrier(v) == VGPU_EINVAL);
    CHECK(vgpu_launch_host_func(v, host_fn_, NULL) == VGPU_EINVAL);
    CHECK(vgpu_math_device(v) == NULL);
    float h[4] = {0};
    CHECK(math_axpby(vgpu_math_device(v), h, 1.0f, h, 1.0f, 4) == VGPU_EINVAL); // said, no crash
    CHECK(!strcmp(vgpu_device_kind(v), "none"));
    CHECK(vgpu_cuda_device(v) == -1);
    CHECK(vgpu_startup_stage(v, "api_trainer: before the device") == 0);
    host_reductions_(v, n);
    const struct vgpu_open_options open = {
        .min_device_bytes = too_small ? (size_t)1 << 60 : (size_t)1 << 20,
        .deterministic = 1,
    };
    rc = vgpu_open(v, &open);
    if (too_small) {
        printf("api_trainer: rank %d: vgpu_open returned %d (%s)\n", rank_, rc,
               vgpu_status_string(rc));
        vgpu_finalize(v);
        return rc < 0 ? 0 : 1;
    }
    if (rc < 0) {
        fprintf(stderr, "api_trainer: vgpu_open: %s\n", vgpu_status_string(rc));
        return 2;
    }
    CHECK(vgpu_open(v, &open) == VGPU_EINVAL); // once
    // A CPU-simulated device has no CUDA ordinal; a GPU has its own.
    CHECK(strcmp(vgpu_device_kind(v), "cpu") ? vgpu_cuda_device(v) >= 0 : vgpu_cuda_device(v) == -1);
    CHECK(vgpu_startup_done(v) == 0);
    CHECK(vgpu_physical_device_count(v) >= 1 && vgpu_host_count(v) >= 1 && vgpu_host_name(v)[0]);
    host_reductions_(v, n);
    host_moves_(v, n);
    host_function_(v);
    kernels_(v);
    beyond_nccl_(v, n);
    int32_t failed = failed_; // the job's
    if (vgpu_ctrl_all_reduce(&failed, &failed, 1, vgpu_int32, vgpu_sum, v) < 0)
        failed = -1;
    if (rank_ == 0)
        printf("api_trainer: %d ranks (%s, %s): %d checks a rank, %d failed\n", n,
               vgpu_device_kind(v), vgpu_backend(v), checks_, failed);
    vgpu_finalize(v);
    return failed ? 1 : 0;
}
