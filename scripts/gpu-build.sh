#!/usr/bin/env bash
# Builds and tests nnlab on the GPU machine (CMake, a compiler, CUDA and cuDNN, but no
# package manager and no network). The other dependencies come from .deps/*.deb, fetched
# beforehand by scripts/gpu-deps.sh; they are unpacked into a private prefix with dpkg -x.
#
#     scripts/gpu-build.sh            # build, ctest, compute-sanitizer over the GPU tests
#     . build-gpu/env.sh              # then: the library path for build-gpu/nnlab (OpenBLAS, CUDA)
# Environment: PREFIX (default /tmp/nnlab-prefix), BUILD (default build-gpu), JOBS (16),
#              ARCH (CMAKE_CUDA_ARCHITECTURES, default 90), SANITIZE=0 to skip the sanitizer,
#              OUT (if set, logs are written there as well), TESTS=0 to build only (benchmarks).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
prefix=${PREFIX:-/tmp/nnlab-prefix}
build=${BUILD:-build-gpu}
jobs=${JOBS:-16}
arch=${ARCH:-90}
logs=${OUT:-$root/$build/logs}
mkdir -p "$logs"

say() { echo "gpu-build.sh: $*" | tee -a "$logs/summary.txt"; }

shopt -s nullglob
debs=(.deps/*.deb)
if (( ${#debs[@]} == 0 )); then
  say "no packages in .deps/; run scripts/gpu-deps.sh on a Debian 12 machine with apt first"
  exit 1
fi
rm -rf "$prefix" && mkdir -p "$prefix"
for deb in "${debs[@]}"; do
  dpkg -x "$deb" "$prefix" || { say "could not unpack $deb"; exit 1; }
done
say "unpacked ${#debs[@]} packages into $prefix"
glibc=$(ldd --version 2>/dev/null | head -1)
say "host C library: $glibc (the packages are built for Debian 12's glibc 2.36)"

export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu/openblas-openmp:$prefix/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
say "nvcc: $(nvcc --version 2>/dev/null | tail -1); GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null)"

cmake -S . -B "$build" -DNNLAB_DEPS_PREFIX="$prefix" -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  -DCMAKE_BUILD_TYPE=Release >"$logs/configure.log" 2>&1 || { say "configure failed, see $logs/configure.log"; tail -30 "$logs/configure.log"; exit 1; }
say "configured $build (CUDA architectures $arch)"
# For later commands on the same machine (benchmarks): source $build/env.sh first.
printf 'export LD_LIBRARY_PATH=%q PATH=%q\n' "$LD_LIBRARY_PATH" "$PATH" >"$build/env.sh"
cmake --build "$build" -j "$jobs" >"$logs/build.log" 2>&1 || { say "build failed, see $logs/build.log"; grep -E "error" "$logs/build.log" | head -30; exit 1; }
say "built"

"$build/nnlab" devices >"$logs/devices.txt" 2>&1 || true
# Tests and training read Fashion-MNIST from Debian's path; the machine is bare and disposable
# (root, no apt): put the carried copy there.
default_data=/usr/share/datasets/fashion-mnist
if [[ ! -d $default_data ]] && ls .deps/fashion-mnist/*-ubyte.gz >/dev/null 2>&1; then
  mkdir -p "$(dirname $default_data)" && ln -s "$root/.deps/fashion-mnist" "$default_data" &&
    say "Fashion-MNIST linked at $default_data"
fi
# Real MNIST, carried compressed by gpu-deps.sh: installed into nnlab's data folder (checked
# file by file), so `--data mnist` needs no --data-dir there.
if ls .deps/mnist/*-ubyte.gz >/dev/null 2>&1; then
  "$build/nnlab" data fetch mnist --from .deps/mnist --no-npm --no-download >"$logs/mnist.log" 2>&1 &&
    say "MNIST installed from .deps/mnist" || say "MNIST from .deps/mnist refused, see $logs/mnist.log"
fi
if [[ "${TESTS:-1}" == 0 ]]; then
  say "TESTS=0: built only"
  exit 0
fi
(cd "$build" && ctest --output-on-failure -j 4 >"$logs/ctest.log" 2>&1)
ctest_rc=$?
say "ctest exit $ctest_rc: $(grep -E 'tests passed|tests failed' "$logs/ctest.log" | tail -1)"
"$build/tests/nnlab_gpu_tests" --durations yes >"$logs/gpu_tests.log" 2>&1
gpu_rc=$?
say "nnlab_gpu_tests exit $gpu_rc: $(tail -3 "$logs/gpu_tests.log" | tr '\n' ' ')"

# A real training run, not only the test executables: 200 cnn steps on Fashion-MNIST (carried
# in .deps/fashion-mnist by gpu-deps.sh); the mean loss of the last 20 steps must be well
# below that of the first 20.
smoke_rc=0
if ls .deps/fashion-mnist/*-ubyte.gz >/dev/null 2>&1; then
  timeout 300 "$build/nnlab" train --device cuda --model cnn --epochs 1 --max-steps 200 --seed 1 \
    --data-dir .deps/fashion-mnist --metrics "$logs/smoke.jsonl" --metrics-every 1 >"$logs/smoke.log" 2>&1
  smoke_rc=$?
  if (( smoke_rc == 0 )); then
    verdict=$(python3 - "$logs/smoke.jsonl" <<'PY'
import json, sys
steps = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"type":"step"' in l]
first, last = sum(steps[:20]) / 20, sum(steps[-20:]) / 20
print(f"{len(steps)} steps, mean loss {first:.3f} -> {last:.3f}", "falls" if last < 0.6 * first else "DOES NOT FALL")
PY
)
    [[ "$verdict" == *"DOES NOT FALL"* ]] && smoke_rc=1
    say "training smoke test (cnn, 200 steps on cuda): $verdict"
  else
    say "training smoke test failed (exit $smoke_rc), see $logs/smoke.log"
  fi
else
  say "training smoke test skipped: no .deps/fashion-mnist (run scripts/gpu-deps.sh with dataset-fashion-mnist installed)"
fi

# compute-sanitizer slows kernels 10-100x: the kernel tests only (not the CLI runs and the
# training comparison), each tool under a time limit, so the whole script fits one 10-minute
# call of the GPU machine.
san_rc=0
if [[ "${SANITIZE:-1}" != 0 ]]; then
  # API errors are not reported: nnlab checks every CUDA return itself, and the run holds
  # deliberate ones (the allocator's out-of-memory test) and the libraries' own calls of
  # cudaFuncGetAttributes answered "no kernel image" (nnlab makes none), which are not faults.
  for tool in memcheck racecheck; do
    timeout "${SANITIZER_SECONDS:-150}" compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 99 \
      "$build/tests/nnlab_gpu_tests" "~[explain]~[training]" >"$logs/sanitizer-$tool.log" 2>&1
    rc=$?
    say "compute-sanitizer $tool exit $rc$( ((rc == 124)) && echo ' (time limit)'): $(grep -E 'ERROR SUMMARY' "$logs/sanitizer-$tool.log" | tail -1)"
    (( rc != 0 )) && san_rc=$rc
  done
fi
say "commit $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
(( ctest_rc == 0 && gpu_rc == 0 && smoke_rc == 0 && san_rc == 0 ))
