#!/usr/bin/env bash
# plot_metrics.sh: a picture of a vgpu_train run from its --metrics CSV: loss
# and accuracy against step (train rows and eval rows), and throughput against
# time. Resumed runs plot as one (the resume rows mark the seams, drawn as
# vertical lines). With --trace (the run's --trace file), a fourth panel: a
# bar a rank of where its mean step went (scripts/trace_summary.py's columns).
# Needs gnuplot (apt-get install gnuplot-nox); --trace needs python3.
# Usage: scripts/plot_metrics.sh METRICS.csv [OUT.png] [--trace TRACE.json]
#        (default OUT: METRICS.png)
set -euo pipefail
usage() { echo "usage: scripts/plot_metrics.sh METRICS.csv [OUT.png] [--trace TRACE.json]" >&2; exit 2; }
args=() trace=
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --trace) [ $# -ge 2 ] && [ -n "$2" ] || usage; trace=$2; shift 2 ;;
    --trace=*) trace=${1#--trace=}; [ -n "$trace" ] || usage; shift ;;
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

panels=3 height=760 ranks_panel=
if [ -n "$trace" ]; then
  tsv=$(mktemp /tmp/vgpu-plot.XXXXXX.tsv)
  trap 'rm -f "$tsv"' EXIT
  # trace_summary.py says what is wrong with the file (exit 2).
  python3 "$(dirname "$0")/trace_summary.py" "$trace" --tsv >"$tsv" || exit 2
  panels=4 height=1000
  ranks_panel="
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
plot for [i=2:8] \"$tsv\" using i:xtic(1)"
fi
title=$(basename "$csv")
seams=$(awk -F, '$1 == "resume" { printf "set arrow from %s, graph 0 to %s, graph 1 nohead dt 2 lc rgb \"gray40\"\n", $3, $3 }' "$csv")
gnuplot <<GP
set terminal pngcairo size 800,$height font "sans,9" noenhanced
set output "$out"
set datafile separator ","
set key top right
set grid
set multiplot layout $panels,1 title "vgpu_train: $title"
$seams
set ylabel "loss"
set xlabel "step"
plot "$csv" using 3:(strcol(1) eq "train" ? \$5 : 1/0) every ::1 with linespoints pt 7 ps 0.4 title "train", \
     "$csv" using 3:(strcol(1) eq "eval" ? \$5 : 1/0) every ::1 with linespoints pt 5 ps 0.8 title "eval (test set)"
set ylabel "accuracy"
set yrange [0:1]
set key bottom right
plot "$csv" using 3:(strcol(1) eq "train" ? \$6 : 1/0) every ::1 with linespoints pt 7 ps 0.4 title "train", \
     "$csv" using 3:(strcol(1) eq "eval" ? \$6 : 1/0) every ::1 with linespoints pt 5 ps 0.8 title "eval (test set)"
set yrange [*:*]
set key top right
unset arrow
set ylabel "samples/s"
set xlabel "training time (s)"
plot "$csv" using 9:(strcol(1) eq "train" ? \$8 : 1/0) every ::1 with linespoints pt 7 ps 0.4 title "throughput (all ranks)"
$ranks_panel
unset multiplot
GP
echo "plot_metrics: wrote $out"
