// vgpurun_mps.h: a private MPS control daemon for one job: started before the
// ranks, stopped after them, its pipes and logs in a temp directory.
#ifndef VGPU_VGPURUN_MPS_H
#define VGPU_VGPURUN_MPS_H

#include <stddef.h>

struct vgpurun_mps {
    char dir[256]; // temp directory holding pipe/ and log/; empty when not started
};

// Makes the temp directory, exports CUDA_MPS_PIPE_DIRECTORY and
// CUDA_MPS_LOG_DIRECTORY into this process's environment (so the ranks
// inherit them) and runs `nvidia-cuda-mps-control -d`. Returns VGPU_OK, or a
// negative status (-errno, VGPU_EIO) with a message in err, nothing left behind.
int vgpurun_mps_start(struct vgpurun_mps *mps, char *err, size_t err_bytes);

// Asks the daemon to quit, waits for it (bounded), removes the directory.
// A no-op when not started.
void vgpurun_mps_stop(struct vgpurun_mps *mps);

#endif
