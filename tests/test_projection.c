// test_projection.c: vgpu-project's model on hand-made inputs, exact values
// (launcher/project/): each collective's alpha-beta time by algorithm, the
// compute scaling's ratio, a row's parts adding up with the communication
// counted once; the target file's keys at their bounds; the trace reader on
// small traces, whole, cut off and wrong.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "json_scan.h"
#include "projection.h"
#include "status.h"

// Relative agreement to the last bits: the model is arithmetic, no noise.
static void assert_close_(double got, double want, const char *what)
{
    if (fabs(got - want) > 1e-12 * fmax(fabs(want), 1e-30)) {
        fprintf(stderr, "%s: got %.17g, want %.17g\n", what, got, want);
        fail();
    }
}

static struct target load_(const char *text)
{
    struct target t;
    char err[512];
    int rc = target_load_text(&t, text, "test.ini", NULL, 0, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    return t;
}

// 1 GB/s = 8 Gbit/s: the byte terms below are bytes / 1e9 seconds.
static const char one_host_[] = "[target]\nhosts = 1\ngpus_per_host = 8\n"
                                "[device]\nfp32_tflops = 10\nmemory_gbyte_per_s = 1000\nmemory = 1G\n"
                                "[intra]\nlatency_us = 2\ngbit_per_s = 8\n";
static const char two_hosts_[] = "[target]\nhosts = 2\ngpus_per_host = 4\ncollective = hierarchical\n"
                                 "[device]\nfp32_tflops = 10\n"
                                 "[intra]\nlatency_us = 1\ngbit_per_s = 8\n"
                                 "[inter]\nlatency_us = 10\ngbit_per_s = 4\nnics_per_host = 2\n";

static void ring_all_reduce(void **state)
{
    (void)state;
    struct target t = load_(one_host_);
    // 2(n-1) steps of S/n: 4 GPUs, 4 MB: 6 x (2 us + 1 MB / 1 GB/s).
    struct comm_cost c = projection_collective(&t, PROFILE_ALL_REDUCE, 4000000, 4);
    assert_close_(c.latency_intra_s, 6 * 2e-6, "latency");
    assert_close_(c.bytes_intra_s, 6 * 1e-3, "bytes");
    assert_close_(comm_cost_total(&c), 6.012e-3, "total");
    assert_true(c.latency_inter_s == 0 && c.bytes_inter_s == 0);
    // 8 GPUs: 14 steps of 0.5 MB.
    c = projection_collective(&t, PROFILE_ALL_REDUCE, 4000000, 8);
    assert_close_(comm_cost_total(&c), 14 * (2e-6 + 0.5e-3), "8 GPUs");
    // One GPU: nothing to exchange.
    c = projection_collective(&t, PROFILE_ALL_REDUCE, 4000000, 1);
    assert_true(comm_cost_total(&c) == 0);
}

static void ring_other_kinds(void **state)
{
    (void)state;
    struct target t = load_(one_host_);
    struct comm_cost c = projection_collective(&t, PROFILE_REDUCE_SCATTER, 4000000, 4);
    assert_close_(comm_cost_total(&c), 3 * (2e-6 + 1e-3), "reduce-scatter: n-1 steps of S/n");
    c = projection_collective(&t, PROFILE_ALL_GATHER, 4000000, 4);
    assert_close_(comm_cost_total(&c), 3 * (2e-6 + 1e-3), "all-gather");
    c = projection_collective(&t, PROFILE_BROADCAST, 4000000, 4);
    assert_close_(comm_cost_total(&c), 3 * 2e-6 + 4e-3, "broadcast: n-1 hops, S once");
    c = projection_collective(&t, PROFILE_BARRIER, 0, 4);
    assert_close_(comm_cost_total(&c), 6 * 2e-6, "barrier");
}

static void ring_across_hosts(void **state)
{
    (void)state;
    // A flat ring over 2 hosts runs at its slowest link: the network's alpha
    // (10 us) and the lower rate (a host's 2 NICs x 2 Gbit/s = 0.5 GB/s, below
    // intra's 1 GB/s).
    struct target t = load_(two_hosts_);
    t.cluster.collective = TARGET_RING;
    t.inter.gbit_per_s = 2; // the host: 0.5 GB/s, below intra's 1 GB/s
    struct comm_cost c = projection_collective(&t, PROFILE_ALL_REDUCE, 8000000, 8);
    assert_close_(c.latency_inter_s, 14 * 10e-6, "the larger alpha");
    assert_close_(c.bytes_inter_s, 14 * 1e6 / 0.5e9, "the lower rate");
    assert_true(c.latency_intra_s == 0 && c.bytes_intra_s == 0);
}

static void hierarchical(void **state)
{
    (void)state;
    struct target t = load_(two_hosts_);
    // Inside: reduce-scatter + all-gather over 4, 2 x 3 steps of S/4 at 1 GB/s;
    // across: an all-reduce over 2 hosts, 2 x 1 steps of S/2 at 2 x 0.5 GB/s.
    struct comm_cost c = projection_collective(&t, PROFILE_ALL_REDUCE, 8000000, 8);
    assert_close_(c.latency_intra_s, 6 * 1e-6, "intra latency");
    assert_close_(c.bytes_intra_s, 6 * 2e6 / 1e9, "intra bytes");
    assert_close_(c.latency_inter_s, 2 * 10e-6, "inter latency");
    assert_close_(c.bytes_inter_s, 2 * 4e6 / 1e9, "inter bytes");
    // On one host it is the ring.
    c = projection_collective(&t, PROFILE_ALL_REDUCE, 8000000, 4);
    assert_close_(comm_cost_total(&c), 6 * (1e-6 + 2e-3), "one host");
}

static void tree(void **state)
{
    (void)state;
    struct target t = load_(two_hosts_);
    t.cluster.collective = TARGET_TREE;
    // NCCL's count: 2 ((g-1) intra + log2(h) inter) steps; the buffer twice
    // through the slowest link (inter, 1 GB/s = intra's: the network's).
    struct comm_cost c = projection_collective(&t, PROFILE_ALL_REDUCE, 8000000, 8);
    assert_close_(c.latency_intra_s, 2 * 3 * 1e-6, "chain inside");
    assert_close_(c.latency_inter_s, 2 * 1 * 10e-6, "tree across");
    assert_close_(c.bytes_inter_s, 2 * 8e6 / 1e9, "the buffer up and down");
    assert_true(c.bytes_intra_s == 0);
}

// A profile made by hand: 10 us of FLOP work and 1 us of data a sample,
// 256 samples a step, 5 us of other work, a sharded update of 1000
// parameters at 2 ns each, one 4 MB all-reduce a step.
static struct trace_profile profile_(void)
{
    struct trace_profile p;
    memset(&p, 0, sizeof p);
    p.ranks = 2;
    p.steps = 10;
    p.global_batch = 256;
    p.flop_us_per_sample = 10;
    p.data_us_per_sample = 1;
    p.flops_per_sample = 1e6;
    p.flops_per_rank = 128e6;
    p.other_us = 5;
    p.optimizer_us_per_param = 0.002;
    p.sharded_params = 1000;
    p.n_coll = 1;
    snprintf(p.coll[0].name, sizeof p.coll[0].name, "all-reduce+update");
    p.coll[0].kind = PROFILE_ALL_REDUCE;
    p.coll[0].bytes = 4000000;
    p.coll[0].per_step = 1;
    snprintf(p.notes[0].key, sizeof p.notes[0].key, "device_bytes@4");
    p.notes[0].value = 2e9; // over the target's 1G
    p.n_notes = 1;
    return p;
}

static void row_parts(void **state)
{
    (void)state;
    struct target t = load_(one_host_);
    const struct trace_profile p = profile_();
    const struct projection_scale s = {.flops = 0.5, .memory = 0.25};
    struct projection_row one, r;
    projection_row(&one, &p, &t, &s, 1, 0);
    // 1 GPU: 256 samples, no collective.
    const double flop1 = 256 * 10e-6 * 0.5, rest1 = (256 * 1e-6 + 5e-6 + 1000 * 0.002e-6) * 0.25;
    assert_close_(one.flop_s, flop1, "1 GPU: FLOP work scaled by the peaks' ratio");
    assert_close_(one.rest_s, rest1, "1 GPU: the rest by the bandwidths'");
    assert_close_(one.step_s, flop1 + rest1, "1 GPU: step");
    assert_true(one.comm_s == 0 && one.wait_s == 0);
    assert_close_(one.efficiency, 1, "1 GPU: efficiency");

    projection_row(&r, &p, &t, &s, 4, one.step_s);
    const double flop = 64 * 10e-6 * 0.5, rest = (64 * 1e-6 + 5e-6 + 250 * 0.002e-6) * 0.25;
    const double comm = 6 * (2e-6 + 1e-3);
    assert_close_(r.flop_s, flop, "4 GPUs: 64 samples each");
    assert_close_(r.rest_s, rest, "4 GPUs: a quarter of the update each");
    assert_close_(r.comm_s, comm, "4 GPUs: the all-reduce");
    assert_close_(r.step_s, flop + rest + comm, "the step counts the communication once");
    assert_close_(r.samples_per_s, 256 / (flop + rest + comm), "samples/s");
    assert_close_(r.efficiency, (flop1 + rest1) / (4 * (flop + rest + comm)), "efficiency");
    assert_true(r.wait_s == 0); // 256 splits evenly
    assert_close_(r.memory_bytes, 2e9, "memory from the trace's note");
    assert_false(r.fits);
    assert_int_equal(r.limit, LIMIT_MEMORY_SIZE);
    t.device.memory_bytes = 0; // no size given: no fit check; the all-reduce's bytes dominate
    projection_row(&r, &p, &t, &s, 4, one.step_s);
    assert_true(r.fits);
    assert_int_equal(r.limit, LIMIT_INTRA_BW);
    assert_string_equal(projection_limit_name(r.limit), "intra-host bandwidth");
}

// The network's headers and a shaper's bucket: 4 hosts of one GPU, 1 GB/s.
static void network_link(void **state)
{
    (void)state;
    struct target t = load_("[target]\nhosts = 4\n[device]\nfp32_tflops = 10\n"
                            "[inter]\ngbit_per_s = 8\npayload_share = 0.5\n");
    const struct trace_profile p = profile_();
    const struct projection_scale s = {.flops = 0.5, .memory = 0.25};
    // Half the rate carries payload: 6 steps of 1 MB at 0.5 GB/s.
    struct comm_cost c = projection_collective(&t, PROFILE_ALL_REDUCE, 4000000, 4);
    assert_close_(c.bytes_inter_s, 6 * 1e6 / 0.5e9, "payload share");
    t.inter.payload_share = 1;
    const double flop = 64 * 10e-6 * 0.5, rest = (64 * 1e-6 + 5e-6 + 250 * 0.002e-6) * 0.25;
    const double bytes = 6 * 1e-3;
    struct projection_row r;
    // A bucket of 100 kB at 1 GB/s: 0.1 ms of the network hidden behind 0.34 ms of compute.
    t.inter.burst_bytes = 100000;
    projection_row(&r, &p, &t, &s, 4, 0);
    assert_close_(r.comm.bytes_inter_s, bytes - 1e-4, "bucket below the compute");
    assert_close_(r.step_s, flop + rest + bytes - 1e-4, "step");
    // A bucket of 1 MB (1 ms): no more than the compute is hidden.
    t.inter.burst_bytes = 1000000;
    projection_row(&r, &p, &t, &s, 4, 0);
    assert_close_(r.comm.bytes_inter_s, bytes - (flop + rest), "bucket above the compute");
    // One host: no network, nothing to hide.
    projection_row(&r, &p, &t, &s, 1, 0);
    assert_true(r.comm_s == 0);
    // Bounds: a share of 0 or above 1 is refused.
    char err[512];
    struct target bad;
    assert_int_equal(target_load_text(&bad, "[device]\nmeasured = true\n[inter]\npayload_share = 0\n",
                                      "t.ini", NULL, 0, err, sizeof err), VGPU_ECONFIG);
    assert_int_equal(target_load_text(&bad, "[device]\nmeasured = true\n[inter]\npayload_share = 1.01\n",
                                      "t.ini", NULL, 0, err, sizeof err), VGPU_ECONFIG);
    assert_int_equal(target_load_text(&bad, "[device]\nmeasured = true\n[inter]\npayload_share = 0.01\n",
                                      "t.ini", NULL, 0, err, sizeof err), 0);
}

static void row_imbalance(void **state)
{
    (void)state;
    struct target t = load_(one_host_);
    const struct trace_profile p = profile_();
    const struct projection_scale s = {.flops = 0.5, .memory = 0.25};
    struct projection_row r;
    // 3 GPUs: 85.33 samples on average, 86 the most: the others wait for 0.67 of one.
    projection_row(&r, &p, &t, &s, 3, 1);
    assert_close_(r.wait_s, (86 - 256.0 / 3) * (10e-6 * 0.5 + 1e-6 * 0.25), "waiting");
    assert_close_(r.step_s, r.compute_s + r.comm_s + r.wait_s, "parts");
}

static void scale_ratio(void **state)
{
    (void)state;
    const struct target t = load_(one_host_);
    struct target here = load_("[device]\nfp32_tflops = 0.2\nmemory_gbyte_per_s = 25\n");
    const struct trace_profile p = profile_();
    struct projection_scale s;
    char err[512];
    assert_int_equal(projection_scale_for(&s, &p, &t, &here, TARGET_FP32, err, sizeof err), 0);
    assert_close_(s.flops, 0.2 / 10, "measured peak / target peak");
    assert_close_(s.memory, 25.0 / 1000, "measured bandwidth / target bandwidth");
    // No measured machine, no peak for the math, no FLOPs: refused.
    assert_int_equal(projection_scale_for(&s, &p, &t, NULL, TARGET_FP32, err, sizeof err),
                     VGPU_ECONFIG);
    assert_non_null(strstr(err, "--measured-on"));
    assert_int_equal(projection_scale_for(&s, &p, &t, &here, TARGET_BF16, err, sizeof err),
                     VGPU_ECONFIG);
    assert_non_null(strstr(err, "bf16"));
    struct trace_profile none = p;
    none.flops_per_rank = 0;
    assert_int_equal(projection_scale_for(&s, &none, &t, &here, TARGET_FP32, err, sizeof err),
                     VGPU_ECONFIG);
    assert_non_null(strstr(err, "no FLOPs"));
    // The device measured: as measured.
    struct target same = load_("[device]\nmeasured = true\n");
    assert_int_equal(projection_scale_for(&s, &none, &same, NULL, TARGET_FP32, err, sizeof err), 0);
    assert_true(s.flops == 1 && s.memory == 1);
}

// ---- the target file ----

// Loads text with one override; returns the status, the message in err.
static int try_(const char *text, const char *set, char *err, size_t bytes)
{
    struct target t;
    const char *sets[1] = {set};
    return target_load_text(&t, text, "t.ini", sets, set ? 1 : 0, err, bytes);
}

static void target_bounds(void **state)
{
    (void)state;
    char err[512];
    assert_int_equal(try_(one_host_, "target.hosts=4096", err, sizeof err), VGPU_ECONFIG);
    assert_non_null(strstr(err, "inter.gbit_per_s is missing")); // many hosts, no network
    static const char net[] = "[target]\nhosts=1\n[device]\nfp32_tflops=1\n[inter]\ngbit_per_s=1\n";
    assert_int_equal(try_(net, "target.hosts=4096", err, sizeof err), 0);
    assert_int_equal(try_(net, "target.hosts=4097", err, sizeof err), VGPU_ECONFIG);
    assert_non_null(strstr(err, "target.hosts"));
    assert_int_equal(try_(net, "target.hosts=0", err, sizeof err), VGPU_ECONFIG);
    assert_int_equal(try_(one_host_, "target.gpus_per_host=64", err, sizeof err), 0);
    assert_int_equal(try_(one_host_, "target.gpus_per_host=65", err, sizeof err), VGPU_ECONFIG);
    assert_int_equal(try_(one_host_, "intra.latency_us=-1", err, sizeof err), VGPU_ECONFIG);
    assert_int_equal(try_(one_host_, "intra.latency_us=0", err, sizeof err), 0);
    assert_int_equal(try_(one_host_, "target.collective=butterfly", err, sizeof err), VGPU_ECONFIG);
    assert_int_equal(try_(one_host_, "device.memory=12Q", err, sizeof err), VGPU_ECONFIG);
    assert_int_equal(try_(one_host_, "device.cores=4", err, sizeof err), VGPU_ECONFIG);
    assert_non_null(strstr(err, "device.cores"));
}

static void target_missing(void **state)
{
    (void)state;
    char err[512];
    // No peak, no "measured": nothing to scale compute to.
    assert_int_equal(try_("[target]\nhosts = 1\n", NULL, err, sizeof err), VGPU_ECONFIG);
    assert_non_null(strstr(err, "no peak"));
    // 8 GPUs a host need the link between them; 0 is "not given".
    assert_int_equal(try_(one_host_, "intra.gbit_per_s=0", err, sizeof err), VGPU_ECONFIG);
    assert_non_null(strstr(err, "intra.gbit_per_s is missing"));
    // ... unless calibrated, which needs the measured machine's file.
    struct target t;
    const char *sets[] = {"intra.gbit_per_s=0", "intra.calibrated=true"};
    assert_int_equal(target_load_text(&t, one_host_, "t.ini", sets, 2, err, sizeof err), 0);
    assert_int_equal(projection_calibrate(&t, NULL, err, sizeof err), VGPU_ECONFIG);
    const struct target here = load_("[device]\nfp32_tflops=1\n[intra]\nlatency_us=1.5\ngbit_per_s=80\n");
    assert_int_equal(projection_calibrate(&t, &here, err, sizeof err), 0);
    assert_true(t.intra.latency_us == 1.5 && t.intra.gbit_per_s == 80);
    // A line that is not INI.
    assert_int_equal(try_("[target\nhosts = 1\n", NULL, err, sizeof err), VGPU_ECONFIG);
    assert_non_null(strstr(err, "t.ini:1"));
}

// ---- the trace ----

// Two ranks, three steps each (the first, a warm-up, left out); each step:
// data 10 us and forward 20 us of 4 rows (8000 FLOPs), backward 40 us
// (16000), one all-reduce+update of 4096 bytes lasting 30 us with a
// 10 us wait and a 5 us optimizer inside, over a step of 120 us.
static const char trace_head_[] =
    "{\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"producer\":\"test\",\"ranks\":2,"
    "\"notes\":{\"global_batch\":8,\"device_bytes@2\":1000},\"clocks\":[]},\n"
    "\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"r\"}}";

static void append_step_(char *buf, size_t bytes, int pid, int step, double t0, double fwd_us)
{
    char *p = buf + strlen(buf);
    snprintf(p, bytes - strlen(buf),
             ",\n{\"name\":\"step\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":%d,\"ts\":%.0f,\"dur\":120,"
             "\"args\":{\"step\":%d}}"
             ",\n{\"name\":\"data\",\"cat\":\"compute\",\"ph\":\"X\",\"pid\":%d,\"ts\":%.0f,\"dur\":10,"
             "\"args\":{\"rows\":4,\"flops\":0}}"
             ",\n{\"name\":\"forward\",\"cat\":\"compute\",\"ph\":\"X\",\"pid\":%d,\"ts\":%.0f,"
             "\"dur\":%.0f,\"args\":{\"rows\":4,\"flops\":8000}}"
             ",\n{\"name\":\"backward\",\"cat\":\"compute\",\"ph\":\"X\",\"pid\":%d,\"ts\":%.0f,"
             "\"dur\":40,\"args\":{\"rows\":4,\"flops\":16000}}"
             ",\n{\"name\":\"all-reduce+update\",\"cat\":\"comm\",\"ph\":\"X\",\"pid\":%d,\"ts\":%.0f,"
             "\"dur\":30,\"args\":{\"seq\":%d,\"bytes\":4096}}"
             ",\n{\"name\":\"wait\",\"cat\":\"wait\",\"ph\":\"X\",\"pid\":%d,\"ts\":%.0f,\"dur\":10,"
             "\"args\":{\"peer\":1}}"
             ",\n{\"name\":\"optimizer\",\"cat\":\"optimizer\",\"ph\":\"X\",\"pid\":%d,\"ts\":%.0f,"
             "\"dur\":5,\"args\":{\"first\":0,\"count\":50}}",
             pid, t0, step, pid, t0 + 1, pid, t0 + 11, fwd_us, pid, t0 + 40, pid, t0 + 85, step,
             pid, t0 + 86, pid, t0 + 100);
}

static char *trace_text_(int with_collectives)
{
    static char buf[16384];
    snprintf(buf, sizeof buf, "%s", trace_head_);
    for (int pid = 0; pid < 2; pid++)
        for (int k = 0; k < 3; k++)
            append_step_(buf, sizeof buf, pid, k + 1, 1000.0 * k, k == 0 ? 900 : 20);
    strcat(buf, "\n]}\n");
    if (!with_collectives) { // rename the collectives out of the trace
        char *c;
        while ((c = strstr(buf, "all-reduce+update")))
            memcpy(c, "injected slowness", 17);
    }
    return buf;
}

// Two gradient buckets beside the backward pass (a step's layout in
// append_overlapped_step_): their all-reduces, the second's past the pass.
static void append_overlapped_step_(char *buf, size_t bytes, int pid, int step, double t0)
{
    char *p = buf + strlen(buf);
    snprintf(p, bytes - strlen(buf),
             ",\n{\"name\":\"step\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":%.0f,"
             "\"dur\":120,\"args\":{\"step\":%d}}"
             ",\n{\"name\":\"data\",\"cat\":\"compute\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":%.0f,"
             "\"dur\":10,\"args\":{\"rows\":4,\"flops\":0}}"
             ",\n{\"name\":\"forward\",\"cat\":\"compute\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,"
             "\"ts\":%.0f,\"dur\":20,\"args\":{\"rows\":4,\"flops\":8000}}"
             ",\n{\"name\":\"backward\",\"cat\":\"compute\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,"
             "\"ts\":%.0f,\"dur\":40,\"args\":{\"rows\":4,\"flops\":16000}}"
             ",\n{\"name\":\"gradient bucket\",\"cat\":\"comm\",\"ph\":\"X\",\"pid\":%d,\"tid\":1,"
             "\"ts\":%.0f,\"dur\":10,\"args\":{\"ready_us\":10,\"count\":512}}"
             ",\n{\"name\":\"all-reduce\",\"cat\":\"comm\",\"ph\":\"X\",\"pid\":%d,\"tid\":1,"
             "\"ts\":%.0f,\"dur\":8,\"args\":{\"seq\":%d,\"bytes\":2048}}"
             ",\n{\"name\":\"gradient bucket\",\"cat\":\"comm\",\"ph\":\"X\",\"pid\":%d,\"tid\":1,"
             "\"ts\":%.0f,\"dur\":15,\"args\":{\"ready_us\":0,\"count\":256}}"
             ",\n{\"name\":\"all-reduce\",\"cat\":\"comm\",\"ph\":\"X\",\"pid\":%d,\"tid\":1,"
             "\"ts\":%.0f,\"dur\":13,\"args\":{\"seq\":%d,\"bytes\":1024}}"
             ",\n{\"name\":\"wait\",\"cat\":\"wait\",\"ph\":\"X\",\"pid\":%d,\"tid\":1,\"ts\":%.0f,"
             "\"dur\":5,\"args\":{\"peer\":1}}"
             ",\n{\"name\":\"optimizer\",\"cat\":\"optimizer\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,"
             "\"ts\":%.0f,\"dur\":5}",
             pid, t0, step, pid, t0 + 1, pid, t0 + 11, pid, t0 + 40, pid, t0 + 60, pid, t0 + 61,
             2 * step, pid, t0 + 80, pid, t0 + 81, 2 * step + 1, pid, t0 + 82, pid, t0 + 100);
}

// The buckets are read apart from the step's own collectives: their sizes,
// when each was final as a share of the pass, and the wait past the pass
// kept out of the step's other work (and lane 1's waits out of its waits).
static void trace_reads_buckets(void **state)
{
    (void)state;
    static char buf[16384];
    snprintf(buf, sizeof buf, "%s", trace_head_);
    for (int pid = 0; pid < 2; pid++)
        for (int k = 0; k < 3; k++)
            append_overlapped_step_(buf, sizeof buf, pid, k + 1, 1000.0 * k);
    strcat(buf, "\n]}\n");
    struct trace_profile p;
    char err[512];
    int rc = trace_profile_parse(&p, buf, strlen(buf), "t.json", err, sizeof err);
    if (rc)
        fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(p.n_coll, 0); // only the buckets' all-reduces: none of the step's own
    assert_int_equal(p.n_buckets, 2);
    assert_int_equal(p.bucket[0].bytes, 2048);
    assert_close_(p.bucket[0].ready_share, (60 - 10 - 40) / 40.0, "final a quarter in");
    assert_int_equal(p.bucket[1].bytes, 1024);
    assert_close_(p.bucket[1].ready_share, 1, "final at the pass's end");
    assert_close_(p.backward_share, 40 / 60.0, "the backward of forward + backward");
    assert_close_(p.comm_us, 0, "no collective of the step's own");
    assert_close_(p.wait_us, 0, "lane 1's wait is the overlap's");
    // 120 - data, forward, backward (70) - the update (5) - the buckets'
    // wait past the pass (94 - 80 = 14).
    assert_close_(p.other_us, 120 - 70 - 5 - 14, "the rest of the step");
}

// The buckets' all-reduces on a lane beside the pass: each from when it is
// final (its share of the projected pass) and the one before it ended; the
// step waits only for what runs past the pass.
static void row_overlap(void **state)
{
    (void)state;
    struct target t = load_(one_host_);
    struct trace_profile p = profile_();
    p.n_coll = 0;
    p.backward_share = 0.5;
    p.n_buckets = 2;
    p.bucket[0] = (struct profile_bucket){.bytes = 400000, .ready_share = 0.25};
    p.bucket[1] = (struct profile_bucket){.bytes = 400000, .ready_share = 1};
    const struct projection_scale s = {.flops = 1, .memory = 1};
    struct projection_row r;
    projection_row(&r, &p, &t, &s, 4, 0);
    // 4 GPUs: 64 rows x 10 us = 640 us of FLOP work, the pass 320 us. Each
    // all-reduce 6 x (2 us + 100 us) = 612 us: the first runs 80..692, the
    // second 692..1304, 984 us past the pass; 240 us beside it.
    assert_close_(r.flop_s, 640e-6, "FLOP work");
    assert_close_(r.comm_s, 984e-6, "exposed");
    assert_close_(r.hidden_s, 1224e-6 - 984e-6, "beside the pass");
    assert_close_(r.comm.latency_intra_s + r.comm.bytes_intra_s, r.comm_s, "the parts");
    assert_close_(r.step_s, r.compute_s + 984e-6 + r.wait_s, "the step");
    // Small buckets fit inside the pass: 18 us each, 80..98 and 160..178.
    p.bucket[0].bytes = p.bucket[1].bytes = 4000;
    p.bucket[1].ready_share = 0.5;
    projection_row(&r, &p, &t, &s, 4, 0);
    assert_close_(r.comm_s, 0, "all hidden");
    assert_close_(r.hidden_s, 36e-6, "both beside the pass");
    assert_close_(r.step_s, r.compute_s + r.wait_s, "the step is the compute");
}

// ---- the lanes (issue 47) ----

// A GPU described by its lanes: 10 TFLOP/s, 1000 GB/s, a 100 GB/s host
// link, 4 us a launch, 2 us the shortest kernel, 5 us a wait; 4 of them on
// one host at 1 GB/s.
static const char lanes_gpu_[] = "[target]\nhosts = 1\ngpus_per_host = 4\n"
                                 "[device]\nfp32_tflops = 10\nmemory_gbyte_per_s = 1000\n"
                                 "launch_us = 4\nkernel_min_us = 2\nsync_us = 5\n"
                                 "host_link_gbyte_per_s = 100\n"
                                 "[intra]\nlatency_us = 2\ngbit_per_s = 8\n";

// A step's counted operations, a sample: 8 GEMMs (flops_per_sample FLOPs,
// 0 bytes), 10 kernels of 1 kB, 2 host copies of 2 kB, 1 wait; the host's
// own work 20 us; 256 samples a step over 2 ranks; one 4 MB all-reduce.
static struct trace_profile lanes_profile_(double flops_per_sample)
{
    struct trace_profile p = profile_();
    p.n_notes = 0; // no memory check
    p.has_ops = 1;
    p.rows_per_rank = 128;
    p.host_us = 20;
    p.ops[PROFILE_OP_GEMM] = (struct profile_ops){.count = 8, .flops = flops_per_sample};
    p.ops[PROFILE_OP_KERNEL] = (struct profile_ops){.count = 10, .bytes = 1000};
    p.ops[PROFILE_OP_COPY_HOST] = (struct profile_ops){.count = 2, .bytes = 2000};
    p.ops[PROFILE_OP_SYNC] = (struct profile_ops){.count = 1};
    return p;
}

static struct projection_scale lanes_scale_(const struct trace_profile *p, const struct target *t)
{
    const struct target here = load_("[device]\nfp32_tflops = 0.2\nmemory_gbyte_per_s = 25\n");
    struct projection_scale s;
    char err[512];
    assert_int_equal(projection_scale_for(&s, p, t, &here, TARGET_FP32, err, sizeof err), 0);
    assert_true(s.lanes);
    return s;
}

// Small work: 20 launches (80 us) and the host's 20 us outlast the device
// lane; the step is the host lane, one wait, and the all-reduce.
static void lanes_launch_bound(void **state)
{
    (void)state;
    const struct target t = load_(lanes_gpu_);
    const struct trace_profile p = lanes_profile_(1e6);
    const struct projection_scale s = lanes_scale_(&p, &t);
    struct projection_row r;
    projection_row(&r, &p, &t, &s, 2, 0);
    // 2 GPUs: 128 samples each. Device: GEMMs max(128e6 / 1e13 = 12.8 us,
    // 8 x 2 us) = 16 us (the floor); kernels max(128 kB / 1e12 = 0.128 us,
    // 20 us) = 20 us; copies max(256 kB / 1e11 = 2.56 us, 4 us) = 4 us: 40 us.
    assert_close_(r.lanes.device_s, 40e-6, "device lane");
    assert_close_(r.lanes.floor_s, 40e-6, "all at the shortest kernel");
    // Host: 20 us + 20 launches x 4 us = 100 us, then a wait of 5 us.
    assert_close_(r.lanes.host_s, 100e-6, "host lane");
    assert_close_(r.compute_s, 100e-6 + 5e-6, "the critical path: the host's");
    const double comm = 2 * (2e-6 + 2e-3); // 2 steps of 2 MB at 1 GB/s
    assert_close_(r.comm_s, comm, "the all-reduce");
    assert_close_(r.step_s, 105e-6 + comm, "compute + communication");
    assert_true(r.wait_s == 0);
    assert_int_equal(r.lanes.limit, LANES_LAUNCH);
    // On one GPU no collective: the launches limit the step.
    projection_row(&r, &p, &t, &s, 1, 0);
    assert_close_(r.step_s, 105e-6, "one GPU");
    assert_int_equal(r.limit, LIMIT_LAUNCH);
    assert_string_equal(projection_limit_name(r.limit), "launches (host lane)");
}

// Large GEMMs: the device lane sets the step (the host waits for it).
static void lanes_compute_bound(void **state)
{
    (void)state;
    const struct target t = load_(lanes_gpu_);
    const struct trace_profile p = lanes_profile_(1e9);
    const struct projection_scale s = lanes_scale_(&p, &t);
    struct projection_row r;
    projection_row(&r, &p, &t, &s, 1, 0);
    // 256 samples x 1e9 FLOPs / 1e13 = 25.6 ms of GEMMs; kernels 20 us (the
    // floor), copies max(512 kB / 1e11 = 5.12 us, 4 us).
    assert_close_(r.lanes.flop_s, 25.6e-3, "GEMMs at the peak");
    assert_close_(r.lanes.device_s, 25.6e-3 + 20e-6 + 5.12e-6, "device lane");
    assert_close_(r.compute_s, 4e-6 + 25.6e-3 + 20e-6 + 5.12e-6 + 5e-6,
                  "a launch, the device lane, the wait");
    assert_close_(r.step_s, r.compute_s, "one GPU: no communication");
    assert_int_equal(r.limit, LIMIT_LANE_COMPUTE);
    // 3 GPUs: 85.33 samples on average, 86 the most: the others wait.
    projection_row(&r, &p, &t, &s, 3, 0);
    assert_close_(r.wait_s, (86 - 256.0 / 3) * 1e9 / 1e13, "waiting for the GEMMs of 0.67 sample");
    // A synchronous device (a CPU): the lanes add up, no floor.
    struct target cpu = t;
    cpu.device.synchronous = 1;
    projection_row(&r, &p, &cpu, &s, 1, 0);
    assert_close_(r.compute_s, 20e-6 + 20 * 4e-6 + 5e-6 + 25.6e-3 + 256e3 / 1e12 + 512e3 / 1e11,
                  "own + launches + wait + device work");
}

// A slow link: the all-reduce sets the step; the lanes are still counted once.
static void lanes_network_bound(void **state)
{
    (void)state;
    struct target t = load_(lanes_gpu_);
    t.intra.gbit_per_s = 0.008; // 1 MB/s
    const struct trace_profile p = lanes_profile_(1e6);
    const struct projection_scale s = lanes_scale_(&p, &t);
    struct projection_row r;
    projection_row(&r, &p, &t, &s, 4, 0);
    // 64 samples: the host lane 100 us, the wait 5 us; 6 steps of 1 MB at 1 MB/s.
    assert_close_(r.compute_s, 105e-6, "compute");
    assert_close_(r.comm_s, 6 * (2e-6 + 1), "the all-reduce");
    assert_close_(r.step_s, 105e-6 + 6 * (2e-6 + 1), "the step");
    assert_int_equal(r.limit, LIMIT_INTRA_BW);
}

// Without counted operations (a trace from before issue 47) or without a
// launch cost in the target, compute is the peaks' ratio, as before.
static void lanes_fallback(void **state)
{
    (void)state;
    const struct target t = load_(lanes_gpu_);
    const struct target here = load_("[device]\nfp32_tflops = 0.2\nmemory_gbyte_per_s = 25\n");
    struct trace_profile p = lanes_profile_(1e6);
    struct projection_scale s;
    char err[512];
    p.has_ops = 0;
    assert_int_equal(projection_scale_for(&s, &p, &t, &here, TARGET_FP32, err, sizeof err), 0);
    assert_false(s.lanes);
    struct projection_row r;
    projection_row(&r, &p, &t, &s, 1, 0);
    assert_false(r.lanes_on);
    const double flop1 = 256 * 10e-6 * 0.02, rest1 = (256 * 1e-6 + 5e-6 + 1000 * 0.002e-6) * 0.025;
    assert_close_(r.step_s, flop1 + rest1, "the peaks' ratio");
    struct target no_launch = t;
    no_launch.device.launch_us = 0;
    p.has_ops = 1;
    assert_int_equal(projection_scale_for(&s, &p, &no_launch, &here, TARGET_FP32, err, sizeof err), 0);
    assert_false(s.lanes);
    struct target measured = t;
    measured.device.measured = 1;
    assert_int_equal(projection_scale_for(&s, &p, &measured, NULL, TARGET_FP32, err, sizeof err), 0);
    assert_false(s.lanes);
}

static void trace_reads(void **state)
{
    (void)state;
    struct trace_profile p;
    char err[512];
    const char *text = trace_text_(1);
    int rc = trace_profile_parse(&p, text, strlen(text), "t.json", err, sizeof err);
    if (rc)
        fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(p.ranks, 2);
    assert_int_equal(p.steps, 2); // the warm-up (a 900 us forward) left out
    assert_close_(p.global_batch, 8, "the note's batch");
    assert_close_(p.flop_us_per_sample, (20 + 40) / 4.0, "forward + backward a sample");
    assert_close_(p.data_us_per_sample, 10 / 4.0, "data a sample");
    assert_close_(p.flops_per_sample, 24000 / 4.0, "FLOPs a sample");
    assert_close_(p.optimizer_us_per_param, 5 / 50.0, "a parameter's update");
    assert_int_equal(p.sharded_params, 100); // 50 a rank
    assert_close_(p.comm_us, 30 - 5, "the collective less the update inside it");
    assert_close_(p.wait_us, 10, "waiting");
    assert_close_(p.other_us, 120 - 70 - 30, "the rest of the step");
    assert_int_equal(p.n_coll, 1);
    assert_string_equal(p.coll[0].name, "all-reduce+update");
    assert_int_equal(p.coll[0].bytes, 4096);
    assert_close_(p.coll[0].per_step, 1, "one a step");
    assert_close_(trace_profile_note(&p, "device_bytes@2", 0), 1000, "a note");
}

// The counted operations of each step (the "device ops" row): their
// medians, FLOPs and bytes a sample, and the host's own work: the step less
// its collective (less the update inside it) and the operations' calls.
static void trace_reads_ops(void **state)
{
    (void)state;
    static char buf[32768];
    snprintf(buf, sizeof buf, "%s", trace_text_(1));
    buf[strlen(buf) - 4] = '\0'; // the closing "\n]}\n"
    for (int pid = 0; pid < 2; pid++)
        for (int k = 0; k < 3; k++)
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf),
                     ",\n{\"name\":\"gemm ops\",\"cat\":\"device\",\"ph\":\"X\",\"pid\":%d,\"tid\":2,"
                     "\"ts\":%d,\"dur\":120,\"args\":{\"n\":3,\"flops\":24000,\"bytes\":4000,"
                     "\"busy_us\":50}}"
                     ",\n{\"name\":\"syncs\",\"cat\":\"device\",\"ph\":\"X\",\"pid\":%d,\"tid\":2,"
                     "\"ts\":%d,\"dur\":120,\"args\":{\"n\":1,\"flops\":0,\"bytes\":0,\"busy_us\":2}}",
                     pid, 1000 * k, pid, 1000 * k);
    strcat(buf, "\n]}\n");
    struct trace_profile p;
    char err[512];
    int rc = trace_profile_parse(&p, buf, strlen(buf), "t.json", err, sizeof err);
    if (rc)
        fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    assert_true(p.has_ops);
    assert_close_(p.ops[PROFILE_OP_GEMM].count, 3, "GEMMs a step");
    assert_close_(p.ops[PROFILE_OP_GEMM].flops, 24000 / 4.0, "their FLOPs a sample");
    assert_close_(p.ops[PROFILE_OP_GEMM].bytes, 4000 / 4.0, "their bytes a sample");
    assert_close_(p.ops[PROFILE_OP_GEMM].busy_us, 50, "their calls' time");
    assert_close_(p.ops[PROFILE_OP_SYNC].count, 1, "a wait a step");
    assert_close_(p.rows_per_rank, 4, "rows a rank");
    assert_close_(p.host_us, 120 - (30 - 5) - 50 - 2, "the host's own work");
    // The rest of the profile is as without them.
    assert_close_(p.other_us, 120 - 70 - 30, "the rest of the step");
    // A trace without them (before issue 47) reads as before, with no lanes.
    const char *old = trace_text_(1);
    assert_int_equal(trace_profile_parse(&p, old, strlen(old), "t.json", err, sizeof err), 0);
    assert_false(p.has_ops);
}

static void trace_errors(void **state)
{
    (void)state;
    struct trace_profile p;
    char err[512];
    const char *text = trace_text_(1);
    // Cut off anywhere: never read as whole.
    const size_t cuts[] = {0, 1, 40, strlen(text) / 2, strlen(text) - 3};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        assert_int_equal(trace_profile_parse(&p, text, cuts[i], "t.json", err, sizeof err),
                         VGPU_EFORMAT);
        assert_non_null(strstr(err, "not whole JSON"));
    }
    text = trace_text_(0);
    assert_int_equal(trace_profile_parse(&p, text, strlen(text), "t.json", err, sizeof err),
                     VGPU_EFORMAT);
    assert_non_null(strstr(err, "no collectives"));
    static const char not_vgpu[] = "{\"traceEvents\":[]}";
    assert_int_equal(trace_profile_parse(&p, not_vgpu, strlen(not_vgpu), "t.json", err, sizeof err),
                     VGPU_EFORMAT);
    assert_non_null(strstr(err, "not a vgpu"));
    static const char no_steps[] = "{\"otherData\":{\"clocks\":[]},\"traceEvents\":[]}";
    assert_int_equal(trace_profile_parse(&p, no_steps, strlen(no_steps), "t.json", err, sizeof err),
                     VGPU_EFORMAT);
    assert_non_null(strstr(err, "no steps"));
    static const char *const broken[] = {"{\"a\":1,}", "{\"a\":01}", "{\"a\":\"\\q\"}", "[1 2]",
                                         "{\"a\":tru}", "{} x"};
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++)
        assert_int_equal(trace_profile_parse(&p, broken[i], strlen(broken[i]), "t.json", err,
                                             sizeof err), VGPU_EFORMAT);
}

static void json_walk(void **state)
{
    (void)state;
    static const char text[] = " {\"a\" : [1, {\"b\":[[]]}, \"x\\u0041\\n\"], \"c\":-2.5e1, "
                               "\"d\":{}, \"e\":[], \"f\":null}";
    struct json_scan j;
    char key[8], s[8];
    double v;
    json_scan_init(&j, text, strlen(text));
    assert_int_equal(json_scan_object(&j), 0);
    assert_int_equal(json_scan_member(&j, key, sizeof key), 1);
    assert_string_equal(key, "a");
    assert_int_equal(json_scan_array(&j), 0);
    assert_int_equal(json_scan_element(&j), 1);
    assert_int_equal(json_scan_number(&j, &v), 0);
    assert_true(v == 1);
    assert_int_equal(json_scan_element(&j), 1);
    assert_int_equal(json_scan_skip(&j), 0);
    assert_int_equal(json_scan_element(&j), 1);
    assert_int_equal(json_scan_string(&j, s, sizeof s), 0);
    assert_string_equal(s, "xA\n");
    assert_int_equal(json_scan_element(&j), 0);
    assert_int_equal(json_scan_member(&j, key, sizeof key), 1);
    assert_int_equal(json_scan_number(&j, &v), 0);
    assert_true(v == -25);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(json_scan_member(&j, key, sizeof key), 1);
        assert_int_equal(json_scan_skip(&j), 0);
    }
    assert_int_equal(json_scan_member(&j, key, sizeof key), 0);
    assert_int_equal(json_scan_end(&j), 0);
    assert_true(json_scan_ok(&j));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ring_all_reduce),  cmocka_unit_test(ring_other_kinds),
        cmocka_unit_test(ring_across_hosts), cmocka_unit_test(hierarchical),
        cmocka_unit_test(tree),             cmocka_unit_test(row_parts),
        cmocka_unit_test(row_imbalance),    cmocka_unit_test(scale_ratio),
        cmocka_unit_test(network_link),
        cmocka_unit_test(target_bounds),    cmocka_unit_test(target_missing),
        cmocka_unit_test(trace_reads),      cmocka_unit_test(trace_errors),
        cmocka_unit_test(trace_reads_buckets), cmocka_unit_test(row_overlap),
        cmocka_unit_test(lanes_launch_bound), cmocka_unit_test(lanes_compute_bound),
        cmocka_unit_test(lanes_network_bound), cmocka_unit_test(lanes_fallback),
        cmocka_unit_test(trace_reads_ops),
        cmocka_unit_test(json_walk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
