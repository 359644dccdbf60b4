// vgpurun_gpus.c: this host's GPUs as vgpurun sees them before any rank
// runs: how many, their compute modes, sizes and UUIDs (VGPU_SIM_GPUS's
// description, else /dev/nvidiaN and nvidia-smi). No CUDA: vgpurun makes no
// context and links no CUDA runtime.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "gpu_driver.h"
#include "vgpurun_facts.h"

// gpu_sim.c's two links to the CUDA backend, which vgpurun does not have:
// its parser and CUDA_VISIBLE_DEVICES's selection are all vgpurun uses.
int gpu_runtime_version(void) { return GPU_RUNTIME_VERSION_NO_CUDA; }
const struct gpu_driver *gpu_cuda_driver(void) { return NULL; }

static struct gpu_sim_gpu host_[GPU_MAX]; // the host's devices, physical order

// GPUs this host shows: /dev/nvidiaN nodes, limited by CUDA_VISIBLE_DEVICES.
static int count_nodes_(void)
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

static int mode_of_(const char *text)
{
    if (!strncmp(text, "Exclusive", 9))
        return GPU_MODE_EXCLUSIVE_PROCESS;
    return !strncmp(text, "Prohibited", 10) ? GPU_MODE_PROHIBITED : GPU_MODE_DEFAULT;
}

// The host's GPUs from nvidia-smi, in its (PCI bus) order, into host_;
// returns how many (0 when it does not answer).
static int query_nvidia_smi_(void)
{
    FILE *p = popen("nvidia-smi --query-gpu=uuid,memory.total,compute_mode "
                    "--format=csv,noheader,nounits 2>/dev/null", "r");
    if (!p)
        return 0;
    int n = 0;
    char line[256], uuid[64], mode[64];
    unsigned long long mib;
    while (n < GPU_MAX && fgets(line, sizeof line, p))
        if (sscanf(line, " %63[^, ] , %llu , %63s", uuid, &mib, mode) == 3 &&
            !strncmp(uuid, "GPU-", 4)) {
            struct gpu_props *g = &host_[n++].props;
            memset(g, 0, sizeof *g);
            snprintf(g->uuid, sizeof g->uuid, "%.47s", uuid);
            g->total_bytes = (uint64_t)mib << 20;
            g->compute_mode = mode_of_(mode);
        }
    pclose(p);
    return n;
}

int vgpurun_gpus_probe(struct vgpurun_facts_store *store, int want_details, int *known)
{
    *known = 0;
    const char *spec = env_read("VGPU_SIM_GPUS");
    int n = 0;
    if (spec && *spec) {
        struct gpu_sim_host host;
        char err[256];
        // A description that does not parse: no GPU here; the ranks say why.
        if (gpu_sim_parse(spec, host_, GPU_MAX, &n, &host, err, sizeof err) < 0 || host.no_driver)
            return 0;
    } else {
        const int nodes = count_nodes_();
        if (nodes == 0 || !want_details)
            return nodes;
        if ((n = query_nvidia_smi_()) == 0)
            return nodes; // no nvidia-smi: the count alone
    }
    store->uuid_count = 0;
    for (int i = 0; i < n && i < VGPURUN_MAX_GPU_UUIDS; i++)
        if ((store->uuids[i] = strdup(host_[i].props.uuid)))
            store->uuid_count = i + 1;
    int order[GPU_MAX];
    const int count = gpu_sim_visible(host_, n, getenv("CUDA_VISIBLE_DEVICES"), order, GPU_MAX);
    for (int i = 0; i < count; i++) {
        store->gpu_modes[i] = host_[order[i]].props.compute_mode;
        store->gpu_bytes[i] = host_[order[i]].props.total_bytes;
    }
    *known = 1;
    return count;
}
