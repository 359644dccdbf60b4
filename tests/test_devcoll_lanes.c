// test_devcoll_lanes.c: the device collectives' protocol (devcoll_proto.h)
// with every lane of every block a thread, as a GPU runs it: N ranks x B
// blocks x L lanes in one process, the windows plain memory, a block's
// barrier (__syncthreads_or) a pthread barrier. The simulated device runs
// one lane a block, so this is where the multi-lane barriers, the unit
// ownership across lanes and real concurrency between blocks are tested:
// random calls of every kind (in place or not, empty, across rounds)
// against a position-order reference, bit for bit, messages of several
// pieces among them, and mismatches (of a collective, of a message's size)
// that fail every rank before any output is written.
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

// A block's lanes meet at its barrier; sync_or ORs what they bring. Three
// accumulators in turn: one is read, one written, one cleared.
struct lane_block {
    pthread_barrier_t bar;
    int acc[3];
};
static __thread struct lane_block *my_block_;
static __thread unsigned my_phase_;
static __thread int my_lane_;

#define DC_BLOCK_SYNC_EXTERNAL
static inline int dc_sync_or(int x)
{
    const unsigned k = my_phase_ % 3;
    if (x)
        __atomic_fetch_or(&my_block_->acc[k], 1, __ATOMIC_SEQ_CST);
    pthread_barrier_wait(&my_block_->bar);
    const int any = __atomic_load_n(&my_block_->acc[k], __ATOMIC_SEQ_CST);
    if (my_lane_ == 0) // read by everyone before the next phase's barrier
        __atomic_store_n(&my_block_->acc[(my_phase_ + 2) % 3], 0, __ATOMIC_SEQ_CST);
    my_phase_++;
    return any;
}

#include "devcoll_proto.h"

enum { MAX_N = 5, MAX_B = 3, MAX_L = 4, MAX_CALLS = 40 };

struct call {
    struct dc_args a[MAX_N]; // each rank's arguments
    char *expect[MAX_N];     // each rank's recv afterwards
    uint64_t recv_bytes;
};

struct job {
    int n, blocks, lanes;
    uint64_t area;
    char *win[MAX_N];
    struct dc_status status[MAX_N];
    struct lane_block block[MAX_N][MAX_B];
    struct call calls[MAX_CALLS];
    int ncalls;
};

struct lane_arg {
    struct job *job;
    int rank, block, lane;
};

static void *lane_main_(void *p)
{
    const struct lane_arg *l = p;
    my_block_ = &l->job->block[l->rank][l->block];
    my_lane_ = l->lane;
    my_phase_ = 0;
    const struct dc_thread t = {l->block, l->job->blocks, l->lane, l->job->lanes};
    for (int c = 0; c < l->job->ncalls; c++) {
        dc_run(&l->job->calls[c].a[l->rank], &t);
        (void)dc_sync_or(0); // the next call starts once this block is through
    }
    return NULL;
}

static void run_job_(struct job *j)
{
    pthread_t tid[MAX_N * MAX_B * MAX_L];
    struct lane_arg arg[MAX_N * MAX_B * MAX_L];
    int k = 0;
    for (int r = 0; r < j->n; r++)
        for (int b = 0; b < j->blocks; b++)
            for (int l = 0; l < j->lanes; l++, k++) {
                arg[k] = (struct lane_arg){j, r, b, l};
                assert_int_equal(pthread_create(&tid[k], NULL, lane_main_, &arg[k]), 0);
            }
    for (int i = 0; i < k; i++)
        pthread_join(tid[i], NULL);
}

static uint64_t rng_;
static uint32_t rnd_(void)
{
    rng_ ^= rng_ << 13, rng_ ^= rng_ >> 7, rng_ ^= rng_ << 17;
    return (uint32_t)rng_;
}

// acc = acc op x for element i, as the host paths reduce (kernels.h).
static void reduce_into_(int dtype, int op, char *acc, const char *x, uint64_t i, int div)
{
    switch (dtype) {
    case DC_F32: kernel_reduce_f32(i, (float *)acc, (float *)acc, (const float *)x, op, div); break;
    case DC_I32:
        kernel_reduce_i32(i, (int32_t *)acc, (int32_t *)acc, (const int32_t *)x, op, div);
        break;
    default:
        kernel_reduce_bf16(i, (uint16_t *)acc, (uint16_t *)acc, (const uint16_t *)x, op, div);
        break;
    }
}

// dst[0..count) = position-order reduction of src[q] + off (elements).
static void reference_(const struct job *j, const struct call *k, char *dst, uint64_t off,
                       uint64_t count, int dtype, int op)
{
    const uint64_t es = dc_elem_bytes(dtype);
    memcpy(dst, k->a[0].send + off * es, count * es);
    for (int q = 1; q < j->n; q++)
        for (uint64_t i = 0; i < count; i++)
            reduce_into_(dtype, op, dst, k->a[q].send + off * es, i,
                         op == KERNEL_OP_AVG && q == j->n - 1 ? j->n : 0);
}

// A random call with its inputs and every rank's expected output.
static void make_call_(struct job *j, struct call *k, uint64_t *round)
{
    static const int kinds[] = {DC_ALL_REDUCE_ONE, DC_ALL_REDUCE_TWO, DC_REDUCE_SCATTER,
                                DC_ALL_GATHER,     DC_BROADCAST,      DC_REDUCE};
    static const int types[] = {DC_F32, DC_I32, DC_BF16};
    const int kind = kinds[rnd_() % 6], root = (int)(rnd_() % (uint32_t)j->n);
    const int moves = kind == DC_ALL_GATHER || kind == DC_BROADCAST;
    const int dtype = moves && rnd_() % 2 ? DC_BYTE : types[rnd_() % 3];
    const int op = moves ? KERNEL_OP_SUM : (int)(rnd_() % 5);
    const uint64_t es = dc_elem_bytes(dtype), big = 3 * j->area / es / 2 + 5;
    const uint64_t count = rnd_() % 4 == 0 ? rnd_() % (big + 1) : rnd_() % 41;
    const int in_place = rnd_() % 2;
    const int n = j->n;
    const uint64_t send_bytes = (kind == DC_REDUCE_SCATTER ? n : 1) * count * es;
    k->recv_bytes = (kind == DC_ALL_GATHER ? n : 1) * count * es;
    for (int q = 0; q < n; q++) {
        char *send = malloc(send_bytes + 1), *recv = malloc(k->recv_bytes + 1);
        assert_non_null(send), assert_non_null(recv);
        for (uint64_t i = 0; i < send_bytes; i++) // small values: no NaN, sums stay finite
            send[i] = (char)(dtype == DC_BF16 && i % 2 ? 0x3f + rnd_() % 2 : rnd_() % 97);
        memset(recv, 0x5a, k->recv_bytes);
        if (in_place && kind == DC_ALL_GATHER) {
            memcpy(recv + (uint64_t)q * count * es, send, count * es);
            free(send), send = recv + (uint64_t)q * count * es;
        } else if (in_place && kind == DC_REDUCE_SCATTER) {
            free(recv), recv = send + (uint64_t)q * count * es;
        } else if (in_place) {
            free(recv), recv = send;
        }
        struct dc_args *a = &k->a[q];
        *a = (struct dc_args){.area_bytes = j->area, .send = send, .recv = recv, .count = count,
                              .kind = kind, .dtype = dtype, .op = op, .root = root, .rank = q,
                              .n = n, .round0 = *round,
                              .desc = dc_desc(kind, dtype, op, root, count),
                              .status = &j->status[q], .timeout_ns = 20000000000ull};
        memcpy(a->win, j->win, sizeof j->win);
    }
    *round += dc_rounds(&k->a[0]);
    for (int q = 0; q < n; q++) {
        char *e = malloc(k->recv_bytes + 1);
        assert_non_null(e);
        memcpy(e, k->a[q].recv, k->recv_bytes); // what is not written stays
        if (kind == DC_ALL_REDUCE_ONE || kind == DC_ALL_REDUCE_TWO ||
            (kind == DC_REDUCE && q == root))
            reference_(j, k, e, 0, count, dtype, op);
        else if (kind == DC_REDUCE_SCATTER)
            reference_(j, k, e, (uint64_t)q * count, count, dtype, op);
        else if (kind == DC_ALL_GATHER)
            for (int p = 0; p < n; p++)
                memcpy(e + (uint64_t)p * count * es, k->a[p].send, count * es);
        else if (kind == DC_BROADCAST)
            memcpy(e, k->a[root].send, count * es);
        k->expect[q] = e;
    }
}

// A message of `bytes` around the ring of ranks, in two calls: rank q
// sends to q + 1 in call q % 2 and receives from q - 1 in the other (even
// ranks send first: a send ends once its message is taken). A receiver
// expects its sender's bytes; a sender's recv, a sentinel, stays as it was.
// msgs[p][q]: the messages from p to q so far.
static void make_ring_(struct job *j, struct call *k, uint64_t round,
                       uint64_t msgs[MAX_N][MAX_N])
{
    const int n = j->n;
    const uint64_t bytes = rnd_() % (4 * j->area + 20);
    char *out[MAX_N];
    for (int q = 0; q < n; q++) {
        out[q] = malloc(bytes + 1);
        assert_non_null(out[q]);
        for (uint64_t i = 0; i < bytes; i++)
            out[q][i] = (char)rnd_();
    }
    for (int s = 0; s < 2; s++) {
        k[s].recv_bytes = bytes;
        for (int q = 0; q < n; q++) {
            const int sends = q % 2 == s, next = (q + 1) % n, prev = (q + n - 1) % n;
            char *recv = malloc(bytes + 1), *e = malloc(bytes + 1);
            assert_non_null(recv), assert_non_null(e);
            memset(recv, 0x5a, bytes);
            memcpy(e, sends ? recv : out[prev], bytes);
            k[s].expect[q] = e;
            struct dc_args *a = &k[s].a[q];
            *a = (struct dc_args){.area_bytes = j->area, .send = sends ? out[q] : NULL,
                                  .recv = recv, .count = bytes,
                                  .kind = sends ? DC_SEND : DC_RECV, .dtype = DC_BYTE,
                                  .rank = q, .n = n, .round0 = round,
                                  .status = &j->status[q], .timeout_ns = 20000000000ull,
                                  .peer = sends ? next : prev,
                                  .msg = sends ? msgs[q][next] : msgs[prev][q]};
            memcpy(a->win, j->win, sizeof j->win);
        }
    }
    for (int q = 0; q < n; q++)
        msgs[q][(q + 1) % n]++;
}

static struct job *job_new_(int n, int blocks, int lanes, uint64_t area)
{
    struct job *j = calloc(1, sizeof *j);
    assert_non_null(j);
    *j = (struct job){.n = n, .blocks = blocks, .lanes = lanes, .area = area};
    for (int q = 0; q < n; q++) {
        j->win[q] = aligned_alloc(4096, (DC_HEAD_BYTES + 4 * area + 4095) / 4096 * 4096);
        assert_non_null(j->win[q]);
        memset(j->win[q], 0, DC_HEAD_BYTES + 4 * area);
        for (int b = 0; b < blocks; b++)
            pthread_barrier_init(&j->block[q][b].bar, NULL, (unsigned)lanes);
    }
    return j;
}

static void job_free_(struct job *j)
{
    for (int q = 0; q < j->n; q++)
        for (int b = 0; b < j->blocks; b++)
            pthread_barrier_destroy(&j->block[q][b].bar);
    for (int q = 0; q < j->n; q++)
        free(j->win[q]);
    free(j);
}

// The outputs of calls that alias their inputs are freed once.
static void free_calls_(struct job *j)
{
    for (int c = 0; c < j->ncalls; c++)
        for (int q = 0; q < j->n; q++) {
            const struct dc_args *a = &j->calls[c].a[q];
            const char *s = a->send, *r = a->recv;
            const uint64_t es = dc_elem_bytes(a->dtype);
            if (a->kind == DC_ALL_GATHER && s == r + (uint64_t)q * a->count * es)
                free((void *)r);
            else if (a->kind == DC_REDUCE_SCATTER && r == s + (uint64_t)q * a->count * es)
                free((void *)s);
            else if (s == r)
                free((void *)s);
            else
                free((void *)s), free((void *)r);
            free(j->calls[c].expect[q]);
        }
}

// MAX_CALLS random calls on every lane; with p2p, half of them messages
// around the ring (make_ring_).
static void random_calls_(int n, int blocks, int lanes, uint64_t area, uint64_t seed, int p2p)
{
    rng_ = 88172645463325252ull ^ seed;
    struct job *j = job_new_(n, blocks, lanes, area);
    uint64_t round = 0, msgs[MAX_N][MAX_N] = {{0}};
    j->ncalls = MAX_CALLS;
    for (int c = 0; c < j->ncalls; c++)
        if (p2p && c + 1 < j->ncalls && rnd_() % 2)
            make_ring_(j, &j->calls[c], round, msgs), c++;
        else
            make_call_(j, &j->calls[c], &round);
    run_job_(j);
    for (int q = 0; q < n; q++)
        assert_int_equal(j->status[q].error, DC_OK);
    for (int c = 0; c < j->ncalls; c++)
        for (int q = 0; q < n; q++) {
            const struct call *k = &j->calls[c];
            if (memcmp(k->a[q].recv, k->expect[q], k->recv_bytes) != 0)
                fail_msg("%d ranks x %d blocks x %d lanes, area %llu: call %d (kind %d, type %d, "
                         "op %d, count %llu, root %d) differs on rank %d",
                         n, blocks, lanes, (unsigned long long)area, c, k->a[q].kind,
                         k->a[q].dtype, k->a[q].op, (unsigned long long)k->a[q].count,
                         k->a[q].root, q);
        }
    free_calls_(j);
    job_free_(j);
}

static void test_lanes_two_ranks(void **state)
{
    (void)state;
    random_calls_(2, 2, 4, 256, 1, 0);
    random_calls_(2, 3, 3, 1024, 2, 0);
}

static void test_lanes_odd_shapes(void **state)
{
    (void)state;
    random_calls_(3, 3, 2, 512, 3, 0); // lanes fewer than ranks: a lane waits for two peers
    random_calls_(5, 1, 4, 256, 4, 0);
    random_calls_(4, 2, 4, 128, 5, 0); // 128-byte areas: reduce-scatter's pieces of 2 units
}

// The last rank calls with one more element: every rank fails at the first
// barrier as a mismatch, and no recv changes.
static void test_lanes_mismatch(void **state)
{
    (void)state;
    rng_ = 99;
    struct job *j = job_new_(3, 2, 3, 256);
    uint64_t round = 0;
    j->ncalls = 1;
    make_call_(j, &j->calls[0], &round);
    struct dc_args *odd = &j->calls[0].a[2];
    odd->desc = dc_desc(odd->kind, odd->dtype, odd->op, odd->root, odd->count + 1);
    char *before[3];
    for (int q = 0; q < 3; q++) {
        before[q] = malloc(j->calls[0].recv_bytes + 1);
        memcpy(before[q], j->calls[0].a[q].recv, j->calls[0].recv_bytes);
    }
    run_job_(j);
    for (int q = 0; q < 3; q++) {
        assert_int_equal(j->status[q].error, DC_ERR_MISMATCH);
        assert_memory_equal(j->calls[0].a[q].recv, before[q], j->calls[0].recv_bytes);
        free(before[q]);
    }
    free_calls_(j);
    job_free_(j);
}

// Messages of up to four pieces and more among the collectives: the lanes
// copy their units of every piece (in both areas of both parities), lane 0
// waits for the block, and blocks of a rank run at once.
static void test_lanes_p2p(void **state)
{
    (void)state;
    random_calls_(2, 2, 4, 64, 6, 1);
    random_calls_(3, 3, 2, 128, 7, 1); // an odd ring: the last rank's send waits a call
    random_calls_(5, 2, 3, 256, 8, 1);
}

// Rank 1 expects one byte more than rank 0 sends it: both fail as a
// mismatch, in every block, and no receive buffer changes (rank 1's
// message back, in the next call, fails as well).
static void test_lanes_p2p_mismatch(void **state)
{
    (void)state;
    rng_ = 123;
    struct job *j = job_new_(2, 2, 3, 128);
    uint64_t msgs[MAX_N][MAX_N] = {{0}};
    j->ncalls = 2;
    make_ring_(j, &j->calls[0], 0, msgs);
    j->calls[0].a[1].count++;
    const uint64_t bytes = j->calls[0].recv_bytes;
    char *before[2][2];
    for (int c = 0; c < 2; c++)
        for (int q = 0; q < 2; q++) {
            before[c][q] = malloc(bytes + 2);
            assert_non_null(before[c][q]);
            memcpy(before[c][q], j->calls[c].a[q].recv, bytes);
        }
    run_job_(j);
    for (int q = 0; q < 2; q++)
        assert_int_equal(j->status[q].error, DC_ERR_MISMATCH);
    for (int c = 0; c < 2; c++)
        for (int q = 0; q < 2; q++) {
            assert_memory_equal(j->calls[c].a[q].recv, before[c][q], bytes);
            free(before[c][q]);
        }
    free_calls_(j);
    job_free_(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lanes_two_ranks),
        cmocka_unit_test(test_lanes_odd_shapes),
        cmocka_unit_test(test_lanes_mismatch),
        cmocka_unit_test(test_lanes_p2p),
        cmocka_unit_test(test_lanes_p2p_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
