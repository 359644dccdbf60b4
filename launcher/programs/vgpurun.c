// vgpurun.c: `vgpurun -np N [...] -- PROGRAM ARGS`: builds and runs the mpirun
// (or, inside Slurm, srun --mpi=pmix) line for a vgpu job.
#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "status.h"
#include "util.h"
#include "vgpurun_mps.h"
#include "vgpurun_plan.h"

#define EXIT_USAGE 2
#define EXIT_NOT_EXECUTABLE 126 // as the shell: found, cannot be run
#define EXIT_NOT_FOUND 127      // as the shell: no such program
#define EXIT_NOT_RUN 127        // the launcher itself could not be started
#define EXIT_PREEMPTED 75       // as vgpu_train: stopped on request, resumable

extern char **environ;

static void usage_(FILE *f)
{
    fprintf(f,
            "usage: vgpurun -np N [options] [-- LAUNCHER-OPTIONS] -- PROGRAM ARGS...\n"
            "\n"
            "Runs PROGRAM as N ranks = N virtual GPUs: with mpirun, or inside a Slurm\n"
            "allocation with srun --mpi=pmix. Adds --allow-run-as-root / --oversubscribe\n"
            "only when needed, maps ranks host by host, binds them, and exports the\n"
            "variables the ranks need to every host.\n"
            "\n"
            "options:\n"
            "  -np, -n N              number of ranks (inside Slurm: default SLURM_NTASKS)\n"
            "  --hostfile FILE        Open MPI hostfile (\"host slots=K\" lines)\n"
            "  -H, --host LIST        hosts as host[:slots],...\n"
            "  --ranks-per-gpu K      ranks sharing one device (exports " VGPURUN_ENV_RANKS_PER_DEVICE ")\n"
            "  --mem-per-rank SIZE    device memory cap per rank, e.g. 512M, 2G\n"
            "                         (exports " VGPURUN_ENV_MEMORY_LIMIT ")\n"
            "  --backend B            collectives: auto, ring, mpi or nccl (exports " VGPURUN_ENV_BACKEND ")\n"
            "  --launcher L           auto (srun inside Slurm, else mpirun), mpirun or srun\n"
            "  --mps                  run a private CUDA MPS daemon for the job; each rank gets\n"
            "                         a driver-enforced cap CUDA_MPS_PINNED_DEVICE_MEM_LIMIT =\n"
            "                         --mem-per-rank + 512 MiB (GPU hosts only; one host)\n"
            "  --sm-share PCT         with --mps: each rank may use PCT%% of the GPU's SMs\n"
            "                         (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)\n"
            "  -x NAME[=VALUE]        pass a variable to every rank (mpirun -x; srun exports all)\n"
            "  --dry-run              print the command and exit\n"
            "  --plan                 run the job's start-up only: each vgpu program prints its\n"
            "                         job table (hosts, devices, caps, backend) and exits\n"
            "                         (exports " VGPURUN_ENV_PLAN "=1)\n"
            "  -v, --verbose          print the command and why each part is there, then run it;\n"
            "                         keeps mpirun's own reports (also " VGPURUN_ENV_MPIRUN_REPORT "=1)\n"
            "  --version              print vgpurun's version\n"
            "  -h, --help             this help\n"
            "\n"
            "LAUNCHER-OPTIONS, between two --, go to mpirun or srun as they are, e.g.\n"
            "  vgpurun -np 4 -- --mca btl self,tcp -- build/vgpu_train configs/default.ini\n"
            "\n"
            "On one host mpirun runs with -q: after a failure the ranks' own message is\n"
            "the last word, not mpirun's 10-line report; a rank killed by a signal is\n"
            "still named as such. On a terminal the ranks are asked for the live progress\n"
            "bar (VGPU_PROGRESS=bar, COLUMNS) unless VGPU_PROGRESS is set.\n"
            "\n"
            "PROGRAM may be any program: each rank starts through vgpurun-rank (beside\n"
            "vgpurun), which sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (as torchrun\n"
            "does; MASTER_ADDR and MASTER_PORT come from vgpurun unless set) and, on a GPU\n"
            "host, the rank's own CUDA_VISIBLE_DEVICES by vgpu's binding policy, e.g.\n"
            "  vgpurun -np 4 -- python3 train_ddp.py   (torch.distributed, env://)\n"
            "\n"
            "The settings reach the program through the environment; vgpu_train reads them\n"
            "(config file < environment < --set). Exit status: the job's; 2 bad usage;\n"
            "126 PROGRAM is not executable; 127 PROGRAM or the launcher was not found.\n");
}

// ---- facts about this machine ----

static int env_is_(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && !strcmp(v, value);
}

static int env_int_(const char *name)
{
    const char *v = getenv(name);
    return v ? atoi(v) : 0;
}

// GPUs this host shows: /dev/nvidiaN nodes, limited by CUDA_VISIBLE_DEVICES.
static int count_gpus_(void)
{
    int nodes = 0;
    DIR *d = opendir("/dev");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            const char *tail = e->d_name + 6;
            if (!strncmp(e->d_name, "nvidia", 6) && *tail && strspn(tail, "0123456789") == strlen(tail))
                nodes++;
        }
        closedir(d);
    }
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    if (!visible || nodes == 0)
        return nodes;
    int listed = *visible ? 1 : 0;
    for (const char *p = visible; *p; p++)
        listed += *p == ',';
    return listed < nodes ? listed : nodes;
}

// The host's GPU UUIDs in PCI bus order, as nvidia-smi numbers them (for
// --mps with CUDA_VISIBLE_DEVICES). Fills uuids[max] (strdup'ed); returns how many.
static int gpu_uuids_(char **uuids, int max)
{
    FILE *p = popen("nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null", "r");
    if (!p)
        return 0;
    int n = 0;
    char line[128];
    while (n < max && fgets(line, sizeof line, p)) {
        line[strcspn(line, "\r\n ")] = '\0';
        if (!strncmp(line, "GPU-", 4) && !(uuids[n] = strdup(line)))
            break;
        n += !strncmp(line, "GPU-", 4);
    }
    pclose(p);
    return n;
}

static int on_path_(const char *program)
{
    const char *path = getenv("PATH");
    if (!path)
        return 0;
    char dir[4096];
    for (const char *p = path; *p;) {
        size_t len = strcspn(p, ":");
        snprintf(dir, sizeof dir, "%.*s/%s", (int)len, p, program);
        if (access(dir, X_OK) == 0)
            return 1;
        p += len + (p[len] == ':');
    }
    return 0;
}

// Width of the terminal on stdout; 0 when stdout is not a terminal.
static int terminal_columns_(void)
{
    if (!isatty(STDOUT_FILENO))
        return 0;
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    int columns = env_int_("COLUMNS");
    return columns > 0 ? columns : 80;
}

// As the shell finds a command: a name with a '/' is a path, others are
// looked up on PATH. Returns 0 if it can be run, else 127 (not found) or 126
// (found, not executable), with the message printed.
static int check_program_(const char *program)
{
    struct stat st;
    if (strchr(program, '/')) {
        if (stat(program, &st) < 0) {
            fprintf(stderr, "vgpurun: %s: %s\n", program, strerror(errno));
            return EXIT_NOT_FOUND;
        }
        if (S_ISDIR(st.st_mode) || access(program, X_OK) < 0) {
            fprintf(stderr, "vgpurun: %s: %s\n", program,
                    S_ISDIR(st.st_mode) ? "is a directory" : "not executable");
            return EXIT_NOT_EXECUTABLE;
        }
        return 0;
    }
    if (on_path_(program))
        return 0;
    fprintf(stderr, "vgpurun: %s: command not found (not on PATH; a program here needs ./)\n",
            program);
    return EXIT_NOT_FOUND;
}

// The per-rank shim beside this program (same directory), or NULL.
static char *rank_shim_(void)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 32);
    if (n <= 0)
        return NULL;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return NULL;
    strcpy(slash + 1, "vgpurun-rank");
    return access(self, X_OK) == 0 ? strdup(self) : NULL;
}

// The k-th host (from 0) of a hostfile's text or of a -H list, into out;
// returns 0, or -1 (out "") when there are fewer.
static int nth_host_(const char *text, int list, int k, char *out, size_t bytes)
{
    out[0] = '\0';
    const char *p = text;
    while (p && *p) {
        const char *line_end = list ? p + strcspn(p, ",") : p + strcspn(p, "\n");
        const char *q = p;
        while (q < line_end && (*q == ' ' || *q == '\t'))
            q++;
        size_t len = strcspn(q, list ? ":," : " \t#\n");
        if (q < line_end && *q != '#' && len > 0 && k-- == 0) {
            snprintf(out, bytes, "%.*s", (int)len, q);
            return 0;
        }
        p = *line_end ? line_end + 1 : line_end;
    }
    return -1;
}

// The first host (where mpirun puts rank 0), into out; "" when none.
static void first_host_(const char *text, int list, char *out, size_t bytes)
{
    nth_host_(text, list, 0, out, bytes);
}

// A host of the hostfile or -H list whose name does not resolve, into out
// (mpirun would say so in about 30 lines of reports after trying ssh);
// returns 1, or 0 when every one resolves.
static int unresolved_host_(const char *text, int list, char *out, size_t bytes)
{
    char name[256];
    for (int k = 0; nth_host_(text, list, k, name, sizeof name) == 0; k++) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
        if (getaddrinfo(name, NULL, &hints, &res) != 0) {
            snprintf(out, bytes, "%s", name);
            return 1;
        }
        freeaddrinfo(res);
    }
    return 0;
}

// The first node of the Slurm allocation (rank 0's), from scontrol.
static void slurm_first_node_(char *out, size_t bytes)
{
    out[0] = '\0';
    const char *list = getenv("SLURM_JOB_NODELIST");
    if (!list || strchr(list, '\'') || !on_path_("scontrol"))
        return;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "scontrol show hostnames '%s' 2>/dev/null", list);
    FILE *f = popen(cmd, "r");
    if (!f)
        return;
    if (fgets(out, (int)bytes, f))
        out[strcspn(out, "\n")] = '\0';
    else
        out[0] = '\0';
    pclose(f);
}

// A TCP port free on this host now (rank 0's, when rank 0 runs here); else
// one derived from the job, as torchrun's 29500 plus an offset.
static int rendezvous_port_(int rank0_here)
{
    if (rank0_here) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        int port = 0;
        if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
            getsockname(fd, (struct sockaddr *)&a, &len) == 0)
            port = ntohs(a.sin_port);
        if (fd >= 0)
            close(fd);
        if (port > 0)
            return port;
    }
    const char *job = getenv("SLURM_JOB_ID");
    return 29500 + (int)((job ? strtoul(job, NULL, 10) : (unsigned long)getpid()) % 1000);
}

static char *read_file_(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger)
                free(buf);
            buf = bigger;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

// Names of the variables in the environment, NULL-terminated (caller frees).
static char **env_names_(void)
{
    int n = 0;
    while (environ[n])
        n++;
    char **names = calloc((size_t)n + 1, sizeof *names);
    for (int i = 0; names && i < n; i++)
        names[i] = strndup(environ[i], strcspn(environ[i], "="));
    return names;
}

static void free_names_(char **names)
{
    for (int i = 0; names && names[i]; i++)
        free(names[i]);
    free(names);
}

// ---- running ----

// A repeat within this time of the first stop signal is the same request
// (a double Ctrl-C, Slurm and a script both passing it on), as for the ranks
// (worker/preempt.h, PREEMPT_REPEAT_GRACE_MS).
#define REPEAT_GRACE_MS 1000

static volatile sig_atomic_t child_pid_ = 0;
static volatile sig_atomic_t stop_signals_ = 0; // TERM/INT received so far
static volatile sig_atomic_t stop_pending_ = 0; // a stop request not yet passed to mpirun
static long long first_stop_ms_ = 0;
static long long pending_since_ms_ = 0;
static volatile sig_atomic_t translate_stop_ = 1; // the child is mpirun: first TERM/INT becomes
                                                  // USR1 (0 for srun, which passes them on)
static int expected_local_ranks_ = 0; // mpirun's children that are ranks, when known (one host)
static int ranks_are_children_ = 1;   // one host: mpirun's children are the ranks
static int child_killed_ = 0;   // the launcher itself ended by a signal
static int ended_hung_ = 0;     // vgpurun ended an mpirun that outlived its ranks

static long long monotonic_ms_(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); // async-signal-safe
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

// Forward ^C / kill to the launcher, which passes it to the ranks; vgpurun
// lives on to stop the MPS daemon. mpirun cannot forward TERM or INT (it
// kills the ranks instead, and exits 1) but forwards USR1 at once, which
// vgpu_train takes as "checkpoint and exit 75"; a second TERM/INT, a second
// or more after the first, aborts. The stop request (USR1) is held until it
// can reach every rank (ranks_ready_): the wait loop passes it on. Taken
// from main's first line: a stop before mpirun runs is a request too.
static void forward_signal_(int sig)
{
    if (translate_stop_ && (sig == SIGTERM || sig == SIGINT || sig == SIGUSR1)) {
        long long now_ms = monotonic_ms_();
        if (sig == SIGUSR1 || stop_signals_ == 0) {
            if (sig != SIGUSR1) {
                first_stop_ms_ = now_ms;
                stop_signals_++;
            }
            if (!stop_pending_)
                pending_since_ms_ = now_ms;
            stop_pending_ = 1;
            return;
        }
        if (now_ms - first_stop_ms_ < REPEAT_GRACE_MS)
            return;
        stop_signals_++;
        stop_pending_ = 0;
        if (child_pid_ <= 0) // before mpirun: nothing to stop in order
            _exit(128 + sig);
    }
    if (child_pid_ > 0)
        kill((pid_t)child_pid_, sig);
    else if (sig == SIGHUP) // the terminal went before the job started: nothing to pass it to
        _exit(128 + sig);
}

// Whether process `pid` has a handler for SIGUSR1 (/proc: SigCgt).
static int catches_usr1_(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    unsigned long long caught = 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "SigCgt: %llx", &caught) == 1;
    fclose(f);
    return found && (caught >> (SIGUSR1 - 1) & 1);
}

// Whether process `pid` (a /proc entry's name) is a live child of `parent`:
// its stat's parent, and not dead (a dead rank mpirun has not reaped, as a
// hung mpirun does not, is no child).
static int live_child_(const char *pid, pid_t parent)
{
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *after = strrchr(buf, ')'); // the name may hold spaces and parentheses
    char state;
    int ppid;
    return after && sscanf(after + 1, " %c %d", &state, &ppid) == 2 && ppid == (int)parent &&
           state != 'Z' && state != 'X';
}

// Whether a USR1 to mpirun now reaches every rank as a stop request: mpirun
// catches USR1 (before, USR1 kills it: exit 138), and its ranks exist (it
// forwards USR1 only to those: a request sent before is lost) and catch it
// (a rank before its handler dies of it). On one host the ranks are mpirun's
// children: each runs its own program (one still running mpirun's image has
// not exec'd) and catches USR1; as many as asked for when -np was given.
static int ranks_ready_(pid_t mpirun)
{
    if (!catches_usr1_(mpirun))
        return 0;
    char path[300], own[512], exe[512];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)mpirun);
    ssize_t n = readlink(path, own, sizeof own - 1);
    if (n <= 0)
        return 0;
    own[n] = '\0';
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    int kids = 0, ready = 1;
    struct dirent *e;
    while (ready && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        if (!live_child_(e->d_name, mpirun))
            continue;
        const pid_t pid = (pid_t)atoi(e->d_name);
        snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
        n = readlink(path, exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = '\0';
        ready = n > 0 && strcmp(exe, own) != 0 && (!ranks_are_children_ || catches_usr1_(pid));
        kids++;
    }
    closedir(d);
    return ready && kids >= (expected_local_ranks_ > 0 ? expected_local_ranks_ : 1);
}

// Passes a held stop request on once it can reach the ranks, or once it has
// been held HOLD_MS and mpirun at least takes USR1 (a program that never
// catches USR1: what it does with one is its own affair).
#define STOP_HOLD_MS 10000
static void deliver_stop_(pid_t mpirun)
{
    if (!stop_pending_)
        return;
    if (ranks_ready_(mpirun) ||
        (monotonic_ms_() - pending_since_ms_ >= STOP_HOLD_MS && catches_usr1_(mpirun))) {
        stop_pending_ = 0;
        kill(mpirun, SIGUSR1);
    }
}

// Whether process `pid` has a child now (a scan of /proc; 1 when it cannot
// tell).
static int has_children_(pid_t pid)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 1;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        found = live_child_(e->d_name, pid);
    }
    closedir(d);
    return found;
}

// Open MPI's mpirun can hang once its ranks are gone (seen when a rank dies
// inside MPI_Init: "PMIX ERROR: UNREACHABLE", then deaf even to SIGTERM).
// Once mpirun has had children (the ranks, or the agents that start them
// elsewhere) and then none for VGPU_MPIRUN_ORPHAN_S seconds (default 5), it
// is ended, and said. Returns the seconds, 0 when the watch is off.
static double orphan_limit_s_(void)
{
    const char *v = getenv("VGPU_MPIRUN_ORPHAN_S");
    if (!v || !v[0])
        return 5;
    char *end;
    double s = strtod(v, &end);
    if (*end || !(s >= 0 && s <= 86400)) {
        fprintf(stderr, "vgpurun: warning: VGPU_MPIRUN_ORPHAN_S='%s' is not a number of seconds "
                        "from 0 to 86400; using 5\n", v);
        return 5;
    }
    return s;
}

static void end_hung_mpirun_(pid_t pid, double limit_s)
{
    fprintf(stderr, "vgpurun: mpirun is still running %g s after its last rank ended: ending it "
                    "(an Open MPI hang)\n", limit_s);
    ended_hung_ = 1;
    kill(pid, SIGTERM);
    for (int i = 0; i < 20; i++) {
        siginfo_t info = {0}; // has it ended? (WNOWAIT: run_and_wait_ reaps it)
        if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == pid)
            return;
        usleep(100000);
    }
    kill(pid, SIGKILL);
}

static int run_and_wait_(char **argv)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "vgpurun: fork: %s\n", strerror(errno));
        return EXIT_NOT_RUN;
    }
    if (pid == 0) {
        // A session of its own: a signal to vgpurun's process group (a
        // terminal's ^C, timeout(1)) reaches vgpurun alone, which turns it
        // into the stop with a checkpoint; mpirun would kill the ranks. If
        // vgpurun dies, mpirun gets SIGTERM and ends the job.
        setsid();
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(EXIT_NOT_RUN); // vgpurun died before the line above
        execvp(argv[0], argv);
        fprintf(stderr, "vgpurun: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(EXIT_NOT_RUN);
    }
    child_pid_ = pid;
    // Wait, watching for an mpirun that outlives its ranks (not srun's), and
    // passing a held stop request on (polling while one is held).
    const double limit_s = translate_stop_ ? orphan_limit_s_() : 0;
    int status, seen = 0;
    long long idle_since_ms = -1;
    for (;;) {
        deliver_stop_(pid);
        const int poll = limit_s > 0 || stop_pending_;
        pid_t r = waitpid(pid, &status, poll ? WNOHANG : 0);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR)
            return EXIT_NOT_RUN;
        if (stop_pending_ && r == 0) {
            usleep(50000);
            continue;
        }
        if (limit_s <= 0 || r < 0)
            continue;
        const long long now = monotonic_ms_();
        if (has_children_(pid)) {
            seen = 1;
            idle_since_ms = -1;
        } else if (seen && idle_since_ms < 0) {
            idle_since_ms = now;
        } else if (seen && now - idle_since_ms >= (long long)(limit_s * 1000) && !ended_hung_) {
            end_hung_mpirun_(pid, limit_s);
        }
        usleep(250000);
    }
    child_pid_ = 0;
    child_killed_ = !WIFEXITED(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// What mpirun -q left out that the status cannot say alone: a rank ended by
// a signal (vgpu's ranks never end that way when they agree on an exit).
static int report_(const struct vgpurun_plan *plan, int rc)
{
    if (plan->quiet_mpirun && !child_killed_ && !stop_signals_ && !ended_hung_ && rc > 128 &&
        rc < 128 + 65)
        fprintf(stderr, "vgpurun: a rank was killed by signal %d (%s) and mpirun ended the job "
                        "(exit %d); " VGPURUN_ENV_MPIRUN_REPORT "=1 or -v keeps mpirun's report, "
                        "which names the rank\n",
                rc - 128, strsignal(rc - 128), rc);
    return rc;
}

// Stop signals from the first instruction on (forward_signal_); USR2 and
// HUP pass through to the launcher once it runs.
static void take_signals_(void)
{
    struct sigaction sa = {.sa_handler = forward_signal_};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    // USR1 (checkpoint and stop) and USR2 (the ranks' flight recorders say
    // what they are doing) pass through; mpirun and srun forward them.
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
}

int main(int argc, char **argv)
{
    take_signals_();
    struct vgpurun_options opts;
    char err[1024] = "";
    int rc = vgpurun_parse_args(argc, argv, &opts, err, sizeof err);
    if (rc == VGPU_OK && opts.help) {
        usage_(stdout);
        return 0;
    }
    if (rc == VGPU_OK && opts.version) {
        printf("vgpurun %s\n", VGPU_VERSION);
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "vgpurun: %s\n", err);
        return EXIT_USAGE;
    }

    char host[256] = "this host";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    char **names = env_names_();
    struct vgpurun_facts facts = {
        .is_root = geteuid() == 0,
        .root_allowed_by_env = env_is_("OMPI_ALLOW_RUN_AS_ROOT", "1") &&
                               env_is_("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
        .cores = (int)sysconf(_SC_NPROCESSORS_ONLN),
        .in_slurm = getenv("SLURM_JOB_ID") != NULL,
        .slurm_ntasks = env_int_("SLURM_NTASKS"),
        .slurm_nnodes = env_int_("SLURM_JOB_NUM_NODES"),
        .gpu_count = count_gpus_(),
        .have_mps_control = on_path_("nvidia-cuda-mps-control"),
        .have_rsh_agent = on_path_("ssh") || on_path_("rsh"),
        .terminal_columns = terminal_columns_(),
        .keep_mpirun_reports = env_is_(VGPURUN_ENV_MPIRUN_REPORT, "1"),
        .host = host,
        .env_names = (const char *const *)names,
        .cuda_visible = getenv("CUDA_VISIBLE_DEVICES"),
    };
    char master[256] = "";
    char *uuids[64] = {0};
    if (opts.mps && facts.cuda_visible && facts.cuda_visible[0]) {
        facts.gpu_uuid_count = gpu_uuids_(uuids, 64);
        facts.gpu_uuids = (const char *const *)uuids;
    }
    if (opts.hostfile) {
        char *text = read_file_(opts.hostfile);
        if (!text) {
            fprintf(stderr, "vgpurun: cannot read hostfile %s: %s\n", opts.hostfile, strerror(errno));
            free_names_(names);
            return EXIT_USAGE;
        }
        rc = vgpurun_count_hostfile(text, &facts.host_count, &facts.slot_count, err, sizeof err);
        first_host_(text, 0, master, sizeof master);
        char bad_host[256];
        if (rc == 0 && unresolved_host_(text, 0, bad_host, sizeof bad_host))
            rc = util_errorf(err, sizeof err, VGPU_ECONFIG,
                             "host '%s' does not resolve (a typo, or missing from DNS or "
                             "/etc/hosts): every host must, and answer ssh",
                             bad_host);
        free(text);
    } else if (opts.hosts) {
        rc = vgpurun_count_host_list(opts.hosts, &facts.host_count, &facts.slot_count, err, sizeof err);
        first_host_(opts.hosts, 1, master, sizeof master);
        char bad_host[256];
        if (rc == 0 && unresolved_host_(opts.hosts, 1, bad_host, sizeof bad_host))
            rc = util_errorf(err, sizeof err, VGPU_ECONFIG,
                             "-H: host '%s' does not resolve (a typo, or missing from DNS or "
                             "/etc/hosts): every host must, and answer ssh",
                             bad_host);
    } else if (facts.in_slurm) {
        slurm_first_node_(master, sizeof master);
    }
    // Rank 0's rendezvous for programs that want one (MASTER_ADDR/PORT).
    char *shim = rank_shim_();
    if (!master[0] || !strcmp(master, "localhost"))
        snprintf(master, sizeof master, "127.0.0.1");
    facts.rank_shim = shim;
    facts.master_addr = master;
    facts.master_port = rendezvous_port_(!strcmp(master, "127.0.0.1") || !strcmp(master, host));
    if (rc < 0) {
        fprintf(stderr, "vgpurun: %s%s%s\n", opts.hostfile ? opts.hostfile : "",
                opts.hostfile ? ": " : "", err);
        free_names_(names);
        free(shim);
        return EXIT_USAGE;
    }
    struct vgpurun_plan plan;
    rc = vgpurun_plan_build(&opts, &facts, &plan, err, sizeof err);
    free_names_(names);
    free(shim);
    for (int i = 0; i < facts.gpu_uuid_count; i++)
        free(uuids[i]);
    if (rc < 0) {
        fprintf(stderr, "vgpurun: %s\n", err);
        vgpurun_plan_free(&plan);
        return EXIT_USAGE;
    }

    static char line[16384];
    vgpurun_format_command(&plan, line, sizeof line);
    for (int i = 0; i < plan.notec; i++)
        if (opts.verbose || plan.loud[i])
            fprintf(stderr, "vgpurun: %s\n", plan.notes[i]);
    if (opts.dry_run) {
        printf("%s\n", line);
        vgpurun_plan_free(&plan);
        return 0;
    }
    if (opts.verbose)
        fprintf(stderr, "vgpurun: %s\n", line);
    if ((rc = check_program_(opts.program[0])) != 0) {
        vgpurun_plan_free(&plan);
        return rc;
    }
    if (plan.uses_srun && !facts.in_slurm)
        fprintf(stderr, "vgpurun: not inside a Slurm allocation (no SLURM_JOB_ID): srun asks Slurm "
                        "for one and waits until it is granted\n");
    for (int i = 0; i < plan.envc; i++)
        putenv(plan.env[i]); // the plan keeps owning the strings until exit

    // srun forwards signals to the tasks itself (SIGTERM reaches vgpu_train,
    // which checkpoints), so it replaces vgpurun; mpirun is watched.
    if (!opts.mps && plan.uses_srun) {
        translate_stop_ = 0; // from here on srun's: it passes TERM/INT to the tasks
        if (stop_pending_) {
            fprintf(stderr, "vgpurun: stopped before the job started (a stop signal); nothing "
                            "to checkpoint\n");
            return EXIT_PREEMPTED;
        }
        execvp(plan.argv[0], plan.argv);
        fprintf(stderr, "vgpurun: cannot run %s: %s%s\n", plan.argv[0], strerror(errno),
                errno == ENOENT ? (plan.uses_srun ? " (is Slurm installed?)"
                                                  : " (install Open MPI: openmpi-bin)")
                                : "");
        return EXIT_NOT_RUN;
    }
    translate_stop_ = !plan.uses_srun;
    ranks_are_children_ = !opts.hostfile && !opts.hosts;
    expected_local_ranks_ = ranks_are_children_ ? opts.np : 0;
    if (!opts.mps)
        return report_(&plan, run_and_wait_(plan.argv));
    struct vgpurun_mps mps = {{0}};
    if (vgpurun_mps_start(&mps, err, sizeof err) < 0) {
        fprintf(stderr, "vgpurun: %s\n", err);
        return EXIT_NOT_RUN;
    }
    if (opts.verbose)
        fprintf(stderr, "vgpurun: MPS control daemon started (CUDA_MPS_PIPE_DIRECTORY=%s)\n",
                getenv("CUDA_MPS_PIPE_DIRECTORY"));
    rc = report_(&plan, run_and_wait_(plan.argv));
    vgpurun_mps_stop(&mps);
    if (opts.verbose)
        fprintf(stderr, "vgpurun: MPS control daemon stopped\n");
    return rc;
}
