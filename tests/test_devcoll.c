// test_devcoll.c: the device collectives (devcoll.h) on the simulated
// device, run by fork()ed ranks with no MPI: every result bit for bit
// against kernels.h's reduction in position order, the call descriptor
// check, dead and absent peers, back-to-back calls with a straggler, and
// nothing left behind. Small data areas make calls of many rounds, so every
// round boundary and both area parities are crossed.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm.h"
#include "devcoll.h"
#include "devcoll_world.h"
#include "kernels.h"
#include "status.h"
#include "util.h"

#define GUARD_BYTES 64    // sentinel bytes after every buffer
#define SENTINEL 0xa5     // what no call may write

// ---- data: inputs, the reference, comparisons ----

static uint64_t mix_(uint64_t x) // splitmix64
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Element i of rank q's input to the call `salt`, stored as dtype. Floats
// span 2^-20..2^20 (float16: 2^-8..2^7) with full mantissas and mixed
// signs, never zero: their sum rounds differently in another order.
// Integers take any bits (sums and products wrap).
static void value_(void *out, int dtype, int q, uint64_t i, uint32_t salt)
{
    const uint64_t h = mix_(mix_((uint64_t)salt << 8 | (uint64_t)q) + i);
    const int spread = dtype == COMM_FLOAT16 ? 8 : 20;
    const double mag = ldexp(1.0 + (double)(h >> 12) / 4503599627370496.0,
                             (int)(h % (uint64_t)(2 * spread)) - spread);
    const double v = h & 1u << 10 ? -mag : mag;
    switch (dtype) {
    case COMM_FLOAT32: memcpy(out, &(float){(float)v}, 4); break;
    case COMM_FLOAT64: memcpy(out, &v, 8); break;
    case COMM_INT32: memcpy(out, &(uint32_t){(uint32_t)h}, 4); break;
    case COMM_INT64: memcpy(out, &h, 8); break;
    case COMM_FLOAT16: memcpy(out, &(uint16_t){kernel_f32_to_f16((float)v)}, 2); break;
    default: memcpy(out, &(uint16_t){kernel_f32_to_bf16((float)v)}, 2); break;
    }
}

// buf[k] = rank q's element i0 + k, k < count.
static void fill_(void *buf, int dtype, int q, uint64_t i0, uint64_t count, uint32_t salt)
{
    const size_t es = comm_dtype_size(dtype);
    for (uint64_t k = 0; k < count; k++)
        value_((char *)buf + k * es, dtype, q, i0 + k, salt);
}

// acc[i] = acc[i] op x[i] by kernels.h, avg_div as there.
static void reduce_into_(void *acc, const void *x, int dtype, int op, uint64_t count, int avg_div)
{
    for (uint64_t i = 0; i < count; i++)
        switch (dtype) {
        case COMM_FLOAT32: kernel_reduce_f32(i, acc, acc, x, op, avg_div); break;
        case COMM_FLOAT64: kernel_reduce_f64(i, acc, acc, x, op, avg_div); break;
        case COMM_INT32: kernel_reduce_i32(i, acc, acc, x, op, avg_div); break;
        case COMM_INT64: kernel_reduce_i64(i, acc, acc, x, op, avg_div); break;
        case COMM_FLOAT16: kernel_reduce_f16(i, acc, acc, x, op, avg_div); break;
        default: kernel_reduce_bf16(i, acc, acc, x, op, avg_div); break;
        }
}

// The reduction over the n ranks of elements [i0, i0 + count), in position
// order as the host one-shot: ((x0 op x1) op x2) ..., avg divided at the
// last step.
static void reference_(void *out, int dtype, int op, int n, uint64_t i0, uint64_t count,
                       uint32_t salt)
{
    void *x = malloc(count * comm_dtype_size(dtype) + 1);
    fill_(out, dtype, 0, i0, count, salt);
    for (int q = 1; q < n; q++) {
        fill_(x, dtype, q, i0, count, salt);
        reduce_into_(out, x, dtype, op, count, op == COMM_AVG && q == n - 1 ? n : 0);
    }
    free(x);
}

// Elements (of es bytes) where got differs from want, the first few printed.
static long count_wrong_(const char *what, const unsigned char *got, const unsigned char *want,
                         uint64_t bytes, size_t es)
{
    long wrong = 0;
    for (uint64_t at = 0; at < bytes; at += es) {
        const size_t len = bytes - at < es ? (size_t)(bytes - at) : es;
        if (!memcmp(got + at, want + at, len))
            continue;
        if (wrong++ < 3) {
            uint64_t g = 0, w = 0;
            memcpy(&g, got + at, len);
            memcpy(&w, want + at, len);
            fprintf(stderr, "[rank %d] %s: element %llu of %llu: got %#llx, want %#llx\n",
                    world_me, what, (unsigned long long)(at / es),
                    (unsigned long long)(bytes / es), (unsigned long long)g,
                    (unsigned long long)w);
        }
    }
    return wrong;
}

// ---- one call, checked ----

enum call_kind { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST, REDUCE, CALL_KINDS };
static const char *const kind_name_[] = {"all-reduce", "reduce-scatter", "all-gather",
                                         "broadcast", "reduce"};

struct call {
    int kind, dtype, op, root;
    uint64_t count;   // devcoll's count (reduce-scatter: recv's; all-gather: send's)
    int in_place;     // 1: in place; 2 (off root): broadcast's send or reduce's recv NULL
    uint32_t salt;    // the inputs' seed, alike on every rank
};

// The data area as devcoll_create sets it: whole units, n at least.
static uint64_t area_eff_(uint64_t area_bytes, int n)
{
    const uint64_t a = area_bytes / DC_UNIT * DC_UNIT;
    return a < (uint64_t)n * DC_UNIT ? (uint64_t)n * DC_UNIT : a;
}

// Elements of a rank block one round carries.
static uint64_t round_elems_(int kind, int dtype, int n, uint64_t area_bytes)
{
    const uint64_t a = area_eff_(area_bytes, n);
    const uint64_t per = kind == REDUCE_SCATTER ? a / (uint64_t)n / DC_UNIT * DC_UNIT : a;
    return per / comm_dtype_size(dtype);
}

static uint64_t rounds_of_(const struct call *c, int n, uint64_t area_bytes)
{
    const uint64_t r = round_elems_(c->kind, c->dtype, n, area_bytes);
    return c->count == 0 ? 1 : (c->count + r - 1) / r;
}

static int launch_(devcoll_t *d, const struct call *c, const void *send, void *recv)
{
    switch (c->kind) {
    case ALL_REDUCE: return devcoll_all_reduce(d, send, recv, c->count, c->dtype, c->op, NULL);
    case REDUCE_SCATTER:
        return devcoll_reduce_scatter(d, send, recv, c->count, c->dtype, c->op, NULL);
    case ALL_GATHER: return devcoll_all_gather(d, send, recv, c->count, c->dtype, NULL);
    case BROADCAST: return devcoll_broadcast(d, send, recv, c->count, c->dtype, c->root, NULL);
    default: return devcoll_reduce(d, send, recv, c->count, c->dtype, c->op, c->root, NULL);
    }
}

static void *sentinel_alloc_(uint64_t bytes)
{
    void *p = malloc(bytes);
    if (p)
        memset(p, SENTINEL, bytes);
    return p;
}

// A call's buffers and what they must hold afterwards: `a` holds send (and
// recv in place), `b` recv out of place; guard bytes after each.
struct bufs {
    unsigned char *a, *b, *want_a, *want_b;
    uint64_t a_bytes, b_bytes;
    const void *send;
    void *recv;
};

static void bufs_free_(struct bufs *x)
{
    free(x->a), free(x->b), free(x->want_a), free(x->want_b);
}

// Lays out and fills this rank's buffers for c, and what they should hold
// if nothing were written (the want images, completed by expect_).
static int bufs_make_(struct bufs *x, const struct call *c, int me, int n)
{
    const size_t es = comm_dtype_size(c->dtype);
    const uint64_t cnt = c->count, bytes = cnt * es;
    const uint64_t send_bytes = c->kind == REDUCE_SCATTER ? n * bytes : bytes;
    const uint64_t recv_bytes = c->kind == ALL_GATHER ? n * bytes : bytes;
    memset(x, 0, sizeof *x);
    x->a_bytes = (send_bytes > recv_bytes ? send_bytes : recv_bytes) + GUARD_BYTES;
    x->b_bytes = c->in_place == 1 ? 0 : recv_bytes + GUARD_BYTES;
    x->a = sentinel_alloc_(x->a_bytes);
    x->b = x->b_bytes ? sentinel_alloc_(x->b_bytes) : NULL;
    if (!x->a || (x->b_bytes && !x->b))
        return -1;
    unsigned char *send = x->a, *recv = c->in_place == 1 ? x->a : x->b;
    if (c->in_place == 1 && c->kind == REDUCE_SCATTER)
        recv = x->a + me * bytes; // block `me` of send
    if (c->in_place == 1 && c->kind == ALL_GATHER)
        send = x->a + me * bytes; // block `me` of recv
    if (c->in_place == 2 && c->kind == BROADCAST)
        send = NULL;
    if (c->in_place == 2 && c->kind == REDUCE)
        recv = NULL;
    const uint64_t send_elems = c->kind == REDUCE_SCATTER ? n * cnt : cnt;
    // Broadcast: what a non-root sends must not matter.
    if (send)
        fill_(send, c->dtype, c->kind == BROADCAST && me == c->root ? c->root : me, 0,
              send_elems, c->salt ^ (c->kind == BROADCAST && me != c->root ? 0x5a5a : 0));
    x->send = send;
    x->recv = recv;
    x->want_a = malloc(x->a_bytes);
    x->want_b = x->b_bytes ? malloc(x->b_bytes) : NULL;
    if (!x->want_a || (x->b_bytes && !x->want_b))
        return -1;
    memcpy(x->want_a, x->a, x->a_bytes);
    if (x->b_bytes)
        memcpy(x->want_b, x->b, x->b_bytes);
    return 0;
}

// Writes into the want images what c must leave in recv.
static void expect_(struct bufs *x, const struct call *c, int me, int n)
{
    if (!x->recv)
        return;
    const size_t es = comm_dtype_size(c->dtype);
    unsigned char *base = (unsigned char *)x->recv >= x->a &&
                                  (unsigned char *)x->recv < x->a + x->a_bytes
                              ? x->want_a + ((unsigned char *)x->recv - x->a)
                              : x->want_b + ((unsigned char *)x->recv - x->b);
    switch (c->kind) {
    case ALL_REDUCE: reference_(base, c->dtype, c->op, n, 0, c->count, c->salt); break;
    case REDUCE_SCATTER:
        reference_(base, c->dtype, c->op, n, (uint64_t)me * c->count, c->count, c->salt);
        break;
    case ALL_GATHER:
        for (int q = 0; q < n; q++)
            fill_(base + q * c->count * es, c->dtype, q, 0, c->count, c->salt);
        break;
    case BROADCAST: fill_(base, c->dtype, c->root, 0, c->count, c->salt); break;
    default:
        if (me == c->root)
            reference_(base, c->dtype, c->op, n, 0, c->count, c->salt);
        break;
    }
}

static void describe_(char *s, size_t bytes, const struct call *c)
{
    snprintf(s, bytes, "%s %s %s root %d count %llu%s salt %u", kind_name_[c->kind],
             comm_dtype_name(c->dtype), comm_op_name(c->op), c->root,
             (unsigned long long)c->count,
             c->in_place == 1 ? " in place" : c->in_place == 2 ? " unused NULL" : "", c->salt);
}

// One call on this rank: launched, synced and checked in full (recv, the
// guards, whatever must stay untouched, devcoll_rounds). Returns the wrong
// elements, or -1 when the call failed.
static long call_checked_(devcoll_t *d, const struct call *c, int me, int n, uint64_t area_bytes)
{
    char name[160];
    describe_(name, sizeof name, c);
    struct bufs x;
    if (bufs_make_(&x, c, me, n) != 0) {
        bufs_free_(&x);
        return -1;
    }
    expect_(&x, c, me, n);
    const uint64_t rounds0 = devcoll_rounds(d);
    int rc = launch_(d, c, x.send, x.recv);
    if (rc == 0)
        rc = devcoll_sync(d);
    long wrong = -1;
    if (rc != 0) {
        char what[200];
        devcoll_error(d, NULL, what, sizeof what);
        fprintf(stderr, "[rank %d] %s: %d (%s)\n", world_me, name, rc, what);
    } else {
        const size_t es = comm_dtype_size(c->dtype);
        wrong = count_wrong_(name, x.a, x.want_a, x.a_bytes, es);
        if (x.b_bytes)
            wrong += count_wrong_(name, x.b, x.want_b, x.b_bytes, es);
        if (devcoll_rounds(d) - rounds0 != rounds_of_(c, n, area_bytes)) {
            fprintf(stderr, "[rank %d] %s: %llu rounds, want %llu\n", world_me, name,
                    (unsigned long long)(devcoll_rounds(d) - rounds0),
                    (unsigned long long)rounds_of_(c, n, area_bytes));
            wrong++;
        }
    }
    bufs_free_(&x);
    return wrong;
}

// Counts around the boundaries of units (u elements) and rounds (r).
static int counts_(uint64_t *out, int kind, int dtype, int n, uint64_t area_bytes)
{
    const uint64_t u = DC_UNIT / comm_dtype_size(dtype);
    const uint64_t r = round_elems_(kind, dtype, n, area_bytes);
    const uint64_t c[] = {0, 1, u - 1, u + 1, r - 1, r, r + 1, 2 * r + u + 1};
    memcpy(out, c, sizeof c);
    return (int)(sizeof c / sizeof c[0]);
}

// ---- all-reduce: every type, operation, count, placement ----

struct algo_case {
    const char *algo; // VGPU_DEVCOLL_ALGO
    uint64_t area_bytes;
};

// Every rank calls in place and out of place (the ranks of one call
// differing), each result bit for bit the position-order reduction: the
// same bits from the one-shot and the two-shot.
static int all_reduce_main_(struct world *w, int me, int n, const void *arg)
{
    const struct algo_case *ac = arg;
    setenv("VGPU_DEVCOLL_ALGO", ac->algo, 1); // read at create
    devcoll_t *d;
    if (world_join(w, me, n, ac->area_bytes, 20, &d))
        return 1;
    const enum devcoll_algo want = !strcmp(ac->algo, "twoshot") ? DEVCOLL_TWOSHOT : DEVCOLL_ONESHOT;
    CHECK(devcoll_algo_for(d, 0) == want && devcoll_algo_for(d, 1ull << 30) == want);
    long wrong = 0;
    uint32_t salt = 1;
    for (int dtype = 0; dtype < COMM_DTYPE_COUNT; dtype++)
        for (int op = 0; op < COMM_OP_COUNT; op++) {
            uint64_t counts[16];
            const int k = counts_(counts, ALL_REDUCE, dtype, n, ac->area_bytes);
            for (int i = 0; i < k; i++)
                for (int turn = 0; turn < 2; turn++) {
                    const struct call c = {ALL_REDUCE, dtype, op, 0, counts[i],
                                           (turn + me + i) & 1, salt++};
                    const long bad = call_checked_(d, &c, me, n, ac->area_bytes);
                    CHECK(bad >= 0);
                    wrong += bad;
                }
        }
    CHECK(wrong == 0);
    CHECK(devcoll_error(d, NULL, NULL, 0) == 0);
    devcoll_destroy(d);
    return 0;
}

static void test_all_reduce(void **state)
{
    (void)state;
    for (int n = 1; n <= 5; n++) {
        // Two-shot chunks of 4 units among n ranks: some empty from n = 5.
        const uint64_t area = n == 4 ? 1024 : 64;
        world_run(n, all_reduce_main_, &(struct algo_case){"oneshot", area});
        world_run(n, all_reduce_main_, &(struct algo_case){"twoshot", area});
    }
    world_run(8, all_reduce_main_, &(struct algo_case){"oneshot", 128});
    world_run(8, all_reduce_main_, &(struct algo_case){"twoshot", 128});
}

// ---- the other collectives ----

// Reduce-scatter and reduce: every operation; all-gather, broadcast and
// reduce: every root; in place and not; off root, broadcast's send and
// reduce's recv are NULL or a buffer that must stay as it was.
static int collectives_main_(struct world *w, int me, int n, const void *arg)
{
    const uint64_t area = *(const uint64_t *)arg;
    devcoll_t *d;
    if (world_join(w, me, n, area, 20, &d))
        return 1;
    long wrong = 0;
    uint32_t salt = 7;
    uint64_t counts[16];
    for (int dtype = 0; dtype < COMM_DTYPE_COUNT; dtype++) {
        int k = counts_(counts, REDUCE_SCATTER, dtype, n, area);
        for (int op = 0; op < COMM_OP_COUNT; op++)
            for (int i = 0; i < k; i++) {
                const struct call c = {REDUCE_SCATTER, dtype, op, 0, counts[i],
                                       (op + me + i) & 1, salt++};
                const long bad = call_checked_(d, &c, me, n, area);
                CHECK(bad >= 0);
                wrong += bad;
            }
        k = counts_(counts, ALL_GATHER, dtype, n, area);
        for (int i = 0; i < k; i++)
            for (int turn = 0; turn < 2; turn++) {
                const struct call c = {ALL_GATHER, dtype, 0, 0, counts[i], (turn + me) & 1,
                                       salt++};
                const long bad = call_checked_(d, &c, me, n, area);
                CHECK(bad >= 0);
                wrong += bad;
            }
        for (int root = 0; root < n; root++)
            for (int i = 0; i < k; i++) {
                const int turn = (root + me + i) % 3;
                const int placement = turn == 2 && me == root ? 1 : turn; // NULL: off root
                struct call c = {BROADCAST, dtype, 0, root, counts[i], placement, salt++};
                long bad = call_checked_(d, &c, me, n, area);
                CHECK(bad >= 0);
                wrong += bad;
                c = (struct call){REDUCE, dtype, (root + i) % COMM_OP_COUNT, root, counts[i],
                                  placement, salt++};
                bad = call_checked_(d, &c, me, n, area);
                CHECK(bad >= 0);
                wrong += bad;
            }
    }
    CHECK(wrong == 0);
    CHECK(devcoll_error(d, NULL, NULL, 0) == 0);
    devcoll_destroy(d);
    return 0;
}

static void test_collectives(void **state)
{
    (void)state;
    for (int n = 1; n <= 5; n++)
        world_run(n, collectives_main_, &(uint64_t){n == 3 ? 1024 : 64});
}

// ---- the descriptor check ----

// One rank (`odd`) calls differently after `good` matching calls.
struct mismatch_case {
    const char *algo;
    int good;       // matching calls first (the mismatch's round parity)
    struct call c;  // everyone's call but odd's
    struct call o;  // odd's
};

#define MISMATCH_RANKS 3
#define MISMATCH_ODD 1
#define MISMATCH_AREA 64

// The mismatched call fails on every rank, quickly (not by the timeout),
// naming a peer, and writes nothing; the next (matching) call fails too.
static int mismatch_main_(struct world *w, int me, int n, const void *arg)
{
    const struct mismatch_case *mc = arg;
    setenv("VGPU_DEVCOLL_ALGO", mc->algo, 1);
    devcoll_t *d;
    if (world_join(w, me, n, MISMATCH_AREA, 5, &d))
        return 1;
    for (int i = 0; i < mc->good; i++) {
        struct call c = mc->c;
        c.salt += 100 + i;
        CHECK(call_checked_(d, &c, me, n, MISMATCH_AREA) == 0);
    }
    for (int again = 0; again < 2; again++) {
        // The second time every rank makes the same call: still failed.
        const struct call c = me == MISMATCH_ODD && !again ? mc->o : mc->c;
        struct bufs x;
        CHECK(bufs_make_(&x, &c, me, n) == 0);
        const double t0 = util_now_s();
        CHECK(launch_(d, &c, x.send, x.recv) == 0);
        CHECK(devcoll_sync(d) == VGPU_ECOMM);
        CHECK(util_now_s() - t0 < 2.5); // the check, not the 5 s timeout
        int peer = -1;
        char what[200], named[32];
        CHECK(devcoll_error(d, &peer, what, sizeof what) == VGPU_ECOMM);
        snprintf(named, sizeof named, "rank %d ", peer);
        // Every rank names the one whose call differs (itself, there).
        CHECK(peer == MISMATCH_ODD && strstr(what, named));
        CHECK(count_wrong_("mismatch send/recv", x.a, x.want_a, x.a_bytes, 1) == 0);
        CHECK(!x.b || count_wrong_("mismatch recv", x.b, x.want_b, x.b_bytes, 1) == 0);
        bufs_free_(&x);
    }
    devcoll_destroy(d);
    return 0;
}

static struct call call_(int kind, int dtype, int op, int root, uint64_t count, int in_place)
{
    return (struct call){kind, dtype, op, root, count, in_place, 3};
}

static void test_mismatch(void **state)
{
    (void)state;
    const int f32 = COMM_FLOAT32, sum = COMM_SUM; // 16 floats a round
    const struct mismatch_case cases[] = {
        // counts within one round
        {"oneshot", 0, call_(ALL_REDUCE, f32, sum, 0, 5, 0), call_(ALL_REDUCE, f32, sum, 0, 6, 0)},
        {"twoshot", 1, call_(ALL_REDUCE, f32, sum, 0, 5, 1), call_(ALL_REDUCE, f32, sum, 0, 6, 1)},
        {"oneshot", 1, call_(ALL_REDUCE, f32, sum, 0, 0, 0), call_(ALL_REDUCE, f32, sum, 0, 1, 0)},
        // counts of different numbers of rounds, both ways
        {"oneshot", 2, call_(ALL_REDUCE, f32, sum, 0, 5, 0), call_(ALL_REDUCE, f32, sum, 0, 40, 0)},
        {"twoshot", 0, call_(ALL_REDUCE, f32, sum, 0, 40, 0), call_(ALL_REDUCE, f32, sum, 0, 5, 0)},
        {"oneshot", 1, call_(REDUCE_SCATTER, f32, sum, 0, 4, 0),
         call_(REDUCE_SCATTER, f32, sum, 0, 9, 0)},
        // the same bytes, another type; another operation; another root
        {"oneshot", 0, call_(ALL_REDUCE, f32, sum, 0, 8, 0),
         call_(ALL_REDUCE, COMM_INT32, sum, 0, 8, 0)},
        {"twoshot", 1, call_(ALL_REDUCE, f32, sum, 0, 8, 0),
         call_(ALL_REDUCE, f32, COMM_MAX, 0, 8, 0)},
        {"oneshot", 1, call_(BROADCAST, f32, sum, 0, 20, 0), call_(BROADCAST, f32, sum, 1, 20, 0)},
        {"oneshot", 0, call_(REDUCE, f32, sum, 2, 20, 0), call_(REDUCE, f32, sum, 0, 20, 0)},
        // another collective
        {"oneshot", 1, call_(ALL_GATHER, f32, sum, 0, 8, 1), call_(ALL_REDUCE, f32, sum, 0, 8, 1)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        world_run(MISMATCH_RANKS, mismatch_main_, &cases[i]);
}

// A failure reaches forward only. The last rank, root, reduces a whole
// area (slowly: float16) while the others, done with the reduce, fail the
// next call (rank 1 differs; rank 0 finds it at once, as it checks root
// last) and make the one after; root must still finish its reduce,
// exactly: no peer's failure mark for a later barrier fails it, and no
// failed peer writes the area parity that root is still reading.
#define FORWARD_AREA (64u << 10)

static int forward_main_(struct world *w, int me, int n, const void *arg)
{
    (void)arg;
    devcoll_t *d;
    if (world_join(w, me, n, FORWARD_AREA, 5, &d))
        return 1;
    const struct call slow = {REDUCE, COMM_FLOAT16, COMM_SUM, n - 1, FORWARD_AREA / 2, 0, 21};
    CHECK(call_checked_(d, &slow, me, n, FORWARD_AREA) == 0);
    for (int again = 0; again < 2; again++) {
        // The second, matching call covers the whole area that root reads.
        const uint64_t count = again ? FORWARD_AREA / 4 : 8 + (me == 1);
        const struct call c = {ALL_REDUCE, COMM_FLOAT32, COMM_SUM, 0, count, 0, 22};
        struct bufs x;
        CHECK(bufs_make_(&x, &c, me, n) == 0);
        CHECK(launch_(d, &c, x.send, x.recv) == 0);
        CHECK(devcoll_sync(d) == VGPU_ECOMM);
        bufs_free_(&x);
    }
    devcoll_destroy(d);
    return 0;
}

static void test_failure_reaches_forward_only(void **state)
{
    (void)state;
    for (int i = 0; i < 8; i++)
        world_run(3, forward_main_, NULL);
}

// ---- dead and absent peers ----

enum victim_how { DIES_BEFORE, KILLED_WAITED_FOR, SLEEPS };

struct victim_case {
    int n, how;
    double timeout_s;
    int late;       // a survivor that comes 0.3 s late (-1: none)
};

#define VICTIM_AREA 64
#define VICTIM_COUNT 100 // floats: 7 rounds

static int victim_main_(struct world *w, int me, int n, const void *arg)
{
    const struct victim_case *vc = arg;
    const int victim = n - 1;
    devcoll_t *d;
    if (world_join(w, me, n, VICTIM_AREA, vc->timeout_s, &d))
        return 1;
    const struct call good = {ALL_REDUCE, COMM_FLOAT32, COMM_SUM, 0, VICTIM_COUNT, 0, 11};
    CHECK(call_checked_(d, &good, me, n, VICTIM_AREA) == 0);
    CHECK(world_wait(w, n) == 0);
    if (me == victim) {
        if (vc->how == DIES_BEFORE)
            _exit(0);
        if (vc->how == KILLED_WAITED_FOR) { // the survivors are in the call by now
            usleep(200000);
            raise(SIGKILL);
        }
        usleep(1500000); // SLEEPS: alive, then too late: the peers have failed
    }
    if (me == vc->late)
        usleep(300000);
    struct bufs x;
    const struct call c = {ALL_REDUCE, COMM_FLOAT32, COMM_SUM, 0, VICTIM_COUNT, 0, 12};
    CHECK(bufs_make_(&x, &c, me, n) == 0);
    const double t0 = util_now_s();
    CHECK(launch_(d, &c, x.send, x.recv) == 0);
    const int rc = devcoll_sync(d);
    const double took = util_now_s() - t0;
    int peer = -1;
    char what[200], named[32];
    CHECK(devcoll_error(d, &peer, what, sizeof what) == rc);
    snprintf(named, sizeof named, "rank %d ", peer);
    CHECK(strstr(what, named));
    int ok;
    if (me == victim) // came after the timeout: its peers have failed it
        ok = rc == VGPU_ECOMM && took < 1.0;
    else if (vc->how == SLEEPS)
        ok = rc == VGPU_ETIMEOUT && peer == victim && took >= vc->timeout_s && took < 2.0;
    else // the watchdog, not the 30 s timeout
        ok = rc == VGPU_ECOMM && peer == victim && took < 2.0;
    if (!ok)
        fprintf(stderr, "[rank %d] %d: %s after %.3f s\n", me, rc, what, took);
    CHECK(ok);
    CHECK(count_wrong_("failed call's recv", x.b, x.want_b, x.b_bytes, 1) == 0);
    bufs_free_(&x);
    // A survivor that exits is a dead peer too: the others' watchdogs
    // could name it (the first gone in rank order) instead of the victim.
    atomic_fetch_add(&w->done, 1);
    const double until = util_now_s() + 10;
    while (me != victim && atomic_load(&w->done) < n - 1 && util_now_s() < until)
        usleep(1000);
    devcoll_destroy(d);
    return 0;
}

static void victim_run_(const struct victim_case *vc)
{
    int status[DC_MAX_RANKS];
    double took_s;
    world_spawn(vc->n, victim_main_, vc, status, &took_s);
    for (int r = 0; r < vc->n - 1; r++)
        assert_true(world_exited_ok(status[r]));
    const int st = status[vc->n - 1];
    if (vc->how == KILLED_WAITED_FOR)
        assert_true(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    else
        assert_true(world_exited_ok(st));
    assert_true(took_s < 10);
}

static void test_dead_peer(void **state)
{
    (void)state;
    victim_run_(&(struct victim_case){2, DIES_BEFORE, 30, -1});
    victim_run_(&(struct victim_case){3, DIES_BEFORE, 30, -1});
    victim_run_(&(struct victim_case){3, KILLED_WAITED_FOR, 30, -1});
}

// A survivor that comes 0.3 s late, when the other has long failed, still
// names the dead rank (its watchdog's abort), not the survivor whose
// mailbox says that it failed.
static void test_dead_peer_late_survivor(void **state)
{
    (void)state;
    victim_run_(&(struct victim_case){3, DIES_BEFORE, 30, 1});
}

static void test_absent_peer(void **state)
{
    (void)state;
    victim_run_(&(struct victim_case){2, SLEEPS, 0.3, -1});
    victim_run_(&(struct victim_case){3, SLEEPS, 0.3, -1});
}

// ---- many calls back to back, with a straggler ----

#define MIXED_CALLS 200
#define MIXED_AREA 128

// Every rank draws the same calls; one rank (another each call) comes up
// to 2 ms late, so the others read what it has not yet written unless they
// wait, and areas are reused while a slow peer may still read them.
static int mixed_main_(struct world *w, int me, int n, const void *arg)
{
    setenv("VGPU_DEVCOLL_ALGO", (const char *)arg, 1);
    devcoll_t *d;
    if (world_join(w, me, n, MIXED_AREA, 20, &d))
        return 1;
    long wrong = 0;
    for (uint32_t i = 0; i < MIXED_CALLS; i++) {
        const uint64_t h = mix_(0xd1ce + i);
        struct call c = {(int)(h % CALL_KINDS), (int)(h >> 8 & 0xff) % COMM_DTYPE_COUNT,
                         (int)(h >> 16 & 0xff) % COMM_OP_COUNT, (int)(h >> 24 & 0xff) % n, 0,
                         (int)(mix_(h + (uint64_t)me) % 3), i + 1000};
        if (c.in_place == 2 && ((c.kind != REDUCE && c.kind != BROADCAST) || me == c.root))
            c.in_place = 0;
        const uint64_t r = round_elems_(c.kind, c.dtype, n, MIXED_AREA);
        c.count = (h >> 32) % (4 * r + 3);
        if ((int)(h >> 40) % n == me)
            usleep((useconds_t)(mix_(h ^ (uint64_t)me) % 2000));
        const long bad = call_checked_(d, &c, me, n, MIXED_AREA);
        CHECK(bad >= 0);
        wrong += bad;
    }
    CHECK(wrong == 0);
    devcoll_destroy(d);
    return 0;
}

static void test_back_to_back(void **state)
{
    (void)state;
    world_run(4, mixed_main_, "oneshot");
    world_run(4, mixed_main_, "twoshot");
    world_run(3, mixed_main_, "auto");
}

// ---- nothing left behind ----

static int fds_open_(void)
{
    int fds = 0;
    DIR *dir = opendir("/proc/self/fd");
    if (!dir)
        return -1;
    while (readdir(dir))
        fds++;
    closedir(dir);
    return fds;
}

// Lines of /proc/self/maps that name a devcoll window.
static int windows_mapped_(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[512];
    int windows = 0;
    while (fgets(line, sizeof line, f))
        windows += strstr(line, "vgpu-devcoll") != NULL;
    fclose(f);
    return windows;
}

// Names in /dev/shm that mention devcoll.
static int devcoll_names_in_dev_shm_(void)
{
    DIR *dir = opendir("/dev/shm");
    if (!dir)
        return 0;
    int names = 0;
    const struct dirent *e;
    while ((e = readdir(dir)))
        names += strstr(e->d_name, "devcoll") != NULL;
    closedir(dir);
    return names;
}

// Create, connect, one call, destroy, many times: the windows are memfds
// (mapped while connected, never in /dev/shm), and the descriptors and
// mappings go with destroy.
static int lifecycle_main_(struct world *w, int me, int n, const void *arg)
{
    (void)arg;
    const int fds0 = fds_open_();
    for (int i = 0; i < 20; i++) {
        devcoll_t *d;
        if (world_join(w, me, n, 256, 10, &d))
            return 1;
        CHECK(windows_mapped_() >= n);
        CHECK(devcoll_names_in_dev_shm_() == 0);
        const struct call c = {ALL_REDUCE, COMM_FLOAT32, COMM_AVG, 0, 70, i & 1, (uint32_t)i};
        CHECK(call_checked_(d, &c, me, n, 256) == 0);
        devcoll_destroy(d);
    }
    CHECK(fds_open_() == fds0);
    CHECK(windows_mapped_() == 0);
    return 0;
}

static void test_nothing_left_behind(void **state)
{
    (void)state;
    world_run(1, lifecycle_main_, NULL);
    world_run(3, lifecycle_main_, NULL);
    assert_int_equal(devcoll_names_in_dev_shm_(), 0);
}

// ---- set-up and the algorithm choice, in this process ----

static void test_create_rejects(void **state)
{
    (void)state;
    devcoll_t *d = (devcoll_t *)1;
    const int bad[][2] = {{0, 0}, {0, 17}, {1, 1}, {4, 4}, {-1, 2}, {16, 16}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(devcoll_create(&devcoll_sim_exec, NULL, bad[i][0], bad[i][1], 64, 1, &d),
                         VGPU_EINVAL);
        assert_null(d);
    }
    assert_int_equal(devcoll_create(&devcoll_sim_exec, NULL, 0, 2, 64, 0, &d), VGPU_EINVAL);
    assert_int_equal(devcoll_create(&devcoll_sim_exec, NULL, 0, 2, 64, NAN, &d), VGPU_EINVAL);
    assert_int_equal(devcoll_create(&devcoll_sim_exec, NULL, 15, 16, 64, 1, &d), 0);
    devcoll_destroy(d);
    devcoll_destroy(NULL);
}

// n = 1 needs no peer: the arguments no rank could pass fail at once,
// without a round.
static void test_call_rejects(void **state)
{
    (void)state;
    devcoll_t *d;
    assert_int_equal(devcoll_create(&devcoll_sim_exec, NULL, 0, 1, 64, 1, &d), 0);
    struct devcoll_handle h;
    devcoll_handle(d, &h);
    assert_int_equal(devcoll_connect(d, &h), 0);
    float buf[4] = {1, 2, 3, 4};
    assert_int_equal(devcoll_all_reduce(d, buf, buf, 4, COMM_DTYPE_COUNT, COMM_SUM, NULL),
                     VGPU_EINVAL);
    assert_int_equal(devcoll_all_reduce(d, buf, buf, 4, -1, COMM_SUM, NULL), VGPU_EINVAL);
    assert_int_equal(devcoll_all_reduce(d, buf, buf, 4, COMM_FLOAT32, COMM_OP_COUNT, NULL),
                     VGPU_EINVAL);
    assert_int_equal(devcoll_all_reduce(d, NULL, buf, 4, COMM_FLOAT32, COMM_SUM, NULL),
                     VGPU_EINVAL);
    assert_int_equal(devcoll_all_reduce(d, buf, buf, DC_MAX_COUNT, COMM_FLOAT32, COMM_SUM, NULL),
                     VGPU_EINVAL);
    assert_int_equal(devcoll_broadcast(d, buf, buf, 4, COMM_FLOAT32, 1, NULL), VGPU_EINVAL);
    assert_int_equal(devcoll_reduce(d, buf, buf, 4, COMM_FLOAT32, COMM_SUM, -1, NULL), VGPU_EINVAL);
    assert_int_equal(devcoll_rounds(d), 0);
    assert_int_equal(devcoll_all_reduce(d, buf, buf, 4, COMM_FLOAT32, COMM_SUM, NULL), 0);
    assert_int_equal(devcoll_sync(d), 0);
    assert_int_equal(devcoll_rounds(d), 1);
    assert_true(buf[0] == 1 && buf[3] == 4);
    devcoll_destroy(d);
}

static enum devcoll_algo algo_at_(int n, uint64_t bytes)
{
    devcoll_t *d;
    assert_int_equal(devcoll_create(&devcoll_sim_exec, NULL, 0, n, 64, 1, &d), 0);
    const enum devcoll_algo a = devcoll_algo_for(d, bytes);
    devcoll_destroy(d);
    return a;
}

static void test_algo_choice(void **state)
{
    (void)state;
    const enum devcoll_algo one = DEVCOLL_ONESHOT, two = DEVCOLL_TWOSHOT;
    unsetenv("VGPU_DEVCOLL_ALGO");
    for (int n = 1; n <= 2; n++) {
        assert_int_equal(algo_at_(n, 0), one);
        assert_int_equal(algo_at_(n, (256u << 10) + 1), one);
        assert_int_equal(algo_at_(n, 1ull << 40), one);
    }
    for (int n = 3; n <= 4; n++) {
        assert_int_equal(algo_at_(n, 0), one);
        assert_int_equal(algo_at_(n, 256u << 10), one);
        assert_int_equal(algo_at_(n, (256u << 10) + 1), two);
    }
    for (int n = 5; n <= DC_MAX_RANKS; n++) {
        assert_int_equal(algo_at_(n, 64u << 10), one);
        assert_int_equal(algo_at_(n, (64u << 10) + 1), two);
        assert_int_equal(algo_at_(n, 256u << 10), two);
    }
    setenv("VGPU_DEVCOLL_ALGO", "oneshot", 1);
    assert_int_equal(algo_at_(8, 1ull << 30), one);
    setenv("VGPU_DEVCOLL_ALGO", "twoshot", 1);
    assert_int_equal(algo_at_(2, 0), two);
    setenv("VGPU_DEVCOLL_ALGO", "bogus", 1); // warned about, then auto
    assert_int_equal(algo_at_(8, 1ull << 30), two);
    unsetenv("VGPU_DEVCOLL_ALGO");
    assert_string_equal(devcoll_algo_name(one), "oneshot");
    assert_string_equal(devcoll_algo_name(two), "twoshot");
    assert_string_equal(devcoll_algo_name(DEVCOLL_AUTO), "auto");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_rejects),
        cmocka_unit_test(test_call_rejects),
        cmocka_unit_test(test_algo_choice),
        cmocka_unit_test(test_all_reduce),
        cmocka_unit_test(test_collectives),
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_failure_reaches_forward_only),
        cmocka_unit_test(test_dead_peer),
        cmocka_unit_test(test_dead_peer_late_survivor),
        cmocka_unit_test(test_absent_peer),
        cmocka_unit_test(test_back_to_back),
        cmocka_unit_test(test_nothing_left_behind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
