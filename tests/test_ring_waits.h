// test_ring_waits.h: what a ring under test reported about its waits
// (ring_report_fn), for the tests that time its bounded waits.
#ifndef VGPU_TEST_RING_WAITS_H
#define VGPU_TEST_RING_WAITS_H

#include "ring_internal.h"
#include "util.h"

struct wait_reports {
    int warnings, timeouts;     // calls at half the bound, and at the bound
    int peer;                   // the rank the last call named
    double warned_s, gave_up_s; // the waited_s they said, s
    double warned_at_s, gave_up_at_s; // util_now_s() when they said it: a wait
                                      // whose clock restarted says less than ran
};

// A ring_report_fn: r->report_arg is a struct wait_reports.
static inline void record_report_(struct ring_core *r, int peer, int timed_out, double waited_s)
{
    struct wait_reports *w = r->report_arg;
    w->peer = peer;
    if (timed_out) {
        w->timeouts++;
        w->gave_up_s = waited_s;
        w->gave_up_at_s = util_now_s();
    } else {
        w->warnings++;
        w->warned_s = waited_s;
        w->warned_at_s = util_now_s();
    }
}

#endif
