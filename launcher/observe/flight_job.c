// flight_job.c: the job's flight recorder (flight_job.h): rings in host
// shared memory, records on disk, the verdict.
#include "flight_job.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "env.h"
#include "flight.h"
#include "log.h"
#include "status.h"

#define INSPECT_ENTRIES 6 // collectives a rank prints on SIGUSR2
#define RECORD_PATH_MAX (PATH_MAX + 128) // the directory, a record's name

// One rank's part of the host's shared window.
struct flight_segment {
    struct flight_ring ring;
    _Atomic int verdict_claimed; // local rank 0's: a rank of this host printed the verdict
};

static struct {
    int joined;
    MPI_Win win;
    struct flight_segment **peers; // [local_size]
    int local_size, local_rank;
    int rank, size;
    char dir[PATH_MAX];
    pthread_mutex_t lock;
} fj_ = {.lock = PTHREAD_MUTEX_INITIALIZER};

const char *flight_job_dir(void) { return fj_.dir; }

int flight_job_join(MPI_Comm world, MPI_Comm local, int rank, int size, const char *host)
{
    flight_use(NULL, rank, size, host);
    // The job's name, rank 0's: when it started and its pid, so that jobs
    // sharing a directory do not mix their records.
    char name[64] = "";
    if (rank == 0) {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char when[32];
        strftime(when, sizeof when, "%Y%m%d-%H%M%S", &tm);
        snprintf(name, sizeof name, "%s-%d", when, (int)getpid());
    }
    if (MPI_Bcast(name, sizeof name, MPI_CHAR, 0, world) != MPI_SUCCESS)
        return VGPU_ECOMM;
    pthread_mutex_lock(&fj_.lock);
    snprintf(fj_.dir, sizeof fj_.dir, "%s/%s", env_get()->flight_dir, name);
    pthread_mutex_unlock(&fj_.lock);

    int local_rank, local_size;
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_size(local, &local_size);
    struct flight_segment *mine = NULL;
    struct flight_segment **peers = calloc((size_t)local_size, sizeof *peers);
    MPI_Win win = MPI_WIN_NULL;
    int ok = peers && MPI_Win_allocate_shared(sizeof *mine, 1, MPI_INFO_NULL, local, &mine,
                                              &win) == MPI_SUCCESS;
    for (int q = 0; ok && q < local_size; q++) {
        MPI_Aint bytes;
        int unit;
        ok = MPI_Win_shared_query(win, q, &bytes, &unit, &peers[q]) == MPI_SUCCESS &&
             bytes >= (MPI_Aint)sizeof *mine;
    }
    if (!ok) {
        if (win != MPI_WIN_NULL)
            MPI_Win_free(&win);
        free(peers);
        log_warn("flight recorder: no shared memory for the rings; records show this rank only");
        return VGPU_ECOMM;
    }
    memset(mine, 0, sizeof *mine);
    flight_use(&mine->ring, rank, size, host);
    // Every ring is stamped before anyone reads one.
    MPI_Barrier(local);
    pthread_mutex_lock(&fj_.lock);
    fj_.win = win;
    fj_.peers = peers;
    fj_.local_size = local_size;
    fj_.local_rank = local_rank;
    fj_.rank = rank;
    fj_.size = size;
    fj_.joined = 1;
    pthread_mutex_unlock(&fj_.lock);
    return 0;
}

void flight_job_leave(void)
{
    pthread_mutex_lock(&fj_.lock);
    const int joined = fj_.joined;
    fj_.joined = 0;
    pthread_mutex_unlock(&fj_.lock);
    if (!joined)
        return;
    const struct flight_ring *r = flight_ring_self();
    flight_use(NULL, r->rank, r->size, r->host);
    MPI_Win_free(&fj_.win);
    free(fj_.peers);
    fj_.peers = NULL;
}

// "running", "stopped" or "dead", from /proc.
static const char *process_state_(int pid)
{
    if (pid == (int)getpid())
        return "running";
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return "dead";
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')'); // the name may hold spaces and parentheses
    const char state = paren && paren[1] == ' ' ? paren[2] : '?';
    return state == 'T' || state == 't' ? "stopped" : state == 'Z' || state == 'X' ? "dead" : "running";
}

static int mkdirs_(const char *dir)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    return mkdir(path, 0777) != 0 && errno != EEXIST ? -errno : 0;
}

// The default place ($TMPDIR/vgpu-flight-<uid>, env.h) is in a directory
// every user may write: it must be this user's own directory (made 0700
// here), not a link or another user's, or nothing is written there (a
// planted directory would receive the records). 0 or a negative status.
static int own_default_root_(void)
{
    const struct vgpu_env *e = env_get();
    if (!e->flight_dir_default)
        return 0;
    if (mkdir(e->flight_dir, 0700) != 0 && errno != EEXIST)
        return -errno;
    struct stat st;
    if (lstat(e->flight_dir, &st) != 0)
        return -errno;
    if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 022)) {
        log_warn("flight recorder: %s is not a directory of this user's alone; no records "
                 "(set VGPU_FLIGHT_DIR to a directory of yours)", e->flight_dir);
        return VGPU_EINVAL;
    }
    return 0;
}

// Whether the record at `path` is a SIGUSR2 look, which any later record
// replaces; a record of trouble is never replaced: the first one written
// after things went wrong shows what went wrong.
static int is_look_(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[128];
    int look = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "reason ", 7) == 0) {
            look = strncmp(line + 7, "SIGUSR2", 7) == 0;
            break;
        }
    fclose(f);
    return look;
}

static void record_path_(const struct flight_record *rec, char *path, size_t bytes)
{
    snprintf(path, bytes, "%s/rank%d-%s-%d.flight", fj_.dir, rec->rank,
             rec->host[0] ? rec->host : "unknown", rec->pid);
}

// Gives the written file (the unnamed one behind fd, or `tmp` by name) the
// name `path`; -EEXIST when that name is taken.
static int link_as_(int fd, const char *tmp, const char *path)
{
    if (tmp[0])
        return link(tmp, path) == 0 ? 0 : -errno;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0 ? 0 : -errno;
}

// Writes rec as its rank's record unless a record of trouble is there (the
// host's ranks write at once: link() lets exactly one be first). The text
// goes into an unnamed file (O_TMPFILE) that gets its name once whole, so a
// rank killed while writing (mpirun's SIGKILL follows its SIGTERM by a
// second) leaves nothing behind; only where the file system has no unnamed
// files, a named temporary one, removed at once. 0 or -errno.
static int write_record_(const struct flight_record *rec, int look)
{
    char path[RECORD_PATH_MAX], tmp[RECORD_PATH_MAX] = "";
    record_path_(rec, path, sizeof path);
    int fd = open(fj_.dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) {
        if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
            return -errno;
        snprintf(tmp, sizeof tmp, "%s/.rank%d.%d.tmp", fj_.dir, rec->rank, (int)getpid());
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
            return -errno;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        const int rc = -errno;
        close(fd);
        if (tmp[0])
            unlink(tmp);
        return rc;
    }
    int rc = flight_write(rec, f);
    if (fflush(f) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && (rc = link_as_(fd, tmp, path)) == -EEXIST) {
        rc = 0; // a record of trouble stays; a SIGUSR2 look is replaced
        if ((look || is_look_(path)) && unlink(path) == 0) {
            const int again = link_as_(fd, tmp, path);
            rc = again == -EEXIST ? 0 : again; // another rank's record got in first: it stays
        }
    }
    fclose(f);
    if (tmp[0])
        unlink(tmp);
    return rc;
}

// The verdict over this host's records as they are on disk (what vgpu-flight
// reads), into out; returns flight_verdict's result.
static int verdict_from_files_(struct flight_record *recs, int n, FILE *out)
{
    const struct flight_record **by_rank = calloc((size_t)fj_.size, sizeof *by_rank);
    struct flight_record *disk = malloc(sizeof *disk);
    int stuck = 0;
    for (int q = 0; by_rank && disk && q < n; q++) {
        if (recs[q].size != fj_.size)
            continue; // not a ring
        char path[RECORD_PATH_MAX], err[128];
        record_path_(&recs[q], path, sizeof path);
        FILE *f = fopen(path, "r");
        if (f && flight_read(f, disk, err, sizeof err) == 0 && disk->rank == recs[q].rank)
            recs[q] = *disk;
        if (f)
            fclose(f);
        by_rank[recs[q].rank] = &recs[q];
    }
    if (by_rank && disk)
        stuck = flight_verdict(by_rank, fj_.size, out);
    free(disk);
    free(by_rank);
    return stuck;
}

void flight_job_event(enum flight_event event, const char *why)
{
    pthread_mutex_lock(&fj_.lock);
    if (!fj_.dir[0]) { // before the job's name is agreed: nothing recorded yet
        pthread_mutex_unlock(&fj_.lock);
        return;
    }
    const int n = fj_.joined ? fj_.local_size : 1;
    struct flight_record *recs = calloc((size_t)n, sizeof *recs);
    char *text = NULL;
    size_t text_bytes = 0;
    FILE *out = open_memstream(&text, &text_bytes);
    if (!recs || !out) {
        log_warn("flight recorder: cannot write records in %s: %s", fj_.dir,
                 status_str(VGPU_ENOMEM));
        goto out;
    }
    int trouble = 0, mine = -1; // trouble: a host-mate is stopped or dead
    for (int q = 0; q < n; q++) {
        const struct flight_ring *ring = fj_.joined ? &fj_.peers[q]->ring : flight_ring_self();
        if (flight_snapshot(ring, &recs[q]) < 0 || recs[q].rank < 0 || recs[q].rank >= fj_.size ||
            recs[q].size != fj_.size) {
            recs[q].size = 0; // not a ring: skipped
            continue;
        }
        snprintf(recs[q].process, sizeof recs[q].process, "%s", process_state_(recs[q].pid));
        snprintf(recs[q].reason, sizeof recs[q].reason, "%s", why);
        recs[q].written_by = fj_.rank;
        trouble |= strcmp(recs[q].process, "running") != 0;
        if (recs[q].rank == fj_.rank)
            mine = q;
    }
    // Records belong to faults. A stop signal is one only when a host-mate
    // is found stopped or dead (mpirun's SIGTERM after a rank died); else it
    // is a stop someone asked for (a preemption, Ctrl-C, mpirun ending the
    // job after an agreed exit), which the run reports itself: no records.
    if (event == FLIGHT_EVENT_STOP && !trouble)
        goto out;
    // The job is going down: every host-mate's record, while this rank can.
    const int all = event == FLIGHT_EVENT_FATAL || event == FLIGHT_EVENT_STOP;
    int rc = own_default_root_();
    if (rc == 0)
        rc = mkdirs_(fj_.dir);
    if (rc < 0) {
        if (rc != VGPU_EINVAL) // own_default_root_ said why
            log_warn("flight recorder: cannot write records in %s: %s", fj_.dir, status_str(rc));
        goto out;
    }
    for (int q = 0; q < n; q++) {
        if (!recs[q].size || (q != mine && !all))
            continue;
        int w = write_record_(&recs[q], event == FLIGHT_EVENT_INSPECT);
        if (w < 0)
            log_warn("flight recorder: cannot write rank %d's record in %s: %s", recs[q].rank,
                     fj_.dir, status_str(w));
    }
    if (event == FLIGHT_EVENT_INSPECT && mine >= 0) {
        char path[RECORD_PATH_MAX];
        record_path_(&recs[mine], path, sizeof path);
        const struct flight_record *me = &recs[mine];
        const struct flight_entry_copy *last = me->count ? &me->entries[me->count - 1] : NULL;
        fprintf(out, "flight recorder (%s): ", why);
        if (me->step > 0)
            fprintf(out, "step %" PRId64 ", ", me->step);
        if (last && last->state != FLIGHT_DONE)
            fprintf(out, "in collective #%" PRIu64 " %s", last->seq, flight_kind_name(last->kind));
        else
            fprintf(out, "in %s", flight_phase_name(me->phase));
        fprintf(out, "; the last collectives:\n");
        flight_print_last(&recs[mine], INSPECT_ENTRIES, out);
        fprintf(out, "flight recorder: record %s\n", path);
    } else if (all) {
        // One rank of the host prints the verdict, from the records as they
        // stand once every host-mate's is there (they do not change then).
        int none = 0;
        _Atomic int *claim = fj_.joined ? &fj_.peers[0]->verdict_claimed : NULL;
        if (!claim || atomic_compare_exchange_strong(claim, &none, 1)) {
            char *verdict = NULL;
            size_t verdict_bytes = 0;
            FILE *v = open_memstream(&verdict, &verdict_bytes);
            int stuck = v ? verdict_from_files_(recs, n, v) : 0;
            if (v)
                fclose(v);
            // The verdict when there is one; where the records are, always.
            if ((stuck || trouble) && verdict && verdict[0])
                fprintf(out, "flight recorder: %s", verdict);
            fprintf(out, "flight recorder: records in %s (vgpu-flight %s %s)\n", fj_.dir, fj_.dir,
                    stuck || trouble ? "prints this again" : "reads them");
            free(verdict);
        }
    }
out:
    if (out) {
        fclose(out);
        if (text && text[0])
            log_lines(text);
    }
    free(text);
    free(recs);
    pthread_mutex_unlock(&fj_.lock);
}
