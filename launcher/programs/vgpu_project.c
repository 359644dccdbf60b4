// vgpu_project.c: vgpu-project, a measured job's step time projected onto a
// described cluster: `vgpu-project --trace t.json --target X.ini` prints a
// row per GPU count (step time and its parts, samples/s, scaling efficiency,
// memory a GPU, what limits it). The model is launcher/project/ and
// docs/PROJECTION.md.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "projection.h"
#include "status.h"
#include "util.h"

#define EXIT_USAGE 2
#define ROWS_MAX 64
#define SETS_MAX 32

struct cli_ {
    const char *trace, *target, *measured_on, *plot;
    const char *sets[SETS_MAX]; // --set of the target's keys
    int n_sets;
    long ranks[ROWS_MAX];       // --ranks; none: powers of two up to the target's size
    int n_ranks;
    enum target_math math;
};

static void usage_(FILE *f)
{
    fprintf(f,
            "usage: vgpu-project --trace TRACE.json --target TARGET.ini [options]\n"
            "Projects the step time of a job measured here (a --trace of vgpu_train or of any\n"
            "libvgpu program) onto the cluster a target file describes (configs/targets/):\n"
            "a row per GPU count with the step time and its parts, samples/s, scaling\n"
            "efficiency, memory a GPU and what limits it. docs/PROJECTION.md has the model.\n"
            "  --trace FILE         the measured run's timeline (vgpu_train --trace FILE)\n"
            "  --target FILE        the cluster to project onto\n"
            "  --measured-on FILE   a target file of the machine the trace was measured on (its\n"
            "                       [device] peak, its [intra] link for calibrated targets);\n"
            "                       scripts/project_calibrate.sh writes this machine's\n"
            "  --ranks LIST         GPU counts, e.g. 1,2,4,8 (default: 1, 2, 4, ... and the\n"
            "                       target's size)\n"
            "  --math fp32|tf32|bf16  the target's peak the job would use (default fp32)\n"
            "  --set SECTION.KEY=VALUE  change a key of the target (repeatable)\n"
            "  --plot OUT.png       also draw the step time's parts and the efficiency (gnuplot)\n"
            "  --help-target        every key of a target file, documented\n"
            "  --measure-memory     print this machine's memory copy rate, GB/s (for a\n"
            "                       --measured-on file's device.memory_gbyte_per_s)\n"
            "  -h, --help\n"
            "Exit status: 0, 1 the plot failed, 2 bad input (a message says what and where).\n");
}

// "1,2,4,8" into cli->ranks: 0, or -1 with the message in err.
static int parse_ranks_(struct cli_ *cli, const char *text, char *err, size_t err_bytes)
{
    char *end;
    const char *p = text;
    cli->n_ranks = 0;
    while (*p) {
        long n = strtol(p, &end, 10);
        if (end == p || n < 1 || n > 65536 || (*end && *end != ',') || cli->n_ranks == ROWS_MAX)
            return util_errorf(err, err_bytes, -1, "--ranks %s: expected up to %d counts from 1 "
                               "to 65536, comma-separated", text, ROWS_MAX);
        cli->ranks[cli->n_ranks++] = n;
        p = *end ? end + 1 : end;
    }
    return cli->n_ranks ? 0 : util_errorf(err, err_bytes, -1, "--ranks: no counts given");
}

// Copies this machine's memory as memcpy does, best of a few: GB/s.
static double measure_memory_(void)
{
    const size_t bytes = (size_t)64 << 20;
    char *a = malloc(bytes), *b = malloc(bytes);
    double best = 0;
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    for (int i = 0; i < 8; i++) {
        const double t0 = util_now_s();
        memcpy(i % 2 ? a : b, i % 2 ? b : a, bytes);
        const double s = util_now_s() - t0;
        // A copy reads and writes every byte: both count, as STREAM's copy does.
        if (s > 0 && 2.0 * (double)bytes / s / 1e9 > best)
            best = 2.0 * (double)bytes / s / 1e9;
    }
    volatile char sink = a[bytes / 2] + b[bytes / 3];
    (void)sink;
    free(a);
    free(b);
    return best;
}

enum { OPT_TRACE = 256, OPT_TARGET, OPT_MEASURED, OPT_RANKS, OPT_MATH, OPT_SET, OPT_PLOT,
       OPT_HELP_TARGET, OPT_MEASURE_MEMORY };

// The command line: 0 to project, 1 done (help printed), or EXIT_USAGE.
static int parse_cli_(int argc, char **argv, struct cli_ *cli)
{
    static const struct option opts[] = {
        {"trace", required_argument, NULL, OPT_TRACE},
        {"target", required_argument, NULL, OPT_TARGET},
        {"measured-on", required_argument, NULL, OPT_MEASURED},
        {"ranks", required_argument, NULL, OPT_RANKS},
        {"math", required_argument, NULL, OPT_MATH},
        {"set", required_argument, NULL, OPT_SET},
        {"plot", required_argument, NULL, OPT_PLOT},
        {"help-target", no_argument, NULL, OPT_HELP_TARGET},
        {"measure-memory", no_argument, NULL, OPT_MEASURE_MEMORY},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char err[256];
    int c, m;
    memset(cli, 0, sizeof *cli);
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_TRACE: cli->trace = optarg; break;
        case OPT_TARGET: cli->target = optarg; break;
        case OPT_MEASURED: cli->measured_on = optarg; break;
        case OPT_PLOT: cli->plot = optarg; break;
        case OPT_RANKS:
            if (parse_ranks_(cli, optarg, err, sizeof err) < 0) {
                fprintf(stderr, "vgpu-project: %s\n", err);
                return EXIT_USAGE;
            }
            break;
        case OPT_MATH:
            if ((m = target_math_parse(optarg)) < 0) {
                fprintf(stderr, "vgpu-project: --math %s: expected fp32, tf32 or bf16\n", optarg);
                return EXIT_USAGE;
            }
            cli->math = (enum target_math)m;
            break;
        case OPT_SET:
            if (cli->n_sets == SETS_MAX) {
                fprintf(stderr, "vgpu-project: more than %d --set\n", SETS_MAX);
                return EXIT_USAGE;
            }
            cli->sets[cli->n_sets++] = optarg;
            break;
        case OPT_HELP_TARGET: target_print_reference(stdout); return 1;
        case OPT_MEASURE_MEMORY: printf("memory_gbyte_per_s = %.1f\n", measure_memory_()); return 1;
        case 'h': usage_(stdout); return 1;
        default: usage_(stderr); return EXIT_USAGE;
        }
    }
    if (optind < argc || !cli->trace || !cli->target) {
        fprintf(stderr, "vgpu-project: %s\n", optind < argc ? "unexpected arguments"
                                              : "--trace and --target are both needed");
        usage_(stderr);
        return EXIT_USAGE;
    }
    return 0;
}

// "6.5M", "80.0G": bytes for the table.
static void bytes_text_(double bytes, char *buf, size_t size)
{
    static const char units[] = "KMGT";
    if (bytes <= 0) {
        snprintf(buf, size, "-");
        return;
    }
    int u = -1;
    while (bytes >= 1024 && u < 3) {
        bytes /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(buf, size, "%.0f", bytes);
    else
        snprintf(buf, size, "%.1f%c", bytes, units[u]);
}

static void print_header_(const struct cli_ *cli, const struct trace_profile *p,
                          const struct target *t)
{
    printf("vgpu-project: %s (%s; %ld steps used) onto %s\n", cli->trace,
           p->producer[0] ? p->producer : "a trace", p->steps,
           t->cluster.name[0] ? t->cluster.name : cli->target);
    printf("  target: %ld host%s x %ld %s, %s%s%s%s, %s all-reduce, %s\n", t->cluster.hosts,
           t->cluster.hosts > 1 ? "s" : "", t->cluster.gpus_per_host,
           t->device.name[0] ? t->device.name : "GPUs", t->intra.name[0] ? t->intra.name : "-",
           t->cluster.hosts > 1 ? " inside, " : "", t->cluster.hosts > 1 ? t->inter.name : "",
           t->cluster.hosts > 1 ? " between" : "", target_algo_name(t->cluster.collective),
           t->device.measured ? "compute as measured" : target_math_name(cli->math));
    if (t->cluster.hosts > 1 && (t->inter.payload_share < 1 || t->inter.burst_bytes > 0))
        printf("  network: %.3g Gbit/s a NIC, %.1f%% of it payload, a %llu-byte bucket\n",
               t->inter.gbit_per_s, 100 * t->inter.payload_share,
               (unsigned long long)t->inter.burst_bytes);
    printf("  measured: step %.3f ms a rank: compute %.3f, collectives %.3f (waiting %.3f); "
           "%.0f samples a step, %.3g FLOP a sample\n",
           p->step_us / 1e3, p->compute_us_per_rank / 1e3, p->comm_us / 1e3, p->wait_us / 1e3,
           p->global_batch, p->flops_per_sample);
    if (p->n_buckets) {
        double bytes = 0;
        for (int i = 0; i < p->n_buckets; i++)
            bytes += (double)p->bucket[i].bytes;
        char all[16];
        bytes_text_(bytes, all, sizeof all);
        printf("  overlapped: %d all-reduces a step (%s) beside the backward pass (%.0f%% of "
               "forward + backward): comm_ms is the part that runs past the pass\n",
               p->n_buckets, all, 100 * p->backward_share);
    }
    printf("%6s %5s %11s %11s %11s %11s %12s %6s %8s  %s\n", "gpus", "hosts", "step_ms",
           "compute_ms", "comm_ms", "wait_ms", "samples/s", "eff", "mem/GPU", "limited by");
}

// How compute is projected: the lanes and what they were given, or why not.
static void print_lanes_(const struct trace_profile *p, const struct target *t,
                         const struct projection_scale *s)
{
    const struct profile_ops *o = p->ops;
    if (s->lanes)
        printf("  lanes: %.0f operations a step a rank (%.0f GEMM, %.0f other kernels, %.0f host "
               "copies, %.0f device copies), %.0f waits; host's own work %.3f ms: compute is the "
               "critical path of the host lane (%.2f us a launch, %.2f us a wait) and the device "
               "lane (each kind at max(FLOPs / peak, bytes / rate, %.2f us a kernel))\n",
               o[PROFILE_OP_GEMM].count + o[PROFILE_OP_KERNEL].count +
                   o[PROFILE_OP_COPY_HOST].count + o[PROFILE_OP_COPY_DEVICE].count,
               o[PROFILE_OP_GEMM].count, o[PROFILE_OP_KERNEL].count,
               o[PROFILE_OP_COPY_HOST].count, o[PROFILE_OP_COPY_DEVICE].count,
               o[PROFILE_OP_SYNC].count, p->host_us / 1e3, t->device.launch_us, t->device.sync_us,
               t->device.kernel_min_us);
    else if (!p->has_ops && !t->device.measured)
        printf("  lanes: none: the trace counts no device operations (written before issue 47): "
               "compute is scaled by the peaks' ratio, with no launch or wait cost\n");
    else if (!t->device.measured)
        printf("  lanes: none: the target gives no device.launch_us: compute is scaled by the "
               "peaks' ratio, with no launch or wait cost\n");
}

// What the projection assumes that matters most where `l` limits the step.
static void print_assumption_(enum projection_limit l, const struct trace_profile *p,
                              const struct target *t, const struct cli_ *cli)
{
    const struct target_link *link = l == LIMIT_INTER_LATENCY || l == LIMIT_INTER_BW ? &t->inter
                                                                                   : &t->intra;
    printf("  %s: ", projection_limit_name(l));
    switch (l) {
    case LIMIT_LAUNCH:
        printf("launch-bound: %.2f us a launch and %.2f us a wait (device.launch_us, sync_us: "
               "the target file's figures), the operations as this trace counts them; CUDA "
               "graphs or fused kernels would cut both\n", t->device.launch_us, t->device.sync_us);
        break;
    case LIMIT_HOST_WORK:
        printf("the host's own work, %.3f ms a step as measured here, taken to cost the same on "
               "the target's host\n", p->host_us / 1e3);
        break;
    case LIMIT_KERNEL_FLOOR:
        printf("launch-bound on the device: each operation takes at least %.2f us "
               "(device.kernel_min_us), more than its FLOPs and bytes would\n",
               t->device.kernel_min_us);
        break;
    case LIMIT_LANE_COMPUTE:
        printf("compute-bound: the GEMMs at the target's %s peak (%.4g TFLOP/s, the datasheet's); "
               "small GEMMs reach a fraction of it, so the step is a lower bound\n",
               target_math_name(cli->math), target_peak_flops(t, cli->math) / 1e12);
        break;
    case LIMIT_LANE_MEMORY:
        printf("memory-bound: each operand read or written once at %.4g GB/s (host copies: %.4g); "
               "caches and fused kernels change it\n", t->device.memory_gbyte_per_s,
               t->device.host_link_gbyte_per_s > 0 ? t->device.host_link_gbyte_per_s
                                                   : t->device.memory_gbyte_per_s);
        break;
    case LIMIT_COMPUTE:
    case LIMIT_MEMORY_BW:
        printf("%s: the job reaches the same share of the target's %s as of the measured "
               "device's; no launch or wait cost\n", t->device.measured ? "as measured here"
               : "scaled by the peaks' ratio", l == LIMIT_COMPUTE ? "peak" : "memory bandwidth");
        break;
    case LIMIT_INTRA_LATENCY:
    case LIMIT_INTRA_BW:
    case LIMIT_INTER_LATENCY:
    case LIMIT_INTER_BW:
        printf("network-bound: alpha-beta over %s (%.3g us a step, %.4g Gbit/s), %s all-reduce, "
               "one collective at a time, no congestion\n", link->name[0] ? link->name : "the link",
               link->latency_us, link->gbit_per_s, target_algo_name(t->cluster.collective));
        break;
    case LIMIT_IMBALANCE:
        printf("the batch's split: every GPU waits for the one with the most samples\n");
        break;
    case LIMIT_MEMORY_SIZE:
        printf("the job's own sizing (the trace's notes) against device.memory\n");
        break;
    }
}

static void print_row_(const struct projection_row *r)
{
    char mem[16], rate[24];
    bytes_text_(r->memory_bytes, mem, sizeof mem);
    if (r->samples_per_s > 0)
        snprintf(rate, sizeof rate, "%.0f", r->samples_per_s);
    else
        snprintf(rate, sizeof rate, "-");
    printf("%6ld %5ld %11.4f %11.4f %11.4f %11.4f %12s %5.0f%% %8s  %s\n", r->gpus, r->hosts,
           r->step_s * 1e3, r->compute_s * 1e3, r->comm_s * 1e3, r->wait_s * 1e3, rate,
           100 * r->efficiency, mem, projection_limit_name(r->limit));
}

// The rows as a picture: each count's step time in its parts (bars) and the
// efficiency (a line, right axis), drawn by gnuplot. 0, or 1 with a message.
static int plot_(const char *out, const struct target *t, const struct projection_row *rows, int n)
{
    FILE *g = popen("gnuplot", "w");
    if (!g) {
        fprintf(stderr, "vgpu-project: --plot needs gnuplot (apt-get install gnuplot-nox)\n");
        return 1;
    }
    fprintf(g, "set terminal pngcairo size 900,500\nset output '%s'\n", out);
    fprintf(g, "set title 'projected step on %s'\nset style data histograms\n"
               "set style histogram rowstacked\nset style fill solid 0.8 border -1\n"
               "set ylabel 'ms a step'\nset y2label 'scaling efficiency (%%)'\n"
               "set y2range [0:110]\nset ytics nomirror\nset y2tics\nset xlabel 'GPUs'\n"
               "set key outside\n",
            t->cluster.name[0] ? t->cluster.name : "the target");
    fprintf(g, "plot '-' using 2:xtic(1) title 'compute', '' using 2 title 'communication', "
               "'' using 2 title 'waiting', '' using 0:2 axes x1y2 with linespoints lw 2 "
               "title 'efficiency'\n");
    for (int part = 0; part < 4; part++) {
        for (int i = 0; i < n; i++) {
            const double v = part == 0 ? rows[i].compute_s * 1e3 : part == 1 ? rows[i].comm_s * 1e3
                             : part == 2 ? rows[i].wait_s * 1e3 : 100 * rows[i].efficiency;
            fprintf(g, "%ld %.6g\n", rows[i].gpus, v);
        }
        fprintf(g, "e\n");
    }
    const int rc = pclose(g);
    if (rc != 0) {
        fprintf(stderr, "vgpu-project: gnuplot failed drawing %s (status %d)\n", out, rc);
        return 1;
    }
    printf("vgpu-project: plot %s\n", out);
    return 0;
}

// The counts to project: --ranks, or 1, 2, 4, ... and the target's size.
static int counts_(const struct cli_ *cli, const struct target *t, long *counts)
{
    const long size = target_gpus(t);
    int n = 0;
    if (cli->n_ranks) {
        for (int i = 0; i < cli->n_ranks; i++) {
            if (cli->ranks[i] > size) {
                fprintf(stderr, "vgpu-project: --ranks %ld: the target has %ld GPUs\n",
                        cli->ranks[i], size);
                return -1;
            }
            counts[n++] = cli->ranks[i];
        }
        return n;
    }
    for (long k = 1; k < size && n < ROWS_MAX - 1; k *= 2)
        counts[n++] = k;
    counts[n++] = size;
    return n;
}

// Both files read, the measured machine when given: 0 or EXIT_USAGE, said.
static int load_inputs_(const struct cli_ *cli, struct trace_profile *p, struct target *t,
                        struct target *measured, int *have_measured)
{
    char err[1024];
    int rc = trace_profile_load(p, cli->trace, err, sizeof err);
    if (rc == 0)
        rc = target_load(t, cli->target, cli->sets, cli->n_sets, err, sizeof err);
    *have_measured = cli->measured_on != NULL;
    if (rc == 0 && cli->measured_on)
        rc = target_load(measured, cli->measured_on, NULL, 0, err, sizeof err);
    if (rc == 0)
        rc = projection_calibrate(t, *have_measured ? measured : NULL, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "vgpu-project: %s\n", err);
        return EXIT_USAGE;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static struct trace_profile profile;
    static struct target target, measured;
    struct cli_ cli;
    int rc = parse_cli_(argc, argv, &cli), have_measured;
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    if ((rc = load_inputs_(&cli, &profile, &target, &measured, &have_measured)) != 0)
        return rc;
    struct projection_scale scale;
    char err[512];
    if (projection_scale_for(&scale, &profile, &target, have_measured ? &measured : NULL, cli.math,
                             err, sizeof err) < 0) {
        fprintf(stderr, "vgpu-project: %s\n", err);
        return EXIT_USAGE;
    }
    long counts[ROWS_MAX];
    const int n = counts_(&cli, &target, counts);
    if (n < 0)
        return EXIT_USAGE;
    struct projection_row rows[ROWS_MAX], one;
    projection_row(&one, &profile, &target, &scale, 1, 0);
    print_header_(&cli, &profile, &target);
    for (int i = 0; i < n; i++) {
        projection_row(&rows[i], &profile, &target, &scale, counts[i], one.step_s);
        print_row_(&rows[i]);
    }
    print_lanes_(&profile, &target, &scale);
    for (int i = 0; i < n; i++) { // each limit once, with what it assumes
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= rows[j].limit == rows[i].limit;
        if (!seen)
            print_assumption_(rows[i].limit, &profile, &target, &cli);
    }
    return cli.plot ? plot_(cli.plot, &target, rows, n) : 0;
}
