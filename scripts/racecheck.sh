#!/usr/bin/env bash
# The CUDA kernels under ThreadSanitizer, on the CUDA simulator: a clang build with
# -fsanitize=thread (CMake options NNLAB_TSAN, NNLAB_CUDA_SIMULATOR) of the GPU test
# executable, run with the simulator's block threads parallel and the CPU side single-threaded.
#
# Each CUDA thread of a block is a fiber that ThreadSanitizer sees as a thread of its own,
# ordered only by the kernel's __syncthreads() and atomics (devices/cuda/sim/sim_threads.cpp),
# so a missing barrier shows up as a data race on the shared memory it should protect; blocks
# run on two CPU threads, so two blocks writing one global address race too. The CPU side
# (reference results, OpenBLAS) runs on one thread: libgomp is not built for ThreadSanitizer and
# its barriers would read as races.
#
# The NCCL of the simulator runs here too, two threads as two ranks on two simulated devices
# (tests/gpu/test_gpu_nccl_devices.cpp); the 2-process training runs are too slow under
# ThreadSanitizer and run in the ASan build (scripts/sanitize.sh). This build is the one CI
# builds without MPI: it checks that such a build refuses to run as one of several ranks.
#
# Environment: BUILD_DIR (default build-tsan), JOBS (default: all cores),
# NNLAB_RACECHECK_TESTS (Catch test spec, default: the kernel tests, without the CLI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build-tsan}
jobs=${JOBS:-$(nproc)}
start=$(date +%s)
echo "== configuring $build_dir (ThreadSanitizer, CUDA simulator)"
mkdir -p "$build_dir"
cmake -S . -B "$build_dir" -DNNLAB_TSAN=ON -DNNLAB_CUDA_SIMULATOR=ON -DNNLAB_WITH_MPI=OFF -DNNLAB_UNITY_BUILD=ON \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
      >"$build_dir/configure.log" 2>&1 || { cat "$build_dir/configure.log"; exit 1; }
echo "== building the GPU tests for ThreadSanitizer with $jobs jobs"
cmake --build "$build_dir" -j "$jobs" --target nnlab_gpu_tests nnlab_cli

export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:report_signal_unsafe=0:ignore_noninstrumented_modules=1"
export NNLAB_THREADS=1 OMP_NUM_THREADS=1 NNLAB_SIM_THREADS=2
echo "== running the GPU tests on the simulator under ThreadSanitizer"
"$build_dir/tests/nnlab_gpu_tests" "${NNLAB_RACECHECK_TESTS:-~[explain]~[training]~[cli]}"
echo "== a build without MPI refuses to run as one of several ranks"
"$build_dir/tests/nnlab_gpu_tests" "[no_mpi]"
echo "== ThreadSanitizer run clean in $(( $(date +%s) - start )) s"
