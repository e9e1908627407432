#!/usr/bin/env bash
# End-to-end test of the applications harness (benchmarks/apps/run.sh) on tiny inputs:
# LAMMPS (LJ melt, EAM, the peptide), HPCC, Quantum ESPRESSO (k-point pools) and an mpi4py program run
# natively and under topo-run on the dev cluster; every run exits 0 with a profile, the
# results agree (the harness checks them), and the report gives each application's share
# of collective calls on topo-run's path. Runs as root.
#
#   tests/e2e/apps.sh [BIN_DIR]     (BIN_DIR holds topo-run and libtopo_preload.so)
#
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$(cd "${1:-$ROOT/target/release}" && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/topo-run-e2e-apps.XXXXXX")"
# shellcheck source=tests/e2e/lib.sh
source "$ROOT/tests/e2e/lib.sh"
trap 'stop_cluster; rm -rf "$WORK"' EXIT

APPS=(lammps-melt lammps-eam lammps-peptide hpcc qe mpi4py)

# check NODES PER_NODE: the harness on NODES x PER_NODE ranks.
check() {
  local nodes=$1 per=$2 out="$WORK/out-$1x$2" t0=$SECONDS app row
  timeout 900 bash "$ROOT/benchmarks/apps/run.sh" --tiny --nodes "$nodes" --per-node "$per" \
    --bin "$BIN" --out "$out" >"$WORK/log" 2>&1
  local rc=$?
  if ((rc != 0)); then
    bad "apps harness, $nodes x $per ranks: exit $rc" "$(grep -E 'FAIL|apps:' "$WORK/log" | head -8)"
    return
  fi
  for app in "${APPS[@]}"; do
    row=$(grep "^| $app |" "$out/apps.md")
    if [[ -z $row ]]; then
      bad "apps harness, $nodes x $per ranks: no row for $app" "$(head -12 "$out/apps.md")"
    elif ! [[ $row =~ \|\ ([0-9]+)\ of\ ([0-9]+)\ \( ]] || ((BASH_REMATCH[1] == 0)); then
      bad "apps harness, $nodes x $per ranks: $app made no collective call on topo-run's path" "$row"
    else
      ok "apps harness, $nodes x $per ranks, $app: ${BASH_REMATCH[1]} of ${BASH_REMATCH[2]} collective calls on topo-run's path, results $(awk -F'|' '{print $(NF-1)}' <<<"$row" | xargs)"
    fi
  done
  [[ -s $out/apps.svg ]] || bad "apps harness, $nodes x $per ranks: no plot"
  echo "     ($((SECONDS - t0)) s)"
}

check 1 2
check 2 2
summary
