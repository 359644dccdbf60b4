// linear_regression.c: data-parallel training with libvgpu, the smallest
// whole example. Each rank holds its own shard of a linear problem
// y = x . w_true + noise, computes the gradient of its shard, and the ranks
// average their gradients with vgpu_all_reduce, so every rank takes the same
// step and the replicas stay equal. Rank 0 draws w_true and broadcasts it.
//
//   cc linear_regression.c $(pkg-config --cflags --libs vgpu) -o linreg
//   vgpurun -np 4 -- ./linreg            (or mpirun -np 4 ./linreg)
//
// The arithmetic is on the host and the exchange through the rank's device
// memory, so the program runs unchanged on CPU-simulated devices and on GPUs
// (a CUDA program would launch its kernels on vgpu_stream() instead).
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

    // The gradient and the loss travel together: FEATURES + 1 floats.
    float w[FEATURES] = {0}, grad[FEATURES + 1];
    float *d_grad;
    CHECK(vgpu_malloc(v, (void **)&d_grad, sizeof grad));
    for (int step = 1; step <= STEPS; step++) {
        for (int j = 0; j <= FEATURES; j++)
            grad[j] = 0;
        for (int i = 0; i < ROWS_PER_RANK; i++) {
            const float *xi = x + i * FEATURES;
            float err = -y[i];
            for (int j = 0; j < FEATURES; j++)
                err += xi[j] * w[j];
            for (int j = 0; j < FEATURES; j++)
                grad[j] += err * xi[j] / ROWS_PER_RANK;
            grad[FEATURES] += 0.5f * err * err / ROWS_PER_RANK;
        }
        // The mean over the ranks: every rank now holds the same numbers.
        CHECK(vgpu_memcpy_htod(v, d_grad, grad, sizeof grad));
        CHECK(vgpu_all_reduce(d_grad, d_grad, FEATURES + 1, vgpu_float32, vgpu_avg, v));
        CHECK(vgpu_memcpy_dtoh(v, grad, d_grad, sizeof grad));
        for (int j = 0; j < FEATURES; j++)
            w[j] -= LR * grad[j];
        if (rank == 0 && (step == 1 || step % 100 == 0))
            printf("linreg: step %3d  loss %.6f\n", step, grad[FEATURES]);
    }

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
    CHECK(vgpu_free(v, d_worst));
    CHECK(vgpu_finalize(v));
    return learnt ? 0 : 1;
}
