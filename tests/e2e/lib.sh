# Helpers shared by the end-to-end scripts (launcher.sh, runtime.sh, preload.sh).
# Sourced after the script has set ROOT (the repository), WORK (its scratch directory) and
# T (seconds allowed for any single srun/mpirun). Defines CLUSTER, the PASS/FAIL counters
# and the functions below.

CLUSTER="$ROOT/slurm/dev-cluster"
export DEV_CLUSTER_DIR="${DEV_CLUSTER_DIR:-${TMPDIR:-/tmp}/topo-run-dev-cluster}"
PASS=0; FAIL=0

ok() { PASS=$((PASS + 1)); echo "ok   $1"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }

# summary: the last line every script prints; fails if any check failed.
summary() { echo "$PASS passed, $FAIL failed"; (( FAIL == 0 )); }

# give_up NAME DETAIL...: a failure after which nothing else can run.
give_up() { bad "$@"; summary; exit 1; }

# run OUT ERR CMD...: runs a Slurm client command against the cluster, under timeout.
# Sets RC.
run() {
  local out=$1 err=$2; shift 2
  timeout "$T" "$CLUSTER" exec "$@" >"$out" 2>"$err"
  RC=$?
}

# Segments of this test run only: topo-run names in /dev/shm owned by this user that were
# not there when the script started (other users' jobs on the machine, and this user's
# other runs, are not ours to count or remove).
SHM_BASELINE=$(find /dev/shm -maxdepth 1 -name 'topo-run.*' -printf '%f\n' 2>/dev/null | sort)
shm_leftover_names() {
  find /dev/shm -maxdepth 1 -name 'topo-run.*' -user "$(id -u)" -printf '%f\n' 2>/dev/null | sort \
    | comm -23 - <(printf '%s\n' "$SHM_BASELINE")
}
# The number of this run's segments left in /dev/shm.
shm_leftovers() { shm_leftover_names | grep -c . ; }

# start_cluster N: (re)starts the private cluster with N emulated nodes, or gives up.
start_cluster() {
  if ! "$CLUSTER" start "$1" >"$WORK/start.log" 2>&1; then
    cat "$WORK/start.log"
    give_up "dev-cluster start $1" "the cluster did not start"
  fi
}

# stop_cluster: stops it (for the scripts' cleanup traps).
stop_cluster() { "$CLUSTER" stop >/dev/null 2>&1 || true; }
