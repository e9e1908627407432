#!/usr/bin/env bash
# Runs every cargo-fuzz target for SECONDS each (default 600) and prints, per target, the
# executions and whether it crashed. Needs cargo-fuzz (`cargo install cargo-fuzz`) and a
# nightly toolchain (or RUSTC_BOOTSTRAP=1). Crashing inputs stay in fuzz/artifacts/TARGET/.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${1:-600}; shift || true
targets=("$@")
if (( ${#targets[@]} == 0 )); then
  mapfile -t targets < <(cargo +nightly fuzz list 2>/dev/null)
fi
status=0
for t in "${targets[@]}"; do
  log=$(mktemp)
  cargo +nightly fuzz run -O "$t" -- -max_total_time="$secs" >"$log" 2>&1
  rc=$?
  execs=$(grep -Eo 'Done [0-9]+ runs' "$log" | grep -Eo '[0-9]+' | tail -1)
  if (( rc == 0 )); then
    echo "$t: ${execs:-?} executions in ${secs} s, no crash"
  else
    status=1
    echo "$t: CRASH (exit $rc); $(grep -E 'Test unit written to' "$log" | tail -1)"
    grep -E 'panicked at|ERROR: libFuzzer' "$log" | head -3
  fi
  rm -f "$log"
done
exit $status
