// vgpu_train.c: the training program: `mpirun -np N vgpu_train CONFIG.ini`.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "log.h"
#include "preempt.h"
#include "train.h"
#include "train_env.h"
#include "util.h"

#define EXIT_USAGE 2     // bad command line or configuration
#define EXIT_WRONG 3     // replicas diverged or --verify failed
#define EXIT_PREEMPTED 75 // stopped by a signal after writing a checkpoint (EX_TEMPFAIL)
#define MAX_OVERRIDES 64

static void usage_(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np N vgpu_train [CONFIG.ini] [options]\n"
            "\n"
            "Synchronous data-parallel training on N virtual GPUs (memory-capped slices of\n"
            "one GPU, one GPU each, or CPU-simulated devices when there is no GPU).\n"
            "\n"
            "options:\n"
            "  --set SECTION.KEY=VALUE  override one config key (repeatable)\n"
            "  --metrics PATH           write progress and evaluations as CSV\n"
            "  --trace PATH             write a timeline of every rank's steps, collectives and\n"
            "                           waits (Chrome trace JSON: chrome://tracing, Perfetto)\n"
            "  --resume PATH            resume from a checkpoint (any rank count)\n"
            "  --verify                 train verify.steps steps, then replay them on one device\n"
            "                           and compare the parameters (bitwise in deterministic mode)\n"
            "  --quiet                  no job table or progress; only the summary line\n"
            "  --plan                   print the job table (hosts, devices, caps, backend and\n"
            "                           why) and exit without training; with VGPU_SIM_GPUS, for\n"
            "                           a described GPU topology (docs/CLUSTER.md: Planning)\n"
            "  --help-config            print every config key with its default and exit\n"
            "  --help                   this help\n"
            "  --version                print the version\n"
            "\n"
            "Without CONFIG.ini the built-in defaults are used (vgpu_train --help-config\n"
            "lists them; configs/default.ini is the quick start's job, not the defaults).\n"
            "Exit status: 0 done, 1 runtime failure (also: metrics rows lost), 2 bad\n"
            "command line or config,\n"
            "3 replicas diverged or --verify failed, 75 preempted (checkpoint written; resume it).\n"
            "SIGTERM/SIGINT/SIGUSR1: stop within 10 steps and checkpoint; a second one aborts.\n"
            "\n"
            "environment (libvgpu: every program that uses it, and vgpurun):\n");
    env_print_reference(f);
    fprintf(f, "\n"
               "environment (vgpu_train's own):\n");
    train_env_print_reference(f);
}

struct cli {
    const char *config_path;
    const char *overrides[MAX_OVERRIDES];
    int n_overrides;
    int plan; // --plan: the job table, no training
    const char *trace_path; // --trace: the timeline's file; NULL = none
    struct train_options train;
};

// What the command line asks for.
enum cli_action {
    CLI_RUN,          // train
    CLI_USAGE_ERROR,  // a bad command line: the message is in err
    CLI_HELP,         // print --help
    CLI_HELP_CONFIG,  // print the config reference
    CLI_VERSION,      // print the version
};

// Parses argv into cli; returns what to do (CLI_USAGE_ERROR with a message in err).
static enum cli_action parse_cli_(int argc, char **argv, struct cli *cli, char *err,
                                  size_t err_bytes)
{
    enum { OPT_SET = 256, OPT_METRICS, OPT_RESUME, OPT_VERIFY, OPT_QUIET, OPT_HELP_CONFIG, OPT_VERSION,
           OPT_PLAN, OPT_TRACE };
    static const struct option options[] = {
        {"set", required_argument, NULL, OPT_SET},
        {"metrics", required_argument, NULL, OPT_METRICS},
        {"trace", required_argument, NULL, OPT_TRACE},
        {"resume", required_argument, NULL, OPT_RESUME},
        {"verify", no_argument, NULL, OPT_VERIFY},
        {"quiet", no_argument, NULL, OPT_QUIET},
        {"plan", no_argument, NULL, OPT_PLAN},
        {"help-config", no_argument, NULL, OPT_HELP_CONFIG},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    memset(cli, 0, sizeof *cli);
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        if ((c == OPT_METRICS || c == OPT_RESUME || c == OPT_TRACE) && !optarg[0]) {
            snprintf(err, err_bytes, "option %s needs a path, not an empty string",
                     c == OPT_METRICS ? "--metrics" : c == OPT_TRACE ? "--trace" : "--resume");
            return CLI_USAGE_ERROR;
        }
        switch (c) {
        case OPT_SET:
            if (cli->n_overrides == MAX_OVERRIDES) {
                snprintf(err, err_bytes, "too many --set options (at most %d)", MAX_OVERRIDES);
                return CLI_USAGE_ERROR;
            }
            cli->overrides[cli->n_overrides++] = optarg;
            break;
        case OPT_METRICS: cli->train.metrics_path = optarg; break;
        case OPT_TRACE: cli->trace_path = optarg; break;
        case OPT_RESUME: cli->train.resume_path = optarg; break;
        case OPT_VERIFY: cli->train.verify = 1; break;
        case OPT_QUIET: cli->train.quiet = 1; break;
        case OPT_PLAN: cli->plan = 1; break;
        case OPT_HELP_CONFIG: return CLI_HELP_CONFIG;
        case 'h': return CLI_HELP;
        case OPT_VERSION: return CLI_VERSION;
        case ':':
            snprintf(err, err_bytes, "option %s needs a value", argv[optind - 1]);
            return CLI_USAGE_ERROR;
        default:
            snprintf(err, err_bytes, "unknown option %s", argv[optind - 1]);
            return CLI_USAGE_ERROR;
        }
    }
    if (optind < argc)
        cli->config_path = argv[optind++];
    if (optind < argc) {
        snprintf(err, err_bytes, "unexpected argument '%s' (one config file at most)", argv[optind]);
        return CLI_USAGE_ERROR;
    }
    if (cli->train.verify && cli->train.resume_path) {
        snprintf(err, err_bytes, "--verify replays a run from its start; it cannot --resume");
        return CLI_USAGE_ERROR;
    }
    return CLI_RUN;
}

// Help and usage errors need no communicator: every rank reaches the same
// verdict, and the launcher's rank 0 prints it. Returns the exit status.
static int answer_without_mpi_(enum cli_action action, const char *err)
{
    if (vgpu_launcher_rank() > 0)
        return action == CLI_USAGE_ERROR ? EXIT_USAGE : 0;
    switch (action) {
    case CLI_USAGE_ERROR:
        fprintf(stderr, "vgpu_train: %s (vgpu_train --help lists the options)\n", err);
        return EXIT_USAGE;
    case CLI_HELP: usage_(stdout); break;
    case CLI_HELP_CONFIG: train_config_print_reference(stdout); break;
    case CLI_VERSION: printf("vgpu_train %s\n", VGPU_VERSION); break;
    case CLI_RUN: break;
    }
    return 0;
}

// The exit status for train_run's verdict.
static int exit_code_(int verdict)
{
    switch (verdict) {
    case 0: return 0;
    case VGPU_ECONFIG:
    case VGPU_EFORMAT: return EXIT_USAGE;
    case VGPU_EMISMATCH: return EXIT_WRONG;
    case VGPU_EPREEMPTED: return EXIT_PREEMPTED;
    default: return 1;
    }
}

// The job's end on a fatal error of vgpu_train's own (log.h's FATAL): the
// whole job, through libvgpu, once the rank has joined.
static vgpu_t *joined_;

static void end_job_(int exit_code)
{
    if (joined_)
        vgpu_abort(joined_, exit_code);
    exit(exit_code);
}

// vgpu_train's copy of the configuration, from the file's text vgpu_join
// read once (every rank has the same text and overrides). vgpu_join left
// the sections it does not know to the program; vgpu_train knows no others,
// so one is a typo: said once (rank 0), agreed, and every rank exits 2.
static int share_config_(struct job *job, const struct cli *cli)
{
    char err[1024];
    int rc = train_config_load_job_text(&job->cfg, NULL, vgpu_config_text(job->v),
                                        cli->config_path, cli->overrides, cli->n_overrides, err,
                                        sizeof err);
    if (rc < 0 && job->rank == 0)
        fprintf(stderr, "vgpu: %s\n", err);
    return job_agree_min(job, rc < 0 ? VGPU_ECONFIG : 0);
}

// The exit status of a failed vgpu_join: the configuration's (a bad value,
// a file that cannot be read: -errno) or a runtime failure's.
static int join_failure_code_(int rc)
{
    const int file_errno = rc < 0 && rc > -1000;
    return rc == VGPU_ECONFIG || file_errno ? EXIT_USAGE : 1;
}

// The job's sizing for vgpu-project, in the timeline: the samples of a step
// and the device bytes a rank needs at each rank count (1 to 16, then powers
// of two), which it reports as memory a GPU on a target.
static void note_sizing_(const struct job *job, const struct train_data *data, int verify)
{
    vgpu_timeline_note(job->v, "global_batch", (double)job->cfg.train.batch_size);
    for (int n = 1; n <= TRAIN_MAX_RANKS; n = n < 16 ? n + 1 : 2 * n) {
        const uint64_t bytes = train_device_bytes(&job->cfg, &data->train, n, verify);
        char key[32];
        snprintf(key, sizeof key, "device_bytes@%d", n);
        if (bytes)
            vgpu_timeline_note(job->v, key, (double)bytes);
    }
}

// --plan: what a rank's device memory holds at this rank count (the job
// table above says whether the caps hold it).
static void print_plan_(const struct job *job, const struct train_bytes *b)
{
    if (job->rank != 0 || !b->total)
        return;
    // One part a line: the job table's width (79 columns).
    char s[32], s2[32];
    printf("vgpu_train: a rank's device memory, %zu parameters:\n", b->param_count);
    printf("  parameters %s, gradients %s\n", util_format_bytes(b->params, s, sizeof s),
           util_format_bytes(b->grads, s2, sizeof s2));
    printf("  optimizer state %s (every rank's)\n", util_format_bytes(b->optimizer, s, sizeof s));
    printf("  activations and buffers %s\n", util_format_bytes(b->activations, s, sizeof s));
    if (b->staging)
        printf("  batch staging %s\n", util_format_bytes(b->staging, s, sizeof s));
    if (b->deterministic)
        printf("  micro-batch gradients and the tree's scratch %s\n",
               util_format_bytes(b->deterministic, s, sizeof s));
    if (b->verify)
        printf("  --verify's replay %s\n", util_format_bytes(b->verify, s, sizeof s));
    fflush(stdout);
}

static int finish_(struct job *job, int exit_code)
{
    vgpu_finalize(job->v);
    joined_ = NULL;
    return exit_code;
}

int main(int argc, char **argv)
{
    // Before MPI or OpenMP start threads: they must inherit the blocked
    // stop signals (preempt.h says why). Armed from here on: a stop request
    // during start-up is honoured at its milestones (exit 75), never fatal.
    if (preempt_start_armed() != 0) {
        fprintf(stderr, "vgpu_train: cannot start the signal thread\n");
        return 1;
    }
    struct cli cli;
    char err[1024] = "";
    // The command line is checked before MPI starts.
    enum cli_action action = parse_cli_(argc, argv, &cli, err, sizeof err);
    if (action != CLI_RUN)
        return answer_without_mpi_(action, err);

    // Join: vgpu_train's way (end_job_on_failure): start-up is watched, and a
    // rank lost in a collective ends the job with a line naming it.
    const struct vgpu_options options = {
        .config_path = cli.config_path,
        .overrides = cli.overrides,
        .n_overrides = cli.n_overrides,
        .end_job_on_failure = 1,
    };
    struct job job = {.launched = env_get()->under_launcher};
    int rc = vgpu_join(&job.v, &argc, &argv, &options);
    if (rc < 0)
        return join_failure_code_(rc);
    joined_ = job.v;
    job.rank = vgpu_rank(job.v);
    job.size = vgpu_size(job.v);
    job.local_rank = vgpu_local_rank(job.v);
    job.local_size = vgpu_local_size(job.v);
    log_set_identity(job.rank, vgpu_host_name(job.v));
    log_set_fatal_hook(end_job_);
    preempt_set_observer(vgpu_on_signal);
    if (share_config_(&job, &cli) < 0)
        return finish_(&job, EXIT_USAGE);
    if (cli.train.verify) {
        // A short run to check the setup: verify.steps steps, no checkpoints.
        struct train_config *cfg = &job.cfg;
        if (!cfg->train.max_steps || cfg->verify.steps < cfg->train.max_steps)
            cfg->train.max_steps = cfg->verify.steps;
        cfg->checkpoint.dir[0] = '\0';
    }

    vgpu_startup_stage(job.v, "loading the data");
    train_test_pause("data", job.rank);
    struct train_data data;
    rc = train_load_data(&job.cfg, job.local_size, &data, err, sizeof err);
    if (rc < 0 && job.local_rank == 0)
        log_error("%s", err);
    if (rc == 0 && data.fallback[0] && job.local_rank == 0)
        log_warn("%s", data.fallback);
    if ((rc = job_agree_min(&job, rc < 0 ? rc : train_stop_vote())) < 0) {
        train_free_data(&data);
        if (rc == VGPU_EPREEMPTED)
            train_report_early_stop(&job);
        return finish_(&job, rc == VGPU_EPREEMPTED ? EXIT_PREEMPTED : EXIT_USAGE);
    }

    // The model laid out once: its bytes for the binding's cap check, its
    // parts for --plan.
    struct train_bytes sizing;
    train_device_parts(&job.cfg, &data.train, job.size, cli.train.verify, &sizing);
    const struct vgpu_open_options open_options = {
        .min_device_bytes = sizing.total,
        .largest_collective_bytes = train_largest_collective_bytes(&job.cfg, &data.train),
        .quiet = cli.train.quiet,
        .deterministic = job.cfg.train.deterministic,
        .plan_only = cli.plan,
    };
    rc = vgpu_open(job.v, &open_options);
    if (rc == 0 && vgpu_is_planned(job.v) && !cli.train.quiet)
        print_plan_(&job, &sizing);
    if (rc < 0 || vgpu_is_planned(job.v)) {
        train_free_data(&data);
        return finish_(&job, rc == VGPU_ECONFIG || rc == VGPU_ENODEV ? EXIT_USAGE : rc < 0);
    }
    if (job.rank == 0 && !cli.train.quiet) {
        printf("vgpu_train: data: %s\n", data.source);
        fflush(stdout);
    }

    // The trace names the job (scripts/plot_metrics.sh titles its picture with it).
    char producer[192];
    snprintf(producer, sizeof producer, "vgpu_train " VGPU_VERSION ": %d ranks, %s, %s", job.size,
             vgpu_backend(job.v), data.name ? data.name : "?");
    if (cli.trace_path && (rc = vgpu_timeline_begin(job.v, cli.trace_path, producer)) < 0) {
        train_free_data(&data);
        return finish_(&job, rc == VGPU_ECONFIG ? EXIT_USAGE : 1);
    }
    if (cli.trace_path)
        note_sizing_(&job, &data, cli.train.verify);
    struct train_result res;
    double t0 = util_now_s();
    rc = train_run(&job, &data, &cli.train, &res);
    double wall = util_now_s() - t0;
    // Preempted or done, the timeline is written (a failure ends the job
    // before this: the flight recorder tells that story).
    const int trace_rc = cli.trace_path ? vgpu_timeline_write(job.v) : 0;

    if (train_print_summary(&job, &res, rc, &cli.train, wall) < 0)
        FATAL(1, "cannot gather the run's summary");
    train_free_data(&data);
    int code = exit_code_(rc);
    return finish_(&job, code == 0 && trace_rc < 0 ? 1 : code);
}
