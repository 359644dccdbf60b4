// train_report.c: what a run tells its user: progress lines (or a bar), the
// evaluation after each epoch, the --metrics CSV, and the summary line.
#include "train_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "env.h"
#include "log.h"
#include "preempt.h"

#define MIB_ (1.0 / (1024.0 * 1024.0))

// Per-rank values for a log line, each times `scale` in format `fmt` (one
// double): "a,b,c" for up to 8 ranks, else "lo..hi".
static void format_ranks_(char *buf, size_t bytes, const double *v, int n, double scale,
                          const char *fmt)
{
    char one[64];
    buf[0] = '\0';
    if (n > 8) {
        double lo = v[0], hi = v[0];
        for (int r = 1; r < n; r++)
            lo = fmin(lo, v[r]), hi = fmax(hi, v[r]);
        snprintf(one, sizeof one, fmt, hi * scale);
        int len = snprintf(buf, bytes, fmt, lo * scale);
        if (len >= 0 && (size_t)len < bytes)
            snprintf(buf + len, bytes - (size_t)len, "..%s", one);
        return;
    }
    for (int r = 0, len = 0; r < n && len >= 0 && (size_t)len < bytes; r++) {
        snprintf(one, sizeof one, fmt, v[r] * scale);
        len += snprintf(buf + len, bytes - (size_t)len, "%s%s", r ? "," : "", one);
    }
}

// "6.3M,6.3M": per-rank peak device memory for progress lines (n > 8: the
// largest and its rank).
static void format_mem_(char *buf, size_t bytes, const double *peak_bytes, int n)
{
    if (n <= 8) {
        format_ranks_(buf, bytes, peak_bytes, n, MIB_, "%.1fM");
        return;
    }
    int at = 0;
    for (int r = 1; r < n; r++)
        at = peak_bytes[r] > peak_bytes[at] ? r : at;
    snprintf(buf, bytes, "max %.1fM (rank %d)", peak_bytes[at] * MIB_, at);
}

int train_report_prepare(struct trainer *t)
{
    const struct job *job = t->job;
    t->report.log_slots = calloc((size_t)model_metrics_of(&t->model)->n_stats + 1 + (size_t)job->size,
                                 sizeof *t->report.log_slots);
    if (!t->report.log_slots)
        return VGPU_ENOMEM;
    // Under mpirun a rank's stdout is a pseudo-terminal even when the user's
    // is a pipe, so the bar is drawn there only when the launcher says the
    // job's output is a terminal (vgpurun: VGPU_TERMINAL=1) or asked for
    // (VGPU_PROGRESS=bar).
    const int progress = t->env->progress;
    const int terminal = job->launched ? env_get()->terminal : isatty(STDOUT_FILENO);
    t->report.live = job->rank == 0 && !t->opts->quiet && (progress >= 0 ? progress == 1 : terminal);
    return 0;
}

void train_report_free(struct trainer *t)
{
    free(t->report.log_slots);
    t->report.log_slots = NULL;
    if (t->report.metrics)
        fclose(t->report.metrics);
    t->report.metrics = NULL;
}

void train_report_count(struct trainer *t, const double *stats, double rows)
{
    const int ns = model_metrics_of(&t->model)->n_stats;
    for (int k = 0; stats && k < ns; k++)
        t->report.window[k] += stats[k];
    t->report.window[ns] += rows;
}

void train_describe_split(const struct trainer *t, char *buf, size_t bytes)
{
    double total = 0;
    for (int r = 0; r < t->job->size; r++)
        total += t->balance.rows_total[r];
    buf[0] = '\0';
    if (total > 0)
        format_ranks_(buf, bytes, t->balance.rows_total, t->job->size,
                      (double)t->cfg->train.batch_size / total, "%.0f");
}

// Each row is flushed, so a killed run keeps what it logged. A write error
// (a full disk) is reported once, naming the file; no row is written after
// it, training goes on (its result is still worth having), and the run ends
// with VGPU_EIO (train_close_metrics).
static void metrics_flush_(struct trainer *t)
{
    if (fflush(t->report.metrics) == 0 && !ferror(t->report.metrics))
        return;
    t->report.metrics_errno = errno ? errno : EIO;
    log_error("metrics: writing %s failed at step %ld: %s; rows from there on are lost",
              t->opts->metrics_path, t->step, strerror(t->report.metrics_errno));
}

// The CSV's header: "kind,epoch,step,lr", the model's columns (the MLP's:
// loss,accuracy,top5), "samples_per_s,elapsed_s" (v1 ended there); v2's
// train rows add rank 0's step-time breakdown over their window (ms per step).
static void metrics_header_(const struct trainer *t, char *v1, char *v2, size_t bytes)
{
    char columns[256];
    model_metrics_format(columns, sizeof columns, model_metrics_of(&t->model), NULL,
                         METRICS_CSV_HEADER);
    snprintf(v1, bytes, "kind,epoch,step,lr%s,samples_per_s,elapsed_s\n", columns);
    snprintf(v2, bytes, "kind,epoch,step,lr%s,samples_per_s,elapsed_s,compute_ms,wait_ms,move_ms,"
             "optim_ms\n", columns);
}

int train_open_metrics(struct trainer *t, const char *path, int resuming)
{
    char header_v1[384], header[384];
    metrics_header_(t, header_v1, header, sizeof header);
    // A resumed run continues the file its first part wrote (a `resume` row
    // marks the seam, train_metrics_resumed); a new run starts it afresh.
    t->report.metrics = fopen(path, resuming ? "a+" : "w");
    if (!t->report.metrics) {
        log_error("cannot write metrics to %s: %s", path, strerror(errno));
        return VGPU_ECONFIG; // a bad --metrics path: exit 2, as other bad input
    }
    char first[sizeof header + 1] = "";
    if (resuming && fgets(first, sizeof first, t->report.metrics) &&
        strcmp(first, header_v1) == 0) {
        log_error("--metrics %s was written by an older vgpu_train (no step-time columns); "
                  "give the resumed run a new file",
                  path);
        fclose(t->report.metrics);
        t->report.metrics = NULL;
        return VGPU_ECONFIG;
    }
    if (resuming && first[0] && strcmp(first, header) != 0) {
        log_error("--metrics %s: the file exists and is not a vgpu_train metrics CSV (its first "
                  "line is not the header); name another file", path);
        fclose(t->report.metrics);
        t->report.metrics = NULL;
        return VGPU_ECONFIG;
    }
    if (!first[0]) // new or empty
        fputs(header, t->report.metrics);
    metrics_flush_(t);
    return t->report.metrics_errno ? VGPU_EIO : 0;
}

void train_metrics_resumed(struct trainer *t, long epoch)
{
    if (!t->report.metrics || t->report.metrics_errno)
        return;
    // Rows of the first part past this step were not kept by the
    // checkpoint: the resumed run's rows after this one replace them.
    char empty[64];
    model_metrics_format(empty, sizeof empty, model_metrics_of(&t->model), NULL,
                         METRICS_CSV_EMPTY);
    fprintf(t->report.metrics, "resume,%ld,%ld,%.6g%s,,0.000,,,,\n", epoch + 1, t->step,
            optim_lr_at(t->cfg, t->step, t->total_steps), empty);
    metrics_flush_(t);
}

int train_close_metrics(struct trainer *t)
{
    if (!t->report.metrics)
        return 0;
    if (fclose(t->report.metrics) != 0 && !t->report.metrics_errno) {
        t->report.metrics_errno = errno;
        log_error("metrics: closing %s failed: %s", t->opts->metrics_path, strerror(errno));
    }
    t->report.metrics = NULL;
    return t->report.metrics_errno ? VGPU_EIO : 0;
}

// Columns of the terminal the bar is drawn on: COLUMNS (the launchers export
// their terminal's), else the terminal's own size, else 80.
static int terminal_columns_(void)
{
    const char *env = getenv("COLUMNS");
    int cols = env ? atoi(env) : 0;
    struct winsize ws;
    if (cols <= 0 && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0)
        cols = ws.ws_col;
    return cols >= 20 ? cols : 80;
}

// "1:05:09" or "5:09".
static void format_duration_(char *buf, size_t bytes, double seconds)
{
    long s = seconds > 0 && seconds < 1e8 ? (long)(seconds + 0.5) : 0;
    if (s >= 3600)
        snprintf(buf, bytes, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(buf, bytes, "%ld:%02ld", s / 60, s % 60);
}

// One frame of the bar, redrawn in place: cut to the terminal's width (a
// frame that wraps cannot be redrawn and the frames pile up) and cleared to
// the end of the line; fixed-width fields, so nothing shifts between frames.
static void draw_bar_(struct trainer *t, long epoch, double lr, const double *values,
                      double sps, const char *mem)
{
    const long total = t->total_steps ? t->total_steps : 1;
    const double run_steps = (double)(t->step - t->start_step);
    const double eta = run_steps > 0 ? t->train_seconds * (double)(total - t->step) / run_steps : 0;
    char bar[16], elapsed[48], left[48], line[512];
    const int width = 12, done = (int)(width * t->step / total);
    for (int i = 0; i < width; i++)
        bar[i] = i < done ? '#' : '.';
    bar[width] = '\0';
    format_duration_(elapsed, sizeof elapsed, t->train_seconds);
    format_duration_(left, sizeof left, eta);
    // The fields in order of use; at a narrow terminal whole fields are left
    // out from the tail (a field cut in the middle reads as a bare "lr").
    char digits[24], field[7 + MODEL_MAX_METRICS][128];
    const int step_w = snprintf(digits, sizeof digits, "%ld", total);
    const int epoch_w = snprintf(digits, sizeof digits, "%ld", t->cfg->train.epochs);
    int n = 0;
    snprintf(field[n++], sizeof field[0], "[%s] %3d%%", bar, (int)(100 * t->step / total));
    snprintf(field[n++], sizeof field[0], "epoch %*ld/%ld", epoch_w, epoch + 1,
             t->cfg->train.epochs);
    snprintf(field[n++], sizeof field[0], "step %*ld/%ld", step_w, t->step, total);
    const struct model_metrics *mm = model_metrics_of(&t->model);
    for (int i = 0; i < mm->n_metrics; i++) // the model's training figures ("loss", "acc")
        if (mm->metric[i].train)
            snprintf(field[n++], sizeof field[0], "%.40s %.4f", mm->metric[i].train, values[i]);
    snprintf(field[n++], sizeof field[0], "%s<%s", elapsed, left);
    snprintf(field[n++], sizeof field[0], "%7.0f samples/s", sps);
    snprintf(field[n++], sizeof field[0], "lr %.2e", lr);
    snprintf(field[n++], sizeof field[0], "mem %.100s", mem);
    const int cols = terminal_columns_() - 1; // the last column would wrap on some terminals
    int len = 0;
    line[0] = '\0';
    for (int i = 0; i < n; i++) {
        const int need = (len ? 1 : 0) + (int)strlen(field[i]);
        if (len + need > cols || len + need >= (int)sizeof line)
            break;
        len += snprintf(line + len, sizeof line - (size_t)len, "%s%s", len ? " " : "", field[i]);
    }
    printf("\r%s\033[K", line);
    t->report.bar_open = 1;
}

// Ends the bar's line, so what is printed next starts on a line of its own.
static void close_bar_(struct trainer *t)
{
    if (t->report.bar_open)
        putchar('\n');
    t->report.bar_open = 0;
}

// Clears the bar's line for what is printed next (an epoch's eval line,
// which says what the bar said): the bar is redrawn below it, so the
// terminal keeps one line an epoch, not two.
static void clear_bar_(struct trainer *t)
{
    if (t->report.bar_open)
        printf("\r\033[K");
    t->report.bar_open = 0;
}

// Rank 0's progress output for one window: a bar on a terminal, else a line.
static void print_progress_(struct trainer *t, long epoch, double lr, int final,
                            const double *values, double sps, const double *peaks)
{
    const int n = t->job->size;
    char mem[256], split[160] = "", figures[256];
    format_mem_(mem, sizeof mem, peaks, n);
    if (t->report.live) {
        draw_bar_(t, epoch, lr, values, sps, mem);
        if (final && t->step >= t->total_steps) // the run's last bar stays; an epoch's
            close_bar_(t);                      // gives way to its eval line
    } else {
        if (t->balance.on) {
            double counts[TRAIN_MAX_RANKS];
            for (int r = 0; r < n; r++)
                counts[r] = (double)t->balance.balancer.counts[r];
            memcpy(split, "  split ", 9);
            format_ranks_(split + 8, sizeof split - 8, counts, n, 1.0, "%.0f");
        }
        model_metrics_format(figures, sizeof figures, model_metrics_of(&t->model), values,
                             METRICS_PROGRESS);
        printf("epoch %3ld  step %6ld/%-6ld%s  lr %.2e  %8.0f samples/s  mem %s%s\n", epoch + 1,
               t->step, t->total_steps, figures, lr, sps, mem, split);
    }
    fflush(stdout);
}

int train_log_progress(struct trainer *t, long epoch, double lr, int final)
{
    const int n = t->job->size;
    const struct model_metrics *mm = model_metrics_of(&t->model);
    const int w = mm->n_stats + 1; // the window: statistics, then rows
    double *sums = t->report.log_slots;
    memset(sums, 0, ((size_t)w + (size_t)n) * sizeof *sums);
    memcpy(sums, t->report.window, (size_t)w * sizeof *sums);
    sums[w + t->job->rank] = (double)job_peak_bytes(t->dev);
    job_sum_doubles(t->job, sums, w + n);
    memset(t->report.window, 0, sizeof t->report.window);
    const double rows = sums[mm->n_stats];
    if (rows == 0) { // nothing new since the last frame; the run's last bar still ends
        if (final && t->job->rank == 0 && t->step >= t->total_steps)
            close_bar_(t);
        return 0;
    }
    double values[MODEL_MAX_METRICS];
    model_metrics_values(mm, sums, rows, values);
    const double loss = values[0];
    double sps = t->train_seconds > 0 ? t->samples_done / t->train_seconds : 0;
    t->report.last_loss = loss;
    if (t->job->rank != 0)
        return 0;
    if (!isfinite(loss) && !t->report.warned_nonfinite) {
        t->report.warned_nonfinite = 1;
        log_warn("training loss is %g at step %ld: the model diverged (a lower train.lr or more "
                 "train.warmup_steps may help)", loss, t->step);
    }
    if (t->report.metrics && !t->report.metrics_errno) {
        // Rank 0's breakdown over the steps since the last row.
        const struct step_clock *now = &t->clock, *mark = &t->report.clock_mark;
        const double steps = now->steps > mark->steps ? (double)(now->steps - mark->steps) : 1;
        const double comm = now->comm_s - mark->comm_s;
        const double wait = now->wait_s - mark->wait_s;
        const double inside = now->optim_in_comm_s - mark->optim_in_comm_s;
        char wait_ms[32] = "", figures[256];
        if (now->wait_known)
            snprintf(wait_ms, sizeof wait_ms, "%.3f", 1e3 * wait / steps);
        model_metrics_format(figures, sizeof figures, mm, values, METRICS_CSV_TRAIN);
        fprintf(t->report.metrics, "train,%ld,%ld,%.6g%s,%.1f,%.3f,%.3f,%s,%.3f,%.3f\n",
                epoch + 1, t->step, lr, figures, sps, t->train_seconds,
                1e3 * (now->compute_s - mark->compute_s) / steps, wait_ms,
                1e3 * fmax(0, comm - wait - inside) / steps,
                1e3 * (now->optim_s - mark->optim_s) / steps);
        metrics_flush_(t);
        t->report.clock_mark = t->clock;
    }
    if (!t->opts->quiet)
        print_progress_(t, epoch, lr, final, values, sps, sums + w);
    return 0;
}

void train_report_eval(struct trainer *t, const struct train_result *res, long number, double lr)
{
    if (t->job->rank != 0)
        return;
    clear_bar_(t);
    const struct model_metrics *mm = model_metrics_of(&t->model);
    char figures[256];
    if (!t->opts->quiet) {
        model_metrics_format(figures, sizeof figures, mm, res->eval, METRICS_EVAL);
        printf("eval  epoch %3ld%s\n", number, figures);
    }
    if (t->report.metrics && !t->report.metrics_errno) {
        model_metrics_format(figures, sizeof figures, mm, res->eval, METRICS_CSV_EVAL);
        fprintf(t->report.metrics, "eval,%ld,%ld,%.6g%s,,%.3f,,,,\n", number, t->step, lr,
                figures, t->train_seconds);
        metrics_flush_(t);
    }
    fflush(stdout);
}

// One rank's step breakdown as "C/W/M/O@rR" (W "-" where the backend cannot
// tell waiting from moving).
static void format_breakdown_(char *buf, size_t bytes, const struct step_breakdown *b, int rank)
{
    char wait[32] = "-";
    if (b->wait_known)
        snprintf(wait, sizeof wait, "%.2f", b->wait_ms);
    snprintf(buf, bytes, "%.2f/%s/%.2f/%.2f@r%d", b->compute_ms, wait, b->move_ms, b->optim_ms,
             rank);
}

// The ranks whose own work (compute and optimizer) per step is the largest
// and the smallest: the one the others wait for, and the one that waits most.
static void slowest_fastest_(const struct step_breakdown *t, int n, int *slow, int *fast)
{
    *slow = *fast = 0;
    for (int r = 1; r < n; r++) {
        const double w = t[r].compute_ms + t[r].optim_ms;
        if (w > t[*slow].compute_ms + t[*slow].optim_ms)
            *slow = r;
        if (w < t[*fast].compute_ms + t[*fast].optim_ms)
            *fast = r;
    }
}

// When collectives take most of a step, what limits it, in one line: ranks
// outnumbering the cores of a machine they share (each waits while the
// others compute: network-namespace hosts of one machine included), or the
// data that crosses hosts, at the rate it achieved.
static void print_limit_(const struct step_breakdown *t, int n, int slow)
{
    const struct step_breakdown *b = &t[slow];
    if (n < 2 || b->exposed_ms <= b->compute_ms + b->optim_ms)
        return;
    int most = 0, cores = 0, at = 0; // the machine most over its cores
    for (int r = 0; r < n; r++) {
        int k = 0;
        for (int q = 0; q < n; q++)
            k += t[q].machine == t[r].machine;
        if (t[r].cores > 0 && (double)k / t[r].cores > (cores ? (double)most / cores : 0)) {
            most = k;
            cores = t[r].cores;
            at = r;
        }
    }
    if (cores && most > cores) {
        printf("vgpu_train: mostly waiting: %d ranks share the %d cores of rank %d's machine\n",
               most, cores, at);
    } else if (b->hosts > 1 && b->move_ms > b->wait_ms && b->move_ms > 0) {
        // A ring moves 2(n-1)/n of the payload through each rank.
        const double mb = b->comm_kib * 1024.0 * 2.0 * (n - 1) / n / 1e6;
        printf("vgpu_train: mostly moving data: %.2f MB a step across %d hosts at %.0f MB/s\n",
               mb, b->hosts, mb / (b->move_ms / 1e3));
    }
}

// Rank 0's table of where a step's time went, slowest and fastest rank.
static void print_breakdown_(const struct step_breakdown *t, int n, int slow, int fast, long steps)
{
    // Columns under their names, within 80 columns.
    char head[96];
    const int head_w = snprintf(head, sizeof head, "vgpu_train: ms a step over %ld steps", steps);
    printf("%s %8s %8s %8s %9s\n", head, "compute", "waiting", "moving", "optimizer");
    const int ranks[2] = {slow, fast};
    const char *what[2] = {"slowest", "fastest"};
    for (int i = 0; i < (n > 1 ? 2 : 1); i++) {
        const struct step_breakdown *b = &t[ranks[i]];
        char wait[32] = "-", who[48];
        if (b->wait_known)
            snprintf(wait, sizeof wait, "%.2f", b->wait_ms);
        snprintf(who, sizeof who, "  %s%srank %d", n > 1 ? what[i] : "", n > 1 ? " " : "", ranks[i]);
        printf("%-*s %8.2f %8s %8.2f %9.2f\n", head_w, who, b->compute_ms, wait, b->move_ms,
               b->optim_ms);
    }
    // Overlapped, waiting and moving happened beside the compute: what the
    // step itself waited for is the exposed part.
    if (t[slow].buckets)
        printf("vgpu_train: exposed communication %.2f ms a step (rank %d), %.2f (rank %d); "
               "%d buckets\n", t[slow].exposed_ms, slow, t[fast].exposed_ms, fast,
               t[slow].buckets);
    print_limit_(t, n, slow);
}

int train_print_summary(struct job *job, const struct train_result *res, int verdict,
                        const struct train_options *opts, double wall_s)
{
    const char *status = verdict == 0                 ? "ok"
                         : verdict == VGPU_EPREEMPTED ? "preempted"
                         : verdict == VGPU_EMISMATCH  ? (opts->verify ? "verify_failed" : "diverged")
                         : verdict == VGPU_EIO        ? "metrics_lost"
                                                      : NULL;
    double *peaks = malloc((size_t)job->size * sizeof *peaks);
    struct step_breakdown *times = malloc((size_t)job->size * sizeof *times);
    int rc = peaks && times ? 0 : VGPU_ENOMEM;
    rc = job_agree_min(job, rc);
    if (rc == 0) {
        double peak = (double)job_peak_bytes(job->v);
        job_gather_all(job, &peak, peaks, sizeof peak);
        job_gather_all(job, &res->time, times, sizeof res->time);
    }
    char step_ms[224] = "";
    if (rc == 0 && job->rank == 0 && status) {
        int slow, fast;
        slowest_fastest_(times, job->size, &slow, &fast);
        char a[72], b[72];
        format_breakdown_(a, sizeof a, &times[slow], slow);
        format_breakdown_(b, sizeof b, &times[fast], fast);
        char exposed[48] = "";
        if (job->size > 1)
            snprintf(exposed, sizeof exposed, ",%.2f", times[fast].exposed_ms);
        snprintf(step_ms, sizeof step_ms, " step_ms=%s%s%s exposed_ms=%.2f%s", a,
                 job->size > 1 ? "," : "", job->size > 1 ? b : "", times[slow].exposed_ms,
                 exposed);
        if (!opts->quiet && res->steps > 0)
            print_breakdown_(times, job->size, slow, fast, res->steps);
    }
    if (rc == 0 && job->rank == 0 && status) {
        // One token per field (key=value, no spaces): "a,b,c", or "lo..hi"
        // past 8 ranks; epochs whole, or to two places when a run stopped
        // inside one.
        char mem[256], epochs[32], figures[256] = "";
        format_ranks_(mem, sizeof mem, peaks, job->size, MIB_, "%.1fM");
        if (res->metrics) // the model's own (the MLP's: test_loss, test_acc)
            model_metrics_format(figures, sizeof figures, res->metrics, res->eval,
                                 METRICS_SUMMARY);
        snprintf(epochs, sizeof epochs, res->epochs == floor(res->epochs) ? "%.0f" : "%.2f",
                 res->epochs);
        printf("vgpu_train: done ranks=%d devices=%dx%s/%dvgpu backend=%s data=%s epochs=%s "
               "steps=%ld "
               "train_loss=%.4f%s samples_per_s=%.0f wall_s=%.1f%s "
               "peak_mem=%s%s%s params_crc=%08x status=%s\n",
               job->size, vgpu_physical_device_count(job->v),
               vgpu_is_simulated(job->v) ? "cuda-sim" : vgpu_device_kind(job->v),
               job->size,
               vgpu_backend(job->v), res->data ? res->data : "?", epochs, res->steps,
               res->train_loss, figures, res->samples_per_s, wall_s, step_ms, mem,
               res->split[0] ? " split=" : "", res->split, res->params_crc, status);
        fflush(stdout);
    }
    free(peaks);
    free(times);
    return rc;
}

int train_agreed_stop_signal(struct job *job)
{
    // Minus the largest: any rank's signal (mpirun passes the same one to all).
    return -job_agree_min(job, -preempt_signal());
}

// When the stop is plain mpirun ending the job (it was signalled itself):
// the run stopped in order, but mpirun's exit status will be 1, not 75, and
// the ranks have a second before its SIGKILL. Said, with the ways to a 75.
static void say_if_mpirun_ends_job_(void)
{
    if (!preempt_from_mpi_launcher())
        return;
    printf("vgpu_train: the stop came from mpirun (SIGTERM from pid %d), which was signalled "
           "itself: it exits 1 whatever the ranks do and kills them a second later (Open MPI); "
           "for exit 75 send mpirun SIGUSR1, or launch with scripts/mpirun.sh or vgpurun\n",
           preempt_sender());
}

void train_report_preempted(struct trainer *t, const char *path, int sig)
{
    close_bar_(t);
    printf("vgpu_train: preempted at step %ld (signal %s); checkpoint %s; resumable: --resume %s\n",
           t->step, preempt_signal_name(sig), path, path);
    say_if_mpirun_ends_job_();
    fflush(stdout);
}

int train_stop_vote(void)
{
    return preempt_requested() ? VGPU_EPREEMPTED : 0;
}

void train_report_early_stop(struct job *job)
{
    const int sig = train_agreed_stop_signal(job);
    if (job->rank != 0)
        return;
    printf("vgpu_train: stopped before the first step (signal %s); nothing new to checkpoint\n",
           preempt_signal_name(sig));
    say_if_mpirun_ends_job_();
    fflush(stdout);
}
