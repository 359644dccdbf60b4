// job.h: the job as the trainer sees it: this rank on libvgpu (its virtual
// GPU, the collectives between the ranks, the host collectives), and the
// configuration every rank shares. vgpu_train uses libvgpu's public API
// only (<vgpu/vgpu.h>): what it needs of vgpu, every program may have.
#ifndef VGPU_JOB_H
#define VGPU_JOB_H

#include <stddef.h>

#include <vgpu/vgpu.h>
#include <vgpu/vgpu_ext.h>

#include "train_config.h"

struct job {
    vgpu_t *v;                  // this rank (vgpu_join, then vgpu_open: its device)
    int rank, size;             // in the job
    int local_rank, local_size; // on this host
    struct train_config cfg;          // the same on every rank: rank 0's reading
    int launched;               // started by a launcher: stdout is not the user's terminal
};

// The host collectives with vgpu_train's contract (the job joined with
// end_job_on_failure): they return only when every rank took part, since
// a failure (a rank lost, MPI failing) ends the job inside libvgpu, with a
// message naming the rank. So there is nothing to check; a call the library
// refuses (a program error, the same on every rank) ends the job here.
// recv = every rank's `bytes` of send, in rank order.
void job_gather_all(struct job *job, const void *send, void *recv, size_t bytes);
// Copies `bytes` of root's buf to every rank's buf.
void job_broadcast(struct job *job, void *buf, size_t bytes, int root);
// The minimum of v over the ranks: a verdict all of them share.
int job_agree_min(struct job *job, int v);
// The sum of doubles over the ranks, in place.
void job_sum_doubles(struct job *job, double *values, int count);

// count floats of device memory on dev, zeroed.
int job_alloc_floats(vgpu_t *dev, size_t count, float **ptr);
// The most device memory this rank has had in use at once, bytes.
size_t job_peak_bytes(vgpu_t *dev);

#endif
