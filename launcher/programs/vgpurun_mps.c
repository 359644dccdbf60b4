// vgpurun_mps.c: start and stop a job-private MPS control daemon.
#include "vgpurun_mps.h"

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "status.h"
#include "util.h"

#define MPS_CONTROL "nvidia-cuda-mps-control"
#define MPS_QUIT_WAIT_MS 10000 // the daemon stops its servers first; give it time

// Runs MPS_CONTROL with args, feeding `input` (may be NULL) on its stdin.
// Returns its exit status, or -1 if it could not run.
static int run_control_(char *const args[], const char *input)
{
    int fds[2];
    if (pipe(fds) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[0], STDIN_FILENO);
        close(fds[0]);
        close(fds[1]);
        execvp(MPS_CONTROL, args);
        _exit(127);
    }
    close(fds[0]);
    if (input && write(fds[1], input, strlen(input)) < 0)
        perror("vgpurun: writing to " MPS_CONTROL);
    close(fds[1]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int remove_entry_(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void remove_tree_(const char *dir)
{
    nftw(dir, remove_entry_, 16, FTW_DEPTH | FTW_PHYS);
}

// PID of the control daemon from the file it writes in the pipe directory; 0 if none.
static pid_t daemon_pid_(const struct vgpurun_mps *mps)
{
    char path[320];
    snprintf(path, sizeof path, "%s/pipe/nvidia-cuda-mps-control.pid", mps->dir);
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return (pid_t)pid;
}

int vgpurun_mps_start(struct vgpurun_mps *mps, char *err, size_t err_bytes)
{
    snprintf(mps->dir, sizeof mps->dir, "/tmp/vgpu-mps.XXXXXX");
    if (!mkdtemp(mps->dir)) {
        int rc = util_errorf(err, err_bytes, -errno, "cannot make a directory for MPS: %s",
                             strerror(errno));
        mps->dir[0] = '\0';
        return rc;
    }
    char pipe_dir[300], log_dir[300];
    snprintf(pipe_dir, sizeof pipe_dir, "%s/pipe", mps->dir);
    snprintf(log_dir, sizeof log_dir, "%s/log", mps->dir);
    if (mkdir(pipe_dir, 0700) < 0 || mkdir(log_dir, 0700) < 0 ||
        setenv("CUDA_MPS_PIPE_DIRECTORY", pipe_dir, 1) < 0 ||
        setenv("CUDA_MPS_LOG_DIRECTORY", log_dir, 1) < 0) {
        int rc = util_errorf(err, err_bytes, -errno, "cannot prepare %s: %s", mps->dir,
                             strerror(errno));
        remove_tree_(mps->dir);
        mps->dir[0] = '\0';
        return rc;
    }
    char *args[] = {MPS_CONTROL, "-d", NULL};
    int rc = run_control_(args, NULL);
    if (rc != 0) {
        // The reason is in the daemon's log, which goes with the directory.
        char log_path[340], reason[200] = "no log";
        snprintf(log_path, sizeof log_path, "%s/control.log", log_dir);
        FILE *f = fopen(log_path, "r");
        if (f) {
            size_t n = fread(reason, 1, sizeof reason - 1, f);
            reason[n] = '\0';
            reason[strcspn(reason, "\n")] = '\0';
            fclose(f);
        }
        // The directory stays: its log says what the first line cannot.
        util_errorf(err, err_bytes, 0, "%s -d %s: %s (the daemon's log stays in %s)", MPS_CONTROL,
                    rc < 0 ? "could not run" : "failed", reason, log_dir);
        mps->dir[0] = '\0';
        return rc < 0 ? VGPU_EUNSUPPORTED : VGPU_EIO;
    }
    return VGPU_OK;
}

void vgpurun_mps_stop(struct vgpurun_mps *mps)
{
    if (!mps->dir[0])
        return;
    pid_t pid = daemon_pid_(mps);
    char *args[] = {MPS_CONTROL, NULL};
    if (run_control_(args, "quit\n") != 0)
        fprintf(stderr, "vgpurun: warning: '%s quit' failed; the daemon (pid %ld) may still run\n",
                MPS_CONTROL, (long)pid);
    for (int waited_ms = 0; pid > 0 && kill(pid, 0) == 0 && waited_ms < MPS_QUIT_WAIT_MS;
         waited_ms += 50)
        nanosleep(&(struct timespec){.tv_nsec = 50 * 1000 * 1000}, NULL);
    if (pid > 0 && kill(pid, 0) == 0)
        fprintf(stderr, "vgpurun: warning: MPS control daemon (pid %ld) did not quit within %d s\n",
                (long)pid, MPS_QUIT_WAIT_MS / 1000);
    remove_tree_(mps->dir);
    mps->dir[0] = '\0';
}
