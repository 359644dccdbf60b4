// test_comm_shm.c: the futex wait (shm_flag) and the ring schedule
// (ring_core) run by fork()ed processes over anonymous shared memory, with no
// MPI: every ring link is a same-host link here.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "env.h"
#include "kernels.h"
#include "ring_internal.h"
#include "shm_flag.h"
#include "status.h"
#include "test_ring_waits.h"
#include "util.h"

static void *shared_alloc_(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    memset(p, 0, bytes);
    return p;
}

// Waits for every child; returns how many exited with a non-zero status.
static int reap_(pid_t *pids, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    return bad;
}

// ---- shm_flag ----

// Two processes hand a token back and forth through two flags. With no
// spinning every wait goes through the futex: a lost wake-up would cost a
// 50 ms sleep slice each time and blow the time bound.
static void ping_pong_(unsigned spin, double yield_s)
{
    enum { ROUNDS = 20000 };
    struct shm_flag *f = shared_alloc_(2 * sizeof *f);
    struct shm_flag_wait_opts o = {.timeout_s = 10, .spin_count = spin, .yield_s = yield_s};
    double t0 = util_now_s();
    pid_t pids[2];
    for (int who = 0; who < 2; who++) {
        pids[who] = fork();
        assert_true(pids[who] >= 0);
        if (pids[who] == 0) {
            for (uint64_t i = 1; i <= ROUNDS; i++) {
                if (who == 0) {
                    shm_flag_publish(&f[0], i);
                    if (shm_flag_wait(&f[1], i, &o) < 0)
                        _exit(1);
                } else {
                    if (shm_flag_wait(&f[0], i, &o) < 0)
                        _exit(1);
                    shm_flag_publish(&f[1], i);
                }
            }
            _exit(0);
        }
    }
    assert_int_equal(reap_(pids, 2), 0);
    double took = util_now_s() - t0;
    assert_true(took < 10.0);
    assert_int_equal(shm_flag_read(&f[0]), ROUNDS);
    assert_int_equal(shm_flag_read(&f[1]), ROUNDS);
    assert_int_equal(atomic_load(&f[0].sleepers), 0);
    munmap(f, 2 * sizeof *f);
}

static void test_wait_ping_pong_futex(void **state) { (void)state; ping_pong_(0, 0); }
static void test_wait_ping_pong_spin(void **state) { (void)state; ping_pong_(1000, 0); }
static void test_wait_ping_pong_yield(void **state) { (void)state; ping_pong_(0, 1e-3); }

static double cpu_s_(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// The yield phase lasts yield_s, then the waiter sleeps on the futex. The
// publisher, 0.2 s late, sees whether the waiter has gone to sleep (it
// announces itself in `sleepers` only then); a waiter past its yield phase
// has used about yield_s of CPU, not 0.2 s.
static void wait_late_publish_(double yield_s, double *cpu_s, int *was_asleep)
{
    struct shm_flag *f = shared_alloc_(sizeof *f);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        usleep(200000);
        int asleep = atomic_load(&f->sleepers) != 0;
        shm_flag_publish(f, 1);
        _exit(asleep ? 3 : 0);
    }
    struct shm_flag_wait_opts o = {.timeout_s = 5, .spin_count = 0, .yield_s = yield_s};
    const double c0 = cpu_s_(), t0 = util_now_s();
    assert_int_equal(shm_flag_wait(f, 1, &o), 0);
    *cpu_s = cpu_s_() - c0;
    const double took = util_now_s() - t0;
    assert_true(took >= 0.15 && took < 1.0);
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    *was_asleep = WEXITSTATUS(st) == 3;
    munmap(f, sizeof *f);
}

static void test_wait_yield_bounded(void **state)
{
    (void)state;
    double cpu_s;
    int asleep;
    wait_late_publish_(1.0, &cpu_s, &asleep); // still yielding when the publish comes
    assert_false(asleep);
    wait_late_publish_(0.01, &cpu_s, &asleep); // asleep long before
    assert_true(asleep);
    assert_true(cpu_s < 0.06);
}

static int slow_calls_;
static double slow_at_;
static void on_slow_(void *arg, double waited_s)
{
    (void)arg;
    slow_calls_++;
    slow_at_ = waited_s;
}

static void test_wait_timeout(void **state)
{
    (void)state;
    struct shm_flag f = {0};
    shm_flag_publish(&f, 5);
    struct shm_flag_wait_opts o = {.timeout_s = 0.4, .spin_count = 10, .on_slow = on_slow_};
    assert_int_equal(shm_flag_wait(&f, 5, &o), 0); // already there: no wait
    double t0 = util_now_s();
    assert_int_equal(shm_flag_wait(&f, 6, &o), VGPU_ETIMEOUT);
    double took = util_now_s() - t0;
    assert_true(took >= 0.4 && took < 0.7);
    assert_int_equal(slow_calls_, 1);
    assert_true(slow_at_ >= 0.2 && slow_at_ < 0.35);
}

// A publish from another process wakes a sleeping waiter promptly.
static void test_wait_wakes(void **state)
{
    (void)state;
    struct shm_flag *f = shared_alloc_(sizeof *f);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        usleep(200000);
        shm_flag_publish(f, 1);
        _exit(0);
    }
    struct shm_flag_wait_opts o = {.timeout_s = 5, .spin_count = 0};
    double t0 = util_now_s();
    assert_int_equal(shm_flag_wait(f, 1, &o), 0);
    double took = util_now_s() - t0;
    assert_true(took >= 0.15 && took < 1.0);
    assert_int_equal(reap_(&pid, 1), 0);
    munmap(f, sizeof *f);
}

// ---- ring schedule ----

#define WIN_BYTES (8u << 20)

struct ring_world {
    struct ring_slot slot[8];
    int order[8];
    char pad_[64];
};

static float value_(int rank, uint64_t i) { return (float)((rank * 5 + i * 7) % 9 + 1); }

// Memory operations as a device runs them: queued, done only when settled
// (in order, as a stream does). A schedule that told a neighbour a step was
// done before settling it would hand over stale data and fail the checks.
struct deferred_op {
    int kind; // 0 reduce, 1 copy
    void *dst;
    const void *a, *b;
    uint64_t n;
    int dtype, op, avg_div;
};
struct deferred {
    struct deferred_op op[64];
    int count;
    long settles;
};

static int deferred_settle_(void *ctx)
{
    struct deferred *d = ctx;
    for (int i = 0; i < d->count; i++) {
        const struct deferred_op *o = &d->op[i];
        if (o->kind == 1) {
            memmove(o->dst, o->a, o->n);
            continue;
        }
        for (uint64_t k = 0; k < o->n; k++)
            switch (o->dtype) { // comm.h's types, by kernels.h's functions as a device's
            case COMM_FLOAT32: kernel_reduce_f32(k, o->dst, o->a, o->b, o->op, o->avg_div); break;
            case COMM_FLOAT64: kernel_reduce_f64(k, o->dst, o->a, o->b, o->op, o->avg_div); break;
            case COMM_INT32: kernel_reduce_i32(k, o->dst, o->a, o->b, o->op, o->avg_div); break;
            default: kernel_reduce_i64(k, o->dst, o->a, o->b, o->op, o->avg_div); break;
            }
    }
    d->count = 0;
    d->settles++;
    return 0;
}

static int deferred_push_(struct deferred *d, struct deferred_op o)
{
    if (d->count == (int)(sizeof d->op / sizeof d->op[0]))
        return VGPU_EINVAL; // the engine issues a few operations between settles
    d->op[d->count++] = o;
    return 0;
}

static int deferred_reduce_(void *ctx, void *dst, const void *mine, const void *theirs, uint64_t n,
                            int dtype, int op, int avg_div)
{
    return deferred_push_(ctx, (struct deferred_op){0, dst, mine, theirs, n, dtype, op, avg_div});
}

static int deferred_copy_(void *ctx, void *dst, const void *src, uint64_t bytes)
{
    return deferred_push_(ctx, (struct deferred_op){1, dst, src, NULL, bytes, 0, 0, 0});
}

// Values whose float sum depends on the order of the additions.
static float frac_(int rank, uint64_t i) { return 1.0f / (float)(3 + rank * 7 + i % 11) + 1e-4f * (float)i; }

// The latency path (or the direct all-reduce): every count of the test
// through the forced algorithm; the result must be the sum in position
// order, bit for bit, on every rank, with the ranks in place and out of
// place by turns (half of them each way), nothing written past the count,
// and doubles (8-byte elements) summed exactly.
static long shot_checks_(struct ring_core *r, int n, int me)
{
    long wrong = 0;
    const float guard = -12345.0f;
    const uint64_t counts[] = {0, 1, (uint64_t)n - 1, (uint64_t)n, (uint64_t)n + 1, 1000, 100003};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        for (int turn = 0; turn < 2; turn++) {
            const int in_place = (turn + me) & 1;
            const uint64_t count = counts[k];
            float *send = (float *)(r->win + 4096 * (k + 1));
            float *recv = in_place ? send : send + count + 64;
            for (uint64_t i = 0; i < count; i++)
                send[i] = frac_(me, i);
            recv[count] = guard;
            if (ring_core_all_reduce(r, send, recv, count, COMM_FLOAT32, COMM_AVG) < 0)
                return 1000000;
            for (uint64_t i = 0; i < count; i++) {
                float sum = frac_(0, i);
                for (int q = 1; q < n; q++)
                    sum += frac_(q, i);
                wrong += memcmp(&recv[i], &(float){sum / (float)n}, sizeof(float)) != 0;
            }
            wrong += recv[count] != guard;
        }
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        const uint64_t count = counts[k];
        double *buf = (double *)(r->win + (4u << 20) + 8192 * k);
        for (uint64_t i = 0; i < count; i++)
            buf[i] = (double)(me + 1) * 1e12 + (double)i;
        buf[count] = -1;
        if (ring_core_all_reduce(r, buf, buf, count, COMM_FLOAT64, COMM_SUM) < 0)
            return 1000000;
        for (uint64_t i = 0; i < count; i++)
            wrong += buf[i] != (double)n * (n + 1) / 2 * 1e12 + (double)n * (double)i;
        wrong += buf[count] != -1;
    }
    return wrong;
}

// Every position's link, as comm_ring.c maps them for the direct all-reduce.
static void all_links_(struct ring_world *w, char *wins, int n, struct ring_link *all)
{
    for (int q = 0; q < n; q++)
        all[q] = (struct ring_link){.rank = q, .local = 1, .slot = &w->slot[q],
                                    .win = wins + (size_t)q * WIN_BYTES, .win_bytes = WIN_BYTES};
}

// The sizes ring_algo.c's table gives n ranks on one host, and the latency
// path's scratch for them, as comm_ring.c sets them up.
static void tune_(struct ring_tune *tune, struct ring_shot *shot, int n, int over, int direct,
                  enum ring_algo forced)
{
    const struct ring_algo_facts f = {.ranks = n, .one_host = 1, .oversubscribed = over,
                                      .direct = direct, .forced = forced};
    ring_algo_tune(tune, &f);
    shot->cap_bytes = ring_algo_scratch_bytes(tune);
}

// One rank's whole test; returns the number of wrong results. deferred: its
// windows are touched as a device's are (through ring_mem_ops). shot: the
// latency path with the algorithm forced (NULL: the ring always). direct:
// every window is mapped writable (the direct all-reduce).
static long rank_main_(struct ring_world *w, char *wins, int n, int me, uint64_t slice,
                       int deferred, struct ring_shot *shot, int direct,
                       const struct ring_tune *tune)
{
    static struct deferred queue;
    const struct ring_mem_ops ops = {deferred_reduce_, deferred_copy_, deferred_settle_, &queue};
    struct ring_core r;
    memset(&r, 0, sizeof r);
    r.pos = me;
    r.size = n;
    r.order = w->order;
    r.rank = me;
    r.me = &w->slot[me];
    r.win = wins + (size_t)me * WIN_BYTES;
    r.win_bytes = WIN_BYTES;
    r.left = (struct ring_link){.rank = (me + n - 1) % n, .local = 1,
                                .slot = &w->slot[(me + n - 1) % n],
                                .win = wins + (size_t)((me + n - 1) % n) * WIN_BYTES,
                                .win_bytes = WIN_BYTES};
    r.right = (struct ring_link){.rank = (me + 1) % n, .local = 1, .slot = &w->slot[(me + 1) % n]};
    r.slice_bytes = slice;
    r.mpi = MPI_COMM_NULL;
    r.timeout_s = 20;
    r.spin_count = 50;
    r.mem = deferred ? &ops : NULL;
    r.shot = shot;
    r.tune = *tune;
    struct ring_link all[8];
    all_links_(w, wins, n, all);
    r.all = direct ? all : NULL;
    // Device-like memory takes the ring, whose order of additions is its own.
    if (direct && ring_algo_for(&r, 1ull << 30) != (deferred ? RING_ALGO_RING : RING_ALGO_DIRECT))
        return 1000000;
    long wrong = shot || (direct && !deferred) ? shot_checks_(&r, n, me) : 0;
    const uint64_t counts[] = {0, 1, (uint64_t)n - 1, (uint64_t)n, (uint64_t)n + 1, 1000, 100003};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        for (int variant = 0; variant < 4; variant++) {
            const uint64_t count = counts[k];
            const int in_place = (variant + me) & 1; // some ranks in place, some not
            const enum comm_reduce_op op = variant & 2 ? COMM_AVG : COMM_SUM;
            // Buffers move around between calls, as a real caller's would.
            float *send = (float *)(r.win + 4096 * (k + 1));
            float *recv = in_place ? send : send + count + 64;
            for (uint64_t i = 0; i < count; i++) {
                send[i] = value_(me, i);
                if (!in_place)
                    recv[i] = -1;
            }
            if (ring_core_all_reduce(&r, send, recv, count, COMM_FLOAT32, op) < 0)
                return 1000000;
            for (uint64_t i = 0; i < count; i++) {
                float sum = 0;
                for (int q = 0; q < n; q++)
                    sum += value_(q, i);
                wrong += recv[i] != (op == COMM_AVG ? sum / (float)n : sum);
                if (!in_place)
                    wrong += send[i] != value_(me, i);
            }
        }
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        const uint64_t bytes = counts[k] * 3 + 1;
        char *recv = r.win + 64 * k;
        const uint64_t stride = bytes + 5;
        char *send = recv + (uint64_t)n * stride + 8;
        for (uint64_t i = 0; i < bytes; i++)
            send[i] = (char)(me * 13 + i);
        if (ring_core_all_gather(&r, send, recv, bytes, stride) < 0)
            return 1000000;
        for (int q = 0; q < n; q++)
            for (uint64_t i = 0; i < bytes; i++)
                wrong += recv[(uint64_t)q * stride + i] != (char)(q * 13 + i);
        for (int root = 0; root < n; root += n > 2 ? n - 2 : 1) {
            char *buf = r.win + 1000 + 8 * k;
            for (uint64_t i = 0; i < bytes; i++)
                buf[i] = me == root ? (char)(root + i * 3) : 0;
            if (ring_core_broadcast(&r, buf, bytes, root) < 0)
                return 1000000;
            for (uint64_t i = 0; i < bytes; i++)
                wrong += buf[i] != (char)(root + i * 3);
        }
        if (ring_core_barrier(&r) < 0)
            return 1000000;
    }
    return wrong;
}

static void run_ring_algo_(int n, uint64_t slice, int deferred, enum ring_algo algo)
{
    struct ring_world *w = shared_alloc_(sizeof *w);
    char *wins = shared_alloc_((size_t)n * WIN_BYTES);
    for (int q = 0; q < n; q++)
        w->order[q] = q;
    // Auto as comm_ring.c sets it up on one host: one-shot, then direct.
    const int direct = algo == RING_ALGO_DIRECT || algo == RING_ALGO_AUTO;
    struct ring_shot shot = {.slot = w->slot};
    struct ring_tune tune;
    tune_(&tune, &shot, n, 1, direct, algo);
    shot.stride = ring_shot_stride(shot.cap_bytes, n);
    shot.buf_bytes = shot.stride / 2;
    shot.scratch = shot.cap_bytes ? shared_alloc_((size_t)n * shot.stride) : NULL;
    pid_t pids[8];
    for (int me = 0; me < n; me++) {
        pids[me] = fork();
        assert_true(pids[me] >= 0);
        if (pids[me] == 0) {
            long wrong = rank_main_(w, wins, n, me, slice, deferred,
                                    shot.cap_bytes ? &shot : NULL, direct, &tune);
            if (wrong)
                fprintf(stderr, "ring n=%d slice=%llu%s %s rank %d: %ld wrong\n", n,
                        (unsigned long long)slice, deferred ? " (deferred)" : "",
                        ring_algo_name(algo), me, wrong);
            _exit(wrong ? 1 : 0);
        }
    }
    assert_int_equal(reap_(pids, n), 0);
    if (shot.scratch)
        munmap(shot.scratch, (size_t)n * shot.stride);
    munmap(wins, (size_t)n * WIN_BYTES);
    munmap(w, sizeof *w);
}

static void run_ring_(int n, uint64_t slice, int deferred)
{
    run_ring_algo_(n, slice, deferred, RING_ALGO_RING);
}

// The latency path's algorithms, each on its own and then with the ring's
// collectives (all-gather, broadcast, barrier) between its calls.
static void test_shot_schedule(void **state)
{
    (void)state;
    for (int n = 2; n <= 5; n++) {
        run_ring_algo_(n, 4096, 0, RING_ALGO_ONE_SHOT);
        run_ring_algo_(n, 4096, 0, RING_ALGO_TWO_SHOT);
    }
}

// The direct all-reduce (ring_direct.c) on its own and with the ring's other
// collectives between its calls, at slices that cut the ring into rounds or
// not (direct ignores them); on device-like memory it is not usable and the
// ring runs instead.
static void test_direct_schedule(void **state)
{
    (void)state;
    for (int n = 2; n <= 5; n++) {
        run_ring_algo_(n, 256, 0, RING_ALGO_DIRECT);
        run_ring_algo_(n, 64 << 10, 0, RING_ALGO_DIRECT);
        run_ring_algo_(n, 4096, 0, RING_ALGO_AUTO); // one-shot up to its size, direct above
    }
    run_ring_algo_(3, 256, 1, RING_ALGO_DIRECT);
}

// Three ranks, one of which passes a buffer that runs past its window: it
// fails before it arrives, and the others, which then wait for it until
// their bound, write into no one's buffers and leave theirs as they were.
static void test_direct_bad_buffer(void **state)
{
    (void)state;
    enum { N = 3 };
    struct ring_world *w = shared_alloc_(sizeof *w);
    char *wins = shared_alloc_(N * (size_t)WIN_BYTES);
    for (int q = 0; q < N; q++)
        w->order[q] = q;
    pid_t pids[N];
    for (int me = 0; me < N; me++) {
        pids[me] = fork();
        assert_true(pids[me] >= 0);
        if (pids[me] != 0)
            continue;
        struct ring_core r = {.pos = me, .size = N, .order = w->order, .rank = me,
                              .me = &w->slot[me], .win = wins + (size_t)me * WIN_BYTES,
                              .win_bytes = WIN_BYTES, .mpi = MPI_COMM_NULL, .timeout_s = 0.5,
                              .spin_count = 50};
        struct ring_link all[N];
        all_links_(w, wins, N, all);
        r.all = all;
        struct ring_shot none = {0}; // direct forced: no latency path
        tune_(&r.tune, &none, N, 1, 1, RING_ALGO_DIRECT);
        r.left = all[(me + N - 1) % N];
        r.right = all[(me + 1) % N];
        const uint64_t count = 4096;
        float *buf = (float *)(r.win + (me == 1 ? WIN_BYTES - 1000 : 0));
        const uint64_t have = me == 1 ? 250 : count; // what lies inside the window
        for (uint64_t i = 0; i < have; i++)
            buf[i] = (float)(me + 1);
        const int rc = ring_core_all_reduce(&r, buf, buf, count, COMM_FLOAT32, COMM_SUM);
        int ok = me == 1 ? rc == VGPU_EINVAL : rc == VGPU_ETIMEOUT;
        usleep(200000); // a late writer would have written by now
        for (uint64_t i = 0; i < have; i++)
            ok &= buf[i] == (float)(me + 1);
        _exit(ok ? 0 : 1);
    }
    assert_int_equal(reap_(pids, N), 0);
    munmap(wins, N * (size_t)WIN_BYTES);
    munmap(w, sizeof *w);
}

// Two ranks that call the direct all-reduce with different counts both fail
// at once, before either writes a byte into the other's buffers (their
// chunks would overlap); a broken ring refuses what follows.
static void test_direct_mismatch(void **state)
{
    (void)state;
    struct ring_world *w = shared_alloc_(sizeof *w);
    char *wins = shared_alloc_(2 * (size_t)WIN_BYTES);
    w->order[0] = 0;
    w->order[1] = 1;
    pid_t pids[2];
    for (int me = 0; me < 2; me++) {
        pids[me] = fork();
        assert_true(pids[me] >= 0);
        if (pids[me] != 0)
            continue;
        struct ring_core r = {.pos = me, .size = 2, .order = w->order, .rank = me,
                              .me = &w->slot[me], .win = wins + (size_t)me * WIN_BYTES,
                              .win_bytes = WIN_BYTES, .mpi = MPI_COMM_NULL, .timeout_s = 20,
                              .spin_count = 50};
        struct ring_link all[2];
        all_links_(w, wins, 2, all);
        r.all = all;
        struct ring_shot none = {0}; // direct forced: no latency path
        tune_(&r.tune, &none, 2, 1, 1, RING_ALGO_DIRECT);
        r.left = all[1 - me];
        r.right = all[1 - me];
        float *buf = (float *)r.win;
        const uint64_t count = me ? 5000 : 4000;
        for (uint64_t i = 0; i < count; i++)
            buf[i] = (float)(me + 1);
        const double t0 = util_now_s();
        int rc = ring_core_all_reduce(&r, buf, buf, count, COMM_FLOAT32, COMM_SUM);
        int ok = rc == VGPU_ECOMM && r.broken && util_now_s() - t0 < 2.0;
        for (uint64_t i = 0; i < count; i++) // neither rank wrote into the other's
            ok &= buf[i] == (float)(me + 1);
        // A broken ring refuses what follows, at once.
        ok &= ring_core_all_reduce(&r, buf, buf, 8, COMM_FLOAT32, COMM_SUM) == VGPU_ECOMM;
        _exit(ok ? 0 : 1);
    }
    assert_int_equal(reap_(pids, 2), 0);
    munmap(wins, 2 * (size_t)WIN_BYTES);
    munmap(w, sizeof *w);
}

// The ring's wait for a same-host neighbour (ring_wait, over shm_flag_wait)
// ends at its bound r->timeout_s, by the clock, from both sides: a neighbour
// that never arrives fails the all-reduce with VGPU_ETIMEOUT after 0.4 s, not
// sooner, and not as late as 0.7 s (a bound applied twice over takes 0.8 s;
// 0.3 s is the slack for a loaded machine); one warning at half of it, one
// report of the timeout, both naming the neighbour; the ring is broken after.
// One process: position 1's slot is there, but nothing ever publishes it.
static void test_ring_wait_timeout(void **state)
{
    (void)state;
    const double bound_s = 0.4, slack_s = 0.3;
    struct ring_world *w = shared_alloc_(sizeof *w);
    char *wins = shared_alloc_(2 * (size_t)WIN_BYTES);
    w->order[0] = 0;
    w->order[1] = 1;
    struct wait_reports got = {.peer = -1};
    struct ring_core r = {.pos = 0, .size = 2, .order = w->order, .rank = 0,
                          .me = &w->slot[0], .win = wins, .win_bytes = WIN_BYTES,
                          .slice_bytes = 1 << 20, .mpi = MPI_COMM_NULL, .timeout_s = bound_s,
                          .spin_count = 50, .report = record_report_, .report_arg = &got};
    r.left = (struct ring_link){.rank = 1, .local = 1, .slot = &w->slot[1],
                                .win = wins + WIN_BYTES, .win_bytes = WIN_BYTES};
    r.right = (struct ring_link){.rank = 1, .local = 1, .slot = &w->slot[1]};
    float *buf = (float *)r.win;
    const double t0 = util_now_s();
    assert_int_equal(ring_core_all_reduce(&r, buf, buf, 64, COMM_FLOAT32, COMM_SUM), VGPU_ETIMEOUT);
    const double ended = util_now_s();
    assert_int_equal(wait_reports_misses(&got, 1, t0, ended, bound_s, slack_s), 0);
    assert_true(r.broken);
    assert_int_equal(ring_core_all_reduce(&r, buf, buf, 64, COMM_FLOAT32, COMM_SUM), VGPU_ECOMM);
    munmap(wins, 2 * (size_t)WIN_BYTES);
    munmap(w, sizeof *w);
}

// The choice by size at the measured crossovers (ring_algo.c), at both
// sides of each, and where it never applies: first without the direct
// all-reduce (forced otherwise, or too many ranks), then with it.
static void test_shot_choice(void **state)
{
    (void)state;
    struct ring_shot shot = {0};
    struct ring_core r = {.size = 4, .shot = &shot};
    const struct {
        int n, over;
        enum ring_algo forced;
        uint64_t bytes;
        enum ring_algo want;
    } cases[] = {
        {2, 0, RING_ALGO_AUTO, 0, RING_ALGO_ONE_SHOT},
        {2, 0, RING_ALGO_AUTO, 8192, RING_ALGO_ONE_SHOT},
        {2, 0, RING_ALGO_AUTO, 8193, RING_ALGO_RING},
        {4, 0, RING_ALGO_AUTO, 8193, RING_ALGO_RING},
        {2, 1, RING_ALGO_AUTO, 32768, RING_ALGO_ONE_SHOT},
        {2, 1, RING_ALGO_AUTO, 32769, RING_ALGO_RING},
        {3, 1, RING_ALGO_AUTO, 131072, RING_ALGO_ONE_SHOT},
        {3, 1, RING_ALGO_AUTO, 131073, RING_ALGO_RING},
        {4, 1, RING_ALGO_AUTO, 32768, RING_ALGO_ONE_SHOT},
        {4, 1, RING_ALGO_AUTO, 32769, RING_ALGO_TWO_SHOT},
        {4, 1, RING_ALGO_AUTO, 524288, RING_ALGO_TWO_SHOT},
        {4, 1, RING_ALGO_AUTO, 524289, RING_ALGO_RING},
        {8, 1, RING_ALGO_AUTO, 524289, RING_ALGO_RING},
        {4, 1, RING_ALGO_RING, 8, RING_ALGO_RING},
        {4, 0, RING_ALGO_ONE_SHOT, 4u << 20, RING_ALGO_ONE_SHOT},
        {4, 0, RING_ALGO_ONE_SHOT, (4u << 20) + 1, RING_ALGO_RING},
        {4, 0, RING_ALGO_TWO_SHOT, 8, RING_ALGO_TWO_SHOT},
        {4, 0, RING_ALGO_TWO_SHOT, 0, RING_ALGO_ONE_SHOT}, // a barrier: nothing to split
        {4, 0, RING_ALGO_TWO_SHOT, (4u << 20) + 1, RING_ALGO_RING},
        {2, 0, RING_ALGO_DIRECT, 0, RING_ALGO_RING}, // not usable here: no windows (r.all)
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        r.size = cases[i].n;
        tune_(&r.tune, &shot, cases[i].n, cases[i].over, 0, cases[i].forced);
        enum ring_algo got = ring_algo_for(&r, cases[i].bytes);
        if (got != cases[i].want)
            fail_msg("case %zu: n=%d %s %llu bytes: %s, want %s", i, cases[i].n,
                     cases[i].over ? "oversubscribed" : "a core each",
                     (unsigned long long)cases[i].bytes, ring_algo_name(got),
                     ring_algo_name(cases[i].want));
    }
    // Device windows (r.mem) and a single rank never take it.
    const struct ring_mem_ops ops = {0};
    tune_(&r.tune, &shot, 4, 1, 0, RING_ALGO_AUTO);
    r.size = 4;
    r.mem = &ops;
    assert_int_equal(ring_algo_for(&r, 8), RING_ALGO_RING);
    r.mem = NULL;
    r.size = 1;
    assert_int_equal(ring_algo_for(&r, 8), RING_ALGO_RING);

    // Every window mapped writable: one-shot up to the measured crossover,
    // direct above (two-shot never); forced, direct at every size; never
    // on device memory.
    struct ring_link all[4] = {{0}};
    r.all = all;
    const struct {
        int n, over;
        uint64_t one_shot;
    } direct_cases[] = {{2, 0, 1024}, {3, 0, 1024}, {4, 0, 1024},
                        {2, 1, 65536}, {3, 1, 16384}, {4, 1, 8192}};
    for (size_t i = 0; i < sizeof direct_cases / sizeof direct_cases[0]; i++) {
        r.size = direct_cases[i].n;
        tune_(&r.tune, &shot, r.size, direct_cases[i].over, 1, RING_ALGO_AUTO);
        const uint64_t b = direct_cases[i].one_shot;
        if (ring_algo_for(&r, b) != RING_ALGO_ONE_SHOT ||
            ring_algo_for(&r, b + 1) != RING_ALGO_DIRECT ||
            ring_algo_for(&r, 1ull << 30) != RING_ALGO_DIRECT)
            fail_msg("direct case %zu: n=%d %s: %s at %llu bytes, %s above", i, r.size,
                     direct_cases[i].over ? "oversubscribed" : "a core each",
                     ring_algo_name(ring_algo_for(&r, b)), (unsigned long long)b,
                     ring_algo_name(ring_algo_for(&r, b + 1)));
    }
    r.size = 2;
    tune_(&r.tune, &shot, 2, 0, 1, RING_ALGO_DIRECT);
    assert_int_equal(ring_algo_for(&r, 0), RING_ALGO_DIRECT);
    r.mem = &ops;
    assert_int_equal(ring_algo_for(&r, 4096), RING_ALGO_RING);
}

static void ring_algo_forced_into_(void *out) { *(enum ring_algo *)out = ring_algo_forced(); }

// What fn(arg) writes on stderr (a warning's text), as a string to free.
static char *stderr_of_(void (*fn)(void *), void *arg)
{
    fflush(stderr);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    const int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    dup2(fileno(tmp), STDERR_FILENO);
    fn(arg);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    assert_int_equal(fseek(tmp, 0, SEEK_END), 0);
    const long bytes = ftell(tmp);
    assert_true(bytes >= 0);
    char *text = calloc(1, (size_t)bytes + 1);
    assert_non_null(text);
    rewind(tmp);
    assert_int_equal(fread(text, 1, (size_t)bytes, tmp), (size_t)bytes);
    fclose(tmp);
    return text;
}

// ring_algo.c's tables at the edges of every range, for rank counts at and
// beside each row's bounds: one-shot up to `one` bytes, two-shot above it up
// to `two`, then `above` (-1: no latency path). A bound moved by one byte, a
// row that takes other rank counts, or VGPU_RING_ALGO mapped onto another
// row fails here (the forced rows are generated from the algorithms'
// descriptors: a forced cap moved by a byte fails too). Every algorithm's
// name forces it; an unknown value is said, with every name, and means auto.
static void test_algo_table(void **state)
{
    (void)state;
    enum { AUTO = RING_ALGO_AUTO, RING = RING_ALGO_RING, ONE = RING_ALGO_ONE_SHOT,
           TWO = RING_ALGO_TWO_SHOT, DIRECT = RING_ALGO_DIRECT };
    const int64_t none = -1, mib4 = 4 << 20;
    const struct {
        int forced, over, direct, n;
        int64_t one, two;
        int above;
    } cases[] = {
        {AUTO, 0, 1, 2, 1024, 1024, DIRECT},    {AUTO, 0, 1, 3, 1024, 1024, DIRECT},
        {AUTO, 0, 1, 64, 1024, 1024, DIRECT},   {AUTO, 1, 1, 2, 65536, 65536, DIRECT},
        {AUTO, 1, 1, 3, 16384, 16384, DIRECT},  {AUTO, 1, 1, 4, 8192, 8192, DIRECT},
        {AUTO, 1, 1, 5, 8192, 8192, DIRECT},    {AUTO, 1, 1, 64, 8192, 8192, DIRECT},
        {AUTO, 0, 0, 2, 8192, 8192, RING},      {AUTO, 0, 0, 5, 8192, 8192, RING},
        {AUTO, 0, 0, 65, 8192, 8192, RING},     {AUTO, 1, 0, 2, 32768, 32768, RING},
        {AUTO, 1, 0, 3, 131072, 131072, RING},  {AUTO, 1, 0, 4, 32768, 524288, RING},
        {AUTO, 1, 0, 5, 32768, 524288, RING},   {AUTO, 1, 0, 65, 32768, 524288, RING},
        {AUTO, 1, 0, 1, none, none, RING},      {AUTO, 0, 1, 1, none, none, RING},
        {ONE, 0, 0, 2, mib4, mib4, RING},       {ONE, 1, 0, 65, mib4, mib4, RING},
        {ONE, 0, 1, 3, mib4, mib4, RING},       {ONE, 0, 0, 1, none, none, RING},
        {TWO, 0, 0, 2, 0, mib4, RING},          {TWO, 1, 0, 4, 0, mib4, RING},
        {TWO, 1, 1, 4, 0, mib4, RING},          {TWO, 1, 0, 1, none, none, RING},
        {RING, 1, 0, 4, none, none, RING},      {RING, 0, 0, 2, none, none, RING},
        {RING, 1, 1, 3, none, none, RING},      {DIRECT, 1, 1, 3, none, none, DIRECT},
        {DIRECT, 0, 1, 64, none, none, DIRECT}, {DIRECT, 1, 0, 3, none, none, RING},
        {DIRECT, 0, 1, 1, none, none, RING},
    };
    struct ring_shot shot = {0};
    struct ring_link all[1] = {{0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ring_core r = {.size = cases[i].n, .shot = &shot,
                              .all = cases[i].direct ? all : NULL};
        tune_(&r.tune, &shot, cases[i].n, cases[i].over, cases[i].direct,
              (enum ring_algo)cases[i].forced);
        const int64_t one = cases[i].one, two = cases[i].two;
        assert_int_equal(shot.cap_bytes, two < 0 ? 0 : (uint64_t)two);
        const int64_t probes[] = {0, one, one + 1, two, two + 1, 1 << 30};
        for (size_t k = 0; k < sizeof probes / sizeof probes[0]; k++) {
            const int64_t b = probes[k];
            if (b < 0)
                continue;
            const int want = b <= one ? ONE : b <= two ? TWO : cases[i].above;
            const enum ring_algo got = ring_algo_for(&r, (uint64_t)b);
            if ((int)got != want)
                fail_msg("case %zu: n=%d %s%s VGPU_RING_ALGO=%s, %lld bytes: %s, want %s", i,
                         cases[i].n, cases[i].over ? "oversubscribed" : "a core each",
                         cases[i].direct ? ", direct" : "",
                         cases[i].forced == AUTO ? "auto" : ring_algo_name(cases[i].forced),
                         (long long)b, ring_algo_name(got), ring_algo_name(want));
        }
        // Direct runs where every rank would have it: auto or forced, 2 to 64 ranks.
        const struct ring_algo_facts f = {.ranks = cases[i].n, .one_host = 1,
                                          .oversubscribed = cases[i].over,
                                          .forced = (enum ring_algo)cases[i].forced};
        assert_int_equal(ring_algo_direct_wanted(&f), (cases[i].forced == AUTO ||
                                                       cases[i].forced == DIRECT) &&
                                                          cases[i].n >= 2 && cases[i].n <= 64);
        // Ranks on several hosts, or on device windows: the ring alone.
        struct ring_algo_facts apart = f;
        apart.one_host = 0;
        apart.direct = cases[i].direct;
        struct ring_tune t;
        ring_algo_tune(&t, &apart);
        for (int a = 0; a < RING_ALGO_COUNT; a++)
            assert_int_equal(t.end_bytes[a], 0);
        assert_int_equal(ring_algo_direct_wanted(&apart), 0);
    }
    // VGPU_RING_ALGO's values: each algorithm's name forces it, every name
    // is its own, and the names the forced rows above use are theirs.
    for (int a = 0; a < RING_ALGO_COUNT; a++) {
        setenv("VGPU_RING_ALGO", ring_algo_name((enum ring_algo)a), 1);
        env_reset();
        assert_int_equal(ring_algo_forced(), a);
        for (int b = 0; b < a; b++)
            assert_string_not_equal(ring_algo_name((enum ring_algo)a),
                                    ring_algo_name((enum ring_algo)b));
    }
    const char *const names[] = {"ring", "one-shot", "two-shot", "direct"};
    const int named[] = {RING, ONE, TWO, DIRECT};
    for (int k = 0; k < 4; k++)
        assert_string_equal(ring_algo_name((enum ring_algo)named[k]), names[k]);
    // auto, unset and an unknown value (said, with every name) mean auto.
    const char *const autos[] = {"auto", "", "one_shot", NULL};
    for (int k = 0; k < 4; k++) {
        if (autos[k])
            setenv("VGPU_RING_ALGO", autos[k], 1);
        else
            unsetenv("VGPU_RING_ALGO");
        env_reset();
        enum ring_algo got = RING_ALGO_COUNT;
        char *said = stderr_of_(ring_algo_forced_into_, &got);
        assert_int_equal(got, RING_ALGO_AUTO);
        if (k != 2) {
            assert_string_equal(said, "");
        } else {
            assert_non_null(strstr(said, "VGPU_RING_ALGO=one_shot"));
            assert_non_null(strstr(said, "auto, "));
            for (int a = 0; a < RING_ALGO_COUNT; a++)
                assert_non_null(strstr(said, ring_algo_name((enum ring_algo)a)));
        }
        free(said);
    }
    unsetenv("VGPU_RING_ALGO");
    env_reset();
}

static void test_ring_schedule(void **state)
{
    (void)state;
    for (int n = 1; n <= 5; n++) {
        run_ring_(n, 256, 0);      // many rounds: every pipelining boundary
        run_ring_(n, 64 << 10, 0); // the whole buffer in one or two rounds
    }
}

// The same schedule with device-like memory operations (ring_mem.h): what
// the CUDA IPC windows run, checked here on host memory.
static void test_ring_schedule_deferred(void **state)
{
    (void)state;
    for (int n = 1; n <= 5; n++) {
        run_ring_(n, 256, 1);
        run_ring_(n, 64 << 10, 1);
    }
}

static void test_ring_chunks(void **state)
{
    (void)state;
    // Chunks tile [0, n) exactly, in order, each starting on a 16-float boundary.
    for (int parts = 1; parts <= 7; parts++)
        for (uint64_t n = 0; n < 300; n++) {
            uint64_t next = 0;
            for (int c = 0; c < parts; c++) {
                uint64_t lo, hi;
                ring_chunk(n, parts, c, &lo, &hi);
                assert_int_equal(lo, next);
                assert_true(hi >= lo && hi <= n);
                assert_true(lo == n || lo % 16 == 0);
                next = hi;
            }
            assert_int_equal(next, n);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_ping_pong_futex),
        cmocka_unit_test(test_wait_ping_pong_spin),
        cmocka_unit_test(test_wait_ping_pong_yield),
        cmocka_unit_test(test_wait_yield_bounded),
        cmocka_unit_test(test_wait_timeout),
        cmocka_unit_test(test_wait_wakes),
        cmocka_unit_test(test_ring_chunks),
        cmocka_unit_test(test_ring_schedule),
        cmocka_unit_test(test_ring_schedule_deferred),
        cmocka_unit_test(test_shot_choice),
        cmocka_unit_test(test_algo_table),
        cmocka_unit_test(test_shot_schedule),
        cmocka_unit_test(test_direct_schedule),
        cmocka_unit_test(test_direct_mismatch),
        cmocka_unit_test(test_direct_bad_buffer),
        cmocka_unit_test(test_ring_wait_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
