#!/usr/bin/env python3
"""trace_summary.py: where each rank's training steps went, from a vgpu_train
--trace file (Chrome trace-event JSON).

Per rank, mean milliseconds per step in: data (the batch onto the device),
forward, backward, optimizer, wait (for a peer, inside the collectives), move
(the rest of the collectives: copying, reducing, sending), other (the rest of
the step). And for each step's collectives, which rank entered last: the one
the others waited for.

Usage: scripts/trace_summary.py TRACE.json [--tsv]
  --tsv   one line a rank, tab-separated (rank, then the columns above in ms),
          as scripts/plot_metrics.sh --trace draws them
Exit status: 0, or 2 when the file is not a vgpu trace.
"""
import bisect
import collections
import json
import sys

COLUMNS = ("data", "forward", "backward", "optimizer", "wait", "move", "other")
COMPUTE = {"data", "forward", "backward"}


def fail(msg):
    print(f"trace_summary: {msg}", file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    except ValueError as e:
        fail(f"{path} is not JSON ({e}); was the run cut off before it wrote the trace?")
    if not isinstance(doc, dict) or "traceEvents" not in doc or "clocks" not in doc.get("otherData", {}):
        fail(f"{path} is not a vgpu_train --trace file")
    return doc


class Rank:
    def __init__(self):
        self.steps = []  # (start, end, step number)
        self.spans = []  # every other complete event

    def index(self):
        """Sorts the steps and the collectives for the lookups below."""
        self.steps.sort()
        self.starts = [s[0] for s in self.steps]
        self.comm = sorted((e["ts"], e["ts"] + e["dur"]) for e in self.spans if is_collective(e))
        self.comm_starts = [c[0] for c in self.comm]

    def step_of(self, ts):
        """The index of the step whose span holds time ts, or None."""
        i = bisect.bisect_right(self.starts, ts) - 1
        if i >= 0 and ts <= self.steps[i][1]:
            return i
        return None

    def inside_comm(self, span):
        """Whether a span lies inside one of the rank's collectives."""
        i = bisect.bisect_right(self.comm_starts, span["ts"]) - 1
        return i >= 0 and span["ts"] + span["dur"] <= self.comm[i][1]


def is_collective(e):
    return e["cat"] == "comm" and "seq" in e.get("args", {})


def summarize(doc):
    ranks = collections.defaultdict(Rank)
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        r = ranks[e["pid"]]
        if e["name"] == "step":
            r.steps.append((e["ts"], e["ts"] + e["dur"], e["args"]["step"]))
        else:
            r.spans.append(e)
    table = {}
    # seq -> {rank: start}: the collectives made inside steps
    entered = collections.defaultdict(dict)
    for pid, r in ranks.items():
        r.index()
        sums = dict.fromkeys(COLUMNS, 0.0)
        comm = 0.0
        for e in r.spans:
            if r.step_of(e["ts"]) is None:
                continue
            name, dur = e["name"], e["dur"]
            if name in COMPUTE:
                sums[name] += dur
            elif name == "optimizer":
                sums["optimizer"] += dur
            elif name == "wait":
                sums["wait"] += dur
            elif is_collective(e):
                comm += dur
                entered[e["args"]["seq"]][pid] = e["ts"]
        # The optimizer runs inside the sharded all-reduce, and the waits
        # inside the collectives: what is left of them is moving data.
        inner = sum(e["dur"] for e in r.spans
                    if e["name"] == "optimizer" and r.step_of(e["ts"]) is not None
                    and r.inside_comm(e))
        sums["move"] = max(comm - sums["wait"] - inner, 0.0)
        total = sum(s[1] - s[0] for s in r.steps)
        sums["other"] = max(total - sum(sums[c] for c in COLUMNS if c != "other"), 0.0)
        n = len(r.steps) or 1
        table[pid] = {c: sums[c] / n / 1000.0 for c in COLUMNS}
        table[pid]["step"] = total / n / 1000.0
        table[pid]["steps"] = len(r.steps)
    last = collections.Counter()
    full = 0
    for seq, starts in entered.items():
        if len(starts) == len(ranks) and len(ranks) > 1:
            full += 1
            last[max(starts, key=starts.get)] += 1
    return table, last, full


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("-")]
    opts = [a for a in argv[1:] if a.startswith("-")]
    if "-h" in opts or "--help" in opts:
        print(__doc__.strip())
        return 0
    if len(args) != 1 or any(o != "--tsv" for o in opts):
        print("usage: scripts/trace_summary.py TRACE.json [--tsv]", file=sys.stderr)
        return 2
    doc = load(args[0])
    table, last, full = summarize(doc)
    if not table or not any(t["steps"] for t in table.values()):
        fail(f"{args[0]} has no training steps")
    if "--tsv" in opts:
        print("rank\t" + "\t".join(COLUMNS))
        for pid in sorted(table):
            print(f"{pid}\t" + "\t".join(f"{table[pid][c]:.4f}" for c in COLUMNS))
        return 0
    other = doc["otherData"]
    steps = max(t["steps"] for t in table.values())
    print(f"trace {args[0]}: {len(table)} ranks, {steps} steps, clocks aligned within "
          f"{other.get('clock_uncertainty_us', '?')} us, {other.get('dropped_spans', 0)} spans dropped")
    print("ms per step " + "".join(f"{c:>10}" for c in COLUMNS + ("step",)))
    for pid in sorted(table):
        print(f"rank {pid:<6} " + "".join(f"{table[pid][c]:10.3f}" for c in COLUMNS + ("step",)))
    if full:
        who, times = last.most_common(1)[0]
        print(f"last into a step's collective: rank {who} in {times} of {full} "
              f"({100.0 * times / full:.0f}%); " +
              ", ".join(f"rank {r} {n}" for r, n in sorted(last.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
