// trace_span_cost.c: what one timeline span costs a rank (for
// scripts/bench_trace.sh): nanoseconds a trace_begin/trace_end pair takes
// with the trace off (the price every build pays) and on (a span recorded),
// the best of 5 rounds of 1e6 pairs each; and the same for a counted device
// operation (trace_op_begin/trace_op_end: two clock reads and four sums).
#include <stdio.h>
#include <stdlib.h>

#include "trace.h"

#define PAIRS 1000000L
#define ROUNDS 5

static double round_ns_(void)
{
    const uint64_t t0 = trace_now_us();
    for (long i = 0; i < PAIRS; i++) {
        const uint64_t span = trace_begin();
        trace_end(TRACE_WAIT, 0, span, i, 0);
    }
    return (double)(trace_now_us() - t0) * 1e3 / (double)PAIRS;
}

static double op_round_ns_(void)
{
    const uint64_t t0 = trace_now_us();
    for (long i = 0; i < PAIRS; i++) {
        const uint64_t op = trace_op_begin();
        trace_op_end(TRACE_OP_KERNEL, op, 0, (uint64_t)i);
    }
    return (double)(trace_now_us() - t0) * 1e3 / (double)PAIRS;
}

static double best_ns_(int on)
{
    double best = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        if (on && trace_start(PAIRS) < 0) {
            fprintf(stderr, "trace_span_cost: no memory for %ld spans\n", PAIRS);
            exit(1);
        }
        const double ns = round_ns_();
        best = ns < best ? ns : best;
        trace_stop();
    }
    return best;
}

// A counted operation's cost, on or off (best of ROUNDS).
static double best_op_ns_(int on)
{
    double best = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        if (on && trace_start(16) < 0)
            exit(1);
        const double ns = op_round_ns_();
        best = ns < best ? ns : best;
        trace_stop();
    }
    return best;
}

int main(void)
{
    const double op_off = best_op_ns_(0), op_on = best_op_ns_(1);
    const double off = best_ns_(0), on = best_ns_(1);
    size_t count;
    uint64_t dropped;
    trace_spans(&count, &dropped);
    if (count != PAIRS || dropped) { // the measurement recorded what it claims
        fprintf(stderr, "trace_span_cost: %zu spans recorded, %llu dropped; expected %ld\n", count,
                (unsigned long long)dropped, PAIRS);
        return 1;
    }
    printf("off_ns %.2f\non_ns %.2f\nop_off_ns %.2f\nop_on_ns %.2f\n", off, on, op_off, op_on);
    trace_free();
    return 0;
}
