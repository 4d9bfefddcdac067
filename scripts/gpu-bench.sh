#!/usr/bin/env bash
# Everything one short loan of the GPU machine should measure, in one call that fits its
# 10-minute limit: the build (scripts/gpu-build.sh, TESTS=0), the GPU test suite, the zoo
# against PyTorch on the GPU (PyTorch's whole step as a CUDA graph, its fastest mode for these
# small models), the zoo against PyTorch on the host's CPU at 16 threads, OpenBLAS's rate per
# core type, nnlab's CPU scaling over 1/4/8/16 threads, real MNIST with the lenet5 recipe, and
# the ResNet-9 recipe's epoch time on random CIFAR-shaped data (CIFAR-10 does not fit the carry).
#
#     OUT=/some/folder scripts/gpu-bench.sh      # the logs and JSON lines land in $OUT
# Every step has its own time limit and its exit status in $OUT/summary.txt; a failed step
# does not stop the others. Needs .deps/ (scripts/gpu-deps.sh) carried to the machine.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build-gpu/bench}
build=${BUILD:-build-gpu}
mkdir -p "$out"
python=${PYTHON:-python3}

step() {  # step NAME SECONDS COMMAND...: run it with a limit, log to $out/NAME.log
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc$( ((rc == 124)) && echo ' (time limit)') after $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
  return $rc
}

TESTS=0 OUT=$out scripts/gpu-build.sh || { echo "build failed" | tee -a "$out/summary.txt"; exit 1; }
. "$build/env.sh"
nvidia-smi >"$out/nvidia-smi.txt" 2>&1
lscpu >"$out/lscpu.txt" 2>&1
git rev-parse HEAD >"$out/commit.txt" 2>&1

step gpu_tests 120 "$build/tests/nnlab_gpu_tests" --durations yes

# PyTorch's fastest mode first, probed alone: if its capture fails there, bench with eager.
mode=graph
step torch_graph_probe 60 "$python" scripts/torch_reference.py --model cnn --device cuda --mode graph --epochs 2 \
  --data .deps/fashion-mnist || mode=eager
step bench_cuda 200 "$python" scripts/bench.py --device cuda --torch-mode "$mode" --models mlp,cnn,lenet5,cifar-cnn,resnet8 \
  --rounds 1 --epochs 4 --threads 2 --nnlab "$build/nnlab" --python "$python" --data-dir .deps/fashion-mnist \
  --out "$out/bench_cuda.jsonl"

for core in default Prescott Haswell SkylakeX Cooperlake; do
  if [[ $core == default ]]; then
    step "sgemm_$core" 20 "$build/nnlab" sgemm --threads 16 --size 1024
  else
    step "sgemm_$core" 20 env OPENBLAS_CORETYPE="$core" "$build/nnlab" sgemm --threads 16 --size 1024
  fi
done
step sweep_threads_1_4 60 "$build/nnlab" sweep --model mlp,cnn,lenet5 --devices cpu:threads=1,cpu:threads=4 \
  --batches 64 --steps 20 --warmup 3 --metrics "$out/sweep_threads_1_4.jsonl"
step sweep_threads_8_16 60 "$build/nnlab" sweep --model mlp,cnn,lenet5 --devices cpu:threads=8,cpu:threads=16 \
  --batches 64 --steps 20 --warmup 3 --metrics "$out/sweep_threads_8_16.jsonl"
step bench_cpu16 150 "$python" scripts/bench.py --models mlp,cnn,lenet5 --rounds 1 --epochs 4 --threads 16 \
  --nnlab "$build/nnlab" --python "$python" --data-dir .deps/fashion-mnist --out "$out/bench_cpu16.jsonl"

step mnist_lenet5_cuda 60 "$build/nnlab" train --model-file docs/examples/lenet5-mnist.json --epochs 10 --device cuda \
  --seed 0 --metrics "$out/mnist_lenet5_cuda.jsonl"
step resnet9_cuda 90 "$build/nnlab" train --model-file docs/examples/resnet9-cifar10.json --data synthetic-cifar10 \
  --epochs 2 --device cuda --nesterov --weight-decay 5e-4 --crop-padding 4 --hflip --normalize dataset \
  --metrics "$out/resnet9_cuda.jsonl"
echo "done after $SECONDS s" | tee -a "$out/summary.txt"
