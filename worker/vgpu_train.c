// vgpu_train.c: the training program: `mpirun -np N vgpu_train CONFIG.ini`.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "preempt.h"
#include "runtime.h"
#include "train.h"
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
            "  --resume PATH            resume from a checkpoint (any rank count)\n"
            "  --verify                 train verify.steps steps, then replay them on one device\n"
            "                           and compare the parameters (bitwise in deterministic mode)\n"
            "  --quiet                  no job table or progress; only the summary line\n"
            "  --help-config            print every config key with its default and exit\n"
            "  --help                   this help\n"
            "  --version                print the version\n"
            "\n"
            "Without CONFIG.ini the defaults are used (see configs/default.ini).\n"
            "Exit status: 0 done, 1 runtime failure, 2 bad command line or config,\n"
            "3 replicas diverged or --verify failed, 75 preempted (checkpoint written; resume it).\n"
            "SIGTERM/SIGINT/SIGUSR1: stop within 10 steps and checkpoint; a second one aborts.\n");
}

struct cli {
    const char *config_path;
    const char *overrides[MAX_OVERRIDES];
    int n_overrides;
    struct train_options train;
};

// Parses argv; returns 0, 1 for "printed help/version, exit 0", or EXIT_USAGE
// with a message in err.
static int parse_cli_(int argc, char **argv, struct cli *cli, char *err, size_t err_bytes)
{
    enum { OPT_SET = 256, OPT_METRICS, OPT_RESUME, OPT_VERIFY, OPT_QUIET, OPT_HELP_CONFIG, OPT_VERSION };
    static const struct option options[] = {
        {"set", required_argument, NULL, OPT_SET},
        {"metrics", required_argument, NULL, OPT_METRICS},
        {"resume", required_argument, NULL, OPT_RESUME},
        {"verify", no_argument, NULL, OPT_VERIFY},
        {"quiet", no_argument, NULL, OPT_QUIET},
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
        if ((c == OPT_METRICS || c == OPT_RESUME) && !optarg[0]) {
            snprintf(err, err_bytes, "option %s needs a path, not an empty string",
                     c == OPT_METRICS ? "--metrics" : "--resume");
            return EXIT_USAGE;
        }
        switch (c) {
        case OPT_SET:
            if (cli->n_overrides == MAX_OVERRIDES) {
                snprintf(err, err_bytes, "too many --set options (at most %d)", MAX_OVERRIDES);
                return EXIT_USAGE;
            }
            cli->overrides[cli->n_overrides++] = optarg;
            break;
        case OPT_METRICS: cli->train.metrics_path = optarg; break;
        case OPT_RESUME: cli->train.resume_path = optarg; break;
        case OPT_VERIFY: cli->train.verify = 1; break;
        case OPT_QUIET: cli->train.quiet = 1; break;
        case OPT_HELP_CONFIG: return 3;
        case 'h': return 1;
        case OPT_VERSION: return 4;
        case ':':
            snprintf(err, err_bytes, "option %s needs a value", argv[optind - 1]);
            return EXIT_USAGE;
        default:
            snprintf(err, err_bytes, "unknown option %s", argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind < argc)
        cli->config_path = argv[optind++];
    if (optind < argc) {
        snprintf(err, err_bytes, "unexpected argument '%s' (one config file at most)", argv[optind]);
        return EXIT_USAGE;
    }
    if (cli->train.verify && cli->train.resume_path) {
        snprintf(err, err_bytes, "--verify replays a run from its start; it cannot --resume");
        return EXIT_USAGE;
    }
    return 0;
}

// Rank of this process before MPI is up (launchers export it), so that help
// and usage errors print once.
static int launcher_rank_(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v)
            return atoi(v);
    }
    return 0;
}

int main(int argc, char **argv)
{
    // Before MPI or OpenMP start threads: they must inherit the blocked
    // stop signals (preempt.h says why).
    if (preempt_start() != 0) {
        fprintf(stderr, "vgpu_train: cannot start the signal thread\n");
        return 1;
    }
    struct cli cli;
    char err[1024] = "";
    // The command line is checked before MPI starts: help and usage errors
    // need no communicator, and every rank reaches the same verdict.
    int rc = parse_cli_(argc, argv, &cli, err, sizeof err);
    if (rc) {
        int print = launcher_rank_() == 0;
        if (rc == EXIT_USAGE && print) {
            fprintf(stderr, "vgpu_train: %s\n\n", err);
            usage_(stderr);
        } else if (rc == 1 && print) {
            usage_(stdout);
        } else if (rc == 3 && print) {
            config_print_reference(stdout);
        } else if (rc == 4 && print) {
            printf("vgpu_train %s\n", VGPU_VERSION);
        }
        return rc == EXIT_USAGE ? EXIT_USAGE : 0;
    }

    struct runtime rt;
    if (runtime_bootstrap(&rt, &argc, &argv) < 0)
        return 1;
    rc = runtime_load_config(&rt, cli.config_path, cli.overrides, cli.n_overrides, err, sizeof err);
    if (rc < 0) {
        if (rt.rank == 0)
            fprintf(stderr, "vgpu_train: %s\n", err);
        return runtime_close(&rt, EXIT_USAGE);
    }
    if (cli.train.verify) {
        // A short run to check the setup: verify.steps steps, no checkpoints.
        struct config *cfg = &rt.cfg;
        if (!cfg->train.max_steps || cfg->verify.steps < cfg->train.max_steps)
            cfg->train.max_steps = cfg->verify.steps;
        cfg->checkpoint.dir[0] = '\0';
    }

    struct train_data data;
    rc = train_load_data(&rt.cfg, &data, err, sizeof err);
    if (rc < 0 && rt.local_rank == 0)
        log_error("%s", err);
    if (rc == 0 && data.fallback[0] && rt.local_rank == 0)
        log_warn("%s", data.fallback);
    if ((rc = runtime_agree_min(&rt, rc < 0 ? rc : 0)) < 0) {
        train_free_data(&data);
        return runtime_close(&rt, EXIT_USAGE);
    }

    struct runtime_open_args open_args = {
        .min_bytes = train_device_bytes(&rt.cfg, &data, rt.size, cli.train.verify),
        .quiet = cli.train.quiet,
    };
    rc = runtime_open(&rt, &open_args);
    if (rc < 0) {
        train_free_data(&data);
        return runtime_close(&rt, rc == VGPU_ECONFIG || rc == VGPU_ENODEV ? EXIT_USAGE : 1);
    }
    if (rt.rank == 0 && !cli.train.quiet) {
        printf("vgpu_train: data: %s\n", data.source);
        fflush(stdout);
    }

    struct train_result res;
    double t0 = util_now_s();
    rc = train_run(&rt, &data, &cli.train, &res);
    double wall = util_now_s() - t0;

    // Per-rank peak device memory, for the summary.
    uint64_t peak = rt.dev.arena.stats.peak_bytes;
    uint64_t *peaks = malloc((size_t)rt.size * sizeof *peaks);
    if (!peaks)
        FATAL(1, "out of memory");
    runtime_gather_all(&rt, &peak, peaks, sizeof peak);
    const char *status = rc == 0 ? "ok"
                         : rc == VGPU_EPREEMPTED ? "preempted"
                         : rc == VGPU_EMISMATCH ? (cli.train.verify ? "verify_failed" : "diverged")
                                                : NULL;
    if (rt.rank == 0 && status) {
        char peak_list[1024] = "";
        for (int r = 0; r < rt.size; r++) {
            size_t len = strlen(peak_list);
            snprintf(peak_list + len, sizeof peak_list - len, "%s%.1fM", r ? "," : "",
                     (double)peaks[r] / (1024.0 * 1024.0));
        }
        printf("vgpu_train: done ranks=%d devices=%dx%s/%dvgpu backend=%s epochs=%ld steps=%ld "
               "train_loss=%.4f test_loss=%.4f test_acc=%.4f samples_per_s=%.0f wall_s=%.1f "
               "peak_mem=%s%s%s params_crc=%08x status=%s\n",
               rt.size, rt.physical_devices, rt.dev.info.kind, rt.size, comm_backend_name(rt.comm),
               res.epochs, res.steps, res.train_loss, res.test_loss, res.test_acc,
               res.samples_per_s, wall, peak_list, res.split[0] ? " split=" : "", res.split,
               res.params_crc, status);
    }
    free(peaks);
    train_free_data(&data);
    int code = rc == 0                                     ? 0
               : rc == VGPU_ECONFIG || rc == VGPU_EFORMAT ? EXIT_USAGE
               : rc == VGPU_EMISMATCH                     ? EXIT_WRONG
               : rc == VGPU_EPREEMPTED                    ? EXIT_PREEMPTED
                                                          : 1;
    return runtime_close(&rt, code);
}
