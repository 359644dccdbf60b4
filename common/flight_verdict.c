// flight_verdict.c: what a job's flight records say (flight.h): the first
// collective that not every rank entered, or the one every rank entered and
// not all finished, who holds it up, and each rank's last doing.
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "flight.h"

// A rank's most recent entry, NULL when it entered none.
static const struct flight_entry_copy *last_(const struct flight_record *rec)
{
    return rec && rec->count ? &rec->entries[rec->count - 1] : NULL;
}

static const struct flight_entry_copy *find_(const struct flight_record *rec, uint64_t seq)
{
    for (int i = rec ? rec->count - 1 : -1; i >= 0; i--)
        if (rec->entries[i].seq == seq)
            return &rec->entries[i];
    return NULL;
}

static int unfinished_(const struct flight_entry_copy *e)
{
    return e && e->state != FLIGHT_DONE;
}

static int not_running_(const struct flight_record *rec)
{
    return rec && (strcmp(rec->process, "stopped") == 0 || strcmp(rec->process, "dead") == 0);
}

// "rank 2" or "ranks 0-3, 5" for the ranks r with pick[r].
static void ranks_(FILE *out, const char *pick, int size)
{
    int n = 0;
    for (int r = 0; r < size; r++)
        n += pick[r] != 0;
    fputs(n == 1 ? "rank " : "ranks ", out);
    const char *sep = "";
    for (int r = 0; r < size; r++) {
        if (!pick[r])
            continue;
        int end = r;
        while (end + 1 < size && pick[end + 1])
            end++;
        if (end > r + 1)
            fprintf(out, "%s%d-%d", sep, r, end);
        else if (end == r + 1)
            fprintf(out, "%s%d, %d", sep, r, end);
        else
            fprintf(out, "%s%d", sep, r);
        sep = ", ";
        r = end;
    }
}

// ranks_, then what is known of those not running: "rank 2 (stopped)",
// "ranks 2, 3 (rank 2 stopped)".
static void ranks_noted_(FILE *out, const char *pick, int size,
                         const struct flight_record *const *recs)
{
    ranks_(out, pick, size);
    int n = 0, noted = 0;
    for (int r = 0; r < size; r++)
        n += pick[r] != 0;
    for (int r = 0; r < size; r++) {
        if (!pick[r] || !not_running_(recs[r]))
            continue;
        if (n == 1)
            fprintf(out, " (%s)", recs[r]->process);
        else
            fprintf(out, "%srank %d %s", noted ? ", " : " (", r, recs[r]->process);
        noted++;
    }
    if (n > 1 && noted)
        fputc(')', out);
}

// Who holds up the ranks in `waiting` (each at its last collective): a rank
// stopped or dead explains every wait, so when there is one, those alone
// (the wait chain past it is its effect, and naming more ranks would name
// innocent ones); else the ranks waited for that are not themselves waiting
// (one computing inside a collective, spinning past the recorder's notice).
static void holders_(const struct flight_record *const *recs, int size, const char *waiting,
                     char *holders)
{
    int stopped = 0;
    for (int r = 0; r < size; r++)
        stopped += holders[r] = not_running_(recs[r]);
    if (stopped)
        return;
    for (int r = 0; r < size; r++) {
        const struct flight_entry_copy *mine = recs[r] ? last_(recs[r]) : NULL;
        if (!waiting[r] || !unfinished_(mine) || mine->peer < 0 || mine->peer >= size)
            continue;
        // A rank that failed waiting for someone was waiting too.
        const struct flight_entry_copy *theirs = recs[mine->peer] ? last_(recs[mine->peer]) : NULL;
        if (!theirs || theirs->peer < 0 ||
            (theirs->state != FLIGHT_WAITING && theirs->state != FLIGHT_FAILED))
            holders[mine->peer] = 1;
    }
}

static int any_(const char *pick, int size)
{
    for (int r = 0; r < size; r++)
        if (pick[r])
            return 1;
    return 0;
}

static void seconds_(FILE *out, uint64_t from_us, uint64_t to_us)
{
    fprintf(out, "%.3f s", to_us > from_us ? (double)(to_us - from_us) / 1e6 : 0.0);
}

static void doing_(const struct flight_record *rec, FILE *out)
{
    const struct flight_entry_copy *e = last_(rec);
    if (!e) {
        fprintf(out, "no collective yet (%s)", flight_phase_name(rec->phase));
        return;
    }
    if (e->state == FLIGHT_DONE) {
        fprintf(out, "last #%" PRIu64 " %s (%" PRIu64 " bytes), finished ", e->seq,
                flight_kind_name(e->kind), e->bytes);
        seconds_(out, e->end_us, rec->at_us);
        fputs(" before this record", out);
        if (rec->phase != FLIGHT_PHASE_NONE && rec->phase_us >= e->end_us)
            fprintf(out, "; since then in %s", flight_phase_name(rec->phase));
        return;
    }
    fprintf(out, "%s #%" PRIu64 " %s (%" PRIu64 " bytes) ",
            e->state == FLIGHT_FAILED ? "failed in" : "in", e->seq, flight_kind_name(e->kind),
            e->bytes);
    if (e->state == FLIGHT_FAILED) {
        fputs("after ", out);
        seconds_(out, e->start_us, e->end_us);
    } else {
        fputs("for ", out);
        seconds_(out, e->start_us, rec->at_us);
    }
    if (e->peer >= 0)
        fprintf(out, ", waiting for rank %d", e->peer);
}

static void rank_line_(const struct flight_record *rec, int r, FILE *out)
{
    if (!rec) {
        fprintf(out, "  rank %d: no record\n", r);
        return;
    }
    fprintf(out, "  rank %d (%s, pid %d%s%s", r, rec->host[0] ? rec->host : "?", rec->pid,
            not_running_(rec) ? ", " : "", not_running_(rec) ? rec->process : "");
    if (rec->step > 0)
        fprintf(out, ", step %" PRId64, rec->step);
    fputs("): ", out);
    doing_(rec, out);
    fputc('\n', out);
}

// The ranks' entries for seq must agree on what the call was.
static int disagree_(const struct flight_record *const *recs, int size, uint64_t seq, FILE *out)
{
    const struct flight_entry_copy *first = NULL;
    int differ = 0;
    for (int r = 0; r < size; r++) {
        const struct flight_entry_copy *e = find_(recs[r], seq);
        if (!e)
            continue;
        if (!first)
            first = e;
        else if (e->kind != first->kind || e->bytes != first->bytes)
            differ = 1;
    }
    if (!differ)
        return 0;
    fprintf(out, "the ranks disagree on collective #%" PRIu64 ":", seq);
    for (int r = 0; r < size; r++) {
        const struct flight_entry_copy *e = find_(recs[r], seq);
        if (e)
            fprintf(out, " rank %d %s %" PRIu64 " bytes;", r, flight_kind_name(e->kind), e->bytes);
    }
    fputs(" every rank must call the same collectives in the same order", out);
    return 1;
}

int flight_verdict(const struct flight_record *const *recs, int size, FILE *out)
{
    if (size <= 0)
        return 0;
    char *absent = calloc((size_t)size * 3, 1);
    if (!absent) {
        fputs("flight verdict: out of memory\n", out);
        return 0;
    }
    char *missing = absent + size, *holders = missing + size;
    int present = 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int r = 0; r < size; r++) {
        if (!recs[r]) {
            absent[r] = 1;
            continue;
        }
        present++;
        const struct flight_entry_copy *e = last_(recs[r]);
        const uint64_t seq = e ? e->seq : 0;
        lo = seq < lo ? seq : lo;
        hi = seq > hi ? seq : hi;
    }
    int stuck = 0;
    if (!present) {
        fputs("no flight records\n", out);
    } else if (lo < hi) {
        // Someone is at lo while others went on: lo + 1 is where they part.
        const uint64_t s = lo + 1;
        if (!(stuck = disagree_(recs, size, s, out))) {
            const struct flight_entry_copy *e = NULL;
            for (int r = 0; r < size; r++) {
                const struct flight_entry_copy *last = last_(recs[r]);
                if (recs[r] && (last ? last->seq : 0) < s)
                    missing[r] = 1;
                else if (!e)
                    e = find_(recs[r], s);
            }
            fprintf(out, "collective #%" PRIu64, s);
            if (e)
                fprintf(out, " (%s, %" PRIu64 " bytes)", flight_kind_name(e->kind), e->bytes);
            fputs(" was not entered by ", out);
            ranks_noted_(out, missing, size, recs);
            fputs("; the others entered it", out);
            // Several behind: the one that holds them up, when it is not
            // simply all of them (a stopped rank among them, say).
            holders_(recs, size, missing, holders);
            if (any_(holders, size) && memcmp(holders, missing, (size_t)size) != 0) {
                fputs("; held up by ", out);
                ranks_noted_(out, holders, size, recs);
            }
            stuck = 1;
        }
    } else if (lo == 0) {
        fputs("no collective was entered yet", out);
    } else if (!(stuck = disagree_(recs, size, lo, out))) {
        char *open = calloc((size_t)size, 1);
        for (int r = 0; open && r < size; r++)
            open[r] = unfinished_(last_(recs[r]));
        const struct flight_entry_copy *e = NULL;
        for (int r = 0; r < size && !e; r++)
            e = last_(recs[r]);
        if (open && any_(open, size)) {
            // Who holds it up: a stopped or dead rank, or a rank waited for
            // that is not itself waiting.
            holders_(recs, size, open, holders);
            fprintf(out, "every rank%s entered collective #%" PRIu64 " (%s, %" PRIu64
                         " bytes); it has not finished on ",
                    any_(absent, size) ? " with a record" : "", lo, flight_kind_name(e->kind),
                    e->bytes);
            ranks_(out, open, size);
            if (any_(holders, size)) {
                fputs("; held up by ", out);
                ranks_noted_(out, holders, size, recs);
            }
            stuck = 1;
        } else {
            fprintf(out, "no collective is stuck: every rank%s finished collective #%" PRIu64 " (%s)",
                    any_(absent, size) ? " with a record" : "", lo, flight_kind_name(e->kind));
        }
        free(open);
    }
    if (present && any_(absent, size)) {
        fputs("; no record of ", out);
        ranks_(out, absent, size);
    }
    if (present)
        fputc('\n', out);
    for (int r = 0; present && r < size; r++)
        if (size <= 16 || missing[r] || holders[r] || (recs[r] && unfinished_(last_(recs[r]))))
            rank_line_(recs[r], r, out);
    free(absent);
    return stuck;
}

void flight_print_last(const struct flight_record *rec, int n, FILE *out)
{
    for (int i = rec->count > n ? rec->count - n : 0; i < rec->count; i++) {
        const struct flight_entry_copy *e = &rec->entries[i];
        fprintf(out, "  #%" PRIu64 " %s %" PRIu64 " bytes %s", e->seq, flight_kind_name(e->kind),
                e->bytes, flight_state_name(e->state));
        if (e->state == FLIGHT_DONE || e->state == FLIGHT_FAILED) {
            fputs(" in ", out);
            seconds_(out, e->start_us, e->end_us);
        } else {
            fputs(" for ", out);
            seconds_(out, e->start_us, rec->at_us);
        }
        if (e->peer >= 0 && e->state != FLIGHT_DONE)
            fprintf(out, " (waiting for rank %d)", e->peer);
        fputc('\n', out);
    }
    if (!rec->count)
        fputs("  no collective yet\n", out);
}
