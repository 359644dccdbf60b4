// vgpurun_mps.h: a private MPS control daemon for one job: started before the
// ranks, stopped after them, its pipes and logs in a temp directory.
#ifndef VGPU_VGPURUN_MPS_H
#define VGPU_VGPURUN_MPS_H

#include <stddef.h>
#include <sys/types.h>

struct vgpurun_mps {
    char dir[256]; // temp directory holding pipe/ and log/; empty when not started
    pid_t watcher; // the process that stops the daemon however vgpurun ends; 0 = none
    int watch_fd;  // vgpurun's end of the watcher's pipe (close-on-exec); -1 = none
};

// Makes the temp directory, exports CUDA_MPS_PIPE_DIRECTORY and
// CUDA_MPS_LOG_DIRECTORY into this process's environment (so the ranks
// inherit them), forks a watcher and runs `nvidia-cuda-mps-control -d`. The
// watcher, in a session of its own, holds a pipe to vgpurun: when vgpurun
// ends without vgpurun_mps_stop (killed, kill -9 included) it reads EOF,
// sends `quit` with the job's pipe directory, removes the directory and says
// so on stderr. Returns VGPU_OK, or a negative status (-errno, VGPU_EIO)
// with a message in err (a daemon that failed keeps its log directory, named).
int vgpurun_mps_start(struct vgpurun_mps *mps, char *err, size_t err_bytes);

// After the job (job_status: its exit status, said): the watcher asks the
// daemon to quit, waits for it (bounded), removes the directory and says so;
// vgpurun waits for the watcher. A no-op when not started.
void vgpurun_mps_stop(struct vgpurun_mps *mps, int job_status);

#endif
