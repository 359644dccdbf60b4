#!/usr/bin/env bash
# plot_metrics.sh: a picture of a vgpu_train run from its --metrics CSV: loss
# and accuracy against step (train rows and eval rows), and throughput against
# time. Resumed runs plot as one (the resume rows mark the seams, drawn as
# vertical lines). With --trace (the run's --trace file), a fourth panel: a
# bar a rank of where its mean step went (scripts/trace_summary.py's columns).
# The title says what ran: --title TEXT, else the trace's job (ranks, backend,
# data) when --trace is given, with the steps and epochs the CSV covers. The
# throughput axis starts at 0, so that a few percent look like a few percent.
# Needs gnuplot (apt-get install gnuplot-nox); --trace needs python3.
# --script prints the gnuplot program (data included) instead of running it.
# Usage: scripts/plot_metrics.sh METRICS.csv [OUT.png] [--trace TRACE.json] [--title TEXT] [--script]
#        (default OUT: METRICS.png)
set -euo pipefail
usage() { echo "usage: scripts/plot_metrics.sh METRICS.csv [OUT.png] [--trace TRACE.json] [--title TEXT] [--script]" >&2; exit 2; }
args=() trace= title= script=0
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --trace) [ $# -ge 2 ] && [ -n "$2" ] || usage; trace=$2; shift 2 ;;
    --trace=*) trace=${1#--trace=}; [ -n "$trace" ] || usage; shift ;;
    --title) [ $# -ge 2 ] && [ -n "$2" ] || usage; title=$2; shift 2 ;;
    --title=*) title=${1#--title=}; [ -n "$title" ] || usage; shift ;;
    --script) script=1; shift ;;
    -*) usage ;;
    *) args+=("$1"); shift ;;
  esac
done
[ ${#args[@]} -ge 1 ] && [ ${#args[@]} -le 2 ] || usage
csv=${args[0]}
out=${args[1]:-${csv%.csv}.png}
[ -r "$csv" ] || { echo "plot_metrics: cannot read $csv" >&2; exit 2; }
header=$(head -n 1 "$csv")
# The first nine columns are those of every version (later ones add columns).
[[ $header == kind,epoch,step,lr,loss,accuracy,top5,samples_per_s,elapsed_s* ]] ||
  { echo "plot_metrics: $csv is not a vgpu_train metrics CSV (first line: $header)" >&2; exit 2; }
grep -q '^train,' "$csv" || { echo "plot_metrics: $csv has no train rows to plot" >&2; exit 2; }
command -v gnuplot >/dev/null ||
  { echo "plot_metrics: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }

panels=3 height=760 ranks_panel= job= ranks_data=
if [ -n "$trace" ]; then
  # trace_summary.py says what is wrong with the file (exit 2).
  ranks_data=$(python3 "$(dirname "$0")/trace_summary.py" "$trace" --tsv) || exit 2
  # The job, as vgpu_train named it in the trace ("vgpu_train V: 4 ranks, ring, fashion-mnist").
  job=$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])).get("otherData", {}); p = d.get("producer", ""); print(p.split(": ", 1)[1] if ": " in p else "%s ranks" % d.get("ranks", "?"))' "$trace" 2>/dev/null || true)
  panels=4 height=1000
  ranks_panel="\$ranks << EOD
$ranks_data
EOD
set datafile separator \"\\t\"
set autoscale x
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.6
set key outside right top autotitle columnheader
set xlabel \"rank\"
set ylabel \"ms per step\"
set yrange [0:*]
set title \"where each rank's step went (--trace $(basename "$trace"))\"
plot for [i=2:8] \$ranks using i:xtic(1)"
fi
# What the file covers: the last step and epoch it reached, and its resumes.
covers=$(awk -F, 'NR > 1 && ($1 == "train" || $1 == "eval") { step = $3; epoch = $2 } $1 == "resume" { r++ }
  END { printf "%d steps, epoch %d", step, epoch; if (r) printf ", resumed %d time%s", r, (r > 1 ? "s" : "") }' "$csv")
title=${title:-${job:+$job, }$covers}
title="vgpu_train: $title ($(basename "$csv"))"
title=${title//\\/\\\\} title=${title//\"/\\\"} # a gnuplot string: \ and " escaped
seams=$(awk -F, '$1 == "resume" { printf "set arrow from %s, graph 0 to %s, graph 1 nohead dt 2 lc rgb \"gray40\"\n", $3, $3 }' "$csv")
# Each kind of row in a block of its own: a train line drawn from the whole
# file would break at every eval row (an undefined point there), i.e. every
# epoch. The blocks make the program whole: --script prints it, to edit.
rows_of() { awk -F, -v kind="$1" 'NR > 1 && $1 == kind' "$csv"; }
program=$(cat <<GP
set terminal pngcairo size 800,$height font "sans,9" noenhanced
set output "${out//\"/\\\"}"
\$train << EOD
$(rows_of train)
EOD
\$eval << EOD
$(rows_of eval)
EOD
set datafile separator ","
set key top right
set grid
set multiplot layout $panels,1 title "$title"
$seams
set ylabel "loss"
set xlabel "step"
plot \$train using 3:5 with linespoints pt 7 ps 0.4 title "train", \\
     \$eval using 3:5 with linespoints pt 5 ps 0.8 title "eval (test set)"
set ylabel "accuracy"
set yrange [0:1]
set key bottom right
plot \$train using 3:6 with linespoints pt 7 ps 0.4 title "train", \\
     \$eval using 3:6 with linespoints pt 5 ps 0.8 title "eval (test set)"
unset arrow
set ylabel "samples/s"
set yrange [0:*]
set xlabel "training time (s)"
plot \$train using 9:8 with linespoints pt 7 ps 0.4 title "throughput (all ranks)"
$ranks_panel
unset multiplot
GP
)
if [ "$script" = 1 ]; then
  printf '%s\n' "$program"
  exit 0
fi
gnuplot <<<"$program"
echo "plot_metrics: wrote $out"
