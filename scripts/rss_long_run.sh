#!/usr/bin/env bash
# Long-run memory check (issue 7): trains and samples the process's resident memory (VmRSS)
# and its peak (VmHWM) from /proc/PID/status each time an epoch line appears, for epochs
# 1..EPOCHS. The run itself is one epoch longer, so the process is still alive when the line
# of epoch EPOCHS is sampled (it exits within milliseconds of printing its last line).
# Prints a Markdown table and the growth from epoch 2 to the last epoch; exits 1 when that
# growth is above MAX_GROWTH_PCT (default 1) or the run fails.
#
#   scripts/rss_long_run.sh NNLAB [train options...]
#   e.g. EPOCHS=10 scripts/rss_long_run.sh build/nnlab --model mlp --threads 1
set -euo pipefail
nnlab=${1:?usage: rss_long_run.sh NNLAB [train options...]}
shift
epochs=${EPOCHS:-10}
max_growth=${MAX_GROWTH_PCT:-1}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

"$nnlab" train --epochs $((epochs + 1)) "$@" >"$log" 2>&1 &
pid=$!
seen=0
declare -a rss hwm
while kill -0 "$pid" 2>/dev/null; do
  n=$(grep -c '^epoch ' "$log" || true)
  if [ "$n" -gt "$seen" ] && [ "$seen" -lt "$epochs" ]; then
    status=$(cat "/proc/$pid/status" 2>/dev/null || true)
    [ -z "$status" ] && break
    seen=$n
    rss[$n]=$(awk '/^VmRSS:/ {print $2}' <<<"$status")
    hwm[$n]=$(awk '/^VmHWM:/ {print $2}' <<<"$status")
  fi
  sleep 0.05
done
wait "$pid" || { echo "rss_long_run.sh: training failed:" >&2; tail -5 "$log" >&2; exit 1; }

echo "| Epoch | VmRSS (kB) | VmHWM (kB) |"
echo "|---|---|---|"
for ((e = 1; e <= epochs; e++)); do echo "| $e | ${rss[$e]:-missed} | ${hwm[$e]:-missed} |"; done
[ -n "${rss[2]:-}" ] && [ -n "${rss[$epochs]:-}" ] ||
  { echo "rss_long_run.sh: an epoch ended before it could be sampled; rerun" >&2; exit 1; }
awk -v a="${rss[2]}" -v b="${rss[$epochs]}" -v m="$max_growth" 'BEGIN {
  g = 100 * (b - a) / a
  printf "VmRSS growth from epoch 2 to the last: %+.3f%% (limit %s%%)\n", g, m
  exit (g > m) }'
