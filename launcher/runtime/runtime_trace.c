// runtime_trace.c: the job's timeline (runtime.h: runtime_trace_begin and
// runtime_trace_write): clock offsets to rank 0, the gather of every rank's
// spans, rank 0's Chrome trace-event file.
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm_internal.h"
#include "flight.h"
#include "log.h"
#include "runtime_internal.h"
#include "trace.h"

#define SYNC_ROUNDS 8    // ping-pongs a rank; the one with the shortest round trip counts
#define SYNC_TAG 0x7663
#define TRACE_SPANS_MAX ((size_t)1 << 20) // 32 MiB a rank; the default job needs 1/10 of it

static struct {
    FILE *out;            // rank 0: the trace file, open since begin
    char path[4096];
    char label[64];       // the program and its version, in the file
    int64_t offset_us[2]; // this rank's offset to rank 0's clock, at begin and at the end
    int64_t uncertainty_us[2];
    uint64_t origin_us;   // rank 0: when tracing began
} tr_;

static double timeout_s_(const struct runtime *rt)
{
    return rt->cfg.comm.timeout_s > 0 ? rt->cfg.comm.timeout_s : 300.0;
}

// A request of the trace's exchanges (started with result mpi_rc), bounded
// like every control-plane wait (`turns` of it where the rank waits for rank
// 0 to take others first). 0, or the failure (runtime_control_failed: the
// job ends for vgpu_train; libvgpu returns it).
static int wait_turns_(struct runtime *rt, int mpi_rc, MPI_Request *req, const char *what,
                       int turns)
{
    double waited = 0;
    int rc = mpi_rc == MPI_SUCCESS
                 ? comm_mpi_wait(req, timeout_s_(rt) * (turns > 1 ? turns : 1), NULL, &waited)
                 : VGPU_ECOMM;
    if (rc == 0)
        return 0;
    char msg[256];
    if (rc == VGPU_ETIMEOUT)
        snprintf(msg, sizeof msg, "trace: timed out after %.1f s in %s: a rank stopped or died "
                 "(comm.timeout_s)", waited, what);
    else
        snprintf(msg, sizeof msg, "trace: MPI failed in %s", what);
    return runtime_control_failed(rt, rc, msg);
}

static int wait_(struct runtime *rt, int mpi_rc, MPI_Request *req, const char *what)
{
    return wait_turns_(rt, mpi_rc, req, what, 1);
}

// NTP over MPI: rank r sends its time t1, rank 0 answers with its own t2, r
// reads t3; rank 0's clock minus r's is t2 - (t1 + t3) / 2, off by at most
// half the round trip. Ranks on rank 0's host share its clock (offset 0).
static int clock_sync_(struct runtime *rt, int64_t *offset_us, int64_t *uncertainty_us)
{
    *offset_us = 0;
    *uncertainty_us = 0;
    if (rt->size == 1)
        return 0;
    const uint64_t seq = flight_begin(FLIGHT_CTL_EXCHANGE, 0);
    const MPI_Comm world = runtime_mpi_world(rt);
    const char *what = "the clock exchange";
    MPI_Request req;
    if (rt->rank == 0) {
        for (int r = 1; r < rt->size; r++)
            for (int k = 0; k < SYNC_ROUNDS; k++) {
                uint64_t t1, t2;
                TRY(wait_(rt, MPI_Irecv(&t1, 1, MPI_UINT64_T, r, SYNC_TAG, world, &req), &req, what));
                t2 = trace_now_us();
                TRY(wait_(rt, MPI_Isend(&t2, 1, MPI_UINT64_T, r, SYNC_TAG, world, &req), &req, what));
            }
    } else {
        uint64_t best = UINT64_MAX;
        for (int k = 0; k < SYNC_ROUNDS; k++) {
            uint64_t t1 = trace_now_us(), t2 = 0;
            TRY(wait_(rt, MPI_Isend(&t1, 1, MPI_UINT64_T, 0, SYNC_TAG, world, &req), &req, what));
            TRY(wait_(rt, MPI_Irecv(&t2, 1, MPI_UINT64_T, 0, SYNC_TAG, world, &req), &req, what));
            const uint64_t t3 = trace_now_us();
            if (t3 - t1 < best) {
                best = t3 - t1;
                *offset_us = (int64_t)t2 - (int64_t)(t1 + (t3 - t1) / 2);
                *uncertainty_us = (int64_t)(best + 1) / 2;
            }
        }
        if (rt->node_index == 0) { // rank 0's host: one CLOCK_MONOTONIC
            *offset_us = 0;
            *uncertainty_us = 0;
        }
    }
    flight_end(seq, 0);
    return 0;
}

int runtime_trace_begin(struct runtime *rt, const char *path, const char *label)
{
    int rc = 0;
    snprintf(tr_.label, sizeof tr_.label, "%s", label ? label : "vgpu");
    if (rt->rank == 0) {
        snprintf(tr_.path, sizeof tr_.path, "%s", path);
        if (!(tr_.out = fopen(path, "w"))) {
            rc = -errno;
            log_error("timeline %s: cannot write: %s", path, strerror(errno));
        }
    }
    if (rc == 0 && trace_start(TRACE_SPANS_MAX) < 0) {
        log_error("timeline: no memory for %zu spans (%zu MiB)", TRACE_SPANS_MAX,
                  TRACE_SPANS_MAX * sizeof(struct trace_span) >> 20);
        rc = VGPU_ENOMEM;
    }
    // The verdict, agreed (a failed agreement is the verdict too).
    int32_t worst = rc;
    const int ctl = runtime_mpi_stuck(rt)
                        ? VGPU_ECOMM
                        : runtime_host_all_reduce(rt, &worst, &worst, 1, COMM_INT32, COMM_MIN);
    if (ctl < 0 || (rc = worst) < 0) {
        trace_free();
        if (tr_.out) {
            fclose(tr_.out);
            tr_.out = NULL;
            unlink(path);
        }
        return ctl < 0 ? ctl : rc == VGPU_ENOMEM ? rc : VGPU_ECONFIG;
    }
    if ((rc = clock_sync_(rt, &tr_.offset_us[0], &tr_.uncertainty_us[0])) < 0) {
        trace_free();
        return rc;
    }
    tr_.origin_us = trace_now_us();
    return 0;
}

int runtime_trace_write(struct runtime *rt)
{
    trace_stop();
    if (runtime_mpi_stuck(rt))
        return VGPU_ECOMM;
    TRY(clock_sync_(rt, &tr_.offset_us[1], &tr_.uncertainty_us[1]));
    size_t count;
    uint64_t dropped;
    const struct trace_span *spans = trace_spans(&count, &dropped);
    // The clocks may drift during the run: the mean of the two offsets, and
    // half the drift added to the uncertainty.
    const int64_t drift = tr_.offset_us[1] - tr_.offset_us[0];
    const int64_t worse = tr_.uncertainty_us[0] > tr_.uncertainty_us[1] ? tr_.uncertainty_us[0]
                                                                         : tr_.uncertainty_us[1];
    struct trace_rank mine = {
        .rank = rt->rank,
        .pid = (int)getpid(),
        .offset_us = tr_.offset_us[0] + drift / 2,
        .uncertainty_us = worse + (drift < 0 ? -drift : drift) / 2,
        .count = count,
        .dropped = dropped,
    };
    snprintf(mine.host, sizeof mine.host, "%s", rt->host);
    struct trace_rank *all = rt->rank == 0 ? calloc((size_t)rt->size, sizeof *all) : NULL;
    if (rt->rank == 0 && !all) {
        fclose(tr_.out);
        tr_.out = NULL;
        return runtime_control_failed(rt, VGPU_ENOMEM, "trace: out of memory");
    }
    const MPI_Comm world = runtime_mpi_world(rt);
    const uint64_t seq = flight_begin(FLIGHT_CTL_EXCHANGE, count * sizeof *spans);
    MPI_Request req;
    int rc = wait_(rt, MPI_Igather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, 0,
                                   world, &req),
                   &req, "gathering the trace");
    if (rc < 0) {
        free(all);
        return rc;
    }
    if (rt->rank != 0) {
        // At most TRACE_SPANS_MAX spans: the byte count fits an int. Rank 0
        // takes the ranks in order, writing each: rank r's turn comes after
        // r - 1 others.
        rc = wait_turns_(rt, MPI_Isend(spans, (int)(count * sizeof *spans), MPI_BYTE, 0, SYNC_TAG,
                                       world, &req),
                         &req, "sending the trace", rt->rank);
        if (rc < 0)
            return rc;
    } else {
        // Rank by rank as the spans arrive: rank 0 holds one rank's at a time.
        uint64_t total = 0, lost = 0;
        struct trace_span *theirs = NULL;
        rc = trace_json_begin(tr_.out, all, rt->size, tr_.label);
        if (rc == 0)
            rc = trace_json_spans(tr_.out, &all[0], spans, count, tr_.origin_us);
        for (int r = 0; r < rt->size; r++) {
            total += all[r].count;
            lost += all[r].dropped;
        }
        for (int r = 1; r < rt->size; r++) {
            struct trace_span *grown = realloc(theirs, (all[r].count ? all[r].count : 1) * sizeof *theirs);
            if (!grown) {
                char msg[128];
                snprintf(msg, sizeof msg, "trace: out of memory for rank %d's %llu spans", r,
                         (unsigned long long)all[r].count);
                free(theirs);
                free(all);
                fclose(tr_.out);
                tr_.out = NULL;
                return runtime_control_failed(rt, VGPU_ENOMEM, msg);
            }
            theirs = grown;
            const int got = wait_(rt, MPI_Irecv(theirs, (int)(all[r].count * sizeof *theirs),
                                                MPI_BYTE, r, SYNC_TAG, world, &req),
                                  &req, "receiving the trace");
            if (got < 0) {
                free(theirs);
                free(all);
                fclose(tr_.out);
                tr_.out = NULL;
                return got;
            }
            if (rc == 0)
                rc = trace_json_spans(tr_.out, &all[r], theirs, all[r].count, tr_.origin_us);
        }
        free(theirs);
        if (rc == 0)
            rc = trace_json_end(tr_.out);
        if (fclose(tr_.out) != 0 && rc == 0)
            rc = -errno;
        tr_.out = NULL;
        int64_t skew = 0;
        for (int r = 0; r < rt->size; r++)
            skew = all[r].uncertainty_us > skew ? all[r].uncertainty_us : skew;
        if (rc < 0)
            log_error("timeline %s: cannot write: %s", tr_.path, status_str(rc));
        else
            printf("vgpu: timeline %s: %llu spans from %d ranks, clocks aligned within %lld us"
                   "%s\n",
                   tr_.path, (unsigned long long)total, rt->size, (long long)skew,
                   lost ? " (some spans dropped: the buffer was full; trace a shorter run)" : "");
        if (lost)
            log_warn("timeline: %llu spans dropped (%zu a rank fit); the trace ends early",
                     (unsigned long long)lost, TRACE_SPANS_MAX);
        fflush(stdout);
    }
    flight_end(seq, rc);
    free(all);
    trace_free();
    return rc < 0 ? VGPU_EIO : 0;
}
