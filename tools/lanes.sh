#!/usr/bin/env bash
# Runs make gates in lanes side by side: each argument is one lane, "name: gate gate ...", its gates in turn.
# Every line of output carries its lane's name; every gate runs even when an earlier one is red (make -k); at the
# end one table names each gate, its lane, its time and its result, and under it, for each gate that failed, the
# lines that say what failed (pytest's short summary, ansible's fatal lines, make's errors), so the end of a long log
# is enough to see why the run is red.
#   VLLM_DR_LANES=1   every gate in one lane, in the order given (a one-core machine, or to read a gate's output alone)
# Exit status: non-zero when any gate failed.
set -uo pipefail

make_cmd=${MAKE:-make}
results=$(mktemp -d "${TMPDIR:-/tmp}/vllm-dr-lanes.XXXXXX")
trap 'rm -rf "$results"' EXIT

run_lane() {  # lane name, gates...
  local name=$1 gate start rc
  shift
  : >"$results/$name"
  for gate in "$@"; do
    start=$SECONDS
    "$make_cmd" --no-print-directory "$gate" 2>&1 | tee "$results/$name.$gate.log" | sed -u "s/^/[$name] /"
    rc=${PIPESTATUS[0]}
    printf '%s\t%s\t%s\t%s\n' "$gate" "$name" "$((SECONDS - start))" "$rc" >>"$results/$name"
  done
}

lanes=()
for spec in "$@"; do
  name=${spec%%:*}
  read -r -a gates <<<"${spec#*:}"
  lanes+=("$name" "${gates[*]}")
done

start=$SECONDS
if [ "${VLLM_DR_LANES:-2}" = 1 ]; then
  for ((i = 0; i < ${#lanes[@]}; i += 2)); do
    read -r -a gates <<<"${lanes[i + 1]}"
    run_lane "${lanes[i]}" "${gates[@]}"
  done
else
  pids=()
  for ((i = 0; i < ${#lanes[@]}; i += 2)); do
    read -r -a gates <<<"${lanes[i + 1]}"
    run_lane "${lanes[i]}" "${gates[@]}" &
    pids+=($!)
  done
  wait "${pids[@]}"
fi

status=0 failed=()
echo
printf '%-18s %-6s %7s  %s\n' gate lane seconds result
for ((i = 0; i < ${#lanes[@]}; i += 2)); do
  while IFS=$'\t' read -r gate lane seconds rc; do
    printf '%-18s %-6s %7s  %s\n' "$gate" "$lane" "$seconds" "$([ "$rc" = 0 ] && echo passed || echo FAILED)"
    [ "$rc" = 0 ] || { status=1; failed+=("$lane" "$gate"); }
  done <"$results/${lanes[i]}"
done
printf '%-18s %-6s %7s  %s\n' all '' "$((SECONDS - start))" "$([ $status = 0 ] && echo passed || echo FAILED)"
for ((i = 0; i < ${#failed[@]}; i += 2)); do
  lane=${failed[i]} gate=${failed[i + 1]}
  echo
  echo "== why $gate failed (its whole output is above, each line marked [$lane])"
  # pytest: the short summary's FAILED/ERROR lines; ansible: fatal and failed task lines; make: its error lines
  grep -E '^(FAILED|ERROR) |^E  +[A-Za-z]|^fatal: |^failed: |^ERROR[!:]|^make(\[[0-9]+\])?: \*\*\*' \
    "$results/$lane.$gate.log" | cut -c1-400 | tail -n 40
  echo "-- its last lines:"
  tail -n 15 "$results/$lane.$gate.log" | cut -c1-400
done
exit $status
