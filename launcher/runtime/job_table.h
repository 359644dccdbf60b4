// job_table.h: the job table rank 0 prints once the ranks are bound: who runs
// where, on which device, with which cap, which collectives and why, what the
// job needs and what is left idle. One row a rank (all-gathered by the
// runtime); counting and formatting only, no MPI, so it is unit-tested.
#ifndef VGPU_JOB_TABLE_H
#define VGPU_JOB_TABLE_H

#include <stdint.h>
#include <stdio.h>

#include "device.h" // enum device_kind, device_kind_name

#define JOB_TABLE_ROWS 16    // rows before the table summarises the middle ones
#define JOB_TABLE_COLUMNS 79 // every line fits an 80-column terminal

// What one rank is bound to (fixed-size: it travels as bytes).
struct job_row {
    int rank, local_rank, node_index, device_index, ranks_on_device, mps;
    int mig;          // the device is a MIG instance
    int nccl_version; // NCCL this rank loads (0 = none)
    int host_devices; // devices binding could use on this rank's host
    char host[64];
    enum device_kind kind; // the device's kind (device_kind_caps, device_kind_name)
    char name[96];       // the device's name
    char uuid[48];       // the device's (a MIG instance's own)
    char pci_bus_id[32]; // the physical GPU's (MIG instances of one GPU share it); "" on CPUs
    uint64_t cap_bytes;
    int blas_threads; // a CPU device's BLAS threads
};

// What the table says besides the rows.
struct job_table_facts {
    int hosts;                  // hosts in the job
    int simulated;              // the GPUs are VGPU_SIM_GPUS's
    const char *backend;        // the collective backend
    const char *backend_reason; // why
    uint64_t need_bytes;        // least device memory a rank needs (0 = not known)
    const char *from_env;       // settings taken from the environment ("" = none)
};

// Distinct devices in the job: (host, UUID) pairs; with by_gpu the physical
// GPUs behind them ((host, PCI bus id): MIG instances of one GPU count once).
int job_table_count_devices(const struct job_row *rows, int n, int by_gpu);

// Distinct MIG instances in the job.
int job_table_count_mig(const struct job_row *rows, int n);

// Writes the table of rows[n] to f, every line at most JOB_TABLE_COLUMNS
// wide (long reasons wrap; long device names are cut).
void job_table_print(FILE *f, const struct job_row *rows, int n, const struct job_table_facts *facts);

#endif
