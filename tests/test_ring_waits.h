// test_ring_waits.h: what a ring under test reported about its waits
// (ring_report_fn), and the checks of one wait that timed out, for the tests
// that time its bounded waits.
#ifndef VGPU_TEST_RING_WAITS_H
#define VGPU_TEST_RING_WAITS_H

#include <stdio.h>

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

// Counts a time outside [lo, hi), and says which.
static inline int wait_outside_(const char *what, double got, double lo, double hi)
{
    if (got >= lo && got < hi)
        return 0;
    fprintf(stderr, "%s: %.3f s, want [%.2f, %.2f) s\n", what, got, lo, hi);
    return 1;
}

// The misses of a wait on `peer` with bound bound_s that never ended, called
// at t0 and returned at ended: its return and its timeout report in
// [bound, bound + slack), one warning in [bound / 2, (bound + slack) / 2),
// each report said at the time it names (a clock restarted at the warning
// would say 0.4 s at 0.6 s; 0.1 s covers a preemption on the way in), one
// report of each kind, naming the peer. Each miss is said on stderr.
static inline int wait_reports_misses(const struct wait_reports *got, int peer, double t0,
                                      double ended, double bound_s, double slack_s)
{
    int bad = wait_outside_("the all-reduce returned after", ended - t0, bound_s,
                            bound_s + slack_s);
    if (got->timeouts != 1 || got->warnings != 1 || got->peer != peer) {
        fprintf(stderr, "%d timeout report(s), %d warning(s), naming rank %d; want 1, 1, rank %d\n",
                got->timeouts, got->warnings, got->peer, peer);
        bad++;
    }
    bad += wait_outside_("the timeout report said it waited", got->gave_up_s, bound_s,
                         bound_s + slack_s);
    bad += wait_outside_("the warning said it had waited", got->warned_s, bound_s / 2,
                         bound_s / 2 + slack_s / 2);
    bad += wait_outside_("the timeout report's lag behind the clock",
                         got->gave_up_at_s - t0 - got->gave_up_s, 0, 0.1);
    bad += wait_outside_("the warning's lag behind the clock",
                         got->warned_at_s - t0 - got->warned_s, 0, 0.1);
    return bad;
}

#endif
