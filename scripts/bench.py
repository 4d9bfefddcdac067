#!/usr/bin/env python3
"""Times nnlab against its PyTorch reference on the same machine, by docs/design.md's rules.

For every model and batch size: R rounds; in each round both frameworks train E epochs
(the first is warm-up, the rest are timed) one after the other, the order alternating
between rounds (with --interleave: both at once, taking turns epoch by epoch); the figure of a round is the ratio of the two medians (nnlab / PyTorch), and
a target holds only when it holds in every round. Also reported: images/s, achieved GFLOP/s
(training FLOP per image × images / s), its share of the sgemm rate measured just before and
just after that round (their mean), peak RSS, and the cache line's round trip between the
two CPUs just before and just after the round (`nnlab devices`): a cloud machine moves its
virtual CPUs between placements where it is ~100 or ~400 ns, and small models' two-thread
steps differ by a third between the two (devices/cpu/core_latency.h).

  /usr/bin/python3 scripts/bench.py --models mlp,cnn --batches 64 --rounds 3 --threads 2
"""
import argparse, json, os, platform, re, resource, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Training FLOP per image (forward + both backward GEMMs, multiply-add = 2 FLOP; no dx for the
# first layer; BatchNorm, ReLU and adds left out: resnet8 has 12.5 M multiply-adds forward),
# as the PyTorch yardstick (torch_bench.py, kept outside the repository) counts them.
TRAIN_FLOP = {"mlp": 1.01e6, "lenet5": 2.26e6, "cnn": 25.0e6, "cnn-bn": 25.0e6, "cifar-cnn": 157.7e6, "resnet8": 74.1e6}
TRAIN_IMAGES = {"cifar-cnn": 50000, "resnet8": 50000}
CIFAR_MODELS = ("cifar-cnn", "resnet8")


PREFIX = []  # e.g. ["chrt", "-f", "10"]: real-time priority for both frameworks alike


def run(cmd, env=None):
    """Runs cmd, returns (stdout, peak RSS in MiB of that process)."""
    cmd = PREFIX + cmd
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        out.seek(0)
        text = out.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"command failed: {' '.join(cmd)}\n{text}")
    return text, usage.ru_maxrss / 1024.0


def nnlab_cmd(a, model, batch, metrics):
    cmd = [a.nnlab, "train", "--model", model, "--batch", str(batch), "--epochs", str(a.epochs),
           "--threads", str(a.threads), "--seed", "0", "--metrics", metrics, "--log-interval", "1000000"]
    cmd += ["--device", a.device] if a.device != "cpu" else []
    cmd += a.nnlab_args.split()
    if model in CIFAR_MODELS:
        return cmd + (["--data", "cifar10", "--data-dir", a.cifar_dir] if a.cifar_dir else ["--data", "synthetic-cifar10"])
    return cmd + (["--data-dir", a.data_dir] if a.data_dir else [])


def nnlab_result(metrics, rss):
    epochs = [json.loads(l) for l in open(metrics) if '"type":"epoch"' in l]
    return [e["seconds"] for e in epochs[1:]], rss, epochs[-1].get("test_accuracy")


def torch_cmd(a, model, batch):
    return [a.python, a.torch_script, "--model", model, "--batch", str(batch), "--epochs", str(a.epochs),
            "--threads", str(a.threads)] + (["--flush-denormals"] if a.torch_flush_denormals else []) + \
           (["--device", a.device] if a.device != "cpu" else []) + \
           (["--mode", a.torch_mode] if a.torch_mode != "eager" else []) + (["--data", a.data_dir] if a.data_dir else []) + \
           (["--cifar", a.cifar_dir] if a.cifar_dir and model in CIFAR_MODELS else [])


def torch_result(text, rss):
    result = json.loads(text.strip().splitlines()[-1])
    return [e["seconds"] for e in result["epochs"][1:]], rss, result["epochs"][-1].get("test_acc")


def run_round(a, model, batch, order):
    """Both frameworks one after the other, in `order`; returns {framework: (epochs, rss, acc)}."""
    res = {}
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as metrics:
        for fw in order:
            if fw == "nnlab":
                _, rss = run(nnlab_cmd(a, model, batch, metrics.name))
                res[fw] = nnlab_result(metrics.name, rss)
            else:
                res[fw] = torch_result(*run(torch_cmd(a, model, batch)))
    return res


class Paced:
    """A training process started with --pace-stdin: it prints 'ready for epoch N' and waits;
    each line we send starts one epoch, whose clock starts after the line arrives."""

    def __init__(self, cmd):
        self.cmd = PREFIX + cmd + ["--pace-stdin"]
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.text = []

    def wait_ready(self):
        """Reads its output up to the next 'ready' line (or its exit after the last epoch)."""
        for line in iter(self.proc.stdout.readline, ""):
            self.text.append(line)
            if line.startswith("ready for epoch"):
                return

    def run_epoch(self):
        try:
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
        except BrokenPipeError:  # it has exited: finish() reports its exit and output
            self.finish()
            sys.exit(f"command ended before its last epoch: {' '.join(self.cmd)}")
        self.wait_ready()

    def finish(self):
        """Waits for the exit; returns (everything it printed, its peak RSS in MiB)."""
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        self.text.append(self.proc.stdout.read())
        _, status, usage = os.wait4(self.proc.pid, 0)
        text = "".join(self.text)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"command failed: {' '.join(self.cmd)}\n{text}")
        return text, usage.ru_maxrss / 1024.0


def run_round_interleaved(a, model, batch, order):
    """Both frameworks alive at once, taking turns epoch by epoch: epoch e of one runs next to
    epoch e of the other, so a machine whose speed drifts over minutes slows both alike. The
    first to go alternates from epoch to epoch, starting with order[0]."""
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as metrics:
        procs = {"nnlab": Paced(nnlab_cmd(a, model, batch, metrics.name)), "torch": Paced(torch_cmd(a, model, batch))}
        for p in procs.values():  # data loading and model set-up, untimed
            p.wait_ready()
        for e in range(a.epochs):
            for fw in (order if e % 2 == 0 else order[::-1]):
                procs[fw].run_epoch()
        n_text, n_rss = procs["nnlab"].finish()
        t_text, t_rss = procs["torch"].finish()
        return {"nnlab": nnlab_result(metrics.name, n_rss), "torch": torch_result(t_text, t_rss)}


# OpenBLAS settings from the environment reach both frameworks (PyTorch's Linear layers call
# OpenBLAS too); OPENBLAS_CORETYPE can swap its kernels for narrower ones, so it is recorded.
OPENBLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS")


def sgemm_rate(a):
    text, _ = run([a.nnlab, "sgemm", "--threads", str(a.threads), "--size", "1024", "--device", a.device])
    return float(re.search(r"median ([0-9.]+) GFLOP/s", text).group(1))


def core_trip(a):
    """The CPUs' cache-line round trip in ns, or None where it was not measurable."""
    text, _ = run([a.nnlab, "devices", "--threads", str(a.threads)])
    found = re.search(r"round trip takes ([0-9.]+) ns", text)
    return float(found.group(1)) if found else None


def trip_text(trips):
    return "/".join("?" if t is None else f"{t:.0f}" for t in trips)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="mlp")
    ap.add_argument("--batches", default="64")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=4, help="per run: 1 warm-up + the timed ones")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--nnlab", default=os.path.join(ROOT, "build", "nnlab"))
    ap.add_argument("--nnlab-args", default="", help="more options for nnlab train, e.g. '--batch-slices 2' (recorded "
                                                     "in the output)")
    ap.add_argument("--python", default="/usr/bin/python3", help="a Python with PyTorch")
    ap.add_argument("--torch-script", default=os.path.join(ROOT, "scripts", "torch_reference.py"))
    ap.add_argument("--torch-flush-denormals", action="store_true",
                    help="PyTorch flushes denormals to zero too (nnlab's default; the yardstick keeps them)")
    ap.add_argument("--device", default="cpu",
                    help="cpu or cuda: both frameworks train there (the share column is of the device's sgemm rate)")
    ap.add_argument("--torch-mode", choices=("eager", "graph", "compile"), default="eager",
                    help="how PyTorch runs its step (scripts/torch_reference.py --mode; graph and compile need cuda)")
    ap.add_argument("--data-dir", default="", help="Fashion-MNIST folder for both (default: each one's own default)")
    ap.add_argument("--cifar-dir", default="", help="CIFAR-10 binary batches for the CIFAR models (default: random "
                                                    "CIFAR-shaped data)")
    ap.add_argument("--out", default="", help="append the results as JSON lines to this file")
    ap.add_argument("--realtime", action="store_true",
                    help="run both frameworks under SCHED_FIFO (chrt -f 10, needs root) so background load on a "
                         "shared machine cannot take their cores; recorded in the output")
    ap.add_argument("--interleave", action="store_true",
                    help="run both frameworks at once and alternate them epoch by epoch (--pace-stdin) instead of "
                         "one whole run after the other; recorded in the output")
    a = ap.parse_args()
    if a.realtime:
        PREFIX.extend(["chrt", "-f", "10"])
    if a.epochs < 4:
        sys.exit("--epochs must be at least 4 (one warm-up and three timed epochs)")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    rate_before = sgemm_rate(a)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  {cpu}, {os.cpu_count()} cores, threads {a.threads}, "
          f"commit {commit}, sgemm 1024³ {rate_before:.0f} GFLOP/s"
          + (", both under SCHED_FIFO (chrt -f 10)" if a.realtime else "")
          + (f", device {a.device}, PyTorch mode {a.torch_mode}" if a.device != "cpu" else "")
          + (", alternated epoch by epoch" if a.interleave else ", alternated run by run")
          + (f", nnlab with {a.nnlab_args}" if a.nnlab_args else "")
          + ("; denormals flushed in both" if a.torch_flush_denormals else "; denormals: nnlab flushes, PyTorch keeps")
          + "".join(f"; {k}={os.environ[k]}" for k in OPENBLAS_ENV if k in os.environ))
    print("| model | batch | round | nnlab s (median) | PyTorch s (median) | ratio | nnlab img/s | GFLOP/s | "
          "share of sgemm | nnlab RSS MiB | PyTorch RSS MiB | CPUs' round trip ns |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for model in a.models.split(","):
        for batch in (int(b) for b in a.batches.split(",")):
            ratios = []
            for r in range(a.rounds):
                order = ["nnlab", "torch"] if r % 2 == 0 else ["torch", "nnlab"]
                # The share is of the sgemm rate measured next to the round (the mean of one run just
                # before and one just after it): this host's speed drifts by up to ±20% over minutes,
                # and a rate taken once at the start would move every later share with the drift.
                rate_next = sgemm_rate(a)
                trips = [core_trip(a)]
                res = (run_round_interleaved if a.interleave else run_round)(a, model, batch, order)
                trips.append(core_trip(a))
                rate_after = sgemm_rate(a)
                rate = (rate_next + rate_after) / 2
                ns, ts = statistics.median(res["nnlab"][0]), statistics.median(res["torch"][0])
                ratios.append(ns / ts)
                n_img = TRAIN_IMAGES.get(model, 60000)
                gflops = TRAIN_FLOP[model] * n_img / ns / 1e9
                row = {"date": time.strftime("%Y-%m-%d"), "cpu": cpu, "commit": commit, "threads": a.threads,
                       "model": model, "batch": batch, "round": r + 1, "order": order,
                       "nnlab_epochs": res["nnlab"][0], "torch_epochs": res["torch"][0], "nnlab_median": ns,
                       "torch_median": ts, "ratio": ns / ts, "nnlab_images_per_s": n_img / ns,
                       "gflops": gflops, "sgemm_gflops": rate, "sgemm_gflops_around": [rate_next, rate_after],
                       "nnlab_rss_mib": res["nnlab"][1], "core_round_trip_ns": trips,
                       "torch_rss_mib": res["torch"][1], "nnlab_acc": res["nnlab"][2], "torch_acc": res["torch"][2],
                       "python": platform.python_version(), "realtime": a.realtime,
                       "interleave": a.interleave, "device": a.device, "torch_mode": a.torch_mode,
                       "nnlab_args": a.nnlab_args,
                       "openblas_env": {k: os.environ[k] for k in OPENBLAS_ENV if k in os.environ}}
                print(f"| {model} | {batch} | {r + 1} | {ns:.2f} | {ts:.2f} | {ns / ts:.2f} | {n_img / ns:.0f} | "
                      f"{gflops:.1f} | {100 * gflops / rate:.0f}% of {rate:.0f} | {res['nnlab'][1]:.0f} | "
                      f"{res['torch'][1]:.0f} | {trip_text(trips)} |", flush=True)
                if a.out:
                    with open(a.out, "a") as f:
                        f.write(json.dumps(row) + "\n")
            print(f"#   {model} batch {batch}: ratio per round {', '.join(f'{x:.2f}' for x in ratios)}; "
                  f"worst {max(ratios):.2f}", flush=True)
    print(f"# sgemm after: {sgemm_rate(a):.0f} GFLOP/s")


if __name__ == "__main__":
    main()
