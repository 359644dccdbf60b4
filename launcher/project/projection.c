// projection.c: the projection's model (projection.h; docs/PROJECTION.md).
#include "projection.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "status.h"
#include "util.h"

// ---- collectives: alpha-beta ----

// The links as a collective over n GPUs sees them.
struct links_ {
    long g, h;            // GPUs a host in use, hosts in use
    double a_in, b_in;    // intra: seconds a step, bytes a second
    double a_out, b_out;  // inter: the same, a host's NICs together
};

static struct links_ links_for_(const struct target *t, long n)
{
    struct links_ l;
    l.g = n < t->cluster.gpus_per_host ? n : t->cluster.gpus_per_host;
    l.h = (n + l.g - 1) / l.g;
    l.a_in = t->intra.latency_us * 1e-6;
    l.b_in = target_link_bytes_per_s(&t->intra, 0);
    l.a_out = t->inter.latency_us * 1e-6;
    l.b_out = target_link_bytes_per_s(&t->inter, 1);
    return l;
}

// `steps` steps of a ring over every GPU, each moving `bytes_a_step` (and
// `once` bytes through the slowest link once, a pipelined broadcast's). A
// ring over several hosts runs at its slowest link, and waits for its
// slowest step: the latency is the larger alpha's, the bytes the lower
// rate's (inside a host only when a host has several GPUs).
static struct comm_cost ring_(const struct links_ *l, double steps, double bytes_a_step, double once)
{
    struct comm_cost c = {0};
    const int in = l->g > 1, out = l->h > 1;
    const double bytes = steps * bytes_a_step + once;
    if (!out) {
        c.latency_intra_s = steps * l->a_in;
        c.bytes_intra_s = bytes / l->b_in;
        return c;
    }
    if (in && l->a_in > l->a_out)
        c.latency_intra_s = steps * l->a_in;
    else
        c.latency_inter_s = steps * l->a_out;
    if (in && l->b_in < l->b_out)
        c.bytes_intra_s = bytes / l->b_in;
    else
        c.bytes_inter_s = bytes / l->b_out;
    return c;
}

// A reduce-scatter then an all-gather inside each host (g GPUs), an
// all-reduce across hosts between them: each GPU of a host carries 1/g of
// the buffer across, so the host's NICs carry it all.
static struct comm_cost hierarchical_(const struct links_ *l, double bytes)
{
    struct comm_cost c = {0};
    const double g = (double)l->g, h = (double)l->h;
    if (l->g > 1) {
        c.latency_intra_s = 2 * (g - 1) * l->a_in;
        c.bytes_intra_s = 2 * (g - 1) * (bytes / g) / l->b_in;
    }
    c.latency_inter_s = 2 * (h - 1) * l->a_out;
    c.bytes_inter_s = 2 * (h - 1) * (bytes / h) / l->b_out;
    return c;
}

// NCCL's tree all-reduce (a chain inside a host, a double binary tree
// across hosts, reduce then broadcast, pipelined): latency as NCCL's tuning
// model counts it, 2 ((g - 1) intra + log2(h) inter) steps; the buffer
// crosses the slowest link twice (up and down).
static struct comm_cost tree_(const struct links_ *l, double bytes)
{
    struct comm_cost c = {0};
    c.latency_intra_s = 2 * (double)(l->g - 1) * l->a_in;
    c.latency_inter_s = l->h > 1 ? 2 * ceil(log2((double)l->h)) * l->a_out : 0;
    if (l->h > 1 && (l->g == 1 || l->b_out <= l->b_in))
        c.bytes_inter_s = 2 * bytes / l->b_out;
    else
        c.bytes_intra_s = 2 * bytes / l->b_in;
    return c;
}

struct comm_cost projection_collective(const struct target *t, enum profile_coll_kind kind,
                                       uint64_t bytes, long n)
{
    const struct comm_cost none = {0};
    if (n <= 1)
        return none;
    const struct links_ l = links_for_(t, n);
    const double S = (double)bytes, N = (double)n;
    switch (kind) {
    case PROFILE_ALL_REDUCE:
        if (t->cluster.collective == TARGET_HIERARCHICAL && l.h > 1)
            return hierarchical_(&l, S);
        if (t->cluster.collective == TARGET_TREE)
            return tree_(&l, S);
        return ring_(&l, 2 * (N - 1), S / N, 0); // reduce-scatter, then all-gather
    case PROFILE_REDUCE_SCATTER:
    case PROFILE_ALL_GATHER:
        return ring_(&l, N - 1, S / N, 0);
    case PROFILE_BROADCAST: // pipelined along the ring: n - 1 hops, the buffer once
        return ring_(&l, N - 1, 0, S);
    case PROFILE_BARRIER: // an all-reduce of nothing
        return ring_(&l, 2 * (N - 1), 0, 0);
    }
    return none;
}

double comm_cost_total(const struct comm_cost *c)
{
    return c->latency_intra_s + c->bytes_intra_s + c->latency_inter_s + c->bytes_inter_s;
}

static void comm_add_(struct comm_cost *sum, const struct comm_cost *c, double times)
{
    sum->latency_intra_s += times * c->latency_intra_s;
    sum->bytes_intra_s += times * c->bytes_intra_s;
    sum->latency_inter_s += times * c->latency_inter_s;
    sum->bytes_inter_s += times * c->bytes_inter_s;
}

// ---- compute: from the device measured to the target's ----

int projection_scale_for(struct projection_scale *s, const struct trace_profile *p,
                         const struct target *t, const struct target *measured,
                         enum target_math math, char *err, size_t err_bytes)
{
    s->flops = s->memory = 1;
    if (t->device.measured)
        return 0;
    if (!measured)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "%s's device is another than the one measured: give the measured "
                           "machine with --measured-on FILE (scripts/project_calibrate.sh writes "
                           "this machine's)", t->cluster.name[0] ? t->cluster.name : "the target");
    const double peak = target_peak_flops(t, math), here = target_peak_flops(measured, TARGET_FP32);
    if (peak <= 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "the target gives no %s peak (device.%s_tflops): choose another --math",
                           target_math_name(math), target_math_name(math));
    if (here <= 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "the --measured-on file gives no device.fp32_tflops: the rate of the "
                           "device the trace was measured on");
    if (p->flops_per_rank <= 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "the trace counts no FLOPs (its forward and backward spans carry none, "
                           "vgpu.h's vgpu_span_end): compute cannot be scaled to another device; "
                           "project onto a target with device.measured = true");
    // The job reaches the same share of the target's peak as it reached of
    // the measured device's: time scales as the peaks' ratio, inverted.
    s->flops = here / peak;
    s->peak_flops = peak;
    s->lanes = lanes_apply(p, t);
    if (measured->device.memory_gbyte_per_s > 0 && t->device.memory_gbyte_per_s > 0)
        s->memory = measured->device.memory_gbyte_per_s / t->device.memory_gbyte_per_s;
    return 0;
}

int projection_calibrate(struct target *t, const struct target *measured, char *err,
                         size_t err_bytes)
{
    if (!t->intra.calibrated)
        return 0;
    if (!measured || measured->intra.gbit_per_s <= 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "intra.calibrated = true takes the link inside a host from the "
                           "--measured-on file's [intra], which %s",
                           measured ? "gives no gbit_per_s" : "was not given "
                                                              "(scripts/project_calibrate.sh "
                                                              "writes one)");
    t->intra.latency_us = measured->intra.latency_us;
    t->intra.gbit_per_s = measured->intra.gbit_per_s;
    if (!t->intra.name[0])
        snprintf(t->intra.name, sizeof t->intra.name, "%s", measured->intra.name);
    return 0;
}

// ---- one row ----

// The parts a step's compute has on n GPUs, seconds: the FLOP-counted
// work and the rest of the mean GPU, and how long the mean GPU waits for
// the one with the most rows.
static void compute_parts_(struct projection_row *r, const struct trace_profile *p,
                           const struct projection_scale *s, long n)
{
    const double us = 1e-6;
    double rest = (p->other_us + p->optimizer_full_us) * us;
    if (p->sharded_params > 0) // each GPU updates its 1/n of the parameters
        rest += p->optimizer_us_per_param * (double)p->sharded_params / (double)n * us;
    if (p->global_batch > 0 && p->flop_us_per_sample > 0) {
        // Strong scaling: the global batch split over n GPUs, ceil(B / n) rows the most.
        const double mean_rows = p->global_batch / (double)n, most = ceil(mean_rows);
        const double flop = p->flop_us_per_sample * us * s->flops;
        const double data = p->data_us_per_sample * us * s->memory;
        r->flop_s = mean_rows * flop;
        r->rest_s = mean_rows * data + rest * s->memory;
        r->wait_s = (most - mean_rows) * (flop + data);
    } else {
        // No rows in the trace: each GPU does what a rank did here.
        r->flop_s = p->compute_us_per_rank * us * s->flops;
        r->rest_s = rest * s->memory;
        r->wait_s = 0;
    }
    r->compute_s = r->flop_s + r->rest_s;
}

// The lanes' compute on n GPUs: the mean GPU's rows, and the one with the
// most (the others wait for it). The forward and backward passes take
// their measured share of it (the buckets' pass).
static void lanes_parts_(struct projection_row *r, const struct trace_profile *p,
                         const struct target *t, const struct projection_scale *s, long n)
{
    const int strong = p->global_batch > 0 && p->rows_per_rank > 0;
    const double mean_rows = strong ? p->global_batch / (double)n : 1;
    struct lanes most;
    lanes_compute(&r->lanes, p, t, s->peak_flops, mean_rows);
    lanes_compute(&most, p, t, s->peak_flops, strong ? ceil(mean_rows) : 1);
    r->lanes_on = 1;
    r->compute_s = r->lanes.compute_s;
    r->wait_s = most.compute_s - r->compute_s;
    double here = p->host_us;
    for (int k = 0; k < PROFILE_OP_KINDS; k++)
        here += p->ops[k].busy_us;
    const double passes = p->flop_us_per_sample * p->rows_per_rank;
    r->flop_s = here > 0 ? r->compute_s * fmin(passes / here, 1) : 0;
    r->rest_s = r->compute_s - r->flop_s;
}

static enum projection_limit limit_of_(const struct projection_row *r)
{
    if (!r->fits)
        return LIMIT_MEMORY_SIZE;
    if (r->lanes_on) { // the compute as a whole, by what set it, against the rest
        const enum projection_limit lane = (enum projection_limit)(LIMIT_LAUNCH + r->lanes.limit);
        enum projection_limit most = lane;
        const double rest[] = {
            [LIMIT_INTRA_LATENCY] = r->comm.latency_intra_s,
            [LIMIT_INTRA_BW] = r->comm.bytes_intra_s,
            [LIMIT_INTER_LATENCY] = r->comm.latency_inter_s,
            [LIMIT_INTER_BW] = r->comm.bytes_inter_s, [LIMIT_IMBALANCE] = r->wait_s,
        };
        double top = r->compute_s;
        for (int i = LIMIT_INTRA_LATENCY; i <= LIMIT_IMBALANCE; i++)
            if (rest[i] > top) {
                top = rest[i];
                most = (enum projection_limit)i;
            }
        return most;
    }
    const double parts[] = {
        [LIMIT_COMPUTE] = r->flop_s, [LIMIT_MEMORY_BW] = r->rest_s,
        [LIMIT_INTRA_LATENCY] = r->comm.latency_intra_s, [LIMIT_INTRA_BW] = r->comm.bytes_intra_s,
        [LIMIT_INTER_LATENCY] = r->comm.latency_inter_s, [LIMIT_INTER_BW] = r->comm.bytes_inter_s,
        [LIMIT_IMBALANCE] = r->wait_s,
    };
    int most = LIMIT_COMPUTE;
    for (int i = 1; i <= LIMIT_IMBALANCE; i++)
        if (parts[i] > parts[most])
            most = i;
    return (enum projection_limit)most;
}

// A shaper's bucket fills while the GPU computes and its NIC idles, and
// then lets that much through at once: up to burst / rate of the network's
// time (of `inter_s`), no more than the link was idle (`idle_s`).
static double burst_hidden_(const struct target *t, long hosts, double idle_s, double inter_s)
{
    if (hosts < 2 || t->inter.burst_bytes <= 0)
        return 0;
    const double burst_s = (double)t->inter.burst_bytes / (t->inter.gbit_per_s * 1e9 / 8);
    return fmin(burst_s, fmin(idle_s, inter_s));
}

// The buckets' all-reduces beside the backward pass (the job overlaps
// them): each starts once the pass has made its part final (its share of
// the projected pass) and the one before it has ended, on the link's lane;
// what runs past the pass is exposed and joins the step's communication,
// in the parts' proportions. The rest ran beside the pass.
static void overlap_buckets_(struct projection_row *r, const struct trace_profile *p,
                             const struct target *t, long n)
{
    const double pass = r->flop_s * p->backward_share; // the mean GPU's backward pass
    double hidden = burst_hidden_(t, r->hosts, r->compute_s - pass, INFINITY);
    double end = 0;
    struct comm_cost all = {0};
    for (int i = 0; i < p->n_buckets; i++) {
        struct comm_cost c = projection_collective(t, PROFILE_ALL_REDUCE, p->bucket[i].bytes, n);
        const double burst = fmin(hidden, c.bytes_inter_s); // the first buckets go at once
        c.bytes_inter_s -= burst;
        hidden -= burst;
        end = fmax(end, p->bucket[i].ready_share * pass) + comm_cost_total(&c);
        comm_add_(&all, &c, 1);
    }
    const double total = comm_cost_total(&all), exposed = fmax(end - pass, 0);
    if (total > 0)
        comm_add_(&r->comm, &all, exposed / total);
    r->hidden_s = total - exposed;
}

void projection_row(struct projection_row *r, const struct trace_profile *p, const struct target *t,
                    const struct projection_scale *s, long n, double one_gpu_step_s)
{
    memset(r, 0, sizeof *r);
    r->gpus = n;
    r->hosts = (n + t->cluster.gpus_per_host - 1) / t->cluster.gpus_per_host;
    if (s->lanes)
        lanes_parts_(r, p, t, s, n);
    else
        compute_parts_(r, p, s, n);
    for (int i = 0; i < p->n_coll; i++) {
        const struct comm_cost c = projection_collective(t, p->coll[i].kind, p->coll[i].bytes, n);
        comm_add_(&r->comm, &c, p->coll[i].per_step);
    }
    if (p->n_buckets)
        overlap_buckets_(r, p, t, n);
    else // the link idles through the step's compute
        r->comm.bytes_inter_s -= burst_hidden_(t, r->hosts, r->compute_s, r->comm.bytes_inter_s);
    r->comm_s = comm_cost_total(&r->comm);
    r->step_s = r->compute_s + r->comm_s + r->wait_s;
    const int strong = p->global_batch > 0 && p->flop_us_per_sample > 0;
    r->samples_per_s = strong ? p->global_batch / r->step_s : 0;
    const double one = one_gpu_step_s > 0 ? one_gpu_step_s : r->step_s;
    r->efficiency = strong ? one / ((double)n * r->step_s) : one / r->step_s;
    char key[32];
    snprintf(key, sizeof key, "device_bytes@%ld", n);
    r->memory_bytes = trace_profile_note(p, key, 0);
    r->fits = !(r->memory_bytes > 0 && t->device.memory_bytes > 0 &&
                r->memory_bytes > (double)t->device.memory_bytes);
    r->limit = limit_of_(r);
}

const char *projection_limit_name(enum projection_limit l)
{
    static const char *const names[] = {
        [LIMIT_COMPUTE] = "compute",
        [LIMIT_MEMORY_BW] = "memory bandwidth",
        [LIMIT_INTRA_LATENCY] = "intra-host latency",
        [LIMIT_INTRA_BW] = "intra-host bandwidth",
        [LIMIT_INTER_LATENCY] = "network latency",
        [LIMIT_INTER_BW] = "network bandwidth",
        [LIMIT_IMBALANCE] = "load imbalance",
        [LIMIT_MEMORY_SIZE] = "memory size (does not fit)",
        [LIMIT_LAUNCH] = "launches (host lane)",
        [LIMIT_HOST_WORK] = "host work (host lane)",
        [LIMIT_KERNEL_FLOOR] = "shortest kernels (device lane)",
        [LIMIT_LANE_COMPUTE] = "compute (device lane)",
        [LIMIT_LANE_MEMORY] = "memory bandwidth (device lane)",
    };
    return (unsigned)l < sizeof names / sizeof names[0] ? names[l] : "?";
}
