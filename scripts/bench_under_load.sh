#!/usr/bin/env bash
# One epoch of the mlp beside a busy program, and on the idle machine: nnlab with its default
# threads (the thread governor, apps/thread_governor.h), with --threads 1 and with
# --threads 2, and PyTorch's mlp (scripts/torch_reference.py) with 1 and 2 threads, so
# docs/benchmarks.md can say what sharing the cores costs each. The busy program is a second
# nnlab training the cnn on 2 threads, as a user running two trainings at once would.
#
#   scripts/bench_under_load.sh [rounds]     (default 3; run on an otherwise idle machine)
#
# Prints one line per run: situation, program, settings, wall seconds of the whole command
# (start-up and data loading included, the same for every variant).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
nnlab=${NNLAB:-build/nnlab}
python=${PYTHON:-/usr/bin/python3}
[ -x "$nnlab" ] || { echo "no $nnlab: build first (scripts/setup.sh build)" >&2; exit 1; }

seconds() {  # wall seconds of a command, its output discarded; a failure stops the script
  local start end
  start=$(date +%s.%N)
  "$@" > /dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }'
}

run_all() {
  local situation=$1
  for ((r = 1; r <= rounds; r++)); do
    echo "$situation round $r nnlab default $(seconds "$nnlab" train --model mlp --epochs 1)"
    echo "$situation round $r nnlab threads=1 $(seconds "$nnlab" train --model mlp --epochs 1 --threads 1)"
    echo "$situation round $r nnlab threads=2 $(seconds "$nnlab" train --model mlp --epochs 1 --threads 2)"
    echo "$situation round $r torch threads=1 $(seconds "$python" scripts/torch_reference.py --model mlp --epochs 1 --threads 1)"
    echo "$situation round $r torch threads=2 $(seconds "$python" scripts/torch_reference.py --model mlp --epochs 1 --threads 2)"
  done
}

echo "# $(date '+%Y-%m-%d %H:%M'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, commit $(git rev-parse --short=12 HEAD)"
run_all idle
"$nnlab" train --model cnn --epochs 1000 --threads 2 > /dev/null 2>&1 &
busy=$!
trap 'kill $busy 2>/dev/null || true' EXIT
sleep 5  # past its data loading: both cores busy
run_all busy
