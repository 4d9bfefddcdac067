#!/usr/bin/env bash
# Builds nnlab's libFuzzer targets (tests/fuzz/fuzz_*.cpp: IDX, CIFAR-10, image, safetensors,
# model-file and tar.gz readers) with clang and -fsanitize=fuzzer,address,undefined, then runs each one
# for MINUTES minutes, starting from the seed corpus in tests/fuzz/corpus/<target>/.
#
#   scripts/fuzz.sh [target ...]      default: all six, one after the other
#
# Environment: MINUTES (default 10), BUILD_DIR (default build-fuzz), PARALLEL=1 runs the
# targets at the same time, JOBS (build jobs, default: all cores).
# New inputs go to BUILD_DIR/corpus/<target> (the committed seeds are never changed); a crash
# leaves its input in BUILD_DIR/artifacts/<target>/ and the script exits non-zero: copy it
# to tests/fuzz/regressions/<target>/ (test_fuzz_corpus.cpp replays those) and fix. Each
# target's last libFuzzer line (executions, coverage) is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build-fuzz}
minutes=${MINUTES:-10}
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(idx cifar image safetensors model_file tar_gz)
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is missing: apt-get install clang libclang-rt-14-dev" >&2; exit 1; }

cmake -S . -B "$build_dir" -DNNLAB_FUZZ=ON -DNNLAB_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" >"$build_dir.configure.log" 2>&1 ||
  { cat "$build_dir.configure.log"; exit 1; }
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}"

run_one() {
  local t=$1 corpus="$build_dir/corpus/$1" artifacts="$build_dir/artifacts/$1/"
  mkdir -p "$corpus" "$artifacts"
  # -rss_limit_mb: a reader that believes a huge header would blow through it (a finding).
  "$build_dir/fuzz_$t" "$corpus" "tests/fuzz/corpus/$t" -max_total_time=$((minutes * 60)) \
    -rss_limit_mb=2048 -max_len=65536 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$artifacts" >"$build_dir/fuzz_$t.log" 2>&1
}
# Undefined behaviour is a finding too: stop at the first report so the input is kept.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
status=0
if [ "${PARALLEL:-0}" = 1 ]; then
  pids=()
  for t in "${targets[@]}"; do run_one "$t" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
else
  for t in "${targets[@]}"; do run_one "$t" || status=1; done
fi
for t in "${targets[@]}"; do
  echo "== fuzz_$t: $(grep -E '^stat::number_of_executed_units' "$build_dir/fuzz_$t.log" | awk '{print $2}') executions," \
       "$(find "$build_dir/artifacts/$t" -type f | wc -l) crash inputs, log $build_dir/fuzz_$t.log"
  grep -E '^#[0-9]+ +(DONE|pulse)' "$build_dir/fuzz_$t.log" | tail -1 || true
done
exit $status
