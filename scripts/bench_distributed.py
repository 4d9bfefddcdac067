#!/usr/bin/env python3
"""1 rank x 2 threads against 2 ranks x 1 thread (docs/distributed.md, "What it costs").

    scripts/bench_distributed.py [--nnlab build/nnlab] [--rounds 3] [--steps mlp=300,cnn=60]

For each model it trains the same steps (same seed, global batch 64) three ways, alternated
over --rounds rounds so a drifting machine affects them alike:
    1x2           one process, --threads 2
    2x1 step      mpirun -np 2, --threads 1, one all-reduce after backward
    2x1 overlap   mpirun -np 2, --threads 1, buckets reduced during backward
and two ways that take the 2x1 step apart (what it costs to compute, without MPI):
    1x1 half      one process, --threads 1, batch 32: one rank's share, the machine otherwise idle
    2 x 1x1 half  two such processes at once, no MPI: both cores busy, as under mpirun
It prints, per way, the median images/s of the training steps (the epoch record's
images_per_second: data, forward, backward, all-reduce, optimizer; no evaluation; for the
half-batch ways 64 images per step time), the step time, its compute part (everything but the
all-reduce) and the all-reduce part (phase_seconds.allreduce: the time a rank spent packing,
summing and unpacking, including waiting for the slower rank). Then a markdown table with the
date, machine, commit and commands, for docs/benchmarks.md.

Run it on a quiet machine: 2 ranks on 2 cores leave nothing spare, so any other load shows
up as all-reduce time (a rank waits for the one that was descheduled).
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIRUN = ["mpirun", "--oversubscribe", "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1",
          "--mca", "btl_vader_single_copy_mechanism", "none", "-np", "2"]


def run_one(command, metrics):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if done.returncode != 0:
        sys.exit("bench_distributed: failed (%d): %s\n%s" % (done.returncode, " ".join(command), done.stdout))
    return read_epoch(metrics)


def read_epoch(metrics):
    """The last epoch record: (seconds, all-reduce seconds) of its training steps."""
    with open(metrics) as f:
        epoch = [json.loads(line) for line in f if '"type":"epoch"' in line.replace(" ", "")][-1]
    return epoch["seconds"], epoch["phase_seconds"].get("allreduce", 0.0)


def run_pair(command, metrics):
    """Two copies of one single-process command at once (seeds 1 and 2): their mean times."""
    env = dict(os.environ)
    runs = []
    for k in range(2):
        copy = [a if a != metrics else metrics + str(k) for a in command]
        copy[copy.index("--seed") + 1] = str(k + 1)
        runs.append((copy, subprocess.Popen(copy, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                            env=env)))
    times = []
    for k, (copy, proc) in enumerate(runs):
        out, _ = proc.communicate()
        if proc.returncode != 0:
            sys.exit("bench_distributed: failed (%d): %s\n%s" % (proc.returncode, " ".join(copy), out))
        times.append(read_epoch(metrics + str(k)))
    return tuple(statistics.mean(t[i] for t in times) for i in range(2))


def machine():
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return "%s, %d cores" % (model, os.cpu_count())


def commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nnlab", default=os.path.join(ROOT, "build", "nnlab"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", default="mlp=300,cnn=60", help="model=steps,... (each run trains this many steps)")
    args = ap.parse_args()
    steps = dict((m, int(s)) for m, s in (item.split("=") for item in args.steps.split(",")))
    # (name, mpirun prefix, options, batch, two processes at once)
    ways = [("1x2", [], ["--threads", "2"], 64, False),
            ("2x1 step", MPIRUN, ["--threads", "1", "--allreduce", "step"], 64, False),
            ("2x1 overlap", MPIRUN, ["--threads", "1", "--allreduce", "overlap"], 64, False),
            ("1x1 half", [], ["--threads", "1"], 32, False),
            ("2 x 1x1 half", [], ["--threads", "1"], 32, True)]
    results = {}
    commands = {}
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        for rnd in range(args.rounds):
            for model, n in steps.items():
                for name, prefix, extra, batch, pair in ways:
                    for old in (metrics, metrics + "0", metrics + "1"):
                        if os.path.exists(old):
                            os.remove(old)
                    train = [args.nnlab, "train", "--model", model, "--epochs", "1", "--max-steps", str(n),
                             "--batch", str(batch), "--seed", "1", "--metrics", metrics] + extra
                    commands[(model, name)] = ("two at once: " if pair else "") + " ".join(prefix + train).replace(
                        metrics, "M.jsonl")
                    seconds, reduce = run_pair(train, metrics) if pair else run_one(prefix + train, metrics)
                    step_ms, reduce_ms = 1000 * seconds / n, 1000 * reduce / n
                    results.setdefault((model, name), []).append((64 * n / seconds, step_ms, reduce_ms))
                    print("round %d  %-4s %-13s %8.0f img/s  step %6.3f ms  all-reduce %6.3f ms" % (
                        rnd + 1, model, name, 64 * n / seconds, step_ms, reduce_ms), flush=True)
    print("\n%s UTC, %s, nnlab %s, %d rounds, median of each\n" % (
        datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), machine(), commit(), args.rounds))
    print("| model | way | images/s (64 a step) | step ms | compute ms | all-reduce ms | vs 1x2 |")
    print("|---|---|---|---|---|---|---|")
    for model in steps:
        base = statistics.median(r[0] for r in results[(model, "1x2")])
        for name, _, _, _, _ in ways:
            rows = results[(model, name)]
            ips, step, reduce = (statistics.median(r[i] for r in rows) for i in range(3))
            compute = statistics.median(r[1] - r[2] for r in rows)
            if name == "1x1 half":  # one rank's share alone: its step time is the figure
                print("| %s | %s | | %.3f | %.3f | | |" % (model, name, step, compute))
                continue
            print("| %s | %s | %.0f | %.3f | %.3f | %.3f | %.2fx |" % (model, name, ips, step, compute, reduce,
                                                                       ips / base))
    print("\nCommands (M.jsonl: a scratch metrics file):")
    for (model, name), command in commands.items():
        print("    %s" % command)

if __name__ == "__main__":
    main()
