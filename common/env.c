// env.c: the environment switches, parsed once.
#include "env.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

struct env_var {
    const char *name;
    const char *form;
    const char *doc;
};

// The table env_print_reference prints; env_parse_ below reads the same names.
static const struct env_var vars_[] = {
    {"VGPU_PROGRESS", "bar|lines",
     "progress display of vgpu_train's rank 0: a live bar, or one line per log_every steps "
     "(default: a bar when stdout is a terminal and no launcher started the job)"},
    {"VGPU_RING_STAGING", "1",
     "the ring all-reduce copies through host staging segments on CPU devices too, as it does "
     "on GPUs (tests the GPU data path without a GPU)"},
    {"VGPU_MPI_STAGING", "1",
     "the mpi backend copies through its host staging buffer on CPU devices too, as it does on "
     "GPUs (tests the GPU data path, e.g. deterministic mode's all-to-all, without a GPU)"},
    {"VGPU_RING_SPIN", "COUNT",
     "polls before a ring wait sleeps on its futex (default: more when each rank has a core)"},
    {"NCCL_MULTI_RANK_GPU_ENABLE", "1",
     "NCCL's own switch (NCCL >= 2.30, experimental): comm.backend = auto may then pick NCCL "
     "for ranks that share a GPU"},
    {"VGPU_PLAN", "1",
     "start up, print the job table (hosts, devices, caps, backend and why) and exit without "
     "training, as vgpu_train --plan (vgpurun --plan exports it)"},
    {"VGPU_SIM_GPUS", "TOPOLOGY",
     "simulated GPUs: the host's GPUs as described (e.g. 4x80G, 1x80G/exclusive, 1x80G/mig=3, "
     "2x24G/used=4G, none, nodriver; README: Planning), with CPU math behind them; "
     "CUDA_VISIBLE_DEVICES selects among them as CUDA does"},
    {"VGPU_INJECT_SLOW", "RANK:FACTOR",
     "injected fault: RANK's compute lasts FACTOR (>= 1) times as long, as on a slower device "
     "(README: Injecting faults)"},
    {"VGPU_INJECT_HANG", "RANK@WHEN",
     "injected fault: RANK stops itself (SIGSTOP) after step WHEN, as a hung process: the "
     "others name it at comm.timeout_s. WHEN: a step, or random[:SEED] for a step drawn from "
     "SEED in the run's steps"},
    {"VGPU_INJECT_KILL", "RANK@WHEN",
     "injected fault: RANK kills itself (SIGKILL) after step WHEN (a step, or random[:SEED])"},
    {"VGPU_INJECT_PERTURB", "RANK@WHEN",
     "injected fault: RANK nudges one parameter after step WHEN (a step, or random[:SEED]); the "
     "replica check (train.check_replicas_every) must catch it"},
    {"VGPU_FLIGHT_DIR", "DIR",
     "where the flight recorder writes a failing job's records, in a directory per job "
     "(default: $TMPDIR/vgpu-flight-UID, /tmp without TMPDIR; README: When a job hangs or dies)"},
    {"VGPU_TEST_HOST", "NAME",
     "test hook: the rank counts as on host NAME (ranks naming the same host are one host), to "
     "rehearse several hosts on one machine"},
    {"VGPU_TEST_NCCL_VERSION", "VERSION",
     "test hook: this rank reports NCCL VERSION (e.g. 23000 for 2.30; 0 for none) to the job's "
     "backend choice instead of the one it loads (a build with NCCL only)"},
    {"VGPU_CUDA_VISIBLE_DEVICES_PINNED", "PIN|BEFORE",
     "set by vgpurun-rank, not by users: the CUDA_VISIBLE_DEVICES it pinned and the value it "
     "replaced, which a vgpu program puts back to bind itself"},
    {"VGPU_TEST_START_PAUSE", "STAGE:SECONDS",
     "test hook: every rank of vgpu_train sleeps SECONDS at a start-up stage: data (before the "
     "data is agreed), open (before the model is set up), warmup (after the warm-up step)"},
};

// Launchers' rank variables, most specific first.
static const char *const launcher_rank_vars_[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                                  "SLURM_PROCID"};

static struct vgpu_env env_;
static int parsed_;

static void malformed_(const char *name, const char *value, const char *form)
{
    log_warn("ignoring %s=%s: expected %s", name, value, form);
}

// NAME=RANK@STEP, RANK@random or RANK@random:SEED into *at (rank -1 = off).
static void parse_when_(const char *name, struct env_when *at)
{
    *at = (struct env_when){.rank = -1};
    const char *v = getenv(name);
    if (!v || !*v)
        return;
    int rank, used = 0;
    char end;
    long step;
    unsigned long long seed;
    if (sscanf(v, "%d@%n", &rank, &used) == 1 && used > 0 && rank >= 0) {
        const char *when = v + used;
        if (sscanf(when, "%ld%c", &step, &end) == 1 && step >= 1 && isdigit((unsigned char)*when)) {
            *at = (struct env_when){.rank = rank, .step = step};
            return;
        }
        if (!strcmp(when, "random")) {
            *at = (struct env_when){.rank = rank, .random = 1, .seed_given = 0};
            return;
        }
        if (!strncmp(when, "random:", 7) && isdigit((unsigned char)when[7]) &&
            sscanf(when + 7, "%llu%c", &seed, &end) == 1) {
            *at = (struct env_when){.rank = rank, .random = 1, .seed_given = 1, .seed = seed};
            return;
        }
    }
    malformed_(name, v, "RANK@STEP (STEP >= 1), RANK@random or RANK@random:SEED");
}

static void env_parse_(struct vgpu_env *e)
{
    *e = (struct vgpu_env){.progress = -1, .ring_spin = -1, .launcher_rank = -1,
                           .slow_rank = -1};
    const char *v;
    char end;
    if ((v = getenv("VGPU_PROGRESS")) && *v) {
        if (!strcmp(v, "bar"))
            e->progress = 1;
        else if (!strcmp(v, "lines"))
            e->progress = 0;
        else
            malformed_("VGPU_PROGRESS", v, vars_[0].form);
    }
    if ((v = getenv("VGPU_RING_STAGING")) && *v)
        e->ring_staging = !strcmp(v, "1");
    if ((v = getenv("VGPU_MPI_STAGING")) && *v)
        e->mpi_staging = !strcmp(v, "1");
    e->test_nccl_version = -1;
    if ((v = getenv("VGPU_TEST_NCCL_VERSION")) && *v) {
        int n;
        if (sscanf(v, "%d%c", &n, &end) == 1 && n >= 0 && n < 1000000)
            e->test_nccl_version = n;
        else
            malformed_("VGPU_TEST_NCCL_VERSION", v, "a version number such as 23000, or 0");
    }
    if ((v = getenv("VGPU_RING_SPIN")) && *v) {
        long n;
        if (sscanf(v, "%ld%c", &n, &end) == 1 && n >= 0)
            e->ring_spin = n;
        else
            malformed_("VGPU_RING_SPIN", v, "a count >= 0");
    }
    if ((v = getenv("NCCL_MULTI_RANK_GPU_ENABLE")))
        e->nccl_multi_rank_gpu = !strcmp(v, "1");
    for (size_t i = 0; i < sizeof launcher_rank_vars_ / sizeof *launcher_rank_vars_; i++) {
        int r;
        if ((v = getenv(launcher_rank_vars_[i])) && sscanf(v, "%d", &r) == 1 && r >= 0) {
            e->launcher_rank = r;
            break;
        }
    }
    e->under_launcher = e->launcher_rank >= 0 || getenv("OMPI_COMM_WORLD_SIZE") != NULL;
    if ((v = getenv("VGPU_INJECT_SLOW")) && *v &&
        (sscanf(v, "%d:%lf%c", &e->slow_rank, &e->slow_factor, &end) != 2 || e->slow_rank < 0 ||
         !(e->slow_factor >= 1) || e->slow_factor > 1e6)) {
        malformed_("VGPU_INJECT_SLOW", v, "RANK:FACTOR with FACTOR from 1 to 1e6");
        e->slow_rank = -1;
    }
    parse_when_("VGPU_INJECT_HANG", &e->hang);
    parse_when_("VGPU_INJECT_KILL", &e->kill);
    parse_when_("VGPU_INJECT_PERTURB", &e->perturb);
    if ((v = getenv("VGPU_PLAN")) && *v) {
        if (!strcmp(v, "1"))
            e->plan = 1;
        else if (strcmp(v, "0") != 0)
            malformed_("VGPU_PLAN", v, "1 or 0");
    }
    // Flight records go where a fault happened, never into the working
    // directory (the user's source tree) unless asked: by default a
    // directory of this user's under $TMPDIR.
    e->flight_dir_default = !((v = getenv("VGPU_FLIGHT_DIR")) && *v);
    if (e->flight_dir_default) {
        const char *tmp = getenv("TMPDIR");
        snprintf(e->flight_dir_buf, sizeof e->flight_dir_buf, "%s/vgpu-flight-%u",
                 tmp && *tmp == '/' && strlen(tmp) < 200 ? tmp : "/tmp", (unsigned)getuid());
        v = e->flight_dir_buf;
    }
    e->flight_dir = v;
    if ((v = getenv("VGPU_TEST_HOST")) && *v) {
        if (strlen(v) < sizeof e->test_host && !strchr(v, ' '))
            snprintf(e->test_host, sizeof e->test_host, "%s", v);
        else
            malformed_("VGPU_TEST_HOST", v, "a host name of at most 63 characters, no spaces");
    }
    if ((v = getenv("VGPU_TEST_START_PAUSE")) && *v) {
        size_t len = strcspn(v, ":");
        static const char *const stages[] = {"data", "open", "warmup"};
        int known = 0;
        for (size_t i = 0; i < sizeof stages / sizeof *stages; i++)
            known |= len == strlen(stages[i]) && !strncmp(v, stages[i], len);
        if (known && v[len] == ':' && sscanf(v + len + 1, "%lf%c", &e->pause_s, &end) == 1 &&
            e->pause_s >= 0 && e->pause_s <= 600)
            snprintf(e->pause_stage, sizeof e->pause_stage, "%.*s", (int)len, v);
        else
            malformed_("VGPU_TEST_START_PAUSE", v, "data|open|warmup:SECONDS (at most 600)");
    }
}

const struct vgpu_env *env_get(void)
{
    if (!parsed_) {
        env_parse_(&env_);
        parsed_ = 1;
    }
    return &env_;
}

void env_reset(void)
{
    parsed_ = 0;
}

void env_print_reference(FILE *f)
{
    for (size_t i = 0; i < sizeof vars_ / sizeof *vars_; i++)
        fprintf(f, "  %s=%s\n      %s\n", vars_[i].name, vars_[i].form, vars_[i].doc);
}
