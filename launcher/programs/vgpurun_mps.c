// vgpurun_mps.c: start and stop a job-private MPS control daemon.
#include "vgpurun_mps.h"

#include <errno.h>
#include <fcntl.h>
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

// Whether process pid still runs: a daemon that has exited but that no one
// reaps (its parent is an init that does not, as in some containers) is a
// zombie, and gone.
static int alive_(pid_t pid)
{
    return pid > 0 && kill(pid, 0) == 0 && !util_proc_gone((long)pid);
}

// Asks the daemon to quit, waits for it (bounded), removes the directory.
// Returns 0, or -1 when the daemon may still run (said).
static int stop_daemon_(const struct vgpurun_mps *mps)
{
    pid_t pid = daemon_pid_(mps);
    char *args[] = {MPS_CONTROL, NULL};
    int rc = 0;
    if (run_control_(args, "quit\n") != 0) {
        fprintf(stderr, "vgpurun: warning: '%s quit' failed; the daemon (pid %ld) may still run\n",
                MPS_CONTROL, (long)pid);
        rc = -1;
    }
    for (int waited_ms = 0; alive_(pid) && waited_ms < MPS_QUIT_WAIT_MS; waited_ms += 50)
        nanosleep(&(struct timespec){.tv_nsec = 50 * 1000 * 1000}, NULL);
    if (alive_(pid)) {
        fprintf(stderr, "vgpurun: warning: MPS control daemon (pid %ld) did not quit within %d s\n",
                (long)pid, MPS_QUIT_WAIT_MS / 1000);
        rc = -1;
    }
    remove_tree_(mps->dir);
    return rc;
}

// ---- the watcher ----
//
// A process forked before the daemon starts, holding the read end of a pipe
// whose write end only vgpurun holds (close-on-exec: not mpirun, not the
// ranks, not the daemon). vgpurun writes how the job ended and closes it;
// if vgpurun dies first, however (kill -9 included), the kernel closes it
// and the watcher reads EOF with nothing said. Either way the watcher stops
// the daemon, removes the directory and says how.

static void watch_(const struct vgpurun_mps *mps, int fd)
{
    // A session of its own: a terminal's ^C or a signal to vgpurun's group
    // is the job's, not the watcher's, which must outlive vgpurun.
    setsid();
    const int ignored[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE};
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
        signal(ignored[i], SIG_IGN);
    char said[64];
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, said + n, sizeof said - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || (n += (size_t)r) == sizeof said - 1)
            break;
    }
    said[n] = '\0';
    if (said[0] == 'f') // the daemon did not start: nothing to stop, its log stays
        _exit(0);
    const int clean = stop_daemon_(mps) == 0;
    if (said[0] == 'e')
        fprintf(stderr, "vgpurun: MPS: the job's daemon %s after the job (exit %s); %s removed\n",
                clean ? "stopped" : "was told to quit", said + 1, mps->dir);
    else
        fprintf(stderr, "vgpurun: MPS: vgpurun ended without stopping the job's daemon (killed?): "
                        "its watcher (pid %ld) %s it and removed %s\n",
                (long)getpid(), clean ? "stopped" : "told to quit", mps->dir);
    _exit(0);
}

// Forks the watcher; on failure there is none (vgpurun stops the daemon
// itself, unless it is killed first: said).
static void start_watcher_(struct vgpurun_mps *mps)
{
    int fds[2];
    mps->watcher = 0;
    mps->watch_fd = -1;
    if (pipe2(fds, O_CLOEXEC) < 0) {
        perror("vgpurun: warning: no watcher for the MPS daemon: pipe");
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[1]);
        watch_(mps, fds[0]);
    }
    close(fds[0]);
    if (pid < 0) {
        perror("vgpurun: warning: no watcher for the MPS daemon: fork");
        close(fds[1]);
        return;
    }
    mps->watcher = pid;
    mps->watch_fd = fds[1];
}

// Tells the watcher how the job ended ("e<status>", or "f": the daemon did
// not start) and waits for it to finish.
static void tell_watcher_(struct vgpurun_mps *mps, const char *said)
{
    if (write(mps->watch_fd, said, strlen(said)) < 0)
        perror("vgpurun: telling the MPS daemon's watcher");
    close(mps->watch_fd);
    mps->watch_fd = -1;
    while (waitpid(mps->watcher, NULL, 0) < 0 && errno == EINTR)
        ;
    mps->watcher = 0;
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
    start_watcher_(mps);
    char *args[] = {MPS_CONTROL, "-d", NULL};
    int rc = run_control_(args, NULL);
    if (rc != 0) {
        if (mps->watcher)
            tell_watcher_(mps, "f");
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

void vgpurun_mps_stop(struct vgpurun_mps *mps, int job_status)
{
    if (!mps->dir[0])
        return;
    if (mps->watcher) {
        char said[32];
        snprintf(said, sizeof said, "e%d", job_status);
        tell_watcher_(mps, said);
    } else if (stop_daemon_(mps) == 0) {
        fprintf(stderr, "vgpurun: MPS: the job's daemon stopped after the job (exit %d); %s "
                        "removed\n", job_status, mps->dir);
    }
    mps->dir[0] = '\0';
}
