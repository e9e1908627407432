#!/usr/bin/env bash
# End-to-end tests of `topo-run doctor` on the private Slurm cluster: every check OK on a
# cluster set up as topo-run needs (on the login side and as a job step of 2 nodes x 2),
# then each common mistake made on purpose, each giving its WARN or FAIL line with its
# fix: no topology.conf, binding off by default, an unbound step, a tiny or full
# /dev/shm, a missing PMPI library, a node missing from the map, no single copy, a bad
# setting, tasks that disagree, no PMIx. Runs as root. Every srun runs under `timeout`.
#
#   tests/e2e/doctor.sh [BIN_DIR]     (BIN_DIR holds topo-run and libtopo_preload.so)
#
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$(cd "${1:-$ROOT/target/release}" && pwd)"
TOPO_RUN="$BIN/topo-run"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/topo-run-e2e-doctor.XXXXXX")"
T=90
# shellcheck source=tests/e2e/lib.sh
source "$ROOT/tests/e2e/lib.sh"

for b in "$TOPO_RUN" "$BIN/libtopo_preload.so"; do
  [[ -e $b ]] || { echo "doctor.sh: $b is not built (cargo build --release -p topo-run -p topo-preload)" >&2; exit 2; }
done
cleanup() {
  umount "$WORK/tinyshm" "$WORK/fullshm" 2>/dev/null
  stop_cluster
  rm -rf "$WORK"
}
trap cleanup EXIT

# expect NAME CODE PATTERN...: the last command's exit code is CODE and its output
# matches every PATTERN (extended regular expressions, one line each).
expect() {
  local name=$1 code=$2; shift 2
  local p missing=()
  for p in "$@"; do grep -Eq -- "$p" "$WORK/out" || missing+=("$p"); done
  if [[ $RC -ne $code ]]; then
    bad "$name" "exit $RC, expected $code" "$(grep -E '^(WARN|FAIL|doctor:)' "$WORK/out" | head -6)"
  elif (( ${#missing[@]} )); then
    bad "$name" "no line matches: ${missing[*]}" "$(grep -E '^(WARN|FAIL|doctor:)' "$WORK/out" | head -6)"
  else
    ok "$name"
  fi
}
# both CMD...: `run` with stderr appended to stdout in $WORK/out (two descriptors on one
# file would overwrite each other).
both() { run "$WORK/out" "$WORK/err" "$@"; cat "$WORK/err" >>"$WORK/out"; }
# doctor ARGS...: topo-run doctor on the login side of the cluster, into $WORK/out.
doctor() { both "$TOPO_RUN" doctor "$@"; }
# step SRUN_ARGS... -- ARGS...: doctor as a job step.
step() {
  local srun_args=()
  while [[ $1 != -- ]]; do srun_args+=("$1"); shift; done
  shift
  both srun --mpi=pmix "${srun_args[@]}" "$TOPO_RUN" doctor "$@"
}
NO_PROBLEM='^doctor: [0-9]+ OK, [0-9]+ info, 0 warning\(s\), 0 failure\(s\)$'

echo "== a cluster set up as topo-run needs (topology.conf beside slurm.conf, binding on)"
export DEV_CLUSTER_TOPOLOGY="$ROOT/slurm/maps/topology.conf"
start_cluster 2
doctor
expect "doctor on the login side: every check OK" 0 "$NO_PROBLEM" \
  '^OK +slurm +slurm-wlm [0-9.]+; MPI plugins: .*pmix' '^OK +binding ' \
  '^OK +network map .*topology.conf: 3 switches; all 2 nodes of the cluster are in it' \
  '^OK +pmix ' '^OK +mpi .*libmpi.so.40' '^OK +pmpi library .*libtopo_preload.so serves Open MPI' \
  '^OK +shared memory ' '^OK +limits ' '^OK +single copy ' '^OK +hwloc '
step -N2 -n4 --cpu-bind=cores --
expect "srun -N2 -n4 topo-run doctor: every check OK, one report, tasks agree" 0 "$NO_PROBLEM" \
  '^topo-run doctor in a job step: 4 task\(s\) on 2 node\(s\)$' \
  '^OK +task binding +every task is bound' '^OK +agreement +all 4 tasks answered, and agree'
if (( $(grep -c '^doctor:' "$WORK/out") == 1 )); then ok "one report for the whole step"
else bad "one report for the whole step" "$(grep -c '^doctor:' "$WORK/out") summaries"; fi
# The same as one JSON object.
step -N2 -n4 --cpu-bind=cores -- --format json
if [[ $RC -eq 0 ]] && python3 -c '
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["failures"] == 0 and doc["warnings"] == 0, doc
checks = {f["check"] for f in doc["findings"]}
for c in ("slurm", "binding", "network map", "shared memory", "single copy", "task binding", "agreement"):
    assert c in checks, c
assert all(f["status"] in ("OK", "INFO") for f in doc["findings"])
' "$WORK/out" 2>"$WORK/py.err"; then
  ok "--format json: one object, every finding OK or INFO"
else
  bad "--format json" "exit $RC" "$(head -3 "$WORK/py.err")" "$(head -c 300 "$WORK/out")"
fi

# A node missing from the map: the map names only node1.
printf 'switches:\n  leaf1:\n    nodes: node1\n' >"$WORK/one-node.yaml"
doctor --network-map "$WORK/one-node.yaml"
expect "a node missing from the map: FAIL, exit 16" 16 \
  '^FAIL +network map .*1 of the cluster.s 2 nodes are missing from it \(node2\): jobs on them stop \(exit 6\)' \
  'fix: add those nodes under their leaf switch'
doctor --network-map "$WORK/one-node.yaml" --format json
expect "the same in JSON: the FAIL and its fix, exit 16" 16 \
  '"failures":1' '"check":"network map"[^}]*"status":"FAIL"|"status":"FAIL"[^}]*"check":"network map"' \
  '"fix":"add those nodes under their leaf switch"'
printf 'switches:\n  leaf1:\n    switches: nowhere\n' >"$WORK/broken.yaml"
doctor --network-map "$WORK/broken.yaml"
expect "a broken map: FAIL, exit 16" 16 '^FAIL +network map .*broken.yaml: ' 'fix: correct the file'

# Tasks that disagree: one node's first task has other settings.
both srun --mpi=pmix -N2 -n4 --cpu-bind=cores bash -c \
  'if [ "$SLURM_PROCID" = 2 ]; then export TOPO_RUN_SLOTS=16; fi; exec "$0" doctor' "$TOPO_RUN"
expect "tasks with other settings: the agreement FAILs" 16 \
  '^INFO +settings +\[rank 0 on node1\] runtime settings: the defaults' \
  '^INFO +settings +\[rank 2 on node2\] runtime settings: slots:16' \
  '^FAIL +agreement +the tasks disagree on settings'

# No PMIx: rank 0 reports, the agreement is not checked.
both srun --mpi=pmi2 -N2 -n4 --cpu-bind=cores "$TOPO_RUN" doctor
expect "srun --mpi=pmi2: agreement not checked (WARN)" 0 \
  '^WARN +agreement +not checked: without a PMIx server' 'fix: run doctor as srun --mpi=pmix'

echo "== the common mistakes"
# The PMPI library missing: a copy of topo-run with nothing beside it, and a wrong path.
mkdir -p "$WORK/bin" && cp "$TOPO_RUN" "$WORK/bin/topo-run"
both env -u TOPO_RUN_PRELOAD_LIB "$WORK/bin/topo-run" doctor
expect "no PMPI library beside topo-run: WARN" 0 \
  '^WARN +pmpi library +libtopo_preload.so not found \(looked at .*/bin/libtopo_preload.so' \
  'fix: install it with scripts/install.sh'
both env TOPO_RUN_PRELOAD_LIB=/nonexistent/libtopo_preload.so "$TOPO_RUN" doctor
expect "TOPO_RUN_PRELOAD_LIB names no file: WARN" 0 \
  '^WARN +pmpi library +libtopo_preload.so not found \(looked at /nonexistent/libtopo_preload.so\)'

# /dev/shm too small for a node's segment, and large enough but full.
mkdir -p "$WORK/tinyshm" "$WORK/fullshm"
mount -t tmpfs -o size=16k tmpfs "$WORK/tinyshm"
both env TOPO_RUN_SHM_DIR="$WORK/tinyshm" "$TOPO_RUN" doctor
expect "a tiny shared-memory directory: FAIL, exit 16" 16 \
  "^FAIL +shared memory +$WORK/tinyshm: 16.0 KiB in all; .*too small" 'fix: make .* larger'
# Large enough for a node's segment (about 2 MiB for 2 tasks with the default 128 KiB
# slots), but all but 0.4 MiB of it taken.
mount -t tmpfs -o size=8m tmpfs "$WORK/fullshm"
head -c 8000000 /dev/zero >"$WORK/fullshm/filler" 2>/dev/null
both env TOPO_RUN_SHM_DIR="$WORK/fullshm" "$TOPO_RUN" doctor
expect "a full shared-memory directory: FAIL, exit 16" 16 \
  "^FAIL +shared memory +$WORK/fullshm: .*reserving it failed: .*No space left"
if [[ -z $(find "$WORK/tinyshm" "$WORK/fullshm" -name 'topo-run.doctor.*') ]]; then
  ok "the reservation leaves nothing behind"
else
  bad "the reservation leaves nothing behind" "$(find "$WORK/tinyshm" "$WORK/fullshm" -name 'topo-run.*')"
fi
umount "$WORK/tinyshm" "$WORK/fullshm"

# Single copy refused (simulated: this machine has no Yama ptrace_scope to set).
both env TOPO_RUN_FAULT=no-single-copy "$TOPO_RUN" doctor
expect "single copy refused between siblings: WARN" 0 \
  '^WARN +single copy .*process_vm_readv between sibling processes fails \(simulated' \
  'fix: sysctl kernel.yama.ptrace_scope=0'

# A bad setting stops every launch.
doctor --slots 0
expect "a bad runtime setting: FAIL, exit 16" 16 '^FAIL +settings +.*slots' 'fix: correct the option'

echo "== no topology.conf"
unset DEV_CLUSTER_TOPOLOGY
start_cluster 2
doctor
expect "no topology.conf beside slurm.conf: WARN" 0 \
  '^WARN +network map +no topology.conf or topology.yaml in .*: jobs get no switch levels' \
  'fix: describe the switches in topology.conf'

echo "== binding off by default (TaskPluginParam=None)"
export DEV_CLUSTER_EXTRA_CONF="TaskPluginParam=None"
start_cluster 2
doctor
expect "TaskPluginParam=None: WARN" 0 \
  '^WARN +binding +TaskPlugin=task/affinity, TaskPluginParam=none: tasks are not bound unless srun asks' \
  'fix: job scripts need srun --cpu-bind=cores'
step -N2 -n4 --
expect "a step without --cpu-bind there: FAIL task binding, exit 16" 16 \
  '^FAIL +task binding +a task is not bound' 'fix: srun --cpu-bind=cores'
if ! grep -q 'topo-run: error' "$WORK/out" || (( $(grep -c 'topo-run: error' "$WORK/out") == 1 )); then
  ok "only rank 0 prints the error line"
else
  bad "only rank 0 prints the error line" "$(grep -c 'topo-run: error' "$WORK/out") lines"
fi
unset DEV_CLUSTER_EXTRA_CONF
stop_cluster

summary
