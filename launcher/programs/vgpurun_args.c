// vgpurun_args.c: what the user gives vgpurun: its command line, and the
// hosts and slots of a hostfile or a -H list.
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "status.h"
#include "util.h"
#include "vgpurun_plan.h"

static const char *const backends_[] = {"auto", "ring", "mpi", "nccl"};

enum { OPT_HOSTFILE = 256, OPT_RPG, OPT_MEM, OPT_BACKEND, OPT_LAUNCHER, OPT_MPS, OPT_NO_MPS,
       OPT_DRY, OPT_PLAN, OPT_SM, OPT_VERSION };

// Mirrors usage_ in vgpurun.c.
static const struct option options_[] = {
    {"np", required_argument, NULL, 'n'},
    {"hostfile", required_argument, NULL, OPT_HOSTFILE},
    {"host", required_argument, NULL, 'H'},
    {"ranks-per-gpu", required_argument, NULL, OPT_RPG},
    {"mem-per-rank", required_argument, NULL, OPT_MEM},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"launcher", required_argument, NULL, OPT_LAUNCHER},
    {"mps", no_argument, NULL, OPT_MPS},
    {"no-mps", no_argument, NULL, OPT_NO_MPS},
    {"dry-run", no_argument, NULL, OPT_DRY},
    {"plan", no_argument, NULL, OPT_PLAN},
    {"sm-share", required_argument, NULL, OPT_SM},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

// Positive decimal integer, whole string; -1 if it is not one.
static int parse_count_(const char *text)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end || v < 1 || v > 1 << 20)
        return -1;
    return (int)v;
}

// NAME or NAME=VALUE with NAME a shell variable name.
static int variable_name_(const char *text)
{
    size_t len = strcspn(text, "=");
    if (len == 0 || len >= 128 || isdigit((unsigned char)text[0]))
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)text[i]) && text[i] != '_')
            return 0;
    return 1;
}

// ---- command line ----

static int take_backend_(const char *name, struct vgpurun_options *opts, char *err, size_t err_bytes)
{
    int known = 0;
    for (size_t i = 0; i < sizeof backends_ / sizeof backends_[0]; i++)
        known |= !strcmp(name, backends_[i]);
    if (!known)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "--backend %s: expected auto, ring, mpi or nccl",
                           name);
    opts->backend = name;
    return VGPU_OK;
}

static int take_launcher_(const char *name, struct vgpurun_options *opts, char *err,
                          size_t err_bytes)
{
    if (!strcmp(name, "auto"))
        opts->launcher = VGPURUN_AUTO;
    else if (!strcmp(name, "mpirun"))
        opts->launcher = VGPURUN_MPIRUN;
    else if (!strcmp(name, "srun"))
        opts->launcher = VGPURUN_SRUN;
    else
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "--launcher %s: expected auto, mpirun or srun", name);
    return VGPU_OK;
}

static int take_sm_share_(const char *text, struct vgpurun_options *opts, char *err,
                          size_t err_bytes)
{
    char *end;
    long pct = strtol(text, &end, 10);
    if (end == text || *end || pct < 1 || pct > 100)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "--sm-share %s: expected a percentage, 1 to 100", text);
    opts->sm_share = (int)pct;
    return VGPU_OK;
}

static int take_export_(const char *item, struct vgpurun_options *opts, char *err, size_t err_bytes)
{
    if (!variable_name_(item))
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "-x %s: expected NAME or NAME=VALUE (a variable name: "
                           "letters, digits, '_')", item);
    if (opts->export_count == VGPURUN_MAX_EXPORTS)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "more than %d -x options",
                           VGPURUN_MAX_EXPORTS);
    opts->exports[opts->export_count++] = item;
    return VGPU_OK;
}

// One option from getopt_long_only (its value in optarg). Returns VGPU_OK,
// 1 when parsing ends here (--help, --version), or VGPU_ECONFIG with err.
static int take_option_(int c, char **argv, struct vgpurun_options *opts, char *err,
                        size_t err_bytes)
{
    switch (c) {
    case 'n':
        if ((opts->np = parse_count_(optarg)) < 0)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "-np %s: expected a rank count >= 1", optarg);
        return VGPU_OK;
    case OPT_HOSTFILE: opts->hostfile = optarg; return VGPU_OK;
    case 'H': opts->hosts = optarg; return VGPU_OK;
    case OPT_RPG:
        if ((opts->ranks_per_gpu = parse_count_(optarg)) < 0)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "--ranks-per-gpu %s: expected a count >= 1", optarg);
        return VGPU_OK;
    case OPT_MEM:
        if (config_parse_size(optarg, &opts->mem_per_rank_bytes) < 0 || opts->mem_per_rank_bytes == 0)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "--mem-per-rank %s: expected a size such as 512M or 2G", optarg);
        opts->mem_per_rank = optarg;
        return VGPU_OK;
    case OPT_BACKEND: return take_backend_(optarg, opts, err, err_bytes);
    case OPT_LAUNCHER: return take_launcher_(optarg, opts, err, err_bytes);
    case OPT_MPS: opts->mps = 1; return VGPU_OK;
    case OPT_NO_MPS: opts->no_mps = 1; return VGPU_OK;
    case OPT_DRY: opts->dry_run = 1; return VGPU_OK;
    case OPT_PLAN: opts->plan = 1; return VGPU_OK;
    case OPT_SM: return take_sm_share_(optarg, opts, err, err_bytes);
    case 'v': opts->verbose = 1; return VGPU_OK;
    case 'x': return take_export_(optarg, opts, err, err_bytes);
    case 'h': opts->help = 1; return 1;
    case OPT_VERSION: opts->version = 1; return 1;
    case ':': return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                 "option %s needs a value", argv[optind - 1]);
    default: return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                "unknown option %s (vgpurun --help lists them; mpirun's "
                                "or srun's own go between two --)",
                                argv[optind - 1]);
    }
}

// "-- LAUNCHER-OPTIONS -- PROGRAM": a program name never starts with '-', so
// options right after the first "--" are mpirun's or srun's. Moves optind
// past them.
static int take_launcher_args_(int argc, char **argv, struct vgpurun_options *opts, char *err,
                               size_t err_bytes)
{
    if (!(optind > 1 && optind < argc && !strcmp(argv[optind - 1], "--") && argv[optind][0] == '-'))
        return VGPU_OK;
    int end = optind;
    while (end < argc && strcmp(argv[end], "--"))
        end++;
    if (end == argc)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "%s: launcher options need a second -- before the program "
                           "(vgpurun [options] -- LAUNCHER-OPTIONS -- PROGRAM ARGS...)",
                           argv[optind]);
    opts->launcher_args = argv + optind;
    opts->launcher_arg_count = end - optind;
    optind = end + 1;
    return VGPU_OK;
}

int vgpurun_parse_args(int argc, char **argv, struct vgpurun_options *opts, char *err,
                       size_t err_bytes)
{
    memset(opts, 0, sizeof *opts);
    opterr = 0;
    optind = 1;
    int c;
    // '+': stop at the program name, whose own options are not ours. Long-only
    // parsing accepts mpirun's spelling "-np".
    while ((c = getopt_long_only(argc, argv, "+:n:H:x:vh", options_, NULL)) != -1) {
        int rc = take_option_(c, argv, opts, err, err_bytes);
        if (rc != VGPU_OK)
            return rc < 0 ? rc : VGPU_OK;
    }
    int rc = take_launcher_args_(argc, argv, opts, err, err_bytes);
    if (rc < 0)
        return rc;
    if (optind >= argc)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "no program to run (vgpurun [options] -- PROGRAM ARGS...)");
    if (opts->hostfile && opts->hosts)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "give --hostfile or -H, not both");
    opts->program = argv + optind;
    opts->program_count = argc - optind;
    return VGPU_OK;
}

// ---- hosts and slots ----

int vgpurun_count_hostfile(const char *text, int *host_count, int *slot_count, char *err,
                           size_t err_bytes)
{
    int hosts = 0, slots = 0, line_no = 0;
    const char *p = text;
    while (*p) {
        line_no++;
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char line[512];
        if (len >= sizeof line)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "hostfile line %d is too long", line_no);
        memcpy(line, p, len);
        line[len] = '\0';
        p += len + (end != NULL);
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL, *word = strtok_r(line, " \t\r", &save);
        if (!word)
            continue;
        hosts++;
        int host_slots = -1;
        while ((word = strtok_r(NULL, " \t\r", &save))) {
            if (!strncmp(word, "slots=", 6)) {
                if ((host_slots = parse_count_(word + 6)) < 0)
                    return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                       "hostfile line %d: bad '%s'", line_no, word);
            }
        }
        slots = host_slots < 0 || slots < 0 ? -1 : slots + host_slots;
    }
    if (hosts == 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "the hostfile names no host");
    *host_count = hosts;
    *slot_count = slots;
    return VGPU_OK;
}

int vgpurun_count_host_list(const char *list, int *host_count, int *slot_count, char *err,
                            size_t err_bytes)
{
    int hosts = 0, slots = 0;
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[256];
        if (len == 0 || len >= sizeof item)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "-H %s: empty or overlong host entry", list);
        memcpy(item, p, len);
        item[len] = '\0';
        p += len + (end != NULL);
        char *colon = strchr(item, ':');
        int n = 1;
        if (colon && (n = parse_count_(colon + 1)) < 0)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "-H %s: bad slot count in '%s'", list, item);
        hosts++;
        slots += n;
    }
    if (hosts == 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "-H needs host[:slots],...");
    *host_count = hosts;
    *slot_count = slots;
    return VGPU_OK;
}
