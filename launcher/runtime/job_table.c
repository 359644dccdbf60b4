// job_table.c: the job table (job_table.h).
#include "job_table.h"

#include <string.h>

#include "util.h"

static const char *id_(const struct job_row *r, int by_gpu)
{
    return by_gpu && r->pci_bus_id[0] ? r->pci_bus_id : r->uuid;
}

int job_table_count_devices(const struct job_row *rows, int n, int by_gpu)
{
    int distinct = 0;
    for (int r = 0; r < n; r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++)
            seen = rows[q].node_index == rows[r].node_index &&
                   !strcmp(id_(&rows[q], by_gpu), id_(&rows[r], by_gpu));
        distinct += !seen;
    }
    return distinct;
}

int job_table_count_mig(const struct job_row *rows, int n)
{
    int distinct = 0;
    for (int r = 0; r < n; r++) {
        int seen = !rows[r].mig;
        for (int q = 0; q < r && !seen; q++)
            seen = rows[q].node_index == rows[r].node_index && !strcmp(rows[q].uuid, rows[r].uuid);
        distinct += !seen;
    }
    return distinct;
}

static const char *s_(long k) { return k == 1 ? "" : "s"; }

// A GPU kind (the CPU stands in otherwise): "physical GPU" lines, idle GPUs,
// contexts taking turns.
static int gpu_(enum device_kind kind) { return (device_kind_caps(kind) & DEVICE_CAP_GPU) != 0; }

// "vgpu: " + text, wrapped at spaces to JOB_TABLE_COLUMNS, continuation
// lines indented under the text.
static void print_wrapped_(FILE *f, const char *text)
{
    static const char prefix[] = "vgpu: ", indent[] = "      ";
    const size_t room = JOB_TABLE_COLUMNS - (sizeof prefix - 1);
    const char *p = text;
    int first = 1;
    while (*p) {
        size_t len = strlen(p);
        if (len > room) {
            len = room;
            while (len > 0 && p[len] != ' ')
                len--;
            if (len == 0) // one word longer than a line: cut it
                len = room;
        }
        fprintf(f, "%s%.*s\n", first ? prefix : indent, (int)len, p);
        first = 0;
        p += len;
        while (*p == ' ')
            p++;
    }
}

// Hosts with devices no rank uses: one line each (the first few).
static void print_idle_(FILE *f, const struct job_row *rows, int n)
{
    int said = 0;
    for (int r = 0; r < n && said < 4; r++) {
        int first = 1;
        for (int q = 0; q < r && first; q++)
            first = rows[q].node_index != rows[r].node_index;
        if (!first || !gpu_(rows[r].kind))
            continue;
        int used = 0;
        for (int q = r; q < n; q++) {
            if (rows[q].node_index != rows[r].node_index)
                continue;
            int seen = 0;
            for (int k = r; k < q && !seen; k++)
                seen = rows[k].node_index == rows[q].node_index && !strcmp(rows[k].uuid, rows[q].uuid);
            used += !seen;
        }
        const int idle = rows[r].host_devices - used;
        if (idle <= 0)
            continue;
        char line[256];
        snprintf(line, sizeof line,
                 "%d of %d GPU%s on %s left idle (more ranks, or devices.map, use them)",
                 idle, rows[r].host_devices, s_(rows[r].host_devices), rows[r].host);
        print_wrapped_(f, line);
        said++;
    }
}

// The host as the table shows it: a name too long for its column loses its
// domain first ("gpu017.cluster.example.org" -> "gpu017"), then its end.
static void short_host_(char *out, size_t out_bytes, const char *host, int width)
{
    const char *dot = strchr(host, '.');
    int len = (int)strlen(host);
    if (len > width && dot)
        len = (int)(dot - host);
    snprintf(out, out_bytes, "%.*s", len < width ? len : width, host);
}

void job_table_print(FILE *f, const struct job_row *rows, int n, const struct job_table_facts *facts)
{
    char line[1024], a[32], b[32];
    const int gpu = gpu_(rows[0].kind), h = facts->hosts;
    if (gpu) {
        const int p = job_table_count_devices(rows, n, 1), mig = job_table_count_mig(rows, n);
        char instances[48] = "";
        if (mig)
            snprintf(instances, sizeof instances, ", %d MIG instance%s", mig, s_(mig));
        snprintf(line, sizeof line, "%d %sphysical GPU%s%s -> %d virtual GPU%s (%d rank%s, %d host%s)",
                 p, facts->simulated ? "simulated " : "", s_(p), instances, n, s_(n), n, s_(n), h,
                 s_(h));
    } else {
        int lo = rows[0].blas_threads, hi = lo; // the BLAS threads a rank (devices.cpu_threads)
        for (int r = 1; r < n; r++) {
            lo = rows[r].blas_threads < lo ? rows[r].blas_threads : lo;
            hi = rows[r].blas_threads > hi ? rows[r].blas_threads : hi;
        }
        char threads[48]; // a rank's
        if (lo == hi)
            snprintf(threads, sizeof threads, "BLAS: %d thread%s", lo, s_(lo));
        else
            snprintf(threads, sizeof threads, "BLAS: %d-%d threads", lo, hi);
        snprintf(line, sizeof line, "no GPU: %d CPU-simulated virtual GPU%s (%d rank%s, %d host%s; %s)",
                 n, s_(n), n, s_(n), h, s_(h), threads);
    }
    print_wrapped_(f, line);
    if (gpu && facts->simulated)
        print_wrapped_(f, "VGPU_SIM_GPUS: CPU math behind the GPUs' description");
    snprintf(line, sizeof line, "collectives: %s (%s)", facts->backend, facts->backend_reason);
    print_wrapped_(f, line);
    int mps_hosts = 0;
    for (int r = 0; r < n; r++)
        mps_hosts += rows[r].mps && rows[r].local_rank == 0;
    if (mps_hosts) {
        snprintf(line, sizeof line, "MPS: %d of %d host%s run their ranks as MPS clients (one server per GPU)",
                 mps_hosts, h, s_(h));
        print_wrapped_(f, line);
    }
    int turns = 0; // the most ranks that take turns on one GPU (no MPS)
    for (int r = 0; r < n; r++)
        if (gpu_(rows[r].kind) && !rows[r].mps && rows[r].ranks_on_device > turns)
            turns = rows[r].ranks_on_device;
    if (turns > 1) {
        snprintf(line, sizeof line,
                 "no MPS: up to %d ranks take turns on a GPU, each in its own CUDA context; "
                 "under MPS they run at once (the default job 6x faster on an H100, "
                 "docs/gpu-runs/2026-11-26-h100.md): vgpurun --mps, or nvidia-cuda-mps-control -d "
                 "before mpirun",
                 turns);
        print_wrapped_(f, line);
    }
    if (facts->from_env && facts->from_env[0]) { // they override the config file: said by the caps
        snprintf(line, sizeof line, "from the environment: %s", facts->from_env);
        print_wrapped_(f, line);
    }
    if (facts->need_bytes) { // does it fit, not only does it start
        uint64_t smallest = rows[0].cap_bytes;
        for (int r = 1; r < n; r++)
            smallest = rows[r].cap_bytes < smallest ? rows[r].cap_bytes : smallest;
        snprintf(line, sizeof line, "each rank needs %s of device memory; the smallest cap is %s",
                 util_format_bytes(facts->need_bytes, a, sizeof a),
                 util_format_bytes(smallest, b, sizeof b));
        print_wrapped_(f, line);
    }
    print_idle_(f, rows, n);

    // Columns: the host and device ones as wide as their longest entry,
    // the device cut so that a row fits.
    int host_w = 4, dev_w = 6, virt_w = 7;
    char dev[160];
    for (int r = 0; r < n; r++) {
        int len = (int)strlen(rows[r].host);
        host_w = len > host_w ? len : host_w;
        len = snprintf(dev, sizeof dev, "%s%d %s", device_kind_name(rows[r].kind), rows[r].device_index, rows[r].name);
        dev_w = len > dev_w ? len : dev_w;
        len = snprintf(dev, sizeof dev, "vgpu%d", rows[r].rank);
        virt_w = len > virt_w ? len : virt_w;
    }
    host_w = host_w > 16 ? 16 : host_w;
    const int fixed = 4 + 2 + host_w + 1 + 5 + 2 + 1 + virt_w + 1 + 10;
    dev_w = dev_w > JOB_TABLE_COLUMNS - fixed ? JOB_TABLE_COLUMNS - fixed : dev_w;
    fprintf(f, "%4s  %-*s %5s  %-*s %*s %10s\n", "rank", host_w, "host", "local", dev_w, "device",
            virt_w, "virtual", "cap");
    // Past JOB_TABLE_ROWS ranks: the first ones and the last, one line for the rest.
    for (int r = 0; r < n; r++) {
        if (n > JOB_TABLE_ROWS && r == JOB_TABLE_ROWS - 2) {
            fprintf(f, "%4s  ... %d more rank%s (vgpu%d..vgpu%d)\n", "", n - JOB_TABLE_ROWS + 1,
                    s_(n - JOB_TABLE_ROWS + 1), r, n - 2);
            r = n - 2;
            continue;
        }
        char virt[16], host[64];
        snprintf(dev, sizeof dev, "%s%d %s", device_kind_name(rows[r].kind), rows[r].device_index, rows[r].name);
        snprintf(virt, sizeof virt, "vgpu%d", rows[r].rank);
        short_host_(host, sizeof host, rows[r].host, host_w);
        fprintf(f, "%4d  %-*.*s %5d  %-*.*s %*s %10s\n", rows[r].rank, host_w, host_w, host,
                rows[r].local_rank, dev_w, dev_w, dev, virt_w, virt,
                util_format_bytes(rows[r].cap_bytes, a, sizeof a));
    }
    fflush(f);
}
