// trace_profile.c: a --trace file read into one measured step (trace_profile.h).
#include "trace_profile.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_scan.h"
#include "status.h"
#include "util.h"

#define TRACE_BYTES_MAX ((size_t)4 << 30) // a trace of 1M spans a rank, 64 ranks, fits

enum ev_what_ {
    EV_OTHER, EV_STEP, EV_DATA, EV_FORWARD, EV_BACKWARD, EV_OPTIMIZER, EV_WAIT, EV_BUCKET, EV_COLL,
    EV_OPS
};

// The device operations' spans by kind (common/trace.c's trace_op_name).
static const char *const ops_names_[PROFILE_OP_KINDS] = {
    [PROFILE_OP_GEMM] = "gemm ops",         [PROFILE_OP_KERNEL] = "kernel ops",
    [PROFILE_OP_COPY_HOST] = "host copies", [PROFILE_OP_COPY_DEVICE] = "device copies",
    [PROFILE_OP_SYNC] = "syncs",
};

// One complete event ("ph":"X") of the file, what the profile needs of it.
struct ev_ {
    double ts, dur;    // microseconds
    int pid;           // the rank
    int lane;          // its tid: 0 the program's thread, 1 collectives beside it
    int what;          // enum ev_what_
    int coll;          // EV_COLL: its name's index in colls_; EV_OPS: enum profile_op
    double a, b;       // step; rows, flops; first, count; seq, bytes; ready_us, count
    double n, flops, bytes, busy_us; // EV_OPS: its operations
};

// The collectives by the names common/flight.c gives them, and what each is
// to the model.
static const struct {
    const char *name;
    enum profile_coll_kind kind;
} colls_[] = {
    {"all-reduce", PROFILE_ALL_REDUCE},       {"all-reduce+update", PROFILE_ALL_REDUCE},
    {"all-reduce-tree", PROFILE_ALL_REDUCE},  {"broadcast", PROFILE_BROADCAST},
    {"all-gather", PROFILE_ALL_GATHER},       {"barrier", PROFILE_BARRIER},
    {"reduce-scatter", PROFILE_REDUCE_SCATTER}, {"control-gather", PROFILE_ALL_GATHER},
    {"control-broadcast", PROFILE_BROADCAST}, {"control-reduce", PROFILE_ALL_REDUCE},
    {"control-barrier", PROFILE_BARRIER},     {"control-exchange", PROFILE_ALL_GATHER},
};
#define N_COLLS_ (int)(sizeof colls_ / sizeof colls_[0])

struct evs_ {
    struct ev_ *v;
    size_t n, cap;
};

static int push_(struct evs_ *e, const struct ev_ *x)
{
    if (e->n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 4096;
        struct ev_ *grown = realloc(e->v, cap * sizeof *grown);
        if (!grown)
            return VGPU_ENOMEM;
        e->v = grown;
        e->cap = cap;
    }
    e->v[e->n++] = *x;
    return 0;
}

static int what_of_(const char *name, const char *cat, int has_seq, int *coll)
{
    static const char *const names[] = {[EV_STEP] = "step", [EV_DATA] = "data",
                                        [EV_FORWARD] = "forward", [EV_BACKWARD] = "backward",
                                        [EV_OPTIMIZER] = "optimizer", [EV_WAIT] = "wait",
                                        [EV_BUCKET] = "gradient bucket"};
    if (!strcmp(cat, "device")) {
        for (int k = 0; k < PROFILE_OP_KINDS; k++)
            if (!strcmp(name, ops_names_[k])) {
                *coll = k;
                return EV_OPS;
            }
        return EV_OTHER;
    }
    if (has_seq && (!strcmp(cat, "comm") || !strcmp(cat, "control"))) {
        for (int i = 0; i < N_COLLS_; i++)
            if (!strcmp(name, colls_[i].name)) {
                *coll = i;
                return EV_COLL;
            }
        return EV_OTHER;
    }
    for (int w = EV_STEP; w <= EV_BUCKET; w++)
        if (!strcmp(name, names[w]))
            return w;
    return EV_OTHER;
}

// An event's "args": the numbers the profile reads, by what the event is.
static int read_args_(struct json_scan *j, struct ev_ *e, int *has_seq)
{
    char key[32];
    int more;
    double v;
    if (json_scan_object(j) < 0)
        return -1;
    while ((more = json_scan_member(j, key, sizeof key)) == 1) {
        const int first = !strcmp(key, "step") || !strcmp(key, "rows") ||
                          !strcmp(key, "first") || !strcmp(key, "seq") || !strcmp(key, "ready_us");
        const int second = !strcmp(key, "flops") || !strcmp(key, "count") || !strcmp(key, "bytes");
        const int ops = !strcmp(key, "n") || !strcmp(key, "busy_us");
        if (!first && !second && !ops) {
            if (json_scan_skip(j) < 0)
                return -1;
            continue;
        }
        if (json_scan_number(j, &v) < 0)
            return -1;
        if (first || second)
            *(first ? &e->a : &e->b) = v;
        *has_seq |= !strcmp(key, "seq");
        double *op = !strcmp(key, "n") ? &e->n : !strcmp(key, "flops") ? &e->flops
                     : !strcmp(key, "bytes") ? &e->bytes : !strcmp(key, "busy_us") ? &e->busy_us
                                                                        : NULL;
        if (op)
            *op = v;
    }
    return more;
}

// One element of traceEvents; complete events inside the steps' ranks go to evs.
static int read_event_(struct json_scan *j, struct evs_ *evs)
{
    char key[32], name[48] = "", cat[32] = "", ph[8] = "";
    struct ev_ e = {0};
    int more, has_seq = 0;
    double pid = -1, tid = 0;
    if (json_scan_object(j) < 0)
        return -1;
    while ((more = json_scan_member(j, key, sizeof key)) == 1) {
        int rc = !strcmp(key, "name")  ? json_scan_string(j, name, sizeof name)
                 : !strcmp(key, "cat") ? json_scan_string(j, cat, sizeof cat)
                 : !strcmp(key, "ph")  ? json_scan_string(j, ph, sizeof ph)
                 : !strcmp(key, "pid") ? json_scan_number(j, &pid)
                 : !strcmp(key, "tid") ? json_scan_number(j, &tid)
                 : !strcmp(key, "ts")  ? json_scan_number(j, &e.ts)
                 : !strcmp(key, "dur") ? json_scan_number(j, &e.dur)
                 : !strcmp(key, "args") ? read_args_(j, &e, &has_seq)
                                        : json_scan_skip(j);
        if (rc < 0)
            return -1;
    }
    if (more < 0 || strcmp(ph, "X") != 0 || pid < 0 || pid > 1e6)
        return more < 0 ? -1 : 0;
    e.pid = (int)pid;
    e.lane = tid != 0;
    e.what = what_of_(name, cat, has_seq, &e.coll);
    return e.what == EV_OTHER ? 0 : push_(evs, &e);
}

static int read_other_data_(struct json_scan *j, struct trace_profile *p, int *vgpu)
{
    char key[48];
    int more;
    double v;
    if (json_scan_object(j) < 0)
        return -1;
    while ((more = json_scan_member(j, key, sizeof key)) == 1) {
        int rc;
        if (!strcmp(key, "producer")) {
            rc = json_scan_string(j, p->producer, sizeof p->producer);
        } else if (!strcmp(key, "ranks")) {
            rc = json_scan_number(j, &v);
            p->ranks = (int)v;
        } else if (!strcmp(key, "clocks")) {
            *vgpu = 1; // what every vgpu trace has (scripts/trace_summary.py asks the same)
            rc = json_scan_skip(j);
        } else if (!strcmp(key, "notes")) {
            int m;
            if ((rc = json_scan_object(j)) < 0)
                return -1;
            while ((m = json_scan_member(j, key, sizeof key)) == 1) {
                if (json_scan_number(j, &v) < 0)
                    return -1;
                if (p->n_notes < PROFILE_NOTES_MAX) {
                    snprintf(p->notes[p->n_notes].key, sizeof p->notes[0].key, "%s", key);
                    p->notes[p->n_notes++].value = v;
                }
            }
            rc = m;
        } else {
            rc = json_scan_skip(j);
        }
        if (rc < 0)
            return -1;
    }
    return more;
}

// The whole document: otherData and traceEvents.
static int read_doc_(struct json_scan *j, struct trace_profile *p, struct evs_ *evs, int *vgpu,
                     int *rc_out)
{
    char key[32];
    int more;
    if (json_scan_object(j) < 0)
        return -1;
    while ((more = json_scan_member(j, key, sizeof key)) == 1) {
        if (!strcmp(key, "otherData")) {
            if (read_other_data_(j, p, vgpu) < 0)
                return -1;
        } else if (!strcmp(key, "traceEvents")) {
            int m;
            if (json_scan_array(j) < 0)
                return -1;
            while ((m = json_scan_element(j)) == 1) {
                const int r = read_event_(j, evs);
                if (r == VGPU_ENOMEM)
                    *rc_out = r;
                if (r < 0)
                    return -1;
            }
            if (m < 0)
                return -1;
        } else if (json_scan_skip(j) < 0) {
            return -1;
        }
    }
    return more < 0 ? -1 : json_scan_end(j);
}

// ---- from events to one step ----

static int by_rank_time_(const void *x, const void *y)
{
    const struct ev_ *a = x, *b = y;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    return a->dur > b->dur ? -1 : a->dur < b->dur; // an enclosing span first
}

static int by_value_(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

// The median of v[0, n) (sorted in place); 0 when n is 0.
static double median_(double *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, by_value_);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One rank's step, added up.
struct step_sum_ {
    double fb_us, fwd_rows, flops, data_us, opt_us, opt_count, opt_full_us, opt_in_coll_us;
    double coll_us, wait_us, step_us;
    double bw_us, bw_start, bw_end; // the backward pass (its last span's start and end)
    double lane_end;                // the end of the last collective beside it
    double ops[PROFILE_OP_KINDS][4];// the device operations: count, FLOPs, bytes, busy us
    int n_buckets;                  // the step's gradient buckets, in order:
    struct profile_bucket *buckets; // ready_share here is the time final (us), until summed
};

// The columns the medians are taken over, one value a (rank, step).
enum col_ { C_FLOP_PER_ROW, C_DATA_PER_ROW, C_COMPUTE, C_FLOPS_ROW, C_FLOPS, C_OPT_PER_PARAM,
            C_OPT_FULL, C_OTHER, C_COMM, C_WAIT, C_STEP, C_ROWS, C_BW_SHARE, C_HOST,
            C_OPS, C_COUNT_ = C_OPS + 4 * PROFILE_OP_KINDS };

struct sums_ {
    double *col[C_COUNT_];
    size_t n, cap;
    double rows_by_rank; // the sum over ranks of their median rows
    uint64_t sharded_params;
};

static int sums_push_(struct sums_ *s, const double *row)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        for (int c = 0; c < C_COUNT_; c++) {
            double *grown = realloc(s->col[c], cap * sizeof *grown);
            if (!grown)
                return VGPU_ENOMEM;
            s->col[c] = grown;
        }
        s->cap = cap;
    }
    for (int c = 0; c < C_COUNT_; c++)
        s->col[c][s->n] = row[c];
    s->n++;
    return 0;
}

// The index of the span in starts[0, n) (sorted, each with its end) that
// holds [ts, ts + dur], or -1. A microsecond of slack: times are rounded.
static long holder_(const struct ev_ *const *spans, long n, double ts, double dur)
{
    long lo = 0, hi = n; // the first span starting after ts
    while (lo < hi) {
        long mid = (lo + hi) / 2;
        if (spans[mid]->ts <= ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (long i = lo - 1; i >= 0 && i >= lo - 2; i--) // nested collectives: look one further
        if (ts + dur <= spans[i]->ts + spans[i]->dur + 1)
            return i;
    return -1;
}

static void add_coll_(struct trace_profile *p, const struct ev_ *e)
{
    const uint64_t bytes = e->b > 0 ? (uint64_t)e->b : 0;
    for (int i = 0; i < p->n_coll; i++)
        if (p->coll[i].bytes == bytes && !strcmp(p->coll[i].name, colls_[e->coll].name)) {
            p->coll[i].per_step += 1;
            return;
        }
    if (p->n_coll == PROFILE_COLL_MAX)
        return; // a step making more distinct collectives than that: the rest are left out
    struct profile_coll *c = &p->coll[p->n_coll++];
    snprintf(c->name, sizeof c->name, "%s", colls_[e->coll].name);
    c->kind = colls_[e->coll].kind;
    c->bytes = bytes;
    c->per_step = 1;
}

// What runs beside the program's thread (lane 1: a gradient bucket and its
// collective's spans) is the overlap's: the step's own sums leave it out.
static void add_beside_(struct step_sum_ *s, const struct ev_ *e)
{
    if (e->what == EV_BUCKET && s->buckets && s->n_buckets < PROFILE_BUCKETS_MAX) {
        s->buckets[s->n_buckets++] = (struct profile_bucket){.ready_share = e->ts - e->a};
    } else if (e->what == EV_COLL) {
        s->lane_end = fmax(s->lane_end, e->ts + e->dur);
        if (s->n_buckets && !s->buckets[s->n_buckets - 1].bytes) // the bucket's own
            s->buckets[s->n_buckets - 1].bytes = e->b > 0 ? (uint64_t)e->b : 0;
    }
}

static void add_to_step_(struct step_sum_ *s, const struct ev_ *e, const struct ev_ *const *colls,
                         long n_colls)
{
    if (e->lane && e->what != EV_OPS) { // the operations' counts have a row of their own
        add_beside_(s, e);
        return;
    }
    switch (e->what) {
    case EV_FORWARD:
        s->fwd_rows += e->a;
        s->fb_us += e->dur;
        s->flops += e->b;
        break;
    case EV_BACKWARD:
        s->fb_us += e->dur;
        s->flops += e->b;
        s->bw_us += e->dur;
        s->bw_start = e->ts;
        s->bw_end = e->ts + e->dur;
        break;
    case EV_DATA:
        s->data_us += e->dur;
        break;
    case EV_OPTIMIZER:
        if (e->b > 0) {
            s->opt_us += e->dur;
            s->opt_count += e->b;
        } else {
            s->opt_full_us += e->dur;
        }
        if (holder_(colls, n_colls, e->ts, e->dur) >= 0)
            s->opt_in_coll_us += e->dur;
        break;
    case EV_WAIT:
        s->wait_us += e->dur;
        break;
    case EV_COLL:
        s->coll_us += e->dur;
        break;
    case EV_OPS: {
        double *o = s->ops[e->coll];
        o[0] += e->n;
        o[1] += e->flops;
        o[2] += e->bytes;
        o[3] += e->busy_us;
        break;
    }
    default:
        break;
    }
}

// Per used step, the row of columns the medians are taken over.
static int push_step_(struct sums_ *sums, const struct step_sum_ *s, double *rows)
{
    double row[C_COUNT_] = {0};
    const double rows_here = s->fwd_rows;
    row[C_FLOP_PER_ROW] = rows_here > 0 ? s->fb_us / rows_here : 0;
    row[C_DATA_PER_ROW] = rows_here > 0 ? s->data_us / rows_here : 0;
    row[C_COMPUTE] = s->fb_us + s->data_us;
    row[C_FLOPS_ROW] = rows_here > 0 ? s->flops / rows_here : 0;
    row[C_FLOPS] = s->flops;
    row[C_OPT_PER_PARAM] = s->opt_count > 0 ? s->opt_us / s->opt_count : 0;
    row[C_OPT_FULL] = s->opt_full_us;
    const double opt_outside = s->opt_us + s->opt_full_us - s->opt_in_coll_us;
    // The wait for the buckets' all-reduces after the pass is the overlap's
    // (projected from the buckets), not other work of the step.
    const double exposed = s->lane_end > s->bw_end ? s->lane_end - s->bw_end : 0;
    row[C_OTHER] = fmax(s->step_us - row[C_COMPUTE] - opt_outside - s->coll_us - exposed, 0);
    row[C_BW_SHARE] = s->fb_us > 0 ? s->bw_us / s->fb_us : 0;
    row[C_COMM] = fmax(s->coll_us - s->opt_in_coll_us, 0);
    row[C_WAIT] = s->wait_us;
    row[C_STEP] = s->step_us;
    row[C_ROWS] = rows_here;
    double busy = 0;
    for (int k = 0; k < PROFILE_OP_KINDS; k++) { // FLOPs and bytes a row, where rows are counted
        const double per = rows_here > 0 ? rows_here : 1;
        row[C_OPS + 4 * k] = s->ops[k][0];
        row[C_OPS + 4 * k + 1] = s->ops[k][1] / per;
        row[C_OPS + 4 * k + 2] = s->ops[k][2] / per;
        row[C_OPS + 4 * k + 3] = s->ops[k][3];
        busy += s->ops[k][3];
    }
    row[C_HOST] = fmax(s->step_us - row[C_COMM] - exposed - busy, 0);
    *rows = s->opt_count;
    return sums_push_(sums, row);
}

// The buckets of the first used step, each final at the median share of the
// backward pass over the steps that made as many.
static void profile_buckets_(struct trace_profile *p, const struct step_sum_ *steps, long n)
{
    p->n_buckets = n > 0 ? steps[0].n_buckets : 0;
    double *share = malloc(((size_t)n + 1) * sizeof *share);
    for (int i = 0; share && i < p->n_buckets; i++) {
        size_t m = 0;
        for (long k = 0; k < n; k++) {
            const struct step_sum_ *s = &steps[k];
            const double pass = s->bw_end - s->bw_start;
            if (s->n_buckets == p->n_buckets && pass > 0)
                share[m++] = fmin(fmax((s->buckets[i].ready_share - s->bw_start) / pass, 0), 1);
        }
        p->bucket[i] = (struct profile_bucket){.bytes = steps[0].buckets[i].bytes,
                                               .ready_share = median_(share, m)};
    }
    if (!share)
        p->n_buckets = 0;
    free(share);
}

// One rank's events [0, n), sorted by time: its steps added up, the first
// (a warm-up) left out when there are more. first_rank: its collectives
// make the profile's list.
static int rank_steps_(struct trace_profile *p, struct sums_ *sums, const struct ev_ *ev, size_t n,
                       int first_rank)
{
    const struct ev_ **steps = malloc(2 * (n + 1) * sizeof *steps);
    if (!steps)
        return VGPU_ENOMEM;
    const struct ev_ **colls = steps + n + 1;
    long n_steps = 0, n_colls = 0, n_buckets = 0;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].what == EV_STEP)
            steps[n_steps++] = &ev[i];
        else if (ev[i].what == EV_COLL && !ev[i].lane)
            colls[n_colls++] = &ev[i];
        n_buckets += ev[i].what == EV_BUCKET;
    }
    // Room for the buckets of each step, only where the trace has buckets
    // (and of the first rank: its buckets are the profile's).
    const int keep = first_rank && n_buckets > 0;
    struct step_sum_ *sum = calloc((size_t)n_steps + 1, sizeof *sum);
    struct profile_bucket *buckets =
        keep ? calloc(((size_t)n_steps + 1) * PROFILE_BUCKETS_MAX, sizeof *buckets) : NULL;
    if (!sum || (keep && !buckets)) {
        free(buckets);
        free(sum);
        free(steps);
        return VGPU_ENOMEM;
    }
    for (long k = 0; buckets && k < n_steps; k++)
        sum[k].buckets = buckets + (size_t)k * PROFILE_BUCKETS_MAX;
    const long skip = n_steps > 1 ? 1 : 0;
    for (size_t i = 0; i < n; i++) {
        const long k = ev[i].what == EV_STEP ? -1 : holder_(steps, n_steps, ev[i].ts, ev[i].dur);
        if (k < 0)
            continue;
        add_to_step_(&sum[k], &ev[i], colls, n_colls);
        if (first_rank && k >= skip && ev[i].what == EV_COLL && !ev[i].lane)
            add_coll_(p, &ev[i]);
    }
    if (first_rank)
        profile_buckets_(p, sum + skip, n_steps - skip);
    free(buckets);
    int rc = 0;
    double params = 0, *rows = malloc(((size_t)n_steps + 1) * sizeof *rows);
    size_t n_rows = 0;
    for (long k = skip; k < n_steps && rc == 0 && rows; k++) {
        sum[k].step_us = steps[k]->dur;
        rc = push_step_(sums, &sum[k], &params);
        rows[n_rows++] = sum[k].fwd_rows;
        if (k == n_steps - 1)
            sums->sharded_params += (uint64_t)params; // the rank's shard, from its last step
    }
    if (first_rank)
        p->steps = n_steps - skip;
    sums->rows_by_rank += rows ? median_(rows, n_rows) : 0;
    rc = rc ? rc : rows ? 0 : VGPU_ENOMEM;
    free(rows);
    free(sum);
    free(steps);
    return rc;
}

static void sums_free_(struct sums_ *s)
{
    for (int c = 0; c < C_COUNT_; c++)
        free(s->col[c]);
}

// The medians into the profile.
static void summarize_(struct trace_profile *p, struct sums_ *s)
{
    p->flop_us_per_sample = median_(s->col[C_FLOP_PER_ROW], s->n);
    p->data_us_per_sample = median_(s->col[C_DATA_PER_ROW], s->n);
    p->compute_us_per_rank = median_(s->col[C_COMPUTE], s->n);
    p->flops_per_sample = median_(s->col[C_FLOPS_ROW], s->n);
    p->flops_per_rank = median_(s->col[C_FLOPS], s->n);
    p->optimizer_us_per_param = median_(s->col[C_OPT_PER_PARAM], s->n);
    p->optimizer_full_us = median_(s->col[C_OPT_FULL], s->n);
    p->other_us = median_(s->col[C_OTHER], s->n);
    p->comm_us = median_(s->col[C_COMM], s->n);
    p->wait_us = median_(s->col[C_WAIT], s->n);
    p->step_us = median_(s->col[C_STEP], s->n);
    p->backward_share = median_(s->col[C_BW_SHARE], s->n);
    p->host_us = median_(s->col[C_HOST], s->n);
    p->rows_per_rank = median_(s->col[C_ROWS], s->n);
    for (int k = 0; k < PROFILE_OP_KINDS; k++) {
        struct profile_ops *o = &p->ops[k];
        o->count = median_(s->col[C_OPS + 4 * k], s->n);
        o->flops = median_(s->col[C_OPS + 4 * k + 1], s->n);
        o->bytes = median_(s->col[C_OPS + 4 * k + 2], s->n);
        o->busy_us = median_(s->col[C_OPS + 4 * k + 3], s->n);
        p->has_ops |= o->count > 0;
    }
    p->sharded_params = s->sharded_params;
    p->global_batch = trace_profile_note(p, "global_batch", s->rows_by_rank);
    for (int i = 0; i < p->n_coll; i++)
        p->coll[i].per_step /= (double)(p->steps > 0 ? p->steps : 1);
}

static int analyse_(struct trace_profile *p, struct evs_ *evs, const char *origin, char *err,
                    size_t err_bytes)
{
    if (evs->n) // qsort's array may not be NULL, even empty
        qsort(evs->v, evs->n, sizeof *evs->v, by_rank_time_);
    struct sums_ sums = {0};
    int rc = 0, ranks = 0;
    for (size_t i = 0; i < evs->n && rc == 0;) {
        size_t end = i;
        while (end < evs->n && evs->v[end].pid == evs->v[i].pid)
            end++;
        rc = rank_steps_(p, &sums, evs->v + i, end - i, ranks == 0);
        ranks++;
        i = end;
    }
    if (rc == 0 && sums.n == 0)
        rc = util_errorf(err, err_bytes, VGPU_EFORMAT,
                         "%s has no steps: vgpu-project needs a program's step spans "
                         "(vgpu_span_step), as vgpu_train --trace writes them", origin);
    if (rc == 0) {
        summarize_(p, &sums);
        p->ranks = p->ranks > ranks ? p->ranks : ranks;
        if (p->n_coll == 0 && p->n_buckets == 0)
            rc = util_errorf(err, err_bytes, VGPU_EFORMAT,
                             "%s has no collectives inside its steps: nothing to project "
                             "across GPUs (a run of one rank with no all-reduce?)", origin);
    }
    sums_free_(&sums);
    return rc;
}

int trace_profile_parse(struct trace_profile *p, const char *text, size_t bytes, const char *origin,
                        char *err, size_t err_bytes)
{
    memset(p, 0, sizeof *p);
    struct json_scan j;
    struct evs_ evs = {0};
    int vgpu = 0, rc = 0;
    json_scan_init(&j, text, bytes);
    if (read_doc_(&j, p, &evs, &vgpu, &rc) < 0 && rc == 0)
        rc = util_errorf(err, err_bytes, VGPU_EFORMAT,
                         "%s is not whole JSON: %s (was the run cut off before it wrote "
                         "the trace?)", origin, j.err);
    else if (rc < 0)
        util_errorf(err, err_bytes, rc, "%s: out of memory for its spans", origin);
    else if (!vgpu)
        rc = util_errorf(err, err_bytes, VGPU_EFORMAT,
                         "%s is not a vgpu --trace file (no otherData.clocks)", origin);
    if (rc == 0)
        rc = analyse_(p, &evs, origin, err, err_bytes);
    free(evs.v);
    return rc;
}

int trace_profile_load(struct trace_profile *p, const char *path, char *err, size_t err_bytes)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return util_errorf(err, err_bytes, -errno, "cannot read %s: %s", path, strerror(errno));
    char *text = NULL;
    size_t bytes = 0, cap = 0, got;
    int rc = 0;
    do {
        if (bytes == cap) {
            cap = cap ? 2 * cap : (size_t)1 << 20;
            char *grown = cap <= TRACE_BYTES_MAX ? realloc(text, cap) : NULL;
            if (!grown) {
                rc = util_errorf(err, err_bytes, VGPU_ENOMEM, "%s: too big to read (%zu bytes "
                                 "so far)", path, bytes);
                break;
            }
            text = grown;
        }
        got = fread(text + bytes, 1, cap - bytes, f);
        bytes += got;
    } while (got > 0);
    if (rc == 0 && ferror(f))
        rc = util_errorf(err, err_bytes, VGPU_EIO, "cannot read %s", path);
    fclose(f);
    if (rc == 0)
        rc = trace_profile_parse(p, text, bytes, path, err, err_bytes);
    free(text);
    return rc;
}

double trace_profile_note(const struct trace_profile *p, const char *key, double otherwise)
{
    for (int i = 0; i < p->n_notes; i++)
        if (!strcmp(p->notes[i].key, key))
            return p->notes[i].value;
    return otherwise;
}
