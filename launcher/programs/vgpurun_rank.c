// vgpurun_rank.c: vgpurun-rank, what each rank of a vgpurun job starts as
// before it becomes the user's program. Any program then finds what its
// framework expects: torchrun's RANK, WORLD_SIZE, LOCAL_RANK and
// LOCAL_WORLD_SIZE (from the launcher's own variables; MASTER_ADDR and
// MASTER_PORT come from vgpurun), and on a host with GPUs its own
// CUDA_VISIBLE_DEVICES: the GPU that vgpu's binding policy gives this local
// rank (binding_place: ranks in order fill the usable GPUs,
// VGPU_RANKS_PER_DEVICE each), named by UUID. A program that knows nothing
// of vgpu thus gets its slice of the GPU as "cuda:0"; vgpu's own programs
// take the launcher's value back and make the runtime's one binding decision
// with every rank's view and their config (binding.h). Where this host's
// ranks share a GPU, vgpu's NCCL (launcher/vnccl/) goes first on the
// loader's path, so an NCCL program (PyTorch's backend="nccl") runs there
// unmodified instead of meeting NCCL's "Duplicate GPU detected".
// Usage (by vgpurun): vgpurun-rank PROGRAM ARGS...
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binding.h"
#include "config.h"
#include "device.h"
#include "env.h"
#include "gpu_driver.h"
#include "status.h"
#include "vgpurun_plan.h"

#define MAX_GPUS 64

static const char *get_(const char *name) { return getenv(name); }

static void set_int_(const char *name, int value)
{
    char v[32];
    snprintf(v, sizeof v, "%d", value);
    setenv(name, v, 1);
}

// A list of MIG instances in CUDA_VISIBLE_DEVICES: CUDA shows a process
// only the first, so every rank would land there. The list is the
// scheduler's or the user's hand-out: local rank i takes entry i (modulo
// its length). Returns 1 when it pinned.
static int pin_mig_instance_(const struct vgpurun_rank_id *id)
{
    const char *list = getenv("CUDA_VISIBLE_DEVICES");
    if (!list || strncmp(list, "MIG-", 4) != 0 || !strchr(list, ','))
        return 0;
    char *copy = strdup(list), *save = NULL;
    const char *entries[MAX_GPUS];
    int n = 0, all_mig = 1;
    for (char *e = copy ? strtok_r(copy, ",", &save) : NULL; e && n < MAX_GPUS;
         e = strtok_r(NULL, ",", &save)) {
        all_mig &= !strncmp(e, "MIG-", 4);
        entries[n++] = e;
    }
    if (n > 1 && all_mig) // no record: a vgpu program cannot see more than one either
        setenv("CUDA_VISIBLE_DEVICES", entries[id->local_rank % n], 1);
    free(copy);
    return n > 1 && all_mig;
}

// This rank's GPU by the binding policy's placement (binding_place: the
// runtime's rules), into CUDA_VISIBLE_DEVICES, for a program that knows
// nothing of vgpu; what it pinned and the value replaced are recorded
// (BINDING_ENV_PINNED) so that a vgpu program takes the value back and binds
// itself with every rank's view and its own config. Left alone: no GPU or a
// failing one (the program says why), a single GPU in view (a scheduler's
// per-task GPU, one MIG instance: nothing to choose). A placement the
// policy refuses is refused (said once a host; returns 2), else 0.
static int bind_gpu_(const struct vgpurun_rank_id *id, int *usable_gpus)
{
    *usable_gpus = 0;
    unsetenv(BINDING_ENV_PINNED); // a record inherited from an outer vgpurun is not ours
    if (pin_mig_instance_(id))
        return 0;
    struct device_info seen[MAX_GPUS], usable[MAX_GPUS];
    int count = 0, n = 0;
    char err[512] = "";
    if (device_discover(device_kind_with(DEVICE_CAP_CUDA), seen, MAX_GPUS, &count, err, sizeof err) < 0 ||
        count <= 0)
        return 0;
    for (int i = 0; i < count; i++)
        if (seen[i].compute_mode != GPU_MODE_PROHIBITED) // as good as absent
            usable[n++] = seen[i];
    *usable_gpus = n;
    if (n == 0 || (count == 1 && n == 1))
        return 0;
    struct config cfg; // the launcher's settings (VGPU_RANKS_PER_DEVICE, ...)
    config_defaults(&cfg);
    if (config_apply_env(&cfg, err, sizeof err) < 0)
        config_defaults(&cfg); // the program says what is wrong with them
    const struct gpu_driver *drv = gpu_driver();
    struct binding_request req = {
        .local_size = id->local_size,
        .ndevices = n,
        .devices = usable,
        .ranks_per_device = cfg.devices.ranks_per_device,
        .mps = drv && drv->mps_active(),
    };
    struct binding *b = calloc((size_t)id->local_size, sizeof *b);
    if (!b)
        return 0;
    if (binding_place(&req, b, err, sizeof err) < 0) {
        // What it knows (the launcher's settings, compute modes, MPS) is the
        // job's too: a vgpu program's runtime would refuse the same.
        free(b);
        if (id->local_rank == 0) {
            fprintf(stderr, "vgpurun-rank: rank %d: cannot place this host's %d ranks on its "
                            "GPUs: %s\n", id->rank, id->local_size, err);
            return 2;
        }
        // The launcher ends the job at the first rank that fails: the silent
        // ones leave the first failure to the rank that says why (a slow
        // start, under a sanitizer, lost that line). Bounded, for a launcher
        // that does not end the job.
        sleep(3);
        return 2;
    }
    const char *pin = usable[b[id->local_rank].device].uuid;
    const char *before = getenv("CUDA_VISIBLE_DEVICES");
    char *record = NULL;
    if (asprintf(&record, "%s|%s%s", pin, before ? "=" : "unset", before ? before : "") >= 0) {
        setenv(BINDING_ENV_PINNED, record, 1);
        setenv("CUDA_VISIBLE_DEVICES", pin, 1);
        free(record);
    } // no room for the record: no pin (a vgpu program could not take it back)
    free(b);
    return 0;
}

// Prepends `first` to the variable `name`, separated by `sep` from what was there.
static void prepend_env_(const char *name, const char *first, const char *sep)
{
    const char *before = getenv(name);
    char *value = NULL;
    if (asprintf(&value, "%s%s%s", first, before && *before ? sep : "", before ? before : "") >= 0)
        setenv(name, value, 1);
    free(value);
}

// Fills path (PATH_MAX bytes) with dir and sub; whether path/name is readable.
static int has_lib_(char *path, const char *dir, const char *sub, const char *name)
{
    snprintf(path, PATH_MAX, "%s%s", dir, sub);
    char file[PATH_MAX + 64];
    snprintf(file, sizeof file, "%s/%s", path, name);
    return access(file, R_OK) == 0;
}

// vgpu's NCCL first on the loader's path, and preloaded, where this host's
// ranks share a GPU (VGPU_NCCL=auto, the default), always (vgpu) or never
// (real): from the build tree beside this program, else the installed
// LIBDIR/vgpu-nccl. On simulated GPUs the build tree's simulated CUDA
// runtime goes first too, so an NCCL program runs here on CPU devices.
static void put_vgpu_nccl_first_(const struct vgpurun_rank_id *id, int usable_gpus)
{
    const char *mode = env_read("VGPU_NCCL");
    if (mode && !strcmp(mode, "real"))
        return;
    const int forced = mode && !strcmp(mode, "vgpu");
    if (mode && !forced && strcmp(mode, "auto"))
        env_warn_malformed("VGPU_NCCL", mode, "auto, vgpu or real");
    if (!forced && (usable_gpus == 0 || id->local_size <= usable_gpus))
        return;
    char exe[PATH_MAX], dir[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    const struct gpu_driver *drv = gpu_driver();
    if (drv && drv->simulated && has_lib_(dir, exe, "/cudart_sim", "libcudart.so.13"))
        prepend_env_("LD_LIBRARY_PATH", dir, ":");
    if (has_lib_(dir, exe, "/vnccl", "libnccl.so.2") ||
        has_lib_(dir, VGPU_NCCL_INSTALL_DIR, "", "libnccl.so.2")) {
        prepend_env_("LD_LIBRARY_PATH", dir, ":");
        // Preloaded too: a program whose library names NCCL's folder in a
        // DT_RPATH (searched before LD_LIBRARY_PATH; PyTorch's wheels point
        // at their own NCCL) finds the loaded one by its SONAME instead.
        char lib[PATH_MAX + 16];
        snprintf(lib, sizeof lib, "%s/libnccl.so.2", dir);
        prepend_env_("LD_PRELOAD", lib, ":");
#ifdef VGPU_ASAN_RUNTIME // a sanitized build's library: the ASan runtime must come first
        prepend_env_("LD_PRELOAD", VGPU_ASAN_RUNTIME, ":");
#endif
    } else if (id->local_rank == 0 && forced) {
        fprintf(stderr, "vgpurun-rank: VGPU_NCCL=vgpu, but vgpu's NCCL is not built (it needs "
                        "nccl.h and CUDA's headers at build time)\n");
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: vgpurun-rank PROGRAM ARGS... (vgpurun runs it for each rank)\n");
        return 2;
    }
    struct vgpurun_rank_id id;
    char err[512];
    if (vgpurun_rank_identity(get_, &id, err, sizeof err) < 0) {
        fprintf(stderr, "vgpurun-rank: %s\n", err);
        return 2;
    }
    set_int_("RANK", id.rank);
    set_int_("WORLD_SIZE", id.world_size);
    set_int_("LOCAL_RANK", id.local_rank);
    set_int_("LOCAL_WORLD_SIZE", id.local_size);
    int usable_gpus;
    if (bind_gpu_(&id, &usable_gpus))
        return 2;
    put_vgpu_nccl_first_(&id, usable_gpus);
    execvp(argv[1], argv + 1);
    int e = errno;
    fprintf(stderr, "vgpurun-rank: %s: %s\n", argv[1], strerror(e));
    return e == ENOENT ? 127 : 126;
}
