// test_devcoll_p2p.c: the device engine's point-to-point (devcoll_send,
// devcoll_recv) on the simulated device, run by fork()ed ranks
// (devcoll_world.h): every message bit for bit with guards on both sides,
// sizes around the piece boundaries, rings both ways, many messages back to
// back, messages among collectives with a straggler, two pairs at once, the
// rendezvous, sizes that differ, absent and dead peers, arguments no rank
// could pass, and the failure that every later call keeps. Small data areas
// cut a message into many pieces, so both areas of both parities are used.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm.h"
#include "devcoll.h"
#include "devcoll_world.h"
#include "status.h"
#include "util.h"

#define GUARD_BYTES 64 // sentinel bytes after every receive buffer
#define SENTINEL 0xa5  // what no call may write
#define AREA 64        // a data area: a piece of a message

// ---- messages: contents, one side of one, checked ----

static uint64_t mix_(uint64_t x) // splitmix64
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// The message `tag` from rank `from`: bytes of their own, so that a piece
// from another message, place or sender differs.
static void fill_(unsigned char *buf, uint64_t bytes, int from, uint64_t tag)
{
    uint64_t h = 0;
    for (uint64_t k = 0; k < bytes; k++) {
        if (k % 8 == 0)
            h = mix_(mix_(tag << 8 | (uint64_t)from) + k);
        buf[k] = (unsigned char)(h >> (k % 8 * 8));
    }
}

// devcoll_sync, its error printed.
static int synced_(devcoll_t *d, const char *call)
{
    const int rc = devcoll_sync(d);
    if (rc != 0) {
        char what[200];
        devcoll_error(d, NULL, what, sizeof what);
        fprintf(stderr, "[rank %d] %s: %d (%s)\n", world_me, call, rc, what);
    }
    return rc;
}

// Bytes where got differs from want, the first few printed.
static long count_wrong_(const char *what, const unsigned char *got, const unsigned char *want,
                         uint64_t bytes)
{
    long wrong = 0;
    for (uint64_t k = 0; k < bytes; k++)
        if (got[k] != want[k] && wrong++ < 3)
            fprintf(stderr, "[rank %d] %s: byte %llu of %llu: got %#x, want %#x\n", world_me,
                    what, (unsigned long long)k, (unsigned long long)bytes, got[k], want[k]);
    return wrong;
}

// Sends the message `tag` of `bytes` to peer, from `tag % 8` bytes into
// its allocation (alignments vary): it succeeds, leaves the buffer as it
// was, and does not move the rounds.
static int send_checked_(devcoll_t *d, int peer, uint64_t bytes, uint64_t tag)
{
    const uint64_t skew = tag % 8;
    unsigned char *buf = malloc(skew + bytes + 1), *want = malloc(skew + bytes + 1);
    CHECK(buf && want);
    fill_(buf + skew, bytes, world_me, tag);
    memcpy(want, buf, skew + bytes);
    const uint64_t rounds = devcoll_rounds(d);
    CHECK(devcoll_send(d, buf + skew, bytes, peer, NULL) == 0);
    CHECK(synced_(d, "send") == 0);
    CHECK(count_wrong_("send's buffer", buf, want, skew + bytes) == 0);
    CHECK(devcoll_rounds(d) == rounds);
    free(buf), free(want);
    return 0;
}

// Receives the message `tag` of `bytes` from peer into a buffer `tag % 8`
// bytes into its allocation: it holds the message bit for bit, the bytes
// before and after it are untouched, and the rounds do not move.
static int recv_checked_(devcoll_t *d, int peer, uint64_t bytes, uint64_t tag)
{
    const uint64_t skew = tag % 8, all = skew + bytes + GUARD_BYTES;
    unsigned char *got = malloc(all), *want = malloc(all);
    CHECK(got && want);
    memset(got, SENTINEL, all);
    memcpy(want, got, all);
    fill_(want + skew, bytes, peer, tag);
    const uint64_t rounds = devcoll_rounds(d);
    CHECK(devcoll_recv(d, got + skew, bytes, peer, NULL) == 0);
    CHECK(synced_(d, "recv") == 0);
    char what[96];
    snprintf(what, sizeof what, "message %llu of %llu bytes from rank %d",
             (unsigned long long)tag, (unsigned long long)bytes, peer);
    CHECK(count_wrong_(what, got, want, all) == 0);
    CHECK(devcoll_rounds(d) == rounds);
    free(got), free(want);
    return 0;
}

// This rank's half of "to gets `bytes` from this rank, this rank gets
// `bytes` from `from`", sending first or second (ranks that exchange must
// not all send first: a send ends once its message is taken).
static int exchange_(devcoll_t *d, int to, int from, uint64_t bytes, uint64_t tag,
                     int send_first)
{
    for (int turn = 0; turn < 2; turn++)
        if (turn == !send_first)
            CHECK(send_checked_(d, to, bytes, tag) == 0);
        else
            CHECK(recv_checked_(d, from, bytes, tag) == 0);
    return 0;
}

// Waits until every rank is done with its calls, then destroys: a rank
// that has exited is a dead peer to the others' watchdogs, which would
// abort a message still in flight between two others.
static int leave_(struct world *w, int n, devcoll_t *d)
{
    CHECK(world_wait(w, n) == 0);
    devcoll_destroy(d);
    return 0;
}

// ---- collectives between messages, checked ----

enum { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST, COLL_KINDS };

// Rank q's element i of the call `salt`: 20 bits, so that sums of up to 16
// ranks are exact.
static int32_t value_(int q, uint64_t i, uint64_t salt)
{
    return (int32_t)(mix_(mix_(salt << 8 | (uint64_t)q) + i) & 0xfffff);
}

// Rounds of a collective of `count` (int32 elements, or bytes for the
// gather and the broadcast) among n ranks over areas of `area` bytes.
static uint64_t coll_rounds_(int kind, uint64_t count, int n, uint64_t area)
{
    const uint64_t per = kind == REDUCE_SCATTER ? area / (uint64_t)n / DC_UNIT * DC_UNIT / 4
                         : kind == ALL_REDUCE    ? area / 4
                                                 : area;
    return count == 0 ? 1 : (count + per - 1) / per;
}

// One collective, synced and checked exactly (recv and its guard): an
// all-reduce (sum), a reduce-scatter (max) of int32, an all-gather or a
// broadcast of bytes. *rounds grows by the call's rounds, which
// devcoll_rounds must match.
static int coll_checked_(devcoll_t *d, int me, int n, int kind, uint64_t count, int root,
                         uint64_t salt, uint64_t area, uint64_t *rounds)
{
    const int words = kind == ALL_REDUCE || kind == REDUCE_SCATTER;
    const uint64_t es = words ? 4 : 1;
    const uint64_t in = kind == REDUCE_SCATTER ? n * count : count;
    const uint64_t out = kind == ALL_GATHER ? n * count : count;
    unsigned char *send = malloc(in * es + 1), *recv = malloc(out * es + GUARD_BYTES);
    unsigned char *want = malloc(out * es + GUARD_BYTES);
    CHECK(send && recv && want);
    for (uint64_t i = 0; i < in; i++) {
        const int32_t v = value_(me, i, salt);
        if (words)
            memcpy(send + 4 * i, &v, 4);
        else
            send[i] = (unsigned char)v;
    }
    memset(recv, SENTINEL, out * es + GUARD_BYTES);
    memcpy(want, recv, out * es + GUARD_BYTES);
    for (uint64_t i = 0; i < out; i++) {
        int32_t v = kind == ALL_REDUCE ? 0 : -1;
        for (int q = 0; q < n && words; q++) {
            const int32_t x = value_(q, kind == ALL_REDUCE ? i : me * count + i, salt);
            v = kind == ALL_REDUCE ? v + x : x > v ? x : v;
        }
        if (words)
            memcpy(want + 4 * i, &v, 4);
        else
            want[i] = (unsigned char)value_(kind == ALL_GATHER ? (int)(i / count) : root,
                                            kind == ALL_GATHER ? i % count : i, salt);
    }
    int rc;
    switch (kind) {
    case ALL_REDUCE:
        rc = devcoll_all_reduce(d, send, recv, count, COMM_INT32, COMM_SUM, NULL);
        break;
    case REDUCE_SCATTER:
        rc = devcoll_reduce_scatter(d, send, recv, count, COMM_INT32, COMM_MAX, NULL);
        break;
    case ALL_GATHER: rc = devcoll_all_gather(d, send, recv, count, DC_BYTE, NULL); break;
    default: rc = devcoll_broadcast(d, send, recv, count, DC_BYTE, root, NULL); break;
    }
    CHECK(rc == 0);
    CHECK(synced_(d, "collective") == 0);
    char what[64];
    snprintf(what, sizeof what, "collective %d of %llu (salt %llu)", kind,
             (unsigned long long)count, (unsigned long long)salt);
    CHECK(count_wrong_(what, recv, want, out * es + GUARD_BYTES) == 0);
    *rounds += coll_rounds_(kind, count, n, area);
    CHECK(devcoll_rounds(d) == *rounds);
    free(send), free(recv), free(want);
    return 0;
}

// ---- contents: sizes around the pieces, around rings ----

struct ring_case {
    uint64_t area;
    int big; // a message of 1 MiB as well
};

// Every size around a ring (to the next rank, even ranks first), one
// collective (the next messages then use the other areas' parity), and
// around the other way (odd ranks first).
static int ring_main_(struct world *w, int me, int n, const void *arg)
{
    const struct ring_case *rc = arg;
    const uint64_t a = rc->area;
    devcoll_t *d;
    if (world_join(w, me, n, a, 20, &d))
        return 1;
    const uint64_t sizes[] = {0,     1,     15,        16,        17, a - 1, a, a + 1,
                              2 * a, 2 * a + 1, 7 * a + 5, (1u << 20) + 3};
    const int count = (int)(sizeof sizes / sizeof sizes[0]) - !rc->big;
    uint64_t rounds = 0;
    for (int way = 0; way < 2; way++) {
        const int to = way ? (me + n - 1) % n : (me + 1) % n;
        const int from = way ? (me + 1) % n : (me + n - 1) % n;
        for (int i = 0; i < count; i++) {
            const uint64_t tag = (uint64_t)(way * count + i);
            CHECK(exchange_(d, to, from, sizes[i], tag, me % 2 == way) == 0);
        }
        if (way == 0)
            CHECK(coll_checked_(d, me, n, ALL_REDUCE, 4, 0, 1, a, &rounds) == 0);
    }
    CHECK(devcoll_rounds(d) == 1);
    CHECK(devcoll_error(d, NULL, NULL, 0) == 0);
    return leave_(w, n, d);
}

// Each piece of a message is a handshake between two processes, slow on
// busy cores: 1 MiB goes in 1 KiB pieces.
static void test_contents(void **state)
{
    (void)state;
    world_run(2, ring_main_, &(struct ring_case){AREA, 0});
    world_run(3, ring_main_, &(struct ring_case){1024, 1});
    world_run(4, ring_main_, &(struct ring_case){AREA, 0});
}

// ---- many messages ----

#define MANY 300

// One pair, MANY messages of 0 to 4 pieces, each in a direction drawn
// alike on both, one side or the other up to 1 ms late at times: the marks
// of every message, both ways, follow on.
static int many_main_(struct world *w, int me, int n, const void *arg)
{
    (void)arg;
    devcoll_t *d;
    if (world_join(w, me, n, AREA, 20, &d))
        return 1;
    for (uint64_t i = 0; i < MANY; i++) {
        const uint64_t h = mix_(0x5e9d + i);
        const int sender = (int)(h >> 20 & 1);
        const uint64_t bytes = h % (4 * AREA + 3);
        if ((h >> 24 & 3) == 0 && (int)(h >> 26 & 1) == me)
            usleep((useconds_t)(h >> 32) % 1000);
        if (me == sender)
            CHECK(send_checked_(d, 1 - me, bytes, i) == 0);
        else
            CHECK(recv_checked_(d, 1 - me, bytes, i) == 0);
    }
    CHECK(devcoll_rounds(d) == 0);
    return leave_(w, n, d);
}

static void test_many_messages(void **state)
{
    (void)state;
    world_run(2, many_main_, NULL);
}

#define MIXED_STEPS 400

// Collectives of every kind and messages between drawn pairs (the others
// go on to the next collective meanwhile), alike on every rank, one rank up
// to 4 ms late at times: the messages use the areas of the parity that the
// next collective writes, and a send ends only once they are free again. A
// message written into the other parity's areas (the last round's, which a
// slow peer may still read) is found here only by chance, where a peer is
// preempted between its barrier and its reads; test_devcoll_lanes.c, whose
// ranks run their blocks at once, finds it every time.
static int mixed_main_(struct world *w, int me, int n, const void *arg)
{
    setenv("VGPU_DEVCOLL_ALGO", (const char *)arg, 1); // read at create
    devcoll_t *d;
    if (world_join(w, me, n, AREA, 20, &d))
        return 1;
    uint64_t rounds = 0, messages = 0;
    for (uint64_t i = 0; i < MIXED_STEPS; i++) {
        const uint64_t h = mix_(0x31337 + i);
        if ((h >> 40 & 3) == 0 && (int)(h >> 42) % n == me)
            usleep(1000 + (useconds_t)(h >> 48) % 3000);
        const int kind = (int)(h % (COLL_KINDS + 2)); // messages: a third of the steps
        if (kind < COLL_KINDS) {
            const uint64_t count = (h >> 8) % (kind < ALL_GATHER ? 3 * AREA / 4 : 3 * AREA);
            const int root = (int)((h >> 16) % (uint64_t)n);
            CHECK(coll_checked_(d, me, n, kind, count, root, i, AREA, &rounds) == 0);
            continue;
        }
        const int from = (int)((h >> 16) % (uint64_t)n);
        const int to = (from + 1 + (int)((h >> 24) % (uint64_t)(n - 1))) % n;
        const uint64_t bytes = (h >> 8) % (3 * AREA + 7);
        if (me == from)
            CHECK(send_checked_(d, to, bytes, i) == 0);
        else if (me == to)
            CHECK(recv_checked_(d, from, bytes, i) == 0);
        messages++;
    }
    CHECK(messages > MIXED_STEPS / 5 && rounds > MIXED_STEPS);
    CHECK(devcoll_rounds(d) == rounds);
    return leave_(w, n, d);
}

static void test_among_collectives(void **state)
{
    (void)state;
    world_run(3, mixed_main_, "twoshot"); // its second area: a message's other area
    world_run(4, mixed_main_, "oneshot");
}

#define PAIR_MESSAGES 500

// 0 <-> 1 and 2 <-> 3 at once, each pair by turns in both directions.
static int pairs_main_(struct world *w, int me, int n, const void *arg)
{
    (void)arg;
    devcoll_t *d;
    if (world_join(w, me, n, AREA, 20, &d))
        return 1;
    const int other = me ^ 1;
    for (uint64_t i = 0; i < PAIR_MESSAGES; i++) {
        const uint64_t h = mix_(0xfa1 + i + (uint64_t)(me / 2) * PAIR_MESSAGES);
        const uint64_t bytes = h % (3 * AREA + 5);
        if (me % 2 == (int)(i % 2))
            CHECK(send_checked_(d, other, bytes, i) == 0);
        else
            CHECK(recv_checked_(d, other, bytes, i) == 0);
    }
    CHECK(devcoll_rounds(d) == 0);
    CHECK(devcoll_error(d, NULL, NULL, 0) == 0);
    return leave_(w, n, d);
}

static void test_two_pairs_at_once(void **state)
{
    (void)state;
    world_run(4, pairs_main_, NULL);
}

// ---- the rendezvous ----

#define LATE_S 0.2

// A send ends only once its receiver has taken the last piece: with the
// receiver LATE_S late, a send of one, two or five pieces takes that long.
static int rendezvous_main_(struct world *w, int me, int n, const void *arg)
{
    (void)arg;
    devcoll_t *d;
    if (world_join(w, me, n, AREA, 5, &d))
        return 1;
    const uint64_t sizes[] = {1, AREA + 1, 5 * AREA};
    for (uint64_t i = 0; i < 3; i++) {
        CHECK(world_wait(w, n) == 0);
        if (me == 1) {
            usleep((useconds_t)(LATE_S * 1e6));
            CHECK(recv_checked_(d, 0, sizes[i], i) == 0);
            continue;
        }
        const double t0 = util_now_s();
        CHECK(send_checked_(d, 1, sizes[i], i) == 0);
        const double took = util_now_s() - t0;
        if (took < 0.75 * LATE_S)
            fprintf(stderr, "[rank 0] a send of %llu bytes ended after %.3f s\n",
                    (unsigned long long)sizes[i], took);
        CHECK(took >= 0.75 * LATE_S);
    }
    return leave_(w, n, d);
}

static void test_rendezvous(void **state)
{
    (void)state;
    world_run(2, rendezvous_main_, NULL);
}

// ---- failures ----

// The rank's error: `code` (devcoll_error) of `fault` (devcoll_fault)
// naming `peer`, said as a failed send/recv with `how` in it.
static int failed_as_(devcoll_t *d, int code, int fault, int peer, const char *how)
{
    int who = -1;
    char what[200], named[32];
    const int rc = devcoll_error(d, &who, what, sizeof what);
    snprintf(named, sizeof named, "rank %d ", peer);
    if (rc != code || devcoll_fault(d) != fault || who != peer || !strstr(what, named) ||
        !strstr(what, "send/recv") || !strstr(what, how))
        fprintf(stderr, "[rank %d] error %d (fault %d, rank %d): %s; want %d (fault %d, rank %d)\n",
                world_me, rc, devcoll_fault(d), who, what, code, fault, peer);
    CHECK(rc == code && devcoll_fault(d) == fault && who == peer);
    CHECK(strstr(what, named) && strstr(what, "send/recv") && strstr(what, how));
    return 0;
}

// After an error, each later call of this rank fails at once (a message to
// or from peer, a collective) with the first error, writes nothing, and
// leaves that error as it was.
static int later_calls_fail_(devcoll_t *d, int peer)
{
    int who0, who;
    char what0[200], what[200];
    const int code = devcoll_error(d, &who0, what0, sizeof what0);
    CHECK(code != 0);
    unsigned char out[3 * AREA] = {1}, in[3 * AREA + GUARD_BYTES];
    memset(in, SENTINEL, sizeof in);
    const double t0 = util_now_s();
    for (int call = 0; call < 3; call++) {
        const int rc = call == 0   ? devcoll_send(d, out, 3 * AREA, peer, NULL)
                       : call == 1 ? devcoll_recv(d, in, 3 * AREA, peer, NULL)
                                   : devcoll_all_reduce(d, out, in, 3 * AREA / 4, COMM_INT32,
                                                        COMM_SUM, NULL);
        CHECK(rc == 0 || rc == code);
        CHECK(devcoll_sync(d) == code);
    }
    CHECK(util_now_s() - t0 < 1.0);
    for (size_t k = 0; k < sizeof in; k++)
        CHECK(in[k] == SENTINEL);
    CHECK(devcoll_error(d, &who, what, sizeof what) == code);
    CHECK(who == who0 && !strcmp(what, what0));
    return 0;
}

// Rank `sender` sends `sent` bytes to rank `receiver`, which expects
// `expected`, after `good` messages each way; a third rank looks on.
struct mismatch_case {
    int sender, receiver, good;
    uint64_t sent, expected;
};

// Both fail, not by the timeout: a mismatch naming each other; the
// receiver's buffer is untouched (sizes are compared before the first piece
// is copied), the sender's too. Then every later call fails, the
// onlooker's next collective too (naming one of the two).
static int mismatch_main_(struct world *w, int me, int n, const void *arg)
{
    const struct mismatch_case *mc = arg;
    devcoll_t *d;
    if (world_join(w, me, n, AREA, 10, &d))
        return 1;
    const int onlooker = 3 - mc->sender - mc->receiver;
    const int peer = mc->sender + mc->receiver - me; // the onlooker's: none
    for (int i = 0; i < mc->good && me != onlooker; i++)
        CHECK(exchange_(d, peer, peer, 3 * AREA + 1, (uint64_t)i, me == mc->sender) == 0);
    if (me == onlooker) {
        CHECK(world_wait(w, n) == 0); // the pair has failed
        const double t0 = util_now_s();
        int32_t x[8] = {0}, y[8];
        CHECK(devcoll_all_reduce(d, x, y, 8, COMM_INT32, COMM_SUM, NULL) == 0);
        int who = -1;
        CHECK(devcoll_sync(d) == VGPU_ECOMM && util_now_s() - t0 < 2.0);
        CHECK(devcoll_error(d, &who, NULL, 0) == VGPU_ECOMM);
        CHECK(who == mc->sender || who == mc->receiver);
        // A peer that gave up, not a collective called otherwise: the
        // message's mismatch is not the onlooker's.
        CHECK(devcoll_fault(d) == DC_ERR_LEFT);
        CHECK(world_wait(w, n) == 0);
        devcoll_destroy(d);
        return 0;
    }
    const double t0 = util_now_s();
    const uint64_t bytes = me == mc->sender ? mc->sent : mc->expected;
    unsigned char *buf = malloc(bytes + GUARD_BYTES), *want = malloc(bytes + GUARD_BYTES);
    CHECK(buf && want);
    memset(buf, SENTINEL, bytes + GUARD_BYTES);
    if (me == mc->sender)
        fill_(buf, bytes, me, 99);
    memcpy(want, buf, bytes + GUARD_BYTES);
    CHECK((me == mc->sender ? devcoll_send(d, buf, bytes, peer, NULL)
                            : devcoll_recv(d, buf, bytes, peer, NULL)) == 0);
    CHECK(devcoll_sync(d) == VGPU_ECOMM);
    CHECK(util_now_s() - t0 < 2.0);
    CHECK(failed_as_(d, VGPU_ECOMM, DC_ERR_MISMATCH, peer, "another size") == 0);
    CHECK(count_wrong_("a mismatched message's buffer", buf, want, bytes + GUARD_BYTES) == 0);
    CHECK(world_wait(w, n) == 0);
    CHECK(later_calls_fail_(d, peer) == 0);
    CHECK(world_wait(w, n) == 0);
    free(buf), free(want);
    devcoll_destroy(d);
    return 0;
}

static void test_size_mismatch(void **state)
{
    (void)state;
    const struct mismatch_case cases[] = {
        {0, 1, 0, 40, 41},                // one piece each, a byte apart
        {1, 0, 2, 41, 40},                // after messages both ways
        {0, 1, 1, 3 * AREA, AREA},        // more pieces sent than expected
        {1, 2, 0, AREA, 3 * AREA + 1},    // fewer
        {2, 0, 1, 0, 5},                  // empty against not
        {0, 2, 0, 5, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        world_run(3, mismatch_main_, &cases[i]);
}

#define ABSENT_TIMEOUT_S 1.0

// Rank `absent` makes no call; the other sends it `bytes` (or receives
// them from it).
struct absent_case {
    int absent;
    uint64_t bytes;
};

// The caller waits one timeout (within [0.9, 1.5] of it), then fails as a
// timeout naming the absent rank, its buffer untouched; the absent rank
// stays alive until then (else the watchdog would name it as dead).
static int absent_main_(struct world *w, int me, int n, const void *arg)
{
    const struct absent_case *ac = arg;
    devcoll_t *d;
    if (world_join(w, me, n, AREA, ABSENT_TIMEOUT_S, &d))
        return 1;
    if (me == ac->absent) {
        const double until = util_now_s() + 10;
        while (atomic_load(&w->done) == 0 && util_now_s() < until)
            usleep(1000);
        devcoll_destroy(d);
        return 0;
    }
    const uint64_t all = ac->bytes + GUARD_BYTES;
    unsigned char *buf = malloc(all), *want = malloc(all);
    CHECK(buf && want);
    memset(buf, SENTINEL, all);
    if (me == 0)
        fill_(buf, ac->bytes, me, 5);
    memcpy(want, buf, all);
    const double t0 = util_now_s();
    CHECK((me == 0 ? devcoll_send(d, buf, ac->bytes, ac->absent, NULL)
                   : devcoll_recv(d, buf, ac->bytes, ac->absent, NULL)) == 0);
    const int rc = devcoll_sync(d);
    const double took = util_now_s() - t0;
    if (rc != VGPU_ETIMEOUT || took < 0.9 * ABSENT_TIMEOUT_S || took > 1.5 * ABSENT_TIMEOUT_S)
        fprintf(stderr, "[rank %d] %s of %llu bytes: %d after %.3f s\n", me,
                me == 0 ? "send" : "recv", (unsigned long long)ac->bytes, rc, took);
    CHECK(rc == VGPU_ETIMEOUT);
    CHECK(took >= 0.9 * ABSENT_TIMEOUT_S && took <= 1.5 * ABSENT_TIMEOUT_S);
    CHECK(failed_as_(d, VGPU_ETIMEOUT, DC_ERR_TIMEOUT, ac->absent, "within the timeout") == 0);
    CHECK(count_wrong_("a timed-out message's buffer", buf, want, all) == 0);
    CHECK(later_calls_fail_(d, ac->absent) == 0);
    atomic_store(&w->done, 1);
    free(buf), free(want);
    devcoll_destroy(d);
    return 0;
}

static void test_absent_peer(void **state)
{
    (void)state;
    world_run(2, absent_main_, &(struct absent_case){1, 1});            // the last wait
    world_run(2, absent_main_, &(struct absent_case){1, 5 * AREA + 3}); // the third piece's
    world_run(2, absent_main_, &(struct absent_case){0, 1});
    world_run(2, absent_main_, &(struct absent_case){0, 5 * AREA + 3});
}

#define DEAD_TIMEOUT_S 20
#define BIG_MESSAGE (16u << 20) // 262144 pieces: not taken in 50 ms

// Rank `victim` dies by SIGKILL while the other waits for it: before it
// calls, or (mid) in the middle of taking a big message.
struct dead_case {
    int victim, mid;
};

static void die_(int sig)
{
    (void)sig;
    raise(SIGKILL);
}

// The survivor ends well before the timeout, by the watchdog: the dead rank
// named, as having exited.
static int dead_main_(struct world *w, int me, int n, const void *arg)
{
    const struct dead_case *dc = arg;
    devcoll_t *d;
    if (world_join(w, me, n, AREA, DEAD_TIMEOUT_S, &d))
        return 1;
    const uint64_t bytes = dc->mid ? BIG_MESSAGE : 5 * AREA;
    unsigned char *buf = calloc(1, bytes);
    CHECK(buf);
    if (me == dc->victim && !dc->mid) {
        usleep(200000); // the survivor is in its call by now
        raise(SIGKILL);
    } else if (me == dc->victim) {
        signal(SIGALRM, die_);
        const struct itimerval in_50ms = {{0, 0}, {0, 50000}};
        setitimer(ITIMER_REAL, &in_50ms, NULL);
        devcoll_recv(d, buf, bytes, 1 - me, NULL);
        return 1; // the whole message taken before the timer: no test
    }
    const double t0 = util_now_s();
    CHECK((me == 0 ? devcoll_send(d, buf, bytes, 1, NULL) : devcoll_recv(d, buf, bytes, 0, NULL)) ==
          0);
    const int rc = devcoll_sync(d);
    const double took = util_now_s() - t0;
    if (took >= 3)
        fprintf(stderr, "[rank %d] ended after %.3f s\n", me, took);
    CHECK(rc == VGPU_ECOMM && took < 3);
    CHECK(failed_as_(d, VGPU_ECOMM, DC_ERR_ABORT, dc->victim, "has exited") == 0);
    free(buf);
    devcoll_destroy(d);
    return 0;
}

static void dead_run_(const struct dead_case *dc)
{
    int status[2];
    double took_s;
    world_spawn(2, dead_main_, dc, status, &took_s);
    const int st = status[dc->victim];
    assert_true(world_exited_ok(status[1 - dc->victim]));
    assert_true(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_true(took_s < 5);
}

static void test_dead_peer(void **state)
{
    (void)state;
    dead_run_(&(struct dead_case){0, 0}); // the survivor waits in a recv
    dead_run_(&(struct dead_case){1, 0}); // in a send, for the third piece's room
    dead_run_(&(struct dead_case){1, 1}); // in a send, the receiver gone mid-message
}

// ---- arguments ----

// Another rank's number, and a buffer for a message with bytes: else
// VGPU_EINVAL at once, on its own (no error, no round, no message counted:
// the messages after match as before). An empty message needs no buffer.
static int invalid_main_(struct world *w, int me, int n, const void *arg)
{
    (void)arg;
    devcoll_t *d;
    if (world_join(w, me, n, AREA, 10, &d))
        return 1;
    unsigned char buf[16] = {0};
    const int peers[] = {me, -1, n, DC_MAX_RANKS};
    for (size_t i = 0; i < sizeof peers / sizeof peers[0]; i++) {
        CHECK(devcoll_send(d, buf, sizeof buf, peers[i], NULL) == VGPU_EINVAL);
        CHECK(devcoll_recv(d, buf, sizeof buf, peers[i], NULL) == VGPU_EINVAL);
        CHECK(devcoll_send(d, buf, 0, peers[i], NULL) == VGPU_EINVAL);
    }
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    CHECK(devcoll_send(d, NULL, 1, next, NULL) == VGPU_EINVAL);
    CHECK(devcoll_recv(d, NULL, 1, prev, NULL) == VGPU_EINVAL);
    CHECK(devcoll_send(d, buf, DC_MAX_COUNT, next, NULL) == VGPU_EINVAL);
    // Pieces past what a mark counts (32 bits): never read.
    CHECK(devcoll_recv(d, buf, (uint64_t)UINT32_MAX * AREA, prev, NULL) == VGPU_EINVAL);
    CHECK(devcoll_sync(d) == 0 && devcoll_error(d, NULL, NULL, 0) == 0);
    CHECK(devcoll_rounds(d) == 0);
    for (int turn = 0; turn < 2; turn++) { // even ranks first
        if (turn == me % 2)
            CHECK(devcoll_send(d, NULL, 0, next, NULL) == 0);
        else
            CHECK(devcoll_recv(d, NULL, 0, prev, NULL) == 0);
        CHECK(synced_(d, "an empty message without a buffer") == 0);
    }
    CHECK(exchange_(d, next, prev, 2 * AREA + 3, 1, me % 2 == 0) == 0);
    uint64_t rounds = 0;
    CHECK(coll_checked_(d, me, n, ALL_REDUCE, 9, 0, 2, AREA, &rounds) == 0);
    return leave_(w, n, d);
}

static void test_invalid_arguments(void **state)
{
    (void)state;
    world_run(3, invalid_main_, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contents),
        cmocka_unit_test(test_many_messages),
        cmocka_unit_test(test_among_collectives),
        cmocka_unit_test(test_two_pairs_at_once),
        cmocka_unit_test(test_rendezvous),
        cmocka_unit_test(test_size_mismatch),
        cmocka_unit_test(test_absent_peer),
        cmocka_unit_test(test_dead_peer),
        cmocka_unit_test(test_invalid_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
