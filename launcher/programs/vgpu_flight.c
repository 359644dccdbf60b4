// vgpu_flight.c: reads a job's flight records after the fact and prints the
// verdict its ranks printed (or would have, had they lived): the first
// collective that not every rank entered, who is missing, and what each
// rank was last doing. `vgpu-flight DIR`, DIR as the job printed it.
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "flight.h"

#define EXIT_STUCK 3 // a collective is stuck (the verdict says which)

static void usage_(FILE *f)
{
    fprintf(f,
            "usage: vgpu-flight [--last N] DIR\n"
            "Reads the flight records (*.flight) a vgpu job wrote in DIR (one job's directory,\n"
            "as the job printed it: VGPU_FLIGHT_DIR/<job>, by default\n"
            "$TMPDIR/vgpu-flight-UID/<job>; given the parent, the newest job in it) and\n"
            "prints the verdict: the first collective that not every rank entered,\n"
            "which ranks are missing, and what each rank was last doing.\n"
            "  --last N  also print each rank's last N collectives (default 0)\n"
            "Exit status: 0 nothing stuck, %d a collective is stuck, 2 bad input.\n",
            EXIT_STUCK);
}

static int is_record_(const char *name)
{
    const size_t n = strlen(name);
    return n > 7 && strcmp(name + n - 7, ".flight") == 0 && name[0] != '.';
}

// The newest subdirectory of dir holding records, into out; 0 or -1.
static int newest_job_(const char *dir, char *out, size_t bytes)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    char best[NAME_MAX + 1] = "";
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        // Job names begin with their start time: the greatest is the newest.
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode) && strcmp(e->d_name, best) > 0)
            snprintf(best, sizeof best, "%s", e->d_name);
    }
    closedir(d);
    if (!best[0])
        return -1;
    snprintf(out, bytes, "%s/%s", dir, best);
    return 0;
}

int main(int argc, char **argv)
{
    int last = 0;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage_(stdout);
            return 0;
        } else if (strcmp(argv[i], "--last") == 0 && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 0 || v > FLIGHT_CAPACITY) {
                fprintf(stderr, "vgpu-flight: --last %s: expected 0..%d\n", argv[i], FLIGHT_CAPACITY);
                return 2;
            }
            last = (int)v;
        } else if (argv[i][0] == '-' || dir) {
            usage_(stderr);
            return 2;
        } else {
            dir = argv[i];
        }
    }
    if (!dir) {
        usage_(stderr);
        return 2;
    }
    char job[PATH_MAX];
    snprintf(job, sizeof job, "%s", dir);
    DIR *d = opendir(job);
    if (!d) {
        fprintf(stderr, "vgpu-flight: %s: %s\n", job, strerror(errno));
        return 2;
    }
    int size = 0, found = 0, bad = 0;
    struct flight_record **recs = NULL;
    for (int pass = 0; pass < 2 && d; pass++) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!is_record_(e->d_name))
                continue;
            char path[PATH_MAX + NAME_MAX + 2], err[256];
            snprintf(path, sizeof path, "%s/%s", job, e->d_name);
            FILE *f = fopen(path, "r");
            struct flight_record *rec = malloc(sizeof *rec);
            if (!f || !rec || flight_read(f, rec, err, sizeof err) < 0) {
                fprintf(stderr, "vgpu-flight: %s: %s\n", path,
                        !f ? strerror(errno) : !rec ? "out of memory" : err);
                bad = 1;
                free(rec);
                if (f)
                    fclose(f);
                continue;
            }
            fclose(f);
            if (!recs) {
                size = rec->size;
                recs = calloc((size_t)size, sizeof *recs);
            }
            if (!recs || rec->size != size) {
                fprintf(stderr, "vgpu-flight: %s: a job of %d ranks, the others of %d: records "
                                "of two jobs?\n", path, rec->size, size);
                free(rec);
                bad = 1;
                continue;
            }
            free(recs[rec->rank]); // one record a rank (two: a rank's pid changed; keep the last)
            recs[rec->rank] = rec;
            found++;
        }
        closedir(d);
        d = NULL;
        // Given the parent of jobs: the newest job.
        if (!found && pass == 0 && newest_job_(dir, job, sizeof job) == 0)
            d = opendir(job);
    }
    if (!found) {
        fprintf(stderr, "vgpu-flight: no flight records (*.flight) in %s\n", dir);
        return 2;
    }
    printf("flight records: %s (%d of %d ranks)\n", job, found, size);
    printf("flight recorder: ");
    int stuck = flight_verdict((const struct flight_record *const *)recs, size, stdout);
    int looks = 0;
    for (int r = 0; r < size; r++)
        looks += recs[r] && strcmp(recs[r]->reason, "SIGUSR2") == 0;
    if (looks == found)
        printf("(every record is a look at a running job, SIGUSR2: ranks a collective apart "
               "were passing, not stuck)\n");
    for (int r = 0; last > 0 && r < size; r++) {
        if (!recs[r])
            continue;
        printf("rank %d (%s, pid %d, %s; record written by rank %d on %s):\n", r, recs[r]->host,
               recs[r]->pid, recs[r]->process, recs[r]->written_by, recs[r]->reason);
        flight_print_last(recs[r], last, stdout);
    }
    for (int r = 0; r < size; r++)
        free(recs[r]);
    free(recs);
    return bad ? 2 : stuck ? EXIT_STUCK : 0;
}
