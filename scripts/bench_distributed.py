#!/usr/bin/env python3
"""1 rank x 2 threads against 2 ranks x 1 thread (docs/distributed.md, "What it costs").

    scripts/bench_distributed.py [--nnlab build/nnlab] [--rounds 3] [--steps mlp=300,cnn=60]

For each model it trains the same steps (same seed, global batch 64) three ways, alternated
over --rounds rounds so a drifting machine affects them alike:
    1x2           one process, --threads 2
    2x1 step      mpirun -np 2, --threads 1, one all-reduce after backward
    2x1 overlap   mpirun -np 2, --threads 1, buckets reduced during backward
and prints, per way, the median images/s of the training steps (the epoch record's
images_per_second: data, forward, backward, all-reduce, optimizer; no evaluation) and the
all-reduce share of the step time (phase_seconds.allreduce / seconds: the time a rank waited
on the reduction, including waiting for the slower rank). Then a markdown table with the
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
    with open(metrics) as f:
        epoch = [json.loads(line) for line in f if '"type":"epoch"' in line.replace(" ", "")][-1]
    seconds = epoch["seconds"]
    return epoch["images_per_second"], epoch["phase_seconds"].get("allreduce", 0.0) / seconds


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
    ways = [("1x2", [], ["--threads", "2"]),
            ("2x1 step", MPIRUN, ["--threads", "1", "--allreduce", "step"]),
            ("2x1 overlap", MPIRUN, ["--threads", "1", "--allreduce", "overlap"])]
    results = {}
    commands = {}
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        for rnd in range(args.rounds):
            for model, n in steps.items():
                for name, prefix, extra in ways:
                    if os.path.exists(metrics):
                        os.remove(metrics)
                    train = [args.nnlab, "train", "--model", model, "--epochs", "1", "--max-steps", str(n),
                             "--batch", "64", "--seed", "1", "--metrics", metrics] + extra
                    commands[(model, name)] = " ".join(prefix + train).replace(metrics, "M.jsonl")
                    ips, share = run_one(prefix + train, metrics)
                    results.setdefault((model, name), []).append((ips, share))
                    print("round %d  %-4s %-12s %8.0f img/s  all-reduce %5.1f%%" % (rnd + 1, model, name, ips,
                                                                                     100 * share), flush=True)
    print("\n%s UTC, %s, nnlab %s, %d rounds, median of each\n" % (
        datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), machine(), commit(), args.rounds))
    print("| model | ranks x threads | images/s | all-reduce share | vs 1x2 |")
    print("|---|---|---|---|---|")
    for model in steps:
        base = statistics.median(r[0] for r in results[(model, "1x2")])
        for name, _, _ in ways:
            ips = statistics.median(r[0] for r in results[(model, name)])
            share = statistics.median(r[1] for r in results[(model, name)])
            print("| %s | %s | %.0f | %.1f%% | %.2fx |" % (model, name, ips, 100 * share, ips / base))
    print("\nCommands (M.jsonl: a scratch metrics file):")
    for (model, name), command in commands.items():
        print("    %s" % command)


if __name__ == "__main__":
    main()
