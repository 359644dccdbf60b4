// test_trace.c: the timeline's span buffer (off records nothing, a full
// buffer counts what it drops, a restart starts over) and its Chrome
// trace-event JSON (times moved to rank 0's clock, names and arguments by
// kind, host names escaped).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "flight.h"
#include "trace.h"
#include "test_util.h"

static void assert_contains_(const char *text, const char *want)
{
    if (!strstr(text, want))
        fail_msg("expected \"%s\" in:\n%s", want, text);
}

static void off_records_nothing(void **state)
{
    (void)state;
    trace_free();
    const uint64_t span = trace_begin();
    assert_int_equal(span, 0);
    trace_end(TRACE_STEP, 0, span, 1, 0);
    trace_end(TRACE_STEP, 0, 12345, 1, 0); // a span begun while on, ended after stop
    size_t count;
    uint64_t dropped;
    trace_spans(&count, &dropped);
    assert_int_equal(count, 0);
    assert_int_equal(dropped, 0);
}

static void records_and_drops(void **state)
{
    (void)state;
    assert_int_equal(trace_start(3), 0);
    uint64_t span = trace_begin();
    assert_true(span > 0);
    usleep(2000);
    trace_end(TRACE_COLLECTIVE, FLIGHT_ALL_REDUCE, span, 7, 4096);
    for (int i = 0; i < 3; i++)
        trace_end(TRACE_WAIT, 0, trace_begin(), i, 0);
    size_t count;
    uint64_t dropped;
    const struct trace_span *s = trace_spans(&count, &dropped);
    assert_int_equal(count, 3);
    assert_int_equal(dropped, 1);
    assert_int_equal(s[0].what, TRACE_COLLECTIVE);
    assert_int_equal(s[0].kind, FLIGHT_ALL_REDUCE);
    assert_int_equal(s[0].arg, 7);
    assert_int_equal(s[0].arg2, 4096);
    assert_true(s[0].dur_us >= 2000 && s[0].dur_us < 2000000);
    assert_int_equal(s[2].arg, 1);

    trace_stop(); // the spans stay; nothing more is recorded
    trace_end(TRACE_STEP, 0, span, 1, 0);
    trace_spans(&count, &dropped);
    assert_int_equal(count, 3);

    assert_int_equal(trace_start(2), 0); // a restart starts over (smaller: the room is kept)
    trace_end(TRACE_STEP, 0, trace_begin(), 1, 0);
    trace_spans(&count, &dropped);
    assert_int_equal(count, 1);
    assert_int_equal(dropped, 0);
    trace_free();
}

static void json_moves_names_and_escapes(void **state)
{
    (void)state;
    struct trace_rank ranks[2] = {
        {.rank = 0, .host = "node\"a\\b\x01", .pid = 11, .offset_us = 0, .count = 3},
        {.rank = 1, .host = "nodeb", .pid = 22, .offset_us = -500, .uncertainty_us = 9, .count = 1,
         .dropped = 4},
    };
    const struct trace_span mine[3] = {
        {.start_us = 1000100, .dur_us = 50, .what = TRACE_STEP, .arg = 3},
        {.start_us = 1000110, .dur_us = 20, .what = TRACE_COLLECTIVE, .kind = FLIGHT_ALL_REDUCE,
         .arg = 9, .arg2 = 1024},
        // point-to-point: its argument is the peer, not a recorder number
        {.start_us = 1000140, .dur_us = 5, .what = TRACE_COLLECTIVE, .kind = FLIGHT_SEND,
         .arg = 1, .arg2 = 7},
    };
    const struct trace_span theirs[1] = {
        {.start_us = 1000700, .dur_us = 30, .what = TRACE_WAIT, .arg = 0},
    };
    char *text = NULL;
    size_t bytes = 0;
    FILE *f = open_memstream(&text, &bytes);
    assert_non_null(f);
    assert_int_equal(trace_json_begin(f, ranks, 2, "test \"1\""), 0);
    assert_int_equal(trace_json_spans(f, &ranks[0], mine, 3, 1000000), 0);
    assert_int_equal(trace_json_spans(f, &ranks[1], theirs, 1, 1000000), 0);
    assert_int_equal(trace_json_end(f), 0);
    fclose(f);

    assert_true(text[0] == '{');
    assert_contains_(text, "\"producer\":\"test \\\"1\\\"\"");
    assert_contains_(text, "\"ranks\":2,\"clock_uncertainty_us\":9,\"dropped_spans\":4");
    assert_contains_(text, "{\"rank\":1,\"offset_us\":-500,\"uncertainty_us\":9}");
    assert_contains_(text, "\"name\":\"rank 0 (node\\\"a\\\\b\\u0001, pid 11)\"");
    assert_contains_(text, "\"name\":\"rank 1 (nodeb, pid 22)\"");
    // Rank 0's spans from the origin; rank 1's moved by its offset.
    assert_contains_(text, "{\"name\":\"step\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":0,\"tid\":0,"
                           "\"ts\":100,\"dur\":50,\"args\":{\"step\":3}}");
    assert_contains_(text, "{\"name\":\"all-reduce\",\"cat\":\"comm\",\"ph\":\"X\",\"pid\":0,"
                           "\"tid\":0,\"ts\":110,\"dur\":20,\"args\":{\"seq\":9,\"bytes\":1024}}");
    assert_contains_(text, "{\"name\":\"send\",\"cat\":\"comm\",\"ph\":\"X\",\"pid\":0,"
                           "\"tid\":0,\"ts\":140,\"dur\":5,\"args\":{\"peer\":1,\"bytes\":7}}");
    assert_contains_(text, "{\"name\":\"wait\",\"cat\":\"wait\",\"ph\":\"X\",\"pid\":1,\"tid\":0,"
                           "\"ts\":200,\"dur\":30,\"args\":{\"peer\":0}}");
    size_t len = strlen(text);
    assert_true(len > 4 && strcmp(text + len - 4, "\n]}\n") == 0);
    free(text);
}

static void names(void **state)
{
    (void)state;
    assert_string_equal(trace_what_name(TRACE_BACKWARD), "backward");
    assert_string_equal(trace_what_name(TRACE_REDUCE_SCATTER), "ring reduce-scatter");
    assert_string_equal(trace_what_name(0), "?");
    assert_string_equal(trace_what_name(TRACE_WHAT_COUNT), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(off_records_nothing),
        cmocka_unit_test(records_and_drops),
        cmocka_unit_test(json_moves_names_and_escapes),
        cmocka_unit_test(names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
