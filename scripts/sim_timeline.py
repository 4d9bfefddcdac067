#!/usr/bin/env python3
"""The CUDA simulator's timeline as text (docs/gpu.md, "The simulator's timeline").

    NNLAB_SIM_TRACE=run.%p.json nnlab train --device cuda ...        (or under mpirun: a file per rank)
    scripts/sim_timeline.py run.*.json [--window FROM:TO] [--width 100]

For each process and stream: how long the stream was busy, by kind of work. For the NCCL sums:
how much of their time the same process was computing (kernels, cuBLAS, cuDNN) on another
stream, i.e. how much of the all-reduce ran beside backward. Then a chart of a window of the
run, one line per stream, one character per slice of time:

    K kernel   B cuBLAS   D cuDNN   N NCCL sum   C copy or memset   - waiting for an event
    e event record   G graph launch   h host function   . idle

The default window is the process's last three NCCL sums and the time before them (about one
step of backward); --window FROM:TO picks one in milliseconds from the first span of all files.
The times are the simulator's (CPU threads standing for streams), not a GPU's.
"""
import argparse
import json
import sys

LETTER = {"kernel": "K", "cublas": "B", "cudnn": "D", "nccl": "N", "copy": "C", "graph": "G", "host": "h"}
COMPUTE = ("kernel", "cublas", "cudnn")


def waits(span):
    return span["cat"] == "event" and span["name"] == "cudaStreamWaitEvent"


def letter(span):
    if span["cat"] == "event":
        return "-" if waits(span) else "e"
    return LETTER.get(span["cat"], "?")


def load(path):
    try:
        with open(path) as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("sim_timeline: %s: %s" % (path, e))
    names, spans, process = {}, [], path
    for e in trace.get("traceEvents", []):
        if e.get("ph") == "M" and e.get("name") == "process_name":
            process = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            names[e["tid"]] = e["args"]["name"]
        elif e.get("ph") == "X":
            spans.append(dict(e, end=e["ts"] + e["dur"]))
    return process, names, spans


def overlap(a, b):
    return max(0.0, min(a["end"], b["end"]) - max(a["ts"], b["ts"]))


def summary(process, names, spans):
    print("%s" % process)
    for row in sorted(names):
        mine = [s for s in spans if s["tid"] == row and not s["args"].get("in_graph")]
        by_kind = {}
        for s in mine:
            if not waits(s):
                by_kind[s["cat"]] = by_kind.get(s["cat"], 0.0) + s["dur"]
        waited = sum(s["dur"] for s in mine if waits(s))
        kinds = ", ".join("%s %.1f" % (k, v / 1000) for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]))
        print("  %-22s busy %9.1f ms (%s); waiting for events %.1f ms" % (
            names[row], sum(by_kind.values()) / 1000, kinds, waited / 1000))
    sums = [s for s in spans if s["cat"] == "nccl"]
    if sums:
        total = sum(s["dur"] for s in sums)
        beside = sum(overlap(s, w) for s in sums for w in spans if w["cat"] in COMPUTE and w["tid"] != s["tid"])
        print("  NCCL: %d sums, %.1f ms; %.1f ms of it (%.0f%%) beside compute on another stream" % (
            len(sums), total / 1000, beside / 1000, 100 * beside / total if total else 0))


def default_window(files):
    process, names, spans = files[0]
    sums = sorted((s for s in spans if s["cat"] == "nccl"), key=lambda s: s["ts"])
    if len(sums) >= 1:
        last = sums[-3:]
        start, end = last[0]["ts"], last[-1]["end"]
        return start - 0.5 * (end - start), end
    end = max(s["end"] for s in spans)
    start = min(s["ts"] for s in spans)
    return end - 0.1 * (end - start), end


def chart(files, window, width):
    start, end = window
    step = (end - start) / width
    print("\n%.3f ms from %.3f ms (after the first span), %.3f ms a character:" % (
        (end - start) / 1000, (start - origin(files)) / 1000, step / 1000))
    for process, names, spans in files:
        for row in sorted(names):
            line = []
            mine = [s for s in spans if s["tid"] == row and s["end"] > start and s["ts"] < end]
            for k in range(width):
                cell = {"ts": start + k * step, "end": start + (k + 1) * step}
                best, best_time = ".", 0.0
                for s in mine:  # the work that filled most of the slice; a graph's nodes over the launch
                    t = overlap(s, cell) * (2 if s["args"].get("in_graph") else 1)
                    if t > best_time:
                        best, best_time = letter(s), t
                line.append(best)
            print("  %-30s |%s|" % ((process.split(" (")[0] + " " + names[row])[:30], "".join(line)))


def origin(files):
    return min(s["ts"] for _, _, spans in files for s in spans)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+", help="files written under NNLAB_SIM_TRACE")
    ap.add_argument("--window", help="FROM:TO in milliseconds after the first span of all files")
    ap.add_argument("--width", type=int, default=100, help="characters of the chart (default 100)")
    args = ap.parse_args()
    files = [load(p) for p in args.traces]
    files = [f for f in files if f[2]]
    if not files:
        sys.exit("sim_timeline: no spans in %s" % " ".join(args.traces))
    if args.width < 10 or args.width > 1000:
        sys.exit("sim_timeline: --width must be 10 to 1000, got %d" % args.width)
    for f in files:
        summary(*f)
    if args.window:
        try:
            a, b = (float(x) for x in args.window.split(":"))
        except ValueError:
            sys.exit("sim_timeline: --window must be FROM:TO in milliseconds, got '%s'" % args.window)
        if b <= a:
            sys.exit("sim_timeline: --window %s ends before it starts" % args.window)
        window = (origin(files) + 1000 * a, origin(files) + 1000 * b)
    else:
        window = default_window(files)
    chart(files, window, args.width)
    print("\n  K kernel  B cuBLAS  D cuDNN  N NCCL sum  C copy/memset  - waiting for an event  e event record"
          "  G graph  h host function  . idle")


if __name__ == "__main__":
    main()
