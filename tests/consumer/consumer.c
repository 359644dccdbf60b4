// consumer.c: a program outside vgpu's tree, built against an installed
// libvgpu (find_package(vgpu), or pkg-config), run under vgpurun: every
// collective of the public API with exact expected values, and the errors a
// program gets back instead of an exit.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vgpu/vgpu.h>

static int rank_, size_, checks_, failures_;

static void check_(int ok, const char *what)
{
    checks_++;
    if (!ok && failures_++ < 10)
        fprintf(stderr, "consumer: rank %d: FAILED: %s\n", rank_, what);
}

#define MUST(call)                                                                    \
    do {                                                                              \
        int rc_ = (call);                                                             \
        if (rc_ < 0) {                                                                \
            fprintf(stderr, "consumer: %s: %s\n", #call, vgpu_status_string(rc_));    \
            exit(2);                                                                  \
        }                                                                             \
    } while (0)

// -4..4: sums, products (up to 5 ranks: 3^5 has 8 significant bits,
// bfloat16's all) and averages are exact in every type.
static long long value_(int q, int i) { return (q * 5 + i * 3) % 9 - 4; }

// The half types by hand, as a program without cuda_fp16.h has them: every
// value here is 0 or normal in both; bfloat16 is a float's upper half.
static uint32_t bits_(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

// x, exact in the type, as its bits.
static uint16_t to_half_(int t, float x)
{
    const uint32_t u = bits_(x);
    if (t == vgpu_bfloat16 || !(u & 0x7fffffffu))
        return (uint16_t)(u >> 16);
    return (uint16_t)((u >> 16 & 0x8000u) | ((u >> 23 & 0xffu) - 112u) << 10 | (u >> 13 & 0x3ffu));
}

static float from_half_(int t, uint16_t h)
{
    if (t == vgpu_bfloat16 || !(h & 0x7fffu))
        return float_((uint32_t)h << 16);
    return float_((uint32_t)(h & 0x8000u) << 16 | ((h >> 10 & 31u) + 112u) << 23 |
                  (uint32_t)(h & 0x3ffu) << 13);
}

// x (normal) rounded to nearest even at `bits` significant bits: what an
// average in float16 (11) or bfloat16 (8) must be.
static float round_to_(float x, int bits)
{
    const int drop = 24 - bits;
    const uint32_t u = bits_(x), rem = u & ((1u << drop) - 1), half = 1u << (drop - 1);
    const uint32_t q = (u >> drop) + (rem > half || (rem == half && (u >> drop & 1)));
    return float_(q << drop);
}

// All-reduce of n elements of every type and operation, checked exactly.
static void all_reduce_(vgpu_t *v, int n)
{
    static const size_t sizes[] = {4, 8, 4, 8, 2, 2};
    void *d;
    MUST(vgpu_malloc(v, &d, (size_t)n * 8));
    char *h = malloc((size_t)n * 8);
    for (int t = vgpu_float32; t <= vgpu_bfloat16; t++)
        for (int op = vgpu_sum; op <= vgpu_max; op++) {
            const int half = t == vgpu_float16 || t == vgpu_bfloat16;
            for (int i = 0; i < n; i++) {
                long long x = value_(rank_, i);
                if (t == vgpu_float32) ((float *)h)[i] = (float)x;
                if (t == vgpu_float64) ((double *)h)[i] = (double)x;
                if (t == vgpu_int32) ((int *)h)[i] = (int)x;
                if (t == vgpu_int64) ((long long *)h)[i] = x;
                if (half) ((uint16_t *)h)[i] = to_half_(t, (float)x);
            }
            MUST(vgpu_memcpy_htod(v, d, h, (size_t)n * sizes[t]));
            MUST(vgpu_all_reduce(d, d, (size_t)n, (vgpu_datatype_t)t, (vgpu_op_t)op, v));
            MUST(vgpu_memcpy_dtoh(v, h, d, (size_t)n * sizes[t]));
            int wrong = 0;
            for (int i = 0; i < n; i++) {
                long long acc = value_(0, i);
                for (int q = 1; q < size_; q++) {
                    long long x = value_(q, i);
                    acc = op == vgpu_prod ? acc * x : op == vgpu_min ? (x < acc ? x : acc)
                        : op == vgpu_max ? (x > acc ? x : acc) : acc + x;
                }
                if (t == vgpu_float32)
                    wrong += ((float *)h)[i] != (op == vgpu_avg ? (float)acc / (float)size_ : (float)acc);
                if (t == vgpu_float64)
                    wrong += ((double *)h)[i] != (op == vgpu_avg ? (double)acc / size_ : (double)acc);
                if (t == vgpu_int32)
                    wrong += ((int *)h)[i] != (int)(op == vgpu_avg ? acc / size_ : acc);
                if (t == vgpu_int64)
                    wrong += ((long long *)h)[i] != (op == vgpu_avg ? acc / size_ : acc);
                if (half) // as values: a product may be -0
                    wrong += from_half_(t, ((uint16_t *)h)[i]) !=
                             (op == vgpu_avg ? round_to_((float)acc / (float)size_,
                                                         t == vgpu_float16 ? 11 : 8)
                                             : (float)acc);
            }
            char what[96];
            snprintf(what, sizeof what, "all_reduce type %d op %d: %d of %d wrong", t, op, wrong, n);
            check_(wrong == 0, what);
        }
    MUST(vgpu_free(v, d));
    free(h);
}

int main(int argc, char **argv)
{
    vgpu_t *v;
    MUST(vgpu_init(&v, &argc, &argv, &(struct vgpu_options){.quiet = 1}));
    rank_ = vgpu_rank(v);
    size_ = vgpu_size(v);
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", VGPU_VERSION_MAJOR, VGPU_VERSION_MINOR,
             VGPU_VERSION_PATCH);
    check_(!strcmp(vgpu_version(), version), "the library's version is the header's");

    all_reduce_(v, 1000);

    // Reduce-scatter: rank r gets block r of the sum.
    const int block = 100;
    long long *h = malloc(sizeof *h * (size_t)block * (size_t)size_);
    void *dsend, *drecv;
    MUST(vgpu_malloc(v, &dsend, sizeof *h * (size_t)block * (size_t)size_));
    MUST(vgpu_malloc(v, &drecv, sizeof *h * (size_t)block * (size_t)size_));
    for (int i = 0; i < block * size_; i++)
        h[i] = value_(rank_, i);
    MUST(vgpu_memcpy_htod(v, dsend, h, sizeof *h * (size_t)block * (size_t)size_));
    MUST(vgpu_reduce_scatter(dsend, drecv, (size_t)block, vgpu_int64, vgpu_sum, v));
    MUST(vgpu_memcpy_dtoh(v, h, drecv, sizeof *h * (size_t)block));
    int wrong = 0;
    for (int i = 0; i < block; i++) {
        long long sum = 0;
        for (int q = 0; q < size_; q++)
            sum += value_(q, rank_ * block + i);
        wrong += h[i] != sum;
    }
    check_(wrong == 0, "reduce_scatter int64 sum");

    // Broadcast from the last rank, out of place; all-gather of int32.
    for (int i = 0; i < block; i++)
        h[i] = rank_ * 1000 + i;
    MUST(vgpu_memcpy_htod(v, dsend, h, sizeof *h * (size_t)block));
    MUST(vgpu_broadcast(dsend, drecv, (size_t)block, vgpu_int64, size_ - 1, v));
    MUST(vgpu_memcpy_dtoh(v, h, drecv, sizeof *h * (size_t)block));
    wrong = 0;
    for (int i = 0; i < block; i++)
        wrong += h[i] != (long long)(size_ - 1) * 1000 + i;
    check_(wrong == 0, "broadcast from the last rank");
    int mine[3] = {rank_, rank_ * 2, -rank_}, all[3 * 64];
    MUST(vgpu_memcpy_htod(v, dsend, mine, sizeof mine));
    MUST(vgpu_all_gather(dsend, drecv, 3, vgpu_int32, v));
    MUST(vgpu_memcpy_dtoh(v, all, drecv, sizeof mine * (size_t)size_));
    wrong = 0;
    for (int q = 0; q < size_; q++)
        wrong += all[3 * q] != q || all[3 * q + 1] != 2 * q || all[3 * q + 2] != -q;
    check_(wrong == 0, "all_gather int32");
    MUST(vgpu_barrier(v));

    // Reduce to every root in turn (int64 sum, out of place; the other
    // ranks pass NULL), then a float32 max in place on the last rank.
    for (int root = 0; root < size_; root++) {
        for (int i = 0; i < block; i++)
            h[i] = value_(rank_, i + root);
        MUST(vgpu_memcpy_htod(v, dsend, h, sizeof *h * (size_t)block));
        MUST(vgpu_reduce(dsend, rank_ == root ? drecv : NULL, (size_t)block, vgpu_int64, vgpu_sum,
                         root, v));
        if (rank_ != root)
            continue;
        MUST(vgpu_memcpy_dtoh(v, h, drecv, sizeof *h * (size_t)block));
        wrong = 0;
        for (int i = 0; i < block; i++) {
            long long sum = 0;
            for (int q = 0; q < size_; q++)
                sum += value_(q, i + root);
            wrong += h[i] != sum;
        }
        check_(wrong == 0, "reduce int64 sum to each root");
    }
    float fmax_in[7], fmax_out[7];
    for (int i = 0; i < 7; i++)
        fmax_in[i] = (float)value_(rank_, i);
    MUST(vgpu_memcpy_htod(v, dsend, fmax_in, sizeof fmax_in));
    MUST(vgpu_reduce(dsend, dsend, 7, vgpu_float32, vgpu_max, size_ - 1, v));
    if (rank_ == size_ - 1) {
        MUST(vgpu_memcpy_dtoh(v, fmax_out, dsend, sizeof fmax_out));
        wrong = 0;
        for (int i = 0; i < 7; i++) {
            long long most = value_(0, i);
            for (int q = 1; q < size_; q++)
                most = value_(q, i) > most ? value_(q, i) : most;
            wrong += fmax_out[i] != (float)most;
        }
        check_(wrong == 0, "reduce float32 max in place on the last rank");
    }

    // Point-to-point round the ring: even ranks send first, odd ranks
    // receive first, so no pair waits on itself; 199 int32s a message (the
    // buffers hold 100 int64s a rank).
    if (size_ > 1) {
        const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_, n = 199;
        int *out = malloc(sizeof *out * (size_t)n), *in = malloc(sizeof *in * (size_t)n);
        for (int i = 0; i < n; i++)
            out[i] = rank_ * 100000 + i;
        MUST(vgpu_memcpy_htod(v, dsend, out, sizeof *out * (size_t)n));
        if (rank_ % 2 == 0) {
            MUST(vgpu_send(dsend, (size_t)n, vgpu_int32, right, v));
            MUST(vgpu_recv(drecv, (size_t)n, vgpu_int32, left, v));
        } else {
            MUST(vgpu_recv(drecv, (size_t)n, vgpu_int32, left, v));
            MUST(vgpu_send(dsend, (size_t)n, vgpu_int32, right, v));
        }
        MUST(vgpu_memcpy_dtoh(v, in, drecv, sizeof *in * (size_t)n));
        wrong = 0;
        for (int i = 0; i < n; i++)
            wrong += in[i] != left * 100000 + i;
        check_(wrong == 0, "send to the right, recv from the left");
        free(out);
        free(in);
    }
    check_(vgpu_send(dsend, 1, vgpu_int32, rank_, v) == VGPU_EINVAL, "a send to itself is VGPU_EINVAL");
    check_(vgpu_recv(drecv, 1, vgpu_int32, size_, v) == VGPU_EINVAL,
           "a peer out of range is VGPU_EINVAL");
    check_(vgpu_reduce(dsend, drecv, 1, vgpu_int32, vgpu_sum, size_, v) == VGPU_EINVAL,
           "a root out of range is VGPU_EINVAL");
    MUST(vgpu_barrier(v));

    // Errors come back as statuses with messages; nothing exits.
    check_(vgpu_all_reduce(dsend, dsend, 1, (vgpu_datatype_t)99, vgpu_sum, v) == VGPU_EINVAL,
           "an unknown type is VGPU_EINVAL");
    check_(vgpu_all_reduce(h, h, 1, vgpu_int64, vgpu_sum, v) == VGPU_EINVAL,
           "a host buffer is VGPU_EINVAL");
    check_(!strcmp(vgpu_status_string(VGPU_EINVAL), "invalid argument"), "VGPU_EINVAL's message");
    size_t used, peak, cap;
    MUST(vgpu_memory(v, &used, &peak, &cap));
    check_(used > 0 && peak >= used && cap > peak, "vgpu_memory");
    void *big;
    check_(vgpu_malloc(v, &big, cap + 1) == VGPU_EDEVMEM, "past the cap is VGPU_EDEVMEM");
    // Reduce-scatter's scratch (ring, mpi) missing on one rank only: rank 0
    // holds a hog, so the scratch fits everywhere but there; every rank must
    // return VGPU_EDEVMEM rather than enter the collective alone.
    if (strcmp(vgpu_backend(v), "nccl")) {
        const size_t third = cap / 3 & ~(size_t)4095;
        void *hog = NULL, *whole = NULL;
        if (rank_ == 0) // half the cap: with the buffer, no room for the scratch
            MUST(vgpu_malloc(v, &hog, cap / 2));
        MUST(vgpu_malloc(v, &whole, third));
        const size_t per = third / 8 / (size_t)size_;
        check_(vgpu_reduce_scatter(whole, whole, per, vgpu_int64, vgpu_sum, v) == VGPU_EDEVMEM,
               "reduce_scatter without scratch on one rank is VGPU_EDEVMEM on every rank");
        MUST(vgpu_free(v, whole));
        if (hog)
            MUST(vgpu_free(v, hog));
        MUST(vgpu_barrier(v)); // and the ranks still talk
    }
    MUST(vgpu_free(v, dsend));
    MUST(vgpu_free(v, drecv));
    free(h);

    // Every rank's verdict, agreed.
    int *dfail;
    MUST(vgpu_malloc(v, (void **)&dfail, sizeof failures_));
    MUST(vgpu_memcpy_htod(v, dfail, &failures_, sizeof failures_));
    MUST(vgpu_all_reduce(dfail, dfail, 1, vgpu_int32, vgpu_sum, v));
    int failed;
    MUST(vgpu_memcpy_dtoh(v, &failed, dfail, sizeof failed));
    if (rank_ == 0)
        printf("consumer: %d ranks (%s, %s), libvgpu %s: %d checks a rank, %d failed\n", size_,
               vgpu_device_kind(v), vgpu_backend(v), vgpu_version(), checks_, failed);
    MUST(vgpu_finalize(v));
    return failed ? 1 : 0;
}
