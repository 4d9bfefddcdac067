#!/usr/bin/env bash
# The screenshots in docs/images: one of each kind of HTML report (a run, several runs
# overlaid, compare, sweep), made from short real runs on Fashion-MNIST and drawn by headless
# Chromium, which also checks each page as the tests do (tests/report_browser_test.py).
#
#   scripts/report_screenshots.sh [BUILD_DIR]     (default: build; a few minutes on 2 cores)
#
# The times in them are those of the machine that made them, busy or not: pictures of the
# reports, not benchmark figures (docs/benchmarks.md has those).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
nnlab=$root/${1:-build}/nnlab
[ -x "$nnlab" ] || { echo "no $nnlab: build first (scripts/setup.sh build)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The pages name the run files as given: short names, not the scratch folder's path.
cd "$work"

train=("$nnlab" train --model mlp --epochs 3 --threads 1 --metrics-every 25)
"${train[@]}" --metrics "mlp-sgd.jsonl" --report "report-run.html"
"${train[@]}" --metrics "mlp-adam.jsonl" --optimizer adam --lr 0.001
"${train[@]}" --metrics "mlp-sgd-lr0.01.jsonl" --lr 0.01
"$nnlab" report "mlp-sgd.jsonl" "mlp-adam.jsonl" "mlp-sgd-lr0.01.jsonl" -o "report-runs.html"
"$nnlab" compare --model cnn --devices cpu:conv=im2col,cpu:conv=reference --threads 1 --max-steps 30 \
  --batch 32 --test-images 1000 --report "report-compare.html"
"$nnlab" sweep --model mlp --devices cpu:threads=1,cpu:threads=2 --batches 1,4,16,64,256 --widths 0.5,2 --steps 3 \
  --warmup 1 --report "report-sweep.html"
mkdir -p "$root/docs/images"
python3 "$root/tests/report_browser_test.py" --check report-*.html --screenshot-dir "$root/docs/images"
