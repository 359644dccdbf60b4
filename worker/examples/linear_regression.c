// linear_regression.c: data-parallel training with libvgpu, the smallest
// whole example. Each rank holds its own shard of a linear problem
// y = x . w_true + noise, computes the gradient of its shard, and the ranks
// average their gradients with vgpu_all_reduce, so every rank takes the same
// step and the replicas stay equal. Rank 0 draws w_true and broadcasts it.
//
//   cc linear_regression.c $(pkg-config --cflags --libs vgpu) -o linreg
//   vgpurun -np 4 -- ./linreg            (or mpirun -np 4 ./linreg)
//
// The shard, the weights and the gradient live in the rank's device memory,
// and the program computes on them there: on a CPU-simulated device with
// vgpu_launch_host_func (the device's memory is host memory while the
// function runs, and faults outside it, as a GPU's would). On a GPU a CUDA
// program launches its own kernels on vgpu_stream() instead; this C file has
// none, so there it runs the same functions on host copies.
// Exit status: 0 when it learnt w_true, 1 when not, 2 when vgpu failed.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <vgpu/vgpu.h>

#define FEATURES 16
#define ROWS_PER_RANK 4096
#define STEPS 300
#define LR 0.1f

// Fails the program with vgpu's message (every rank sees the same failure).
#define CHECK(call)                                                                   \
    do {                                                                              \
        int rc_ = (call);                                                             \
        if (rc_ < 0) {                                                                \
            fprintf(stderr, "linreg: %s: %s\n", #call, vgpu_status_string(rc_));      \
            exit(2);                                                                  \
        }                                                                             \
    } while (0)

// One rank's problem: its shard (x is [ROWS_PER_RANK, FEATURES], y is
// [ROWS_PER_RANK]), the weights w [FEATURES], and the gradient followed by
// the loss, grad [FEATURES + 1]: device pointers, or host copies on a GPU.
struct problem {
    const float *x, *y;
    float *w, *grad;
};

// grad = the gradient of this shard's mean squared error / 2 at w, and
// grad[FEATURES] the loss.
static void gradient_(void *arg)
{
    const struct problem *p = arg;
    for (int j = 0; j <= FEATURES; j++)
        p->grad[j] = 0;
    for (int i = 0; i < ROWS_PER_RANK; i++) {
        const float *xi = p->x + i * FEATURES;
        float err = -p->y[i];
        for (int j = 0; j < FEATURES; j++)
            err += xi[j] * p->w[j];
        for (int j = 0; j < FEATURES; j++)
            p->grad[j] += err * xi[j] / ROWS_PER_RANK;
        p->grad[FEATURES] += 0.5f * err * err / ROWS_PER_RANK;
    }
}

// w -= LR * grad (by then the mean over the ranks).
static void update_(void *arg)
{
    const struct problem *p = arg;
    for (int j = 0; j < FEATURES; j++)
        p->w[j] -= LR * p->grad[j];
}

// A uniform number in [-1, 1) from a small LCG: reproducible shards.
static float uniform_(unsigned long long *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

int main(int argc, char **argv)
{
    vgpu_t *v;
    CHECK(vgpu_init(&v, &argc, &argv, NULL));
    const int rank = vgpu_rank(v), size = vgpu_size(v);

    // Rank 0 draws the true weights; every rank gets them from its device.
    float w_true[FEATURES];
    unsigned long long seed = 12345;
    for (int j = 0; j < FEATURES; j++)
        w_true[j] = uniform_(&seed);
    float *d_w_true;
    CHECK(vgpu_malloc(v, (void **)&d_w_true, sizeof w_true));
    if (rank == 0)
        CHECK(vgpu_memcpy_htod(v, d_w_true, w_true, sizeof w_true));
    CHECK(vgpu_broadcast(d_w_true, d_w_true, FEATURES, vgpu_float32, 0, v));
    CHECK(vgpu_memcpy_dtoh(v, w_true, d_w_true, sizeof w_true));

    // This rank's shard: its own rows, the same w_true.
    float *x = malloc(sizeof(float) * ROWS_PER_RANK * FEATURES), *y = malloc(sizeof(float) * ROWS_PER_RANK);
    if (!x || !y)
        return 2;
    seed = 1000003ull * (unsigned long long)(rank + 1);
    for (int i = 0; i < ROWS_PER_RANK; i++) {
        float dot = 0;
        for (int j = 0; j < FEATURES; j++) {
            x[i * FEATURES + j] = uniform_(&seed);
            dot += x[i * FEATURES + j] * w_true[j];
        }
        y[i] = dot + 0.01f * uniform_(&seed);
    }

    // The problem in device memory: the shard uploaded, w zero.
    float *d_x, *d_y, *d_w, *d_grad, w[FEATURES], grad[FEATURES + 1];
    CHECK(vgpu_malloc(v, (void **)&d_x, sizeof(float) * ROWS_PER_RANK * FEATURES));
    CHECK(vgpu_malloc(v, (void **)&d_y, sizeof(float) * ROWS_PER_RANK));
    CHECK(vgpu_malloc(v, (void **)&d_w, sizeof w));
    CHECK(vgpu_malloc(v, (void **)&d_grad, sizeof grad));
    CHECK(vgpu_memcpy_htod(v, d_x, x, sizeof(float) * ROWS_PER_RANK * FEATURES));
    CHECK(vgpu_memcpy_htod(v, d_y, y, sizeof(float) * ROWS_PER_RANK));
    CHECK(vgpu_memzero(v, d_w, sizeof w));
    struct problem on_device = {d_x, d_y, d_w, d_grad};
    // On a GPU the functions may not touch device memory: host copies.
    const int gpu = vgpu_cuda_device(v) >= 0;
    for (int j = 0; j < FEATURES; j++)
        w[j] = 0;
    struct problem on_host = {x, y, w, grad};
    if (rank == 0)
        printf("linreg: computing %s\n", gpu ? "on host copies (a CUDA device: a CUDA program "
                                               "launches its kernels on vgpu_stream)"
                                             : "on device memory (vgpu_launch_host_func)");

    for (int step = 1; step <= STEPS; step++) {
        if (gpu) {
            gradient_(&on_host);
            CHECK(vgpu_memcpy_htod(v, d_grad, grad, sizeof grad));
        } else {
            CHECK(vgpu_launch_host_func(v, gradient_, &on_device));
        }
        // The mean over the ranks: every rank now holds the same numbers.
        CHECK(vgpu_all_reduce(d_grad, d_grad, FEATURES + 1, vgpu_float32, vgpu_avg, v));
        if (gpu) {
            CHECK(vgpu_memcpy_dtoh(v, grad, d_grad, sizeof grad));
            update_(&on_host);
        } else {
            CHECK(vgpu_launch_host_func(v, update_, &on_device));
        }
        if (rank == 0 && (step == 1 || step % 100 == 0)) {
            float loss;
            CHECK(vgpu_memcpy_dtoh(v, &loss, d_grad + FEATURES, sizeof loss));
            printf("linreg: step %3d  loss %.6f\n", step, loss);
        }
    }
    if (!gpu)
        CHECK(vgpu_memcpy_dtoh(v, w, d_w, sizeof w));

    // The replicas must agree: the largest |w| difference from rank 0's.
    float diff[FEATURES];
    CHECK(vgpu_memcpy_htod(v, d_grad, w, sizeof w));
    CHECK(vgpu_broadcast(d_grad, d_grad, FEATURES, vgpu_float32, 0, v));
    CHECK(vgpu_memcpy_dtoh(v, diff, d_grad, sizeof diff));
    double apart = 0, err = 0;
    for (int j = 0; j < FEATURES; j++) {
        apart = fmax(apart, fabs((double)diff[j] - w[j]));
        err = fmax(err, fabs((double)w[j] - w_true[j]));
    }
    double worst[2] = {apart, err}, *d_worst;
    CHECK(vgpu_malloc(v, (void **)&d_worst, sizeof worst));
    CHECK(vgpu_memcpy_htod(v, d_worst, worst, sizeof worst));
    CHECK(vgpu_all_reduce(d_worst, d_worst, 2, vgpu_float64, vgpu_max, v));
    CHECK(vgpu_memcpy_dtoh(v, worst, d_worst, sizeof worst));
    const int learnt = worst[0] == 0 && worst[1] < 0.01;
    if (rank == 0)
        printf("linreg: %d ranks (%s, %s): replicas %s, largest |w - w_true| %.5f: %s\n", size,
               vgpu_device_kind(v), vgpu_backend(v), worst[0] == 0 ? "equal" : "DIFFER", worst[1],
               learnt ? "learnt" : "NOT learnt");
    free(x);
    free(y);
    CHECK(vgpu_free(v, d_w_true));
    CHECK(vgpu_free(v, d_grad));
    CHECK(vgpu_free(v, d_x));
    CHECK(vgpu_free(v, d_y));
    CHECK(vgpu_free(v, d_w));
    CHECK(vgpu_free(v, d_worst));
    CHECK(vgpu_finalize(v));
    return learnt ? 0 : 1;
}
