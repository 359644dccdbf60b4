// env.c: libvgpu's environment switches: the table, and each parsed once.
#include "env.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "ring_algos.h"

// VGPU_RING_ALGO's values: "auto", then the ring's algorithms (ring_algos.h).
#define RING_ALGO_FORM_(ID, id, name) "|" name
#define RING_ALGO_NAME_(ID, id, name) name,
static const char *const ring_algo_names_[] = {"auto", RING_ALGOS(RING_ALGO_NAME_)};
#define RING_ALGO_NAMES_ ((int)(sizeof ring_algo_names_ / sizeof *ring_algo_names_))

// The table env_print_reference prints (and docs/CONFIG.md shows); every
// switch below is read through it (env_read), so none goes undocumented.
static const struct env_var vars_[] = {
    // The config's switches: config_apply_env sets their keys (config.c);
    // VGPU_COMM_TIMEOUT_S also bounds the start-up before the config is read.
    {"VGPU_RANKS_PER_DEVICE", "VALUE", "sets devices.ranks_per_device (file < environment < --set)"},
    {"VGPU_MEMORY_LIMIT", "VALUE", "sets devices.memory_limit (file < environment < --set)"},
    {"VGPU_BACKEND", "VALUE", "sets comm.backend (file < environment < --set)"},
    {"VGPU_COMM_TIMEOUT_S", "VALUE",
     "sets comm.timeout_s (file < environment < --set); before the config is read, it also "
     "bounds the start-up's waits (0.1 to 86400 seconds, else 300)"},
    {"VGPU_RING_STAGING", "1|0",
     "1: the ring all-reduce copies through host staging segments on any device (on CPU devices: "
     "tests the GPU data path without a GPU); 0: ranks on one GPU map each other's memory (CUDA "
     "IPC) for every all-reduce, even where their contexts take turns on it (no MPS); unset: IPC "
     "only under MPS without a pinned memory limit, and there small all-reduces staged; else "
     "staging"},
    {"VGPU_MPI_STAGING", "1",
     "the mpi backend copies through its host staging buffer on CPU devices too, as it does on "
     "GPUs (tests the GPU data path, e.g. deterministic mode's all-to-all, without a GPU)"},
    {"VGPU_RING_SPIN", "COUNT",
     "polls before a ring wait yields its core, then sleeps on its futex (default: more when "
     "each rank has a core)"},
    {"VGPU_RING_YIELD_US", "MICROSECONDS",
     "how long a ring wait yields its core between polls before it sleeps on its futex "
     "(0 to 1000000, default 250; 0: sleep after the polls)"},
    {"VGPU_RING_MSG_BYTES", "BYTES",
     "the largest MPI message the ring sends between hosts (0, or 256 to 1073741824; default "
     "64512, under Open MPI's TCP eager limit, so that no message waits for the receiver's "
     "answer; 0: each step in one message); ranks that disagree all use the smallest (0 "
     "counting as the largest)"},
    {"VGPU_RING_ALGO", "auto" RING_ALGOS(RING_ALGO_FORM_),
     "the ring backend's all-reduce algorithm on one host (default auto: by size, rank count "
     "and cores, docs/COLLECTIVES.md; a forced one-shot or two-shot carries up to 4 MiB, the "
     "ring above that; direct carries every size); ranks that disagree all use the smallest "
     "sizes any of them asks for, and direct only if all allow it"},
    {"NCCL_MULTI_RANK_GPU_ENABLE", "1",
     "NCCL's own switch (NCCL >= 2.30, experimental): comm.backend = auto may then pick NCCL "
     "for ranks that share a GPU"},
    {"VGPU_PLAN", "1",
     "start up, print the job table (hosts, devices, caps, backend and why) and open nothing: "
     "vgpu_init returns VGPU_EPLANNED, vgpu_is_planned says so (vgpurun --plan exports it)"},
    {"VGPU_TERMINAL", "1",
     "the job's output reaches a terminal, COLUMNS wide, though each rank's stdout is a pipe "
     "(vgpurun sets it on a terminal): a program may draw live output there"},
    {"VGPU_SIM_GPUS", "TOPOLOGY",
     "simulated GPUs: the host's GPUs as described (e.g. 4x80G, 1x80G/exclusive, 1x80G/mig=3, "
     "2x24G/used=4G, none, nodriver; docs/CLUSTER.md: Planning), with CPU math behind them; "
     "CUDA_VISIBLE_DEVICES selects among them as CUDA does"},
    {"VGPU_FLIGHT_DIR", "DIR",
     "where the flight recorder writes a failing job's records, in a directory per job "
     "(default: $TMPDIR/vgpu-flight-UID, /tmp without TMPDIR; docs/OBSERVABILITY.md: When a job "
     "hangs or dies)"},
    {"VGPU_MPIRUN_REPORT", "1",
     "vgpurun keeps mpirun's own reports (no mpirun -q), as vgpurun -v does"},
    {"VGPU_MPIRUN_ORPHAN_S", "SECONDS",
     "vgpurun ends an mpirun that had children and has had none for SECONDS (0 to 86400, "
     "default 5; 0 = never): Open MPI's mpirun can hang once its ranks are gone"},
    {"VGPU_TEST_HOST", "NAME",
     "test hook: the rank counts as on host NAME (ranks naming the same host are one host), to "
     "rehearse several hosts on one machine"},
    {"VGPU_TEST_NCCL_VERSION", "VERSION",
     "test hook: this rank reports NCCL VERSION (e.g. 23000 for 2.30; 0 for none) to the job's "
     "backend choice instead of the one it loads (a build with NCCL only)"},
    {"VGPU_TEST_DEVICE", "NAME",
     "test hook: the test-only device backend NAME (testmem: host memory without a host view, "
     "so the collectives copy through staging as on a GPU) stands for the CPU, in a build with "
     "the tests"},
    {"VGPU_NCCL", "auto|vgpu|real",
     "which libnccl.so.2 a program started by vgpurun loads: auto (default) puts vgpu's NCCL "
     "first on the loader's path (and in LD_PRELOAD) where the host's ranks share a GPU (and, on simulated GPUs, "
     "the build's simulated CUDA runtime), so that an unmodified NCCL program runs there; vgpu "
     "always; real never (docs/LIBRARY.md: vgpu's NCCL)"},
    {"VGPU_DEVCOLL", "auto|0|1",
     "the device collectives, which keep a collective on the GPU when every rank of a "
     "communicator shares it: auto (default) where its contexts run at once (MPS), 1 wherever "
     "the device has them (a time-sliced GPU: slow; the test device), 0 never "
     "(docs/COLLECTIVES.md)"},
    {"VGPU_DEVCOLL_ALGO", "auto|oneshot|twoshot",
     "the device collectives (ranks sharing a GPU under MPS): which all-reduce every size "
     "takes (default auto: one-shot for small sizes, two-shot above; docs/COLLECTIVES.md)"},
    {"VGPU_DEVCOLL_AREA_KB", "KIB",
     "the device collectives: each of a rank window's four data areas, the most a round "
     "carries (1 to 1048576, default 4096; every rank of a communicator alike)"},
    {"VGPU_NCCL_STAGE_KB", "KIB",
     "vgpu's NCCL: each rank's stage in the communicator's shared memory, the chunk a "
     "collective moves at a time (4 to 1048576, default 4096; every rank of a communicator "
     "uses its first rank's)"},
    {"VGPU_CUDA_VISIBLE_DEVICES_PINNED", "PIN|BEFORE",
     "set by vgpurun-rank, not by users: the CUDA_VISIBLE_DEVICES it pinned and the value it "
     "replaced, which a vgpu program puts back to bind itself"},
};
#define VARS_COUNT_ (sizeof vars_ / sizeof *vars_)

// Launchers' rank variables, most specific first (theirs, not vgpu's switches).
static const char *const launcher_rank_vars_[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                                  "SLURM_PROCID"};

static struct vgpu_env env_;
static int parsed_;

void env_table_print(FILE *f, const struct env_var *vars, size_t count)
{
    for (size_t i = 0; i < count; i++)
        fprintf(f, "  %s=%s\n      %s\n", vars[i].name, vars[i].form, vars[i].doc);
}

const char *env_table_get(const struct env_var *vars, size_t count, const char *name)
{
    for (size_t i = 0; i < count; i++)
        if (!strcmp(vars[i].name, name))
            return getenv(name);
    fprintf(stderr, "vgpu: bug: environment switch %s is read but not in its table (env.h)\n",
            name);
    abort();
}

void env_warn_malformed(const char *name, const char *value, const char *expected)
{
    log_warn("ignoring %s=%s: expected %s", name, value, expected);
}

const char *env_read(const char *name)
{
    return env_table_get(vars_, VARS_COUNT_, name);
}

double env_comm_timeout_s(void)
{
    const char *v = env_read("VGPU_COMM_TIMEOUT_S");
    char *end = NULL;
    double t = v ? strtod(v, &end) : 0;
    return v && end != v && !*end && t >= 0.1 && t <= 86400 ? t : ENV_DEFAULT_TIMEOUT_S;
}

// A whole number in [lo, hi]; -1 when unset, and when malformed or out of
// range (then said once, as "expected").
static long env_long_(const char *name, long lo, long hi, const char *expected)
{
    const char *v = env_read(name);
    long n;
    char end;
    if (!v || !*v)
        return -1;
    if (sscanf(v, "%ld%c", &n, &end) == 1 && n >= lo && n <= hi)
        return n;
    env_warn_malformed(name, v, expected);
    return -1;
}

// VGPU_RING_ALGO: its value's place in ring_algo_names_ (0: auto, also when
// unset or malformed, which is said with every name).
static int ring_algo_parse_(void)
{
    const char *v = env_read("VGPU_RING_ALGO");
    if (!v || !*v)
        return 0;
    for (int k = 0; k < RING_ALGO_NAMES_; k++)
        if (!strcmp(v, ring_algo_names_[k]))
            return k;
    char expected[256]; // "auto, ring, ... or direct"
    size_t used = 0;
    for (int k = 0; k < RING_ALGO_NAMES_ && used < sizeof expected; k++)
        used += (size_t)snprintf(expected + used, sizeof expected - used, "%s%s",
                                 k == 0 ? "" : k + 1 < RING_ALGO_NAMES_ ? ", " : " or ",
                                 ring_algo_names_[k]);
    env_warn_malformed("VGPU_RING_ALGO", v, expected);
    return 0;
}

static void env_parse_(struct vgpu_env *e)
{
    *e = (struct vgpu_env){.ring_staging = -1, .ring_spin = -1, .launcher_rank = -1};
    const char *v;
    char end;
    if ((v = env_read("VGPU_RING_STAGING")) && *v) {
        if (!strcmp(v, "1") || !strcmp(v, "0"))
            e->ring_staging = v[0] == '1';
        else
            env_warn_malformed("VGPU_RING_STAGING", v, "1 or 0");
    }
    if ((v = env_read("VGPU_MPI_STAGING")) && *v)
        e->mpi_staging = !strcmp(v, "1");
    e->test_nccl_version = -1;
    if ((v = env_read("VGPU_TEST_NCCL_VERSION")) && *v) {
        int n;
        if (sscanf(v, "%d%c", &n, &end) == 1 && n >= 0 && n < 1000000)
            e->test_nccl_version = n;
        else
            env_warn_malformed("VGPU_TEST_NCCL_VERSION", v, "a version number such as 23000, or 0");
    }
    e->ring_spin = env_long_("VGPU_RING_SPIN", 0, LONG_MAX, "a count >= 0");
    e->ring_yield_us = env_long_("VGPU_RING_YIELD_US", 0, 1000000, "microseconds, 0 to 1000000");
    static const char msg_expected[] = "bytes, 0 or 256 to 1073741824";
    e->ring_msg_bytes = env_long_("VGPU_RING_MSG_BYTES", 0, 1L << 30, msg_expected);
    if (e->ring_msg_bytes > 0 && e->ring_msg_bytes < 256) {
        env_warn_malformed("VGPU_RING_MSG_BYTES", env_read("VGPU_RING_MSG_BYTES"), msg_expected);
        e->ring_msg_bytes = -1;
    }
    e->ring_algo = ring_algo_parse_();
    if ((v = env_read("NCCL_MULTI_RANK_GPU_ENABLE")))
        e->nccl_multi_rank_gpu = !strcmp(v, "1");
    for (size_t i = 0; i < sizeof launcher_rank_vars_ / sizeof *launcher_rank_vars_; i++) {
        int r;
        if ((v = getenv(launcher_rank_vars_[i])) && sscanf(v, "%d", &r) == 1 && r >= 0) {
            e->launcher_rank = r;
            break;
        }
    }
    e->under_launcher = e->launcher_rank >= 0 || getenv("OMPI_COMM_WORLD_SIZE") != NULL;
    if ((v = env_read("VGPU_TERMINAL")) && *v) {
        if (!strcmp(v, "1"))
            e->terminal = 1;
        else if (strcmp(v, "0") != 0)
            env_warn_malformed("VGPU_TERMINAL", v, "1 or 0");
    }
    if ((v = env_read("VGPU_PLAN")) && *v) {
        if (!strcmp(v, "1"))
            e->plan = 1;
        else if (strcmp(v, "0") != 0)
            env_warn_malformed("VGPU_PLAN", v, "1 or 0");
    }
    // Flight records go where a fault happened, never into the working
    // directory (the user's source tree) unless asked: by default a
    // directory of this user's under $TMPDIR.
    e->flight_dir_default = !((v = env_read("VGPU_FLIGHT_DIR")) && *v);
    if (e->flight_dir_default) {
        const char *tmp = getenv("TMPDIR");
        snprintf(e->flight_dir_buf, sizeof e->flight_dir_buf, "%s/vgpu-flight-%u",
                 tmp && *tmp == '/' && strlen(tmp) < 200 ? tmp : "/tmp", (unsigned)getuid());
        v = e->flight_dir_buf;
    }
    e->flight_dir = v;
    if ((v = env_read("VGPU_TEST_HOST")) && *v) {
        if (strlen(v) < sizeof e->test_host && !strchr(v, ' '))
            snprintf(e->test_host, sizeof e->test_host, "%s", v);
        else
            env_warn_malformed("VGPU_TEST_HOST", v,
                               "a host name of at most 63 characters, no spaces");
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
    env_table_print(f, vars_, VARS_COUNT_);
}
