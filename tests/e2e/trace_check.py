#!/usr/bin/env python3
"""trace_check.py TRACE.json RANKS STEPS [--names a,b,...] [--same-clock]

Checks a vgpu_train --trace file: it parses as JSON; every rank 0..RANKS-1 has
a named process and step spans numbered 1..STEPS; each rank's spans nest (a
span lies inside another or apart from it, as the timeline draws them); every
collective made inside a step is on every rank with the same kind and size,
and its spans overlap across ranks within the measured clock uncertainty;
every name in --names occurs. --same-clock: the ranks share one clock (one
kernel: network namespaces included), so each measured offset must be zero
within its uncertainty. Prints one line a check; exit 1 if any failed.
"""
import collections
import json
import sys

failures = 0


def check(cond, msg):
    global failures
    print(("ok   " if cond else "FAIL ") + msg)
    failures += 0 if cond else 1


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path, nranks, nsteps = argv[1], int(argv[2]), int(argv[3])
    names = []
    if "--names" in argv:
        names = argv[argv.index("--names") + 1].split(",")
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        check(False, f"{path} loads as JSON: {e}")
        return 1
    check(True, f"{path} loads as JSON")
    other = doc["otherData"]
    slack = other["clock_uncertainty_us"]
    check(other["ranks"] == nranks, f"otherData.ranks = {other['ranks']}, expected {nranks}")
    check(other["dropped_spans"] == 0, f"{other['dropped_spans']} spans dropped")
    events = doc["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "process_name"}
    check(sorted(procs) == list(range(nranks)), f"a process a rank: {sorted(procs)}")
    check(all(procs[r].startswith(f"rank {r} (") for r in procs), "processes named 'rank R (host, pid)'")

    spans = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            spans[e["pid"]].append(e)
    check(sorted(spans) == list(range(nranks)), f"spans from ranks {sorted(spans)}")

    steps = {}
    for r, mine in spans.items():
        got = sorted(e["args"]["step"] for e in mine if e["name"] == "step")
        check(got == list(range(1, nsteps + 1)),
              f"rank {r}: steps 1..{nsteps} ({len(got)} step spans, {len(mine)} spans)")
        steps[r] = sorted((e["ts"], e["ts"] + e["dur"]) for e in mine if e["name"] == "step")

        # Nesting: a stack of open spans, in order of start (longer first).
        order = sorted(mine, key=lambda e: (e["ts"], -e["dur"]))
        stack, crossed = [], []
        for e in order:
            while stack and stack[-1][1] <= e["ts"]:
                stack.pop()
            end = e["ts"] + e["dur"]
            if stack and end > stack[-1][1]:
                crossed.append((stack[-1][2], e["name"], e["ts"]))
            stack.append((e["ts"], end, e["name"]))
        check(not crossed, f"rank {r}: spans nest" + (f" (first crossing: {crossed[0]})" if crossed else ""))

    def in_step(r, ts):
        return any(a <= ts <= b for a, b in steps[r])

    colls = collections.defaultdict(dict)
    for r, mine in spans.items():
        for e in mine:
            if e["cat"] == "comm" and "seq" in e.get("args", {}) and in_step(r, e["ts"]):
                colls[e["args"]["seq"]][r] = e
    complete = {s: c for s, c in colls.items() if len(c) == nranks}
    check(len(colls) >= nsteps and len(complete) == len(colls),
          f"{len(colls)} collectives inside steps, {len(complete)} on every rank")
    same = all(len({(e["name"], e["args"]["bytes"]) for e in c.values()}) == 1 for c in complete.values())
    check(same, "each collective has the same kind and size on every rank")
    apart = []
    for s, c in complete.items():
        latest_start = max(e["ts"] for e in c.values())
        earliest_end = min(e["ts"] + e["dur"] for e in c.values())
        if latest_start > earliest_end + 2 * slack:
            apart.append((s, latest_start - earliest_end))
    check(not apart, f"every collective's spans overlap across the ranks within 2 x {slack} us"
          + (f" ({len(apart)} do not, first {apart[0]})" if apart else ""))

    present = {e["name"] for mine in spans.values() for e in mine}
    for n in names:
        check(n in present, f"spans named '{n}'")

    if "--same-clock" in argv:
        off = [(c["rank"], c["offset_us"], c["uncertainty_us"]) for c in other["clocks"]]
        check(all(abs(o) <= u + 1 for _, o, u in off),
              f"one clock: every offset within its uncertainty {off}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
