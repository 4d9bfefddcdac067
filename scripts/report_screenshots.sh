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
nnlab=${1:-build}/nnlab
[ -x "$nnlab" ] || { echo "no $nnlab: build first (scripts/setup.sh build)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

train=("$nnlab" train --model mlp --epochs 3 --threads 2 --metrics-every 25)
"${train[@]}" --metrics "$work/mlp-sgd.jsonl" --report "$work/report-run.html"
"${train[@]}" --metrics "$work/mlp-adam.jsonl" --optimizer adam --lr 0.001
"${train[@]}" --metrics "$work/mlp-sgd-lr0.01.jsonl" --lr 0.01
"$nnlab" report "$work/mlp-sgd.jsonl" "$work/mlp-adam.jsonl" "$work/mlp-sgd-lr0.01.jsonl" -o "$work/report-runs.html"
"$nnlab" compare --model cnn --devices cpu:conv=im2col,cpu:conv=reference,cpu:threads=1 --threads 2 --max-steps 30 \
  --batch 32 --test-images 1000 --report "$work/report-compare.html"
"$nnlab" sweep --model mlp --devices cpu:threads=1,cpu:threads=2 --batches 1,4,16,64,256 --widths 0.5,2 --steps 3 \
  --warmup 1 --report "$work/report-sweep.html"
mkdir -p docs/images
python3 tests/report_browser_test.py --check "$work"/report-*.html --screenshot-dir docs/images
