// vgpurun_facts.c: what vgpurun finds out about where it runs: GPUs, cores,
// the terminal, Slurm, the hosts and rank 0's rendezvous.
#include "vgpurun_facts.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "env.h"
#include "status.h"
#include "util.h"

extern char **environ;

static int env_is_(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && !strcmp(v, value);
}

// One of vgpu's own switches (read through the library's table, env.h) is value.
static int vgpu_switch_is_(const char *name, const char *value)
{
    const char *v = env_read(name);
    return v && !strcmp(v, value);
}

static int env_int_(const char *name)
{
    const char *v = getenv(name);
    return v ? atoi(v) : 0;
}

int vgpurun_on_path(const char *program)
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

// An MPS server the ranks reach already: the pipe directory they are given
// (CUDA_MPS_PIPE_DIRECTORY), or the default one with its control pipe.
static const char *mps_server_(void)
{
    static char said[320];
    const char *pipe = getenv("CUDA_MPS_PIPE_DIRECTORY");
    if (pipe && *pipe) {
        snprintf(said, sizeof said, "CUDA_MPS_PIPE_DIRECTORY=%s", pipe);
        return said;
    }
    return access("/tmp/nvidia-mps/control", F_OK) == 0 ? "/tmp/nvidia-mps" : NULL;
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
    if (!list || strchr(list, '\'') || !vgpurun_on_path("scontrol"))
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

// ---- gathering ----

// The hosts of --hostfile or -H (counted, each resolved), or Slurm's first
// node; the first host, where rank 0 runs, into master. Returns VGPU_OK, or
// VGPU_ECONFIG with the reason printed.
static int find_hosts_(const struct vgpurun_options *opts, struct vgpurun_facts *facts, char *master,
                       size_t master_bytes)
{
    char err[1024] = "", bad_host[256];
    int rc = VGPU_OK;
    if (opts->hostfile) {
        char *text = read_file_(opts->hostfile);
        if (!text) {
            fprintf(stderr, "vgpurun: cannot read hostfile %s: %s\n", opts->hostfile, strerror(errno));
            return VGPU_ECONFIG;
        }
        rc = vgpurun_count_hostfile(text, &facts->host_count, &facts->slot_count, err, sizeof err);
        first_host_(text, 0, master, master_bytes);
        if (rc == 0 && unresolved_host_(text, 0, bad_host, sizeof bad_host))
            rc = util_errorf(err, sizeof err, VGPU_ECONFIG,
                             "host '%s' does not resolve (a typo, or missing from DNS or "
                             "/etc/hosts): every host must, and answer ssh",
                             bad_host);
        free(text);
    } else if (opts->hosts) {
        rc = vgpurun_count_host_list(opts->hosts, &facts->host_count, &facts->slot_count, err, sizeof err);
        first_host_(opts->hosts, 1, master, master_bytes);
        if (rc == 0 && unresolved_host_(opts->hosts, 1, bad_host, sizeof bad_host))
            rc = util_errorf(err, sizeof err, VGPU_ECONFIG,
                             "-H: host '%s' does not resolve (a typo, or missing from DNS or "
                             "/etc/hosts): every host must, and answer ssh",
                             bad_host);
    } else if (facts->in_slurm) {
        slurm_first_node_(master, master_bytes);
    }
    if (rc < 0)
        fprintf(stderr, "vgpurun: %s%s%s\n", opts->hostfile ? opts->hostfile : "",
                opts->hostfile ? ": " : "", err);
    return rc;
}

int vgpurun_facts_gather(const struct vgpurun_options *opts, struct vgpurun_facts *facts,
                         struct vgpurun_facts_store *store)
{
    memset(store, 0, sizeof *store);
    snprintf(store->host, sizeof store->host, "this host");
    gethostname(store->host, sizeof store->host);
    store->host[sizeof store->host - 1] = '\0';
    store->env_names = env_names_();
    *facts = (struct vgpurun_facts){
        .is_root = geteuid() == 0,
        .root_allowed_by_env = env_is_("OMPI_ALLOW_RUN_AS_ROOT", "1") &&
                               env_is_("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
        .cores = (int)sysconf(_SC_NPROCESSORS_ONLN),
        .in_slurm = getenv("SLURM_JOB_ID") != NULL,
        .slurm_ntasks = env_int_("SLURM_NTASKS"),
        .slurm_nnodes = env_int_("SLURM_JOB_NUM_NODES"),
        .ranks_per_gpu_env = env_int_(VGPURUN_ENV_RANKS_PER_DEVICE),
        .mps_server = mps_server_(),
        .have_mps_control = vgpurun_on_path("nvidia-cuda-mps-control"),
        .have_rsh_agent = vgpurun_on_path("ssh") || vgpurun_on_path("rsh"),
        .terminal_columns = terminal_columns_(),
        .keep_mpirun_reports = vgpu_switch_is_(VGPURUN_ENV_MPIRUN_REPORT, "1"),
        .host = store->host,
        .env_names = (const char *const *)store->env_names,
        .cuda_visible = getenv("CUDA_VISIBLE_DEVICES"),
    };
    int known = 0;
    facts->gpu_count = vgpurun_gpus_probe(store, !opts->no_mps, &known);
    const char *sim = env_read("VGPU_SIM_GPUS");
    facts->gpus_simulated = sim && *sim;
    if (known) {
        facts->gpu_modes = store->gpu_modes;
        facts->gpu_bytes = store->gpu_bytes;
    }
    facts->gpu_uuid_count = store->uuid_count;
    facts->gpu_uuids = (const char *const *)store->uuids;
    int rc = find_hosts_(opts, facts, store->master, sizeof store->master);
    if (rc < 0)
        return rc;
    // Rank 0's rendezvous for programs that want one (MASTER_ADDR/PORT).
    store->rank_shim = rank_shim_();
    char *master = store->master;
    if (!master[0] || !strcmp(master, "localhost"))
        snprintf(master, sizeof store->master, "127.0.0.1");
    facts->rank_shim = store->rank_shim;
    facts->master_addr = master;
    facts->master_port = rendezvous_port_(!strcmp(master, "127.0.0.1") || !strcmp(master, store->host));
    return VGPU_OK;
}

void vgpurun_facts_free(struct vgpurun_facts_store *store)
{
    free_names_(store->env_names);
    store->env_names = NULL;
    for (int i = 0; i < VGPURUN_MAX_GPU_UUIDS; i++) {
        free(store->uuids[i]);
        store->uuids[i] = NULL;
    }
    free(store->rank_shim);
    store->rank_shim = NULL;
}
