// test_flight.c: the flight recorder's ring (wrap-around, states), its
// records' text form (round trip, bad input) and the verdict over a job's
// records (a missing rank, a wait chain, a dead rank, nothing stuck, ranks
// without records, ranks that disagree).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "flight.h"
#include "test_util.h"

// The verdict as a string (the caller frees it); *stuck gets its result.
static char *verdict_(const struct flight_record *const *recs, int size, int *stuck)
{
    char *text = NULL;
    size_t bytes = 0;
    FILE *f = open_memstream(&text, &bytes);
    assert_non_null(f);
    *stuck = flight_verdict(recs, size, f);
    fclose(f);
    return text;
}

static void assert_contains_(const char *text, const char *want)
{
    if (!strstr(text, want))
        fail_msg("expected \"%s\" in:\n%s", want, text);
}

// A record of `rank` of `size` whose collectives up to `last` (the ring's
// worth) are done, except
// the last one, which is in `state` waiting for `peer`.
static struct flight_record *record_(int rank, int size, uint64_t last, uint32_t state, int peer)
{
    struct flight_record *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->rank = rank;
    r->size = size;
    r->pid = 1000 + rank;
    snprintf(r->host, sizeof r->host, "h%d", rank / 2);
    snprintf(r->process, sizeof r->process, "running");
    r->at_us = 10000500;
    for (uint64_t s = last > FLIGHT_CAPACITY ? last - FLIGHT_CAPACITY + 1 : 1; s <= last; s++) {
        struct flight_entry_copy *e = &r->entries[r->count++];
        *e = (struct flight_entry_copy){.seq = s, .kind = FLIGHT_ALL_REDUCE, .bytes = 4096,
                                        .start_us = s * 1000, .end_us = s * 1000 + 500,
                                        .state = FLIGHT_DONE, .peer = -1};
        if (s == last && state != FLIGHT_DONE) {
            e->state = state;
            e->end_us = 0;
            e->peer = peer;
        }
    }
    return r;
}

static void free_all_(struct flight_record **recs, int n)
{
    for (int i = 0; i < n; i++)
        free(recs[i]);
}

static void test_ring_wraps_and_keeps_order(void **state)
{
    (void)state;
    static struct flight_ring ring;
    flight_use(&ring, 3, 4, "hostA");
    uint64_t first = 0, seq = 0;
    for (int i = 0; i < FLIGHT_CAPACITY + 44; i++) {
        seq = flight_begin(i % 2 ? FLIGHT_BROADCAST : FLIGHT_ALL_REDUCE, (uint64_t)i);
        if (!first)
            first = seq;
        flight_end(seq, 0);
    }
    seq = flight_begin(FLIGHT_ALL_GATHER, 77);
    flight_waiting(2);
    struct flight_record *rec = malloc(sizeof *rec);
    assert_int_equal(flight_snapshot(&ring, rec), 0);
    assert_int_equal(rec->rank, 3);
    assert_int_equal(rec->size, 4);
    assert_string_equal(rec->host, "hostA");
    assert_int_equal(rec->count, FLIGHT_CAPACITY);
    assert_int_equal(rec->entries[rec->count - 1].seq, seq);
    assert_int_equal(rec->entries[0].seq, seq - FLIGHT_CAPACITY + 1);
    for (int i = 1; i < rec->count; i++)
        assert_int_equal(rec->entries[i].seq, rec->entries[i - 1].seq + 1);
    const struct flight_entry_copy *last = &rec->entries[rec->count - 1];
    assert_int_equal(last->state, FLIGHT_WAITING);
    assert_int_equal(last->peer, 2);
    assert_int_equal(last->kind, FLIGHT_ALL_GATHER);
    assert_int_equal(last->end_us, 0);

    flight_resumed();
    flight_end(seq, -1);
    flight_waiting(1); // finished: a later wait does not change it
    assert_int_equal(flight_snapshot(&ring, rec), 0);
    last = &rec->entries[rec->count - 1];
    assert_int_equal(last->state, FLIGHT_FAILED);
    assert_int_equal(last->peer, -1);
    assert_true(last->end_us >= last->start_us);
    free(rec);
    flight_use(NULL, 3, 4, "hostA"); // back to the process's own ring, entries kept
    assert_int_equal(flight_begin(FLIGHT_BARRIER, 0), seq + 1);
}

static void test_record_round_trip(void **state)
{
    (void)state;
    struct flight_record *a = record_(1, 4, 300, FLIGHT_WAITING, 0);
    assert_int_equal(a->count, FLIGHT_CAPACITY);
    snprintf(a->backend, sizeof a->backend, "ring");
    snprintf(a->reason, sizeof a->reason, "SIGTERM");
    snprintf(a->process, sizeof a->process, "stopped");
    a->written_by = 0;
    a->phase = FLIGHT_PHASE_BACKWARD;
    a->phase_us = 12345;
    char *text = NULL;
    size_t bytes = 0;
    FILE *f = open_memstream(&text, &bytes);
    assert_int_equal(flight_write(a, f), 0);
    fclose(f);

    struct flight_record *b = malloc(sizeof *b);
    char err[256];
    f = fmemopen(text, bytes, "r");
    assert_int_equal(flight_read(f, b, err, sizeof err), 0);
    fclose(f);
    assert_int_equal(b->rank, 1);
    assert_string_equal(b->process, "stopped");
    assert_string_equal(b->reason, "SIGTERM");
    assert_string_equal(b->backend, "ring");
    assert_int_equal(b->phase, FLIGHT_PHASE_BACKWARD);
    assert_int_equal(b->count, a->count);
    assert_memory_equal(b->entries, a->entries, (size_t)a->count * sizeof a->entries[0]);

    // Cut short: an error naming how far it got, never a partial record.
    f = fmemopen(text, bytes / 2, "r");
    assert_int_equal(flight_read(f, b, err, sizeof err), -1);
    assert_contains_(err, "truncated");
    fclose(f);
    const char *other = "step,loss\n1,2\n";
    f = fmemopen((void *)other, strlen(other), "r");
    assert_int_equal(flight_read(f, b, err, sizeof err), -1);
    assert_contains_(err, "not a flight record");
    fclose(f);
    free(text);
    free(a);
    free(b);
}

static void test_verdict_names_the_rank_that_did_not_enter(void **state)
{
    (void)state;
    struct flight_record *recs[4] = {
        record_(0, 4, 10, FLIGHT_WAITING, -1), record_(1, 4, 10, FLIGHT_WAITING, 0),
        record_(2, 4, 9, FLIGHT_DONE, -1), record_(3, 4, 10, FLIGHT_FAILED, 2)};
    snprintf(recs[2]->process, sizeof recs[2]->process, "stopped");
    recs[2]->phase = FLIGHT_PHASE_FORWARD;
    recs[2]->phase_us = 9600;
    int stuck;
    char *v = verdict_((const struct flight_record *const *)recs, 4, &stuck);
    assert_true(stuck);
    assert_contains_(v, "collective #10 (all-reduce, 4096 bytes) was not entered by rank 2 "
                        "(stopped); the others entered it\n");
    assert_contains_(v, "rank 2 (h1, pid 1002, stopped): last #9 all-reduce (4096 bytes), "
                        "finished 9.991 s before this record; since then in forward");
    assert_contains_(v, "rank 3 (h1, pid 1003): failed in #10 all-reduce");
    free(v);
    free_all_(recs, 4);
}

static void test_verdict_follows_the_wait_chain(void **state)
{
    (void)state;
    // All entered #7: 0 waits for 1, 1 for 2, 2 is not waiting (it computes
    // inside the collective, or spins past the recorder's notice).
    struct flight_record *recs[3] = {record_(0, 3, 7, FLIGHT_WAITING, 1),
                                     record_(1, 3, 7, FLIGHT_WAITING, 2),
                                     record_(2, 3, 7, FLIGHT_ISSUED, -1)};
    int stuck;
    char *v = verdict_((const struct flight_record *const *)recs, 3, &stuck);
    assert_true(stuck);
    assert_contains_(v, "every rank entered collective #7 (all-reduce, 4096 bytes); it has not "
                        "finished on ranks 0-2; held up by rank 2\n");
    free(v);
    // Dead beats the chain: a dead rank holds up whoever waits, and it alone
    // is named (rank 2 would be an innocent one: e2e checks the exact rank).
    snprintf(recs[0]->process, sizeof recs[0]->process, "dead");
    v = verdict_((const struct flight_record *const *)recs, 3, &stuck);
    assert_contains_(v, "held up by rank 0 (dead)\n");
    free(v);
    free_all_(recs, 3);
}

// Several ranks behind (a ring: rank 0 finished #9 and entered #10, its
// neighbours still wait in #9 for rank 2, which is stopped there): all of
// them did not enter #10, and the one holding them up is named (as seen in
// e2e_hung_rank: "ranks 1-3 (rank 2 stopped)" alone did not say who).
static void test_verdict_names_who_holds_up_the_ranks_behind(void **state)
{
    (void)state;
    struct flight_record *recs[4] = {
        record_(0, 4, 10, FLIGHT_WAITING, 3), record_(1, 4, 9, FLIGHT_WAITING, 2),
        record_(2, 4, 9, FLIGHT_WAITING, 1), record_(3, 4, 9, FLIGHT_FAILED, 2)};
    snprintf(recs[2]->process, sizeof recs[2]->process, "stopped");
    int stuck;
    char *v = verdict_((const struct flight_record *const *)recs, 4, &stuck);
    assert_true(stuck);
    assert_contains_(v, "collective #10 (all-reduce, 4096 bytes) was not entered by ranks 1-3 "
                        "(rank 2 stopped); the others entered it; held up by rank 2 (stopped)\n");
    free(v);
    // Nobody stopped: the chain names the rank waited for that does not wait.
    snprintf(recs[2]->process, sizeof recs[2]->process, "running");
    recs[2]->entries[recs[2]->count - 1].state = FLIGHT_ISSUED;
    recs[2]->entries[recs[2]->count - 1].peer = -1;
    v = verdict_((const struct flight_record *const *)recs, 4, &stuck);
    assert_contains_(v, "was not entered by ranks 1-3; the others entered it; held up by rank 2\n");
    free(v);
    free_all_(recs, 4);
}

static void test_verdict_nothing_stuck_and_missing_records(void **state)
{
    (void)state;
    struct flight_record *recs[5] = {record_(0, 5, 12, FLIGHT_DONE, -1),
                                     record_(1, 5, 12, FLIGHT_DONE, -1), NULL, NULL,
                                     record_(4, 5, 12, FLIGHT_DONE, -1)};
    int stuck;
    char *v = verdict_((const struct flight_record *const *)recs, 5, &stuck);
    assert_false(stuck);
    assert_contains_(v, "no collective is stuck: every rank with a record finished collective "
                        "#12 (all-reduce); no record of ranks 2, 3\n");
    assert_contains_(v, "  rank 3: no record\n");
    free(v);
    free_all_(recs, 5);
}

static void test_verdict_names_a_disagreement(void **state)
{
    (void)state;
    struct flight_record *recs[2] = {record_(0, 2, 5, FLIGHT_WAITING, 1),
                                     record_(1, 2, 5, FLIGHT_WAITING, 0)};
    recs[1]->entries[4].kind = FLIGHT_BROADCAST;
    recs[1]->entries[4].bytes = 8;
    int stuck;
    char *v = verdict_((const struct flight_record *const *)recs, 2, &stuck);
    assert_true(stuck);
    assert_contains_(v, "the ranks disagree on collective #5: rank 0 all-reduce 4096 bytes; rank "
                        "1 broadcast 8 bytes;");
    free(v);
    free_all_(recs, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_wraps_and_keeps_order),
        cmocka_unit_test(test_record_round_trip),
        cmocka_unit_test(test_verdict_names_the_rank_that_did_not_enter),
        cmocka_unit_test(test_verdict_follows_the_wait_chain),
        cmocka_unit_test(test_verdict_names_who_holds_up_the_ranks_behind),
        cmocka_unit_test(test_verdict_nothing_stuck_and_missing_records),
        cmocka_unit_test(test_verdict_names_a_disagreement),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
