// test_ring_links.c: the ring engine's schedule over MPI links (hosts of
// one or more ranks: MPI between hosts, shared memory inside one), run by
// fork()ed processes whose MPI point-to-point calls are replaced at link
// time (--wrap) by a mailbox in shared memory with the two properties that
// hurt a careless schedule:
// - like TCP's rendezvous, data moves only while the SENDER is inside an MPI
//   call (any MPI_Test progresses all its sends), so a rank that leaves a
//   send in flight and waits on shared memory can deadlock the ring;
// - the receiver takes its time: a message moves only after its receive has
//   been polled a few times, some hundred microseconds, so a schedule that
//   writes over a buffer whose send is still in flight, or returns before
//   its sends are complete, hands over wrong data here, not by chance;
// - messages complete out of order (an odd-numbered message needs more
//   polls than the even one after it), as MPI allows: a transfer of
//   several messages is complete only when all of them are.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ring_internal.h"
#include "status.h"
#include "test_ring_waits.h"
#include "util.h"

#define MAX_RANKS 8
#define QUEUE 256            // messages in flight on one link, at most
#define LAZY_POLLS 3         // a receive's polls before its message may move
#define LAZY_POLL_US 100     // ... each this long
#define WIN_BYTES (4u << 20) // each rank's buffers (shared: every rank maps them)
#define MAX_SENDS 128        // sends of one rank in flight

enum { MSG_FREE, MSG_POSTED, MSG_DELIVERED };

struct mock_msg {
    _Atomic int state;
    const void *buf; // the sender's data (shared memory, the same address everywhere)
    uint64_t bytes;
    void *rbuf;      // the receive's buffer, once posted (shared memory too)
    uint64_t rbytes;
    _Atomic int rposted;
    _Atomic int rpolls; // the receive's polls so far
    int rneed;          // polls before its message may move
};

// The messages into one rank, in the order its left sent them.
struct mock_link {
    _Atomic uint64_t sent; // messages posted by the sender
    struct mock_msg msg[QUEUE];
};

struct mock_req {
    int is_send;
    struct mock_msg *msg;
    uint64_t seq;
};

static struct mock_link *links_; // [MAX_RANKS], shared
static uint64_t received_;        // receives this rank has posted
static int me_;
static struct mock_req *sends_[MAX_SENDS]; // this rank's sends in flight
static int transport_errors_;

int __wrap_MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                     MPI_Comm comm, MPI_Request *req);
int __wrap_MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                     MPI_Request *req);
int __wrap_MPI_Test(MPI_Request *req, int *flag, MPI_Status *status);

int __wrap_MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                     MPI_Comm comm, MPI_Request *req)
{
    (void)type, (void)tag, (void)comm;
    struct mock_link *l = &links_[dest];
    const uint64_t seq = atomic_load(&l->sent);
    struct mock_msg *m = &l->msg[seq % QUEUE];
    while (atomic_load(&m->state) != MSG_FREE) // the queue is deep enough: never long
        usleep(10);
    m->buf = buf;
    m->bytes = (uint64_t)count;
    atomic_store(&m->state, MSG_POSTED);
    atomic_store(&l->sent, seq + 1);
    struct mock_req *r = calloc(1, sizeof *r);
    *r = (struct mock_req){.is_send = 1, .msg = m, .seq = seq};
    int k = 0;
    while (k < MAX_SENDS && sends_[k])
        k++;
    assert_true(k < MAX_SENDS);
    sends_[k] = r;
    *req = (MPI_Request)r;
    return MPI_SUCCESS;
}

int __wrap_MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                     MPI_Request *req)
{
    (void)type, (void)source, (void)tag, (void)comm;
    const uint64_t seq = received_++;
    struct mock_msg *m = &links_[me_].msg[seq % QUEUE];
    m->rbuf = buf;
    m->rbytes = (uint64_t)count;
    m->rneed = LAZY_POLLS + 4 * (int)(seq & 1);
    atomic_store(&m->rpolls, 0);
    atomic_store(&m->rposted, 1);
    struct mock_req *r = calloc(1, sizeof *r);
    *r = (struct mock_req){.msg = m, .seq = seq};
    *req = (MPI_Request)r;
    return MPI_SUCCESS;
}

// The sender's side of the transport: a message whose receive has been
// polled enough moves now (only here, inside the sender's MPI calls).
static void progress_sends_(void)
{
    for (int k = 0; k < MAX_SENDS; k++) {
        struct mock_msg *m = sends_[k] ? sends_[k]->msg : NULL;
        if (!m || atomic_load(&m->state) != MSG_POSTED || !atomic_load(&m->rposted) ||
            atomic_load(&m->rpolls) < m->rneed)
            continue;
        if (m->rbytes != m->bytes) {
            fprintf(stderr, "rank %d: a message of %llu bytes met a receive of %llu\n", me_,
                    (unsigned long long)m->bytes, (unsigned long long)m->rbytes);
            transport_errors_++;
        }
        memcpy(m->rbuf, m->buf, m->bytes < m->rbytes ? m->bytes : m->rbytes);
        atomic_store(&m->state, MSG_DELIVERED);
    }
}

static void done_(MPI_Request *req, int *flag)
{
    free((struct mock_req *)*req);
    *req = MPI_REQUEST_NULL;
    *flag = 1;
}

int __wrap_MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    (void)status;
    *flag = 0;
    progress_sends_();
    if (*req == MPI_REQUEST_NULL) {
        *flag = 1;
        return MPI_SUCCESS;
    }
    struct mock_req *r = (struct mock_req *)*req;
    struct mock_msg *m = r->msg;
    if (r->is_send) {
        if (atomic_load(&m->state) == MSG_POSTED)
            return MPI_SUCCESS;
        for (int k = 0; k < MAX_SENDS; k++)
            if (sends_[k] == r)
                sends_[k] = NULL;
    } else {
        if (atomic_load(&m->state) != MSG_DELIVERED) {
            if (atomic_fetch_add(&m->rpolls, 1) < m->rneed)
                usleep(LAZY_POLL_US);
            return MPI_SUCCESS;
        }
        atomic_store(&m->rposted, 0);
        atomic_store(&m->state, MSG_FREE);
    }
    done_(req, flag);
    return transport_errors_ ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
}

static void *shared_alloc_(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    memset(p, 0, bytes);
    return p;
}

static float value_(int rank, uint64_t i) { return (float)((rank * 5 + i * 3) % 7 + 1); }

struct world {
    struct ring_slot slot[MAX_RANKS]; // same-host links' progress counters
    char *landing[MAX_RANKS];         // each rank's landing buffers (shared: senders write them)
};

// One rank's test on the all-reduce (in place or not) and the all-gather;
// ranks come per_host to a host, in ring order. Returns the wrong results.
static long rank_main_(struct world *w, char *wins, int n, int per_host, uint64_t slice,
                       uint64_t msg)
{
    static int order[MAX_RANKS];
    for (int q = 0; q < n; q++)
        order[q] = q;
    const int left = (me_ + n - 1) % n, right = (me_ + 1) % n;
    char *win = wins + (size_t)me_ * WIN_BYTES;
    struct ring_core r = {.pos = me_, .size = n, .order = order, .rank = me_,
                          .left = {.rank = left, .local = left / per_host == me_ / per_host,
                                   .slot = &w->slot[left], .win = wins + (size_t)left * WIN_BYTES,
                                   .win_bytes = WIN_BYTES},
                          .right = {.rank = right, .local = right / per_host == me_ / per_host,
                                    .slot = &w->slot[right]},
                          .me = &w->slot[me_], .win = win, .win_bytes = WIN_BYTES,
                          .slice_bytes = slice, .mpi = MPI_COMM_WORLD, .timeout_s = 5,
                          .spin_count = 10, .yield_s = 1e-4};
    r.landing_bytes = slice + 128;
    r.landing = w->landing[me_];
    assert_int_equal(ring_core_set_messages(&r, msg), 0);
    long wrong = 0;
    const uint64_t counts[] = {0, 1, (uint64_t)n + 1, 1000, 40003};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        for (int in_place = 0; in_place < 2; in_place++) {
            const uint64_t count = counts[k];
            float *send = (float *)win + 64 * k, *recv = in_place ? send : send + count + 64;
            for (uint64_t i = 0; i < count; i++)
                send[i] = value_(me_, i);
            if (ring_core_all_reduce(&r, send, recv, count, COMM_FLOAT32, COMM_SUM) < 0)
                return 1000000;
            // The caller may reuse its buffers at once: scribble over them.
            float got_last = count ? recv[count - 1] : 0;
            for (uint64_t i = 0; i + 1 < count; i++) {
                float sum = 0;
                for (int q = 0; q < n; q++)
                    sum += value_(q, i);
                wrong += recv[i] != sum;
                recv[i] = -7;
            }
            if (count) {
                float sum = 0;
                for (int q = 0; q < n; q++)
                    sum += value_(q, count - 1);
                wrong += got_last != sum;
            }
        }
    const uint64_t bytes = 30001;
    char *recv = win + (1u << 20), *mine = recv + (uint64_t)me_ * bytes;
    for (uint64_t i = 0; i < bytes; i++)
        mine[i] = (char)(me_ * 11 + i);
    if (ring_core_all_gather(&r, mine, recv, bytes, bytes) < 0)
        return 1000000;
    for (int q = 0; q < n; q++)
        for (uint64_t i = 0; i < bytes; i++)
            wrong += recv[(uint64_t)q * bytes + i] != (char)(q * 11 + i);
    // A broadcast from the last position: its chain crosses every link.
    char *bc = win + (2u << 20);
    for (uint64_t i = 0; i < bytes; i++)
        bc[i] = me_ == n - 1 ? (char)(i * 7 + 3) : 0;
    if (ring_core_broadcast(&r, bc, bytes, n - 1) < 0)
        return 1000000;
    for (uint64_t i = 0; i < bytes; i++)
        wrong += bc[i] != (char)(i * 7 + 3);
    // A barrier (empty steps: one empty message each over MPI) holds every
    // rank until the last arrives, 50 ms late.
    if (me_ == n - 1)
        usleep(50000);
    const double t0 = util_now_s();
    if (ring_core_barrier(&r) < 0)
        return 1000000;
    const double held = util_now_s() - t0;
    if (me_ != n - 1 && held < 0.04) {
        fprintf(stderr, "rank %d: the barrier let it through after %.3f s, before the last rank\n",
                me_, held);
        wrong++;
    }
    ring_core_free_messages(&r);
    return wrong;
}

static void run_(int n, int per_host, uint64_t slice, uint64_t msg)
{
    links_ = shared_alloc_(MAX_RANKS * sizeof *links_);
    struct world *w = shared_alloc_(sizeof *w);
    char *wins = shared_alloc_((size_t)n * WIN_BYTES);
    const size_t landing = 2 * (slice + 128);
    for (int q = 0; q < n; q++)
        w->landing[q] = shared_alloc_(landing);
    pid_t pids[MAX_RANKS];
    for (int q = 0; q < n; q++) {
        pids[q] = fork();
        assert_true(pids[q] >= 0);
        if (pids[q] == 0) {
            me_ = q;
            long wrong = rank_main_(w, wins, n, per_host, slice, msg);
            if (wrong)
                fprintf(stderr, "ring over MPI links n=%d, %d a host, slice=%llu, messages of "
                        "%llu, rank %d: %ld wrong\n", n, per_host, (unsigned long long)slice,
                        (unsigned long long)msg, q, wrong);
            _exit(wrong ? 1 : 0);
        }
    }
    int bad = 0;
    for (int q = 0; q < n; q++) {
        int st = 0;
        waitpid(pids[q], &st, 0);
        bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    assert_int_equal(bad, 0);
    for (int q = 0; q < n; q++)
        munmap(w->landing[q], landing);
    munmap(wins, (size_t)n * WIN_BYTES);
    munmap(w, sizeof *w);
    munmap(links_, MAX_RANKS * sizeof *links_);
}

// One rank a host: 2 and 3 ranks: an all-gather step overwrites a chunk whose
// reduce-scatter send may still be in flight; 4 and 5: more steps than sends
// in flight. Steps in one message, and cut into several (a chunk of a 4096-
// byte slice is up to 4224 bytes: 5 messages of 1000, the last of 224).
static void test_ring_over_mpi_links(void **state)
{
    (void)state;
    for (int n = 2; n <= 5; n++) {
        run_(n, 1, 4096, 0);         // many rounds and steps
        run_(n, 1, 4096, 1000);
        run_(n, 1, 1 << 20, 0);      // one round
        run_(n, 1, 1 << 20, 64512);  // ... its steps cut as between real hosts
    }
}

// The messages a transfer needs, at the bounds: a chunk is a slice and 128
// bytes more; 0 is one message a step.
static void test_message_parts(void **state)
{
    (void)state;
    const struct {
        uint64_t slice, msg;
        int parts;
    } cases[] = {{4096, 0, 1},     {4096, 4224, 1}, {4096, 4223, 2}, {4096, 1000, 5},
                 {1 << 20, 64512, 17}, {1 << 20, 1 << 30, 1}, {64, 256, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ring_core r = {.slice_bytes = cases[i].slice, .landing_bytes = cases[i].slice + 128};
        assert_int_equal(ring_core_set_messages(&r, cases[i].msg), 0);
        assert_int_equal(r.xfer_parts, cases[i].parts);
        assert_int_equal(r.msg_bytes, cases[i].msg ? cases[i].msg : UINT64_MAX);
        assert_true(r.reqs[RING_XFERS * cases[i].parts - 1] == MPI_REQUEST_NULL);
        ring_core_free_messages(&r);
        assert_null(r.reqs);
    }
}

// Several ranks a host: each host's first rank receives over MPI and its
// last sends over MPI, the others' links are shared memory.
static void test_ring_over_mixed_links(void **state)
{
    (void)state;
    run_(4, 2, 4096, 0);
    run_(4, 2, 4096, 1000);
    run_(6, 2, 1 << 20, 0);
    run_(6, 2, 1 << 20, 64512);
    run_(6, 3, 4096, 1000);
    run_(8, 2, 4096, 0);
}

// The ring's wait for a transfer over an MPI link (mpi_wait_) ends at its
// bound r->timeout_s, by the clock, from both sides: a left neighbour on
// another host that never sends fails the all-reduce with VGPU_ETIMEOUT
// after 0.4 s, not sooner, and not as late as 0.7 s (a bound applied twice
// over takes 0.8 s; 0.3 s is the slack for a loaded machine); one warning at
// half of it, one report of the timeout, both naming the neighbour; the ring
// is broken after. Rank 0 of 2, each its own host; rank 1 never runs. In a
// child, so that the send left in flight stays out of the other tests.
static void test_mpi_link_timeout(void **state)
{
    (void)state;
    links_ = shared_alloc_(MAX_RANKS * sizeof *links_);
    struct world *w = shared_alloc_(sizeof *w);
    char *win = shared_alloc_(WIN_BYTES);
    const uint64_t slice = 4096;
    w->landing[0] = shared_alloc_(2 * (slice + 128));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        me_ = 0;
        const double bound_s = 0.4, slack_s = 0.3;
        static int order[2] = {0, 1};
        struct wait_reports got = {.peer = -1};
        struct ring_core r = {.pos = 0, .size = 2, .order = order, .rank = 0,
                              .left = {.rank = 1, .local = 0}, .right = {.rank = 1, .local = 0},
                              .me = &w->slot[0], .win = win, .win_bytes = WIN_BYTES,
                              .slice_bytes = slice, .mpi = MPI_COMM_WORLD, .timeout_s = bound_s,
                              .spin_count = 10, .yield_s = 1e-4, .report = record_report_,
                              .report_arg = &got};
        r.landing_bytes = slice + 128;
        r.landing = w->landing[0];
        if (ring_core_set_messages(&r, 0) < 0)
            _exit(2);
        float *buf = (float *)win;
        const double t0 = util_now_s();
        const int rc = ring_core_all_reduce(&r, buf, buf, 64, COMM_FLOAT32, COMM_SUM);
        const double ended = util_now_s();
        int bad = wait_reports_misses(&got, 1, t0, ended, bound_s, slack_s);
        if (rc != VGPU_ETIMEOUT || !r.broken) {
            fprintf(stderr, "the all-reduce gave %d, broken %d; want %d, broken\n", rc, r.broken,
                    VGPU_ETIMEOUT);
            bad++;
        }
        _exit(bad ? 1 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    munmap(w->landing[0], 2 * (slice + 128));
    munmap(win, WIN_BYTES);
    munmap(w, sizeof *w);
    munmap(links_, MAX_RANKS * sizeof *links_);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_over_mpi_links),
        cmocka_unit_test(test_ring_over_mixed_links),
        cmocka_unit_test(test_message_parts),
        cmocka_unit_test(test_mpi_link_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
