#!/usr/bin/env bash
# Builds the library, CLI and tests with AddressSanitizer + UndefinedBehaviorSanitizer (CMake
# option NNLAB_SANITIZE, RelWithDebInfo), the CUDA backend as the CUDA simulator
# (NNLAB_CUDA_SIMULATOR), and runs under them the CPU test suite and the GPU test suite on
# the simulator (every CUDA kernel, cuBLAS and cuDNN call against its CPU twin) side by side, then a
# 20-step cnn comparison of the CPU and the simulated CUDA device on Fashion-MNIST.
# Any report stops the run (halt_on_error) and fails this script; LeakSanitizer checks every
# process at exit, the CLI runs the tests start included (NNLAB_CLI_PATH is the sanitized one).
# scripts/setup.sh test runs this after the ordinary suite.
#
# Environment: BUILD_DIR (default build-asan), JOBS (default: all cores),
# NNLAB_SANITIZE_TESTS (Catch test spec, default: everything but [slow] and the CPU
# data-parallel runs, [mpi], which the main build runs).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build-asan}
jobs=${JOBS:-$(nproc)}
start=$(date +%s)
echo "== configuring $build_dir (ASan + UBSan, the CUDA backend as the CUDA simulator)"
mkdir -p "$build_dir"
# clang (with LLVM's OpenMP runtime) built this project faster than g++ here, and is the
# compiler scripts/fuzz.sh uses too. -O1 with line tables only: cheaper to build than -O2 -g,
# and the reports still name file and line.
# With MPI: the GPU suite runs 2-rank jobs on 2 simulated devices summing with the simulator's
# NCCL (tests/gpu/test_gpu_distributed.cpp). Open MPI keeps its start-up allocations until the
# end, in components unloaded by then: its ranks skip the leak check (tests/mpi_support.h). The
# CPU data-parallel tests ([mpi]) run in the main build.
cmake -S . -B "$build_dir" -DNNLAB_SANITIZE=ON -DNNLAB_WITH_CUDA=OFF -DNNLAB_CUDA_SIMULATOR=ON -DNNLAB_WITH_MPI=ON -DNNLAB_UNITY_BUILD=ON \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
      >"$build_dir/configure.log" 2>&1 || { cat "$build_dir/configure.log"; exit 1; }
echo "== building the sanitized tests with $jobs jobs"
cmake --build "$build_dir" -j "$jobs" --target nnlab_tests nnlab_cli nnlab_gpu_tests

# halt_on_error: the first report fails the test that caused it (and so this script).
# tests/lsan.supp, tests/ubsan.supp: suppressions for code nnlab does not own.
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=0
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$PWD/tests/ubsan.supp"
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
cpu_suite=("$build_dir/tests/nnlab_tests" "${NNLAB_SANITIZE_TESTS:-~[slow]~[mpi]}")
gpu_suite=("$build_dir/tests/nnlab_gpu_tests")
if [ "$jobs" -ge 2 ]; then
  # The two suites side by side: neither keeps 2 cores busy the whole time (its cases wait on
  # the programs they start, the simulator on its barriers), and together they finished in
  # 573 s where one after the other took 379 + 373 = 752 s (2 cores, 2026-11-28; with OpenMP's
  # waiting threads sleeping, OMP_WAIT_POLICY=passive, 605 s). Each suite writes to a log of
  # its own, printed whole when both have ended.
  echo "== running the CPU suite and the GPU suite on the CUDA simulator under the sanitizers, side by side"
  # Each suite's own wall time goes to NAME-suite.seconds: the longer one bounds this part.
  timed_suite() {
    local name=$1 began rc=0
    shift
    began=$(date +%s)
    "$@" >"$build_dir/$name-suite.log" 2>&1 || rc=$?
    echo $(($(date +%s) - began)) >"$build_dir/$name-suite.seconds"
    return "$rc"
  }
  timed_suite cpu "${cpu_suite[@]}" &
  cpu_pid=$!
  timed_suite gpu "${gpu_suite[@]}" &
  gpu_pid=$!
  cpu_rc=0; gpu_rc=0
  wait "$cpu_pid" || cpu_rc=$?
  wait "$gpu_pid" || gpu_rc=$?
  echo "== the CPU suite (exit $cpu_rc, $(cat "$build_dir/cpu-suite.seconds") s):"; cat "$build_dir/cpu-suite.log"
  echo "== the GPU suite on the CUDA simulator (exit $gpu_rc, $(cat "$build_dir/gpu-suite.seconds") s):"
  cat "$build_dir/gpu-suite.log"
  [ "$cpu_rc" -eq 0 ] && [ "$gpu_rc" -eq 0 ] || { echo "== a sanitized suite failed (see above)"; exit 1; }
else
  echo "== running the CPU suite under the sanitizers"
  "${cpu_suite[@]}"
  echo "== running the GPU suite on the CUDA simulator under the sanitizers"
  "${gpu_suite[@]}"
fi
echo "== comparing 20 cnn steps on the CPU and the simulated CUDA device"
"$build_dir/nnlab" compare --model cnn --devices cpu,cuda --max-steps 20 --test-images 500
echo "== sanitizer run clean in $(( $(date +%s) - start )) s"
