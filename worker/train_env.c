// train_env.c: vgpu_train's environment switches: the table, and each parsed once.
#include "train_env.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "env.h"

// The table --help prints (and docs/CONFIG.md shows); every switch below is
// read through it (get_).
static const struct env_var vars_[] = {
    {"VGPU_PROGRESS", "bar|lines",
     "progress display of vgpu_train's rank 0: a live bar, or one line per log_every steps "
     "(default: a bar when stdout is a terminal and no launcher started the job, or when "
     "VGPU_TERMINAL=1 says the launcher's is)"},
    {"VGPU_INJECT_SLOW", "RANK:FACTOR",
     "injected fault: RANK's compute lasts FACTOR (>= 1) times as long, as on a slower device "
     "(docs/TROUBLESHOOTING.md: Injecting faults)"},
    {"VGPU_INJECT_HANG", "RANK@WHEN",
     "injected fault: RANK stops itself (SIGSTOP) after step WHEN, as a hung process: the "
     "others name it at comm.timeout_s. WHEN: a step, or random[:SEED] for a step drawn from "
     "SEED in the run's steps"},
    {"VGPU_INJECT_KILL", "RANK@WHEN",
     "injected fault: RANK kills itself (SIGKILL) after step WHEN (a step, or random[:SEED])"},
    {"VGPU_INJECT_PERTURB", "RANK@WHEN",
     "injected fault: RANK nudges one parameter after step WHEN (a step, or random[:SEED]); the "
     "replica check (train.check_replicas_every) must catch it"},
    {"VGPU_TEST_START_PAUSE", "STAGE:SECONDS",
     "test hook: every rank of vgpu_train sleeps SECONDS at a start-up stage: data (before the "
     "data is agreed), open (before the model is set up), warmup (after the warm-up step)"},
};
#define VARS_COUNT_ (sizeof vars_ / sizeof *vars_)

static struct train_env env_;
static int parsed_;

static const char *get_(const char *name)
{
    return env_table_get(vars_, VARS_COUNT_, name);
}

// NAME=RANK@STEP, RANK@random or RANK@random:SEED into *at (rank -1 = off).
static void parse_when_(const char *name, struct train_env_when *at)
{
    *at = (struct train_env_when){.rank = -1};
    const char *v = get_(name);
    if (!v || !*v)
        return;
    int rank, used = 0;
    char end;
    long step;
    unsigned long long seed;
    if (sscanf(v, "%d@%n", &rank, &used) == 1 && used > 0 && rank >= 0) {
        const char *when = v + used;
        if (sscanf(when, "%ld%c", &step, &end) == 1 && step >= 1 && isdigit((unsigned char)*when)) {
            *at = (struct train_env_when){.rank = rank, .step = step};
            return;
        }
        if (!strcmp(when, "random")) {
            *at = (struct train_env_when){.rank = rank, .random = 1, .seed_given = 0};
            return;
        }
        if (!strncmp(when, "random:", 7) && isdigit((unsigned char)when[7]) &&
            sscanf(when + 7, "%llu%c", &seed, &end) == 1) {
            *at = (struct train_env_when){.rank = rank, .random = 1, .seed_given = 1,
                                          .seed = seed};
            return;
        }
    }
    env_warn_malformed(name, v, "RANK@STEP (STEP >= 1), RANK@random or RANK@random:SEED");
}

static void parse_pause_(struct train_env *e)
{
    const char *v = get_("VGPU_TEST_START_PAUSE");
    if (!v || !*v)
        return;
    size_t len = strcspn(v, ":");
    static const char *const stages[] = {"data", "open", "warmup"};
    int known = 0;
    char end;
    for (size_t i = 0; i < sizeof stages / sizeof *stages; i++)
        known |= len == strlen(stages[i]) && !strncmp(v, stages[i], len);
    if (known && v[len] == ':' && sscanf(v + len + 1, "%lf%c", &e->pause_s, &end) == 1 &&
        e->pause_s >= 0 && e->pause_s <= 600)
        snprintf(e->pause_stage, sizeof e->pause_stage, "%.*s", (int)len, v);
    else
        env_warn_malformed("VGPU_TEST_START_PAUSE", v, "data|open|warmup:SECONDS (at most 600)");
}

static void parse_(struct train_env *e)
{
    *e = (struct train_env){.progress = -1, .slow_rank = -1};
    const char *v;
    char end;
    if ((v = get_("VGPU_PROGRESS")) && *v) {
        if (!strcmp(v, "bar"))
            e->progress = 1;
        else if (!strcmp(v, "lines"))
            e->progress = 0;
        else
            env_warn_malformed("VGPU_PROGRESS", v, "bar|lines");
    }
    if ((v = get_("VGPU_INJECT_SLOW")) && *v &&
        (sscanf(v, "%d:%lf%c", &e->slow_rank, &e->slow_factor, &end) != 2 || e->slow_rank < 0 ||
         !(e->slow_factor >= 1) || e->slow_factor > 1e6)) {
        env_warn_malformed("VGPU_INJECT_SLOW", v, "RANK:FACTOR with FACTOR from 1 to 1e6");
        e->slow_rank = -1;
    }
    parse_when_("VGPU_INJECT_HANG", &e->hang);
    parse_when_("VGPU_INJECT_KILL", &e->kill);
    parse_when_("VGPU_INJECT_PERTURB", &e->perturb);
    parse_pause_(e);
}

const struct train_env *train_env_get(void)
{
    if (!parsed_) {
        parse_(&env_);
        parsed_ = 1;
    }
    return &env_;
}

void train_env_reset(void)
{
    parsed_ = 0;
}

void train_env_print_reference(FILE *f)
{
    env_table_print(f, vars_, VARS_COUNT_);
}
