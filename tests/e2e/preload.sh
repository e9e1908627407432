#!/usr/bin/env bash
# End-to-end tests of the PMPI library (libtopo_preload.so): unmodified C and Fortran MPI
# programs under `srun --mpi=pmix topo-run` on the private dev cluster (1 node x 2, 3 and
# 4 ranks, and 2 and 4 emulated nodes), with results compared against runs without topo-run, the statistics,
# the launcher's preload decision and options, and the fault cases. Runs as root. Every
# srun runs under `timeout`.
#
#   tests/e2e/preload.sh [BIN_DIR]     (BIN_DIR holds topo-run, coll-check, libtopo_preload.so)
#
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$(cd "${1:-$ROOT/target/release}" && pwd)"
TOPO_RUN="$BIN/topo-run"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/topo-run-e2e-preload.XXXXXX")"
T=240  # seconds allowed for any single srun
# shellcheck source=tests/e2e/lib.sh
source "$ROOT/tests/e2e/lib.sh"

for b in "$TOPO_RUN" "$BIN/coll-check" "$BIN/libtopo_preload.so"; do
  [[ -e $b ]] || { echo "preload.sh: $b is not built (cargo build --release -p topo-run -p topo-examples -p topo-preload)" >&2; exit 2; }
done

cleanup() { stop_cluster; rm -rf "$WORK"; }
trap cleanup EXIT

# The test programs, built with Open MPI's compiler wrappers.
CPROG="$WORK/preload-check"
FPROG="$WORK/preload-check-f"
if ! mpicc -O2 -Wall -o "$CPROG" "$ROOT/examples/c/preload-check.c" 2>"$WORK/cc.log"; then
  cat "$WORK/cc.log"; give_up "mpicc examples/c/preload-check.c"
fi
NBPROG="$WORK/preload-nonblocking"
if ! mpicc -O2 -Wall -o "$NBPROG" "$ROOT/examples/c/preload-nonblocking.c" 2>"$WORK/cc.log"; then
  cat "$WORK/cc.log"; give_up "mpicc examples/c/preload-nonblocking.c"
fi
IEPROG="$WORK/internal-error"
if ! mpif90 -O2 -o "$IEPROG" "$ROOT/examples/fortran/internal-error.f90" 2>"$WORK/fc.log"; then
  cat "$WORK/fc.log"; give_up "mpif90 examples/fortran/internal-error.f90"
fi
F08PROG="$WORK/comm-f08"
if ! mpif90 -O2 -J "$WORK" -o "$F08PROG" "$ROOT/examples/fortran/comm-f08.f90" 2>"$WORK/fc.log"; then
  cat "$WORK/fc.log"; give_up "mpif90 examples/fortran/comm-f08.f90"
fi
COMMSPROG="$WORK/preload-comms"
if ! mpicc -O2 -Wall -o "$COMMSPROG" "$ROOT/examples/c/preload-comms.c" 2>"$WORK/cc.log"; then
  cat "$WORK/cc.log"; give_up "mpicc examples/c/preload-comms.c"
fi
THREADSPROG="$WORK/preload-threads"
if ! mpicc -O2 -Wall -Wno-unused-function -pthread -o "$THREADSPROG" "$ROOT/examples/c/preload-threads.c" 2>"$WORK/cc.log"; then
  cat "$WORK/cc.log"; give_up "mpicc examples/c/preload-threads.c"
fi
PROFPROG="$WORK/profile-known"
if ! mpicc -O2 -Wall -o "$PROFPROG" "$ROOT/examples/c/profile-known.c" 2>"$WORK/cc.log"; then
  cat "$WORK/cc.log"; give_up "mpicc examples/c/profile-known.c"
fi
CASES="$WORK/preload-cases"
if ! mpicc -O2 -Wall -o "$CASES" "$ROOT/examples/c/preload-cases.c" 2>"$WORK/cc.log"; then
  cat "$WORK/cc.log"; give_up "mpicc examples/c/preload-cases.c"
fi
if ! mpif90 -O2 -o "$FPROG" "$ROOT/examples/fortran/preload-check.f90" 2>"$WORK/fc.log"; then
  cat "$WORK/fc.log"; give_up "mpif90 examples/fortran/preload-check.f90"
fi
# The Fortran program on communicators of every kind, through each of the three bindings
# (mpif.h, use mpi, use mpi_f08), built with Open MPI's and with MPICH's wrappers.
declare -A FCOMMS MFCOMMS
for b in mpifh:-DMPIFH mpi: f08:-DF08; do
  FCOMMS[${b%%:*}]="$WORK/preload-comms-f-${b%%:*}"
  MFCOMMS[${b%%:*}]="$WORK/preload-comms-f-${b%%:*}-mpich"
  mkdir -p "$WORK/mod-${b%%:*}" "$WORK/mmod-${b%%:*}"
  # mpif.h declares no interfaces: gfortran 10+ needs leave to pass buffers of any type.
  if ! mpif90 -O2 ${b#*:} -fallow-argument-mismatch -J "$WORK/mod-${b%%:*}" -o "${FCOMMS[${b%%:*}]}" \
      "$ROOT/examples/fortran/preload-comms.F90" 2>"$WORK/fc.log" \
    || ! mpif90.mpich -O2 ${b#*:} -fallow-argument-mismatch -J "$WORK/mmod-${b%%:*}" -o "${MFCOMMS[${b%%:*}]}" \
      "$ROOT/examples/fortran/preload-comms.F90" 2>>"$WORK/fc.log"; then
    cat "$WORK/fc.log"; give_up "mpif90 ${b#*:} examples/fortran/preload-comms.F90"
  fi
done
# The blocking collectives the C test program calls, every one on topo-run's path.
C_CALLS="MPI_Bcast MPI_Reduce MPI_Allreduce MPI_Barrier MPI_Allgather MPI_Gather MPI_Scatter MPI_Gatherv MPI_Scatterv MPI_Scan MPI_Exscan MPI_Reduce_scatter_block MPI_Reduce_scatter MPI_Alltoall MPI_Alltoallv MPI_Allgatherv"
# Every collective the library serves, as the statistics name them.
ALL_CALLS="MPI_Bcast MPI_Reduce MPI_Allreduce MPI_Barrier MPI_Allgather MPI_Ibcast MPI_Ireduce MPI_Iallreduce MPI_Ibarrier MPI_Iallgather"
# A plain C program built with MPICH, and the PMPI library built against MPICH
# (MPICC=mpicc.mpich CARGO_TARGET_DIR=target/mpich, as scripts/test.sh does).
MPICH_LIB="${MPICH_BIN:-$ROOT/target/mpich/release}/libtopo_preload.so"
MHELLO="$WORK/mpi-hello-mpich"
if ! mpicc.mpich -O2 -Wall -o "$MHELLO" "$ROOT/examples/c/mpi-hello.c" 2>"$WORK/cc.log"; then
  cat "$WORK/cc.log"; give_up "mpicc.mpich examples/c/mpi-hello.c"
fi
# The C and Fortran test programs built with MPICH's wrappers.
MCPROG="$WORK/preload-check-mpich"
MNBPROG="$WORK/preload-nonblocking-mpich"
MFPROG="$WORK/preload-check-f-mpich"
MCASES="$WORK/preload-cases-mpich"
for c in "preload-check:$MCPROG" "preload-nonblocking:$MNBPROG" "preload-cases:$MCASES"; do
  if ! mpicc.mpich -O2 -Wall -o "${c#*:}" "$ROOT/examples/c/${c%%:*}.c" 2>"$WORK/cc.log"; then
    cat "$WORK/cc.log"; give_up "mpicc.mpich examples/c/${c%%:*}.c"
  fi
done
MTHREADS="$WORK/preload-threads-mpich"
MLIVE="$WORK/live-comms-mpich"
if ! mpicc.mpich -O2 -Wall -o "$MLIVE" "$ROOT/benchmarks/live-comms.c" 2>"$WORK/cc.log"; then
  cat "$WORK/cc.log"; give_up "mpicc.mpich benchmarks/live-comms.c"
fi
if ! mpicc.mpich -O2 -Wall -Wno-unused-function -pthread -o "$MTHREADS" "$ROOT/examples/c/preload-threads.c" 2>"$WORK/cc.log"; then
  cat "$WORK/cc.log"; give_up "mpicc.mpich examples/c/preload-threads.c"
fi
if ! mpif90.mpich -O2 -o "$MFPROG" "$ROOT/examples/fortran/preload-check.f90" 2>"$WORK/fc.log"; then
  cat "$WORK/fc.log"; give_up "mpif90.mpich examples/fortran/preload-check.f90"
fi
# The C benchmarks of the library (run by hand, docs/preload.md) still compile; comm-churn
# also runs below.
CHURN="$WORK/comm-churn"
LIVE="$WORK/live-comms"
for b in preload-bench back-to-back comm-churn live-comms handoff; do
  if ! mpicc -O2 -Wall -o "$WORK/$b" "$ROOT/benchmarks/$b.c" 2>"$WORK/cc.log"; then
    cat "$WORK/cc.log"; give_up "mpicc benchmarks/$b.c"
  fi
done
# MPICH 4.0.2's own device (ch4) collectives crash on an in-place MPI_Reduce at a root other
# than 0 (a SIGSEGV reading MPI_IN_PLACE's address, without topo-run; the test programs'
# calls on a reversed split are handed to MPI): the runs of the MPICH programs, with and
# without topo-run, use MPICH's generic collectives.
MPICH_GENERIC=--export=ALL,MPIR_CVAR_DEVICE_COLLECTIVES=none

# tcp_warning ERR: the message and error of Open MPI's TCP warning in ERR, on one line.
tcp_warning() {
  grep -E '^ *(Message|Error): ' "$1" | head -2 | sed 's/^ *//' | paste -sd ';' -
}
# crash_lines ERR: what a process that died by a signal left in ERR beyond its first
# lines: the signal, its address, the frames and the TCP warning's reason.
crash_lines() {
  grep -E 'Signal:|Signal code|Failing at address|\[ *[0-9]+\] |^ *(Message|Error): ' "$1" | head -14
}
passed_line() { [[ $(tail -1 "$1") =~ ^[0-9]+\ passed,\ 0\ failed$ ]]; }
# The last run without topo-run died by a signal (or hung after one of its ranks did).
native_died() { (( RC > 128 )) || { (( RC == 124 )) && grep -q "Process received signal" "$WORK/native.err"; }; }
digest() { grep -o 'digest: [0-9a-f]*' "$1"; }
# The statistics line of CALL shows at least one call on topo-run's path.
took_our_path() { grep -Eq "topo-run: stats: rank 0.*: $2: [1-9][0-9]* topo-run" "$1"; }

# check_prog NAME PROG "CALLS" "HANDOFFS" SRUN_ARGS...: PROG --quick (or $PROG_OPTS) passes
# natively and under topo-run, with the same digest, no segment left, every call in CALLS on topo-run's
# path, and every reason in HANDOFFS ('|'-separated) in the statistics.
check_prog() {
  local name=$1 prog=$2 calls=$3 handoffs=$4; shift 4
  local t0=$SECONDS opts=${PROG_OPTS:---quick}
  run "$WORK/native.out" "$WORK/native.err" srun "$@" "$prog" $opts
  # The reference run has no topo-run in it, but Open MPI 4.1.4 itself dies by a signal now
  # and then on the emulated nodes (a SIGSEGV at address 0 in 1 of many CI runs, twice in a
  # row once on 4 nodes x 2; once the other ranks then hung until the timeout, exit 124):
  # it is taken up to twice more then, and the line says so.
  local again="" tries=1
  while native_died && (( tries < 3 )); do
    tries=$((tries + 1))
    again=", the run without topo-run taken $tries times (it died by a signal before, exit $RC)"
    run "$WORK/native.out" "$WORK/native.err" srun "$@" "$prog" $opts
  done
  if [[ $RC -ne 0 ]] || ! passed_line "$WORK/native.out"; then
    bad "$name: without topo-run" "exit $RC: $(tail -1 "$WORK/native.out")" "$(head -4 "$WORK/native.err")" \
      "$(crash_lines "$WORK/native.err")"; return
  fi
  run "$WORK/topo.out" "$WORK/topo.err" env TOPO_RUN_STATS=1 srun "$@" "$TOPO_RUN" -- "$prog" $opts
  # The same for Open MPI's TCP transport between emulated nodes: in 1 of many CI runs of
  # 4 nodes x 2 a process died by SIGSEGV right after Open MPI's own warning that a TCP
  # connect() between two of its processes failed. topo-run does not open, close or touch
  # MPI's sockets; a death by signal that follows that warning is taken once more, and
  # the line says so with the warning's reason. So is a run that hung after it (exit 124:
  # once, 2026-11-29, the MULTIPLE threads program on 2 nodes x 2, which passed 11 runs
  # by hand right after). Any other failure counts at once.
  if (( RC > 128 || RC == 124 )) && grep -q "Open MPI failed to TCP connect\|failed to handshake with a connecting peer" "$WORK/topo.err"; then
    again+=", the run under topo-run taken twice (it $( (( RC == 124 )) && echo "hung" || echo "died by signal $((RC - 128))") after Open MPI's TCP warning: $(tcp_warning "$WORK/topo.err"))"
    run "$WORK/topo.out" "$WORK/topo.err" env TOPO_RUN_STATS=1 srun "$@" "$TOPO_RUN" -- "$prog" $opts
  fi
  local missing="" unseen="" c h
  for c in $calls; do
    took_our_path "$WORK/topo.err" "$c" || missing+=" $c"
  done
  local IFS='|'
  for h in $handoffs; do
    grep -q "$h" "$WORK/topo.err" || unseen+=" '$h'"
  done
  unset IFS
  if [[ $RC -ne 0 ]] || ! passed_line "$WORK/topo.out"; then
    bad "$name: under topo-run" "exit $RC: $(tail -1 "$WORK/topo.out")" "$(grep -v '^ok' "$WORK/topo.err" | head -6)" \
      "$(crash_lines "$WORK/topo.err")"
  elif [[ "$(digest "$WORK/topo.out")" != "$(digest "$WORK/native.out")" ]]; then
    bad "$name: results differ from MPI's own" "$(digest "$WORK/topo.out") vs $(digest "$WORK/native.out")"
  elif [[ -n $missing ]]; then
    bad "$name: not on topo-run's path:$missing" "$(grep stats "$WORK/topo.err" | head -6)"
  elif [[ -n $unseen ]]; then
    bad "$name: the statistics do not show the hand-offs:$unseen" "$(grep stats "$WORK/topo.err" | head -6)"
  elif (( $(shm_leftovers) > 0 )); then
    bad "$name: segments left in /dev/shm"
  else
    ok "$name: $(tail -1 "$WORK/topo.out"), same $(digest "$WORK/topo.out") as without topo-run ($((SECONDS - t0)) s$again)"
  fi
}

# all_ours NAME PATTERN: the last run handed no call to MPI for a reason that matches
# PATTERN; the line shows the calls by communicator kind.
all_ours() {
  if grep -q "$2" "$WORK/topo.err"; then
    bad "$1: calls handed to MPI" "$(grep stats "$WORK/topo.err" | head -8)"
  else
    ok "$1: $(grep -o 'by communicator: .*' "$WORK/topo.err" | head -1)"
  fi
}

# check_c NAME SRUN_ARGS...: the blocking C program (every blocking call ours, and the
# hand-offs it provokes).
check_c() {
  local name=$1; shift
  check_prog "$name" "$CPROG" "$C_CALLS" \
    "communicator without a topo-run context|derived datatype|MINLOC/MAXLOC pair datatype" "$@"
}

# check_nb NAME SRUN_ARGS...: the nonblocking C program (every nonblocking call ours, and
# its calls on a reversed split and with zero counts handed to MPI).
check_nb() {
  local name=$1; shift
  check_prog "$name" "$NBPROG" "MPI_Ibcast MPI_Ireduce MPI_Iallreduce MPI_Ibarrier MPI_Iallgather MPI_Iscan MPI_Iexscan MPI_Ialltoall MPI_Ialltoallv MPI_Igather MPI_Iscatter MPI_Igatherv MPI_Iscatterv MPI_Iallgatherv MPI_Ireduce_scatter_block MPI_Ireduce_scatter" \
    "communicator without a topo-run context|zero count" "$@"
}

# check_f NAME SRUN_ARGS...: the Fortran program passes natively and under topo-run, and
# its calls take topo-run's path.
check_f() {
  local name=$1; shift
  check_fortran "$name" "$FPROG" "$@"
}

# check_fortran NAME PROG SRUN_ARGS...: check_f for the Fortran program PROG.
check_fortran() {
  local name=$1 FPROG=$2; shift 2
  run "$WORK/native.out" "$WORK/native.err" srun "$@" "$FPROG"
  if [[ $RC -ne 0 ]] || ! passed_line "$WORK/native.out"; then
    bad "$name: without topo-run" "exit $RC: $(tail -1 "$WORK/native.out")" "$(head -4 "$WORK/native.err")"; return
  fi
  run "$WORK/topo.out" "$WORK/topo.err" env TOPO_RUN_STATS=1 srun "$@" "$TOPO_RUN" -- "$FPROG"
  if [[ $RC -ne 0 ]] || ! passed_line "$WORK/topo.out"; then
    bad "$name: under topo-run" "exit $RC: $(tail -1 "$WORK/topo.out")" "$(head -6 "$WORK/topo.err")"
  elif ! took_our_path "$WORK/topo.err" MPI_Allreduce || ! took_our_path "$WORK/topo.err" MPI_Bcast \
     || ! took_our_path "$WORK/topo.err" MPI_Gather || ! took_our_path "$WORK/topo.err" MPI_Scatter \
     || ! took_our_path "$WORK/topo.err" MPI_Scan || ! took_our_path "$WORK/topo.err" MPI_Exscan \
     || ! took_our_path "$WORK/topo.err" MPI_Reduce_scatter_block || ! took_our_path "$WORK/topo.err" MPI_Alltoall \
     || ! took_our_path "$WORK/topo.err" MPI_Alltoallv || ! took_our_path "$WORK/topo.err" MPI_Allgatherv \
     || ! took_our_path "$WORK/topo.err" MPI_Gatherv || ! took_our_path "$WORK/topo.err" MPI_Scatterv; then
    bad "$name: Fortran calls did not reach the library" "$(grep stats "$WORK/topo.err" | head -8)"
  else
    ok "$name: $(tail -1 "$WORK/topo.out") natively and under topo-run, on topo-run's path"
  fi
}

# check_profile NAME topo|native SRUN_ARGS...: examples/c/profile-known.c under
# `topo-run -v --profile` (with --native for MPI's own collectives) passes, rank 0 prints
# the table, and the file holds exactly the program's calls (tests/e2e/profile_check.py)
# for the job's RANKS and NODES (set by the caller).
check_profile() {
  local name=$1 mode=$2; shift 2
  local extra=() out
  [[ $mode == native ]] && extra=(--native)
  rm -f "$WORK/profile.json"
  run "$WORK/topo.out" "$WORK/topo.err" srun "$@" "$TOPO_RUN" -v --profile "$WORK/profile.json" \
    "${extra[@]}" -- "$PROFPROG"
  if [[ $RC -ne 0 ]] || ! passed_line "$WORK/topo.out"; then
    bad "$name" "exit $RC: $(tail -1 "$WORK/topo.out")" "$(grep -v '^ok' "$WORK/topo.err" | head -6)"
  elif ! grep -q "topo-run: profile: $RANKS ranks on $NODES nodes" "$WORK/topo.err" \
      || ! grep -q "topo-run: profile written to $WORK/profile.json" "$WORK/topo.err"; then
    bad "$name: no table on stderr with -v" "$(grep 'topo-run: ' "$WORK/topo.err" | tail -4)"
  elif ! out=$(python3 "$ROOT/tests/e2e/profile_check.py" "$WORK/profile.json" "$RANKS" "$NODES" "$mode"); then
    bad "$name: the file" "$out"
  else
    ok "$name: $out"
  fi
}

echo "== 1 node"
start_cluster 1
ONE=(-N1 -n2 --mpi=pmix --cpu-bind=cores)
check_c "C, 1 node x 2 ranks" "${ONE[@]}"
# Its halves have one rank each here: the statistics say so.
if grep -q "rank 0 on .*MPI_Allreduce: .*communicator of one rank" "$WORK/topo.err"; then
  ok "C, 1 node x 2 ranks: calls on one-rank communicators counted as such"
else bad "C, 1 node x 2 ranks: the reason for one-rank communicators" "$(grep 'rank 0.*MPI_Allreduce' "$WORK/topo.err")"; fi
# With room for one segment per process (world's), every other communicator's context goes
# on the node's lanes: its calls stay on topo-run's path, results unchanged.
LANES_USED="on the node's lanes: [1-9][0-9]* communicators; blocking calls: [1-9][0-9]* on a lane"
check_prog "C, 1 node x 2 ranks, TOPO_RUN_MAX_COMMS=1 (the others on the node's lanes)" "$CPROG" \
  "$C_CALLS" \
  "$LANES_USED" "${ONE[@]}" --export=ALL,TOPO_RUN_MAX_COMMS=1
all_ours "C, 1 node x 2 ranks, TOPO_RUN_MAX_COMMS=1" "no room for another context"
# Without lanes (TOPO_RUN_LANES=0) they go to MPI, results unchanged, and the statistics
# say why.
check_prog "C, 1 node x 2 ranks, TOPO_RUN_MAX_COMMS=1 TOPO_RUN_LANES=0" "$CPROG" \
  "$C_CALLS" \
  "no room for another context|communicator of one rank" "${ONE[@]}" \
  --export=ALL,TOPO_RUN_MAX_COMMS=1,TOPO_RUN_LANES=0
# MPI out of communicators for a context's own (simulated: TOPO_RUN_FAULT=no-communicator):
# every communicator but world stays MPI's, results unchanged, nobody aborts.
check_prog "C communicators of every kind, 1 node x 2 ranks, MPI without room for more communicators" \
  "$COMMSPROG" "MPI_Bcast MPI_Allreduce" "no room for another context" "${ONE[@]}" \
  --export=ALL,TOPO_RUN_FAULT=no-communicator
# check_live NAME N KIND SRUN_ARGS...: benchmarks/live-comms.c with N communicators alive
# at once, each with every collective: results right, every call on topo-run's path (the
# contexts past TOPO_RUN_MAX_COMMS on the node's lanes), and /dev/shm's use on rank 0's
# node the same with N live communicators as with 16.
check_live() {
  local name=$1 n=$2 kind=$3; shift 3
  run "$WORK/out" "$WORK/err" env TOPO_RUN_STATS=1 srun "$@" "$TOPO_RUN" -- "$LIVE" "$n" "$kind" 1
  local at16 atn
  at16=$(awk '$1 == 16 { print $10 }' "$WORK/out"); atn=$(awk -v n="$n" '$1 == n { print $10 }' "$WORK/out")
  if [[ $RC -ne 0 ]] || ! grep -q "^live-comms: ok" "$WORK/out"; then
    bad "$name" "exit $RC: $(tail -1 "$WORK/out")" "$(grep -v stats "$WORK/err" | head -4)"
  elif grep -Eq "[0-9] MPI \(" "$WORK/err" || ! grep -q "$LANES_USED" "$WORK/err"; then
    bad "$name: calls handed to MPI, or no lane used" "$(grep stats "$WORK/err" | head -8)"
  elif [[ -z $at16 || -z $atn ]] || (( ${atn#+} > ${at16#+} + 1024 )); then
    bad "$name: /dev/shm grew with the communicators" "$(cat "$WORK/out")"
  else
    ok "$name: /dev/shm ${at16} KiB with 16 live, ${atn} KiB with $n; $(grep -o 'on the node.s lanes: .*' "$WORK/err" | head -1)"
  fi
}
check_live "live-comms, 300 reversed splits alive at once, 1 node x 2" 300 reversed "${ONE[@]}"
check_nb "C nonblocking, 1 node x 2 ranks" "${ONE[@]}"
# The same with the progress thread (TOPO_RUN_PROGRESS=thread, as --progress-thread sets).
check_nb "C nonblocking, 1 node x 2 ranks, progress thread" "${ONE[@]}" --export=ALL,TOPO_RUN_PROGRESS=thread
check_f "Fortran, 1 node x 2 ranks" "${ONE[@]}"
# check_fcomms NAME PROGS SRUN_ARGS...: the Fortran program on communicators of every kind,
# through each binding (PROGS names the array of programs): every collective on topo-run's
# path; on one node, the one-rank communicators (parities, halves, grid rows) are MPI's.
check_fcomms() {
  local name=$1 progs=$2 b; shift 2
  local -n p=$progs
  for b in mpifh mpi f08; do
    check_prog "$name through $b" "${p[$b]}" "$ALL_CALLS MPI_Igatherv MPI_Iscatterv MPI_Ireduce_scatter_block MPI_Ireduce_scatter" "" "$@"
  done
}
check_fcomms "Fortran communicators of every kind, 1 node x 2 ranks," FCOMMS "${ONE[@]}"
# Communicators made and freed by the thousand, each with collectives (benchmarks/comm-churn.c):
# the contexts of freed ones are kept and taken up again, in the call that creates the
# communicator (its 1,000 through the library: at most the first is set up), and what a
# process holds stays the same (file descriptors, /dev/shm files).
for kind in dup reversed; do
  run "$WORK/out" "$WORK/err" srun "${ONE[@]}" --export=ALL,TOPO_RUN_STATS=1 "$TOPO_RUN" -- "$CHURN" 200 2 $kind
  taken=$(sed -n 's/.*rank 0 .*contexts of other communicators: [01] set up, .*(\([0-9]*\) in the call that created.*/\1/p' "$WORK/err")
  if [[ $RC -eq 0 ]] && grep -Eq "fds ([0-9]+) -> \1, /dev/shm files ([0-9]+) -> \2," "$WORK/out" \
      && [[ ${taken:-0} -ge 999 ]]; then
    ok "comm-churn $kind, 2,000 communicators with 2 Allreduce each, 1 node x 2, $taken contexts taken up in the creating call: $(tail -2 "$WORK/out" | paste -sd ' ' -)"
  else bad "comm-churn $kind" "exit $RC, taken up in the creating call: ${taken:-none}" "$(tail -3 "$WORK/out")" "$(grep 'contexts of' "$WORK/err" | head -2)" "$(head -4 "$WORK/err")"; fi
done
# MPI_THREAD_MULTIPLE: four threads per rank, each on a communicator of its own, set up and
# used at the same time (on one node two of the four have one rank: MPI's, as always).
# (THREADS_CALLS: the calls of that program, examples/c/preload-threads.c, under MPICH too.)
THREADS_CALLS="MPI_Bcast MPI_Reduce MPI_Allreduce MPI_Barrier MPI_Allgather MPI_Iallreduce MPI_Ibcast"
check_prog "C at MPI_THREAD_MULTIPLE, four threads on four communicators, 1 node x 2 ranks" "$THREADSPROG" \
  "$THREADS_CALLS" "" "${ONE[@]}"
# check_threads_pt NAME SRUN_ARGS...: the same program with the progress thread beside the
# program's threads (TOPO_RUN_PROGRESS=thread, as --progress-thread sets): every call on
# topo-run's path, and the statistics say the thread ran at MPI_THREAD_MULTIPLE.
check_threads_pt() {
  local name=$1; shift
  check_prog "$name" "$THREADSPROG" \
    "$THREADS_CALLS" "" \
    "$@" --export=ALL,TOPO_RUN_PROGRESS=thread
  if ! grep -q "stats: rank 0.*the progress thread advanced the nonblocking collectives (MPI_THREAD_MULTIPLE)" "$WORK/topo.err"; then
    bad "$name: the progress thread did not run" "$(grep -E 'stats|warning' "$WORK/topo.err" | head -6)"
  fi
}
check_threads_pt "C at MPI_THREAD_MULTIPLE with the progress thread, 1 node x 2 ranks" "${ONE[@]}"

# check_mpich NAME RANKS SRUN_ARGS...: the MPICH program, with topo-run choosing the
# PMPI library by itself (the MPICH build, target/mpich/release, as -v says): every rank
# OK, and its Allreduce and Bcast on topo-run's path.
check_mpich() {
  local name=$1 ranks=$2; shift 2
  if [[ ! -f $MPICH_LIB ]]; then
    bad "$name: $MPICH_LIB is not built"; return
  fi
  run "$WORK/out" "$WORK/err" env -u TOPO_RUN_PRELOAD_LIB TOPO_RUN_STATS=1 \
    srun "$@" "$TOPO_RUN" -v -- "$MHELLO"
  local n; n=$(grep -c '^OK rank' "$WORK/out")
  if [[ $RC -eq 0 ]] && (( n == ranks )) \
     && grep -q "preloading .*mpich/release/libtopo_preload.so (.*needs libmpich.so.12; .* is built against libmpich.so.12)" "$WORK/err" \
     && took_our_path "$WORK/err" MPI_Allreduce && took_our_path "$WORK/err" MPI_Bcast; then
    ok "$name: $n ranks OK, the MPICH library chosen, MPI_Allreduce and MPI_Bcast on topo-run's path"
  else
    bad "$name" "exit $RC" "$(grep -v '^OK' "$WORK/out" | head -3)" "$(grep -v '^ok' "$WORK/err" | head -6)"
  fi
}
check_mpich "MPICH C program through the MPICH-built PMPI library, 1 node x 2 (srun --mpi=pmi2)" 2 \
  -N1 -n2 --mpi=pmi2 --cpu-bind=cores

# check_mpich_progs NAME C_OPTS SRUN_ARGS...: the C (run with C_OPTS), nonblocking C and
# Fortran programs built with MPICH, as check_c, check_nb and check_f (the MPICH library
# chosen by topo-run).
check_mpich_progs() {
  local name=$1 c_opts=$2; shift 2
  if [[ ! -f $MPICH_LIB ]]; then
    bad "$name: $MPICH_LIB is not built"; return
  fi
  PROG_OPTS=$c_opts check_prog "MPICH C, $name" "$MCPROG" "$C_CALLS" \
    "communicator without a topo-run context|derived datatype|MINLOC/MAXLOC pair datatype" "$@" "$MPICH_GENERIC"
  check_prog "MPICH C nonblocking, $name" "$MNBPROG" "MPI_Ibcast MPI_Ireduce MPI_Iallreduce MPI_Ibarrier MPI_Iallgather MPI_Iscan MPI_Iexscan MPI_Ialltoall MPI_Ialltoallv MPI_Igather MPI_Iscatter MPI_Igatherv MPI_Iscatterv MPI_Iallgatherv MPI_Ireduce_scatter_block MPI_Ireduce_scatter" \
    "communicator without a topo-run context|zero count" "$@" "$MPICH_GENERIC"
  check_fortran "MPICH Fortran, $name" "$MFPROG" "$@" "$MPICH_GENERIC"
}
check_mpich_progs "1 node x 2 ranks (srun --mpi=pmi2)" --quick -N1 -n2 --mpi=pmi2 --cpu-bind=cores
check_fcomms "MPICH Fortran communicators of every kind, 1 node x 2 ranks (srun --mpi=pmi2)," MFCOMMS \
  -N1 -n2 --mpi=pmi2 --cpu-bind=cores "$MPICH_GENERIC"
# MPICH at MPI_THREAD_MULTIPLE: four threads per rank on four communicators at once.
check_prog "MPICH C at MPI_THREAD_MULTIPLE, four threads on four communicators, 1 node x 2 ranks (srun --mpi=pmi2)" \
  "$MTHREADS" "$THREADS_CALLS" "" \
  -N1 -n2 --mpi=pmi2 --cpu-bind=cores "$MPICH_GENERIC"
# MPICH allows 2,048 communicators per process and each context of topo-run's takes two:
# with 700 of the program's alive at once, topo-run's contexts stop at 256 (the rest are
# MPI's, "no room for another context"), so the program never runs out of communicators
# (without that bound its own MPI_Comm_split failed at about 680).
run "$WORK/out" "$WORK/err" env TOPO_RUN_STATS=1 srun -N1 -n2 --mpi=pmi2 --cpu-bind=cores "$MPICH_GENERIC" \
  "$TOPO_RUN" -- "$MLIVE" 700 reversed 1
if [[ $RC -ne 0 ]] || ! grep -q "^live-comms: ok" "$WORK/out"; then
  bad "MPICH live-comms, 700 communicators alive at once" "exit $RC: $(tail -1 "$WORK/out")" "$(grep -v stats "$WORK/err" | head -4)"
elif ! grep -q "MPI_Allreduce: [1-9][0-9]* topo-run, [1-9][0-9]* MPI ([1-9][0-9]* no room for another context)" "$WORK/err" \
    || ! grep -q "$LANES_USED" "$WORK/err"; then
  bad "MPICH live-comms: the statistics" "$(grep stats "$WORK/err" | head -9)"
else
  ok "MPICH live-comms, 700 communicators alive at once, 1 node x 2: $(grep -o 'MPI_Allreduce: .*' "$WORK/err" | head -1)"
fi
# The nonblocking program under MPICH with the progress thread; the warning about MPICH's
# missing progress hook names what advances the collectives instead.
check_prog "MPICH C nonblocking, 1 node x 2 ranks, progress thread (srun --mpi=pmi2)" "$MNBPROG" \
  "MPI_Ibcast MPI_Ireduce MPI_Iallreduce MPI_Ibarrier MPI_Iallgather" "communicator without a topo-run context|zero count" \
  -N1 -n2 --mpi=pmi2 --cpu-bind=cores "$MPICH_GENERIC,TOPO_RUN_PROGRESS=thread"
if grep -q "no progress hook .* advance only in the wait and test calls (also MPI's own, through MPICH's MPIX_Grequest_start) and in the progress thread" "$WORK/topo.err"; then
  ok "MPICH with the progress thread: the warning names the waits, MPIX_Grequest_start and the thread"
else bad "MPICH with the progress thread: the warning" "$(grep warning "$WORK/topo.err" | head -3)"; fi

# check_over N: both C programs on 1 node x N ranks oversubscribed (N ranks on 2 cores,
# through salloc + srun -O, as runtime.sh), results as without topo-run and the Allgathers
# on topo-run's path (N = 3, not a power of two: Bruck's exchange).
check_over() {
  local n=$1 prog name call
  # Open MPI must yield when idle here, or its busy waits take minutes (88 s for 4 ranks).
  local over=(env OMPI_MCA_mpi_yield_when_idle=1 salloc -N1 -n2 --quiet srun -O -n"$n"
    --mpi=pmix --cpu-bind=map_cpu:0,1)
  for prog in "$CPROG" "$NBPROG"; do
    name="C $(basename "$prog"), 1 node x $n ranks oversubscribed"
    run "$WORK/native.out" "$WORK/native.err" "${over[@]}" "$prog" --quick
    run "$WORK/topo.out" "$WORK/topo.err" env TOPO_RUN_STATS=1 "${over[@]}" "$TOPO_RUN" --spin 0 -- "$prog" --quick
    call=$([[ $prog == "$CPROG" ]] && echo MPI_Allgather || echo MPI_Iallgather)
    if ! passed_line "$WORK/native.out" || ! passed_line "$WORK/topo.out"; then
      bad "$name" "$(tail -1 "$WORK/native.out") / $(tail -1 "$WORK/topo.out")" "$(grep -v '^ok' "$WORK/topo.err" | head -4)"
    elif [[ "$(digest "$WORK/topo.out")" != "$(digest "$WORK/native.out")" ]]; then
      bad "$name: results differ from MPI's own"
    elif ! took_our_path "$WORK/topo.err" "$call"; then
      bad "$name: $call not on topo-run's path" "$(grep stats "$WORK/topo.err" | head -6)"
    else
      ok "$name: $(tail -1 "$WORK/topo.out"), same $(digest "$WORK/topo.out"), $call on topo-run's path"
    fi
  done
}
check_over 3
check_over 4

# Legal programs that once went wrong: rank 0 in MPI_Barrier with a user-op MPI_Iallreduce
# in flight that the others wait on (MPI must progress inside topo-run's waits, or it
# hangs), and communicators whose handles MPI reuses. A hang fails through the short
# timeout.
T=60 run "$WORK/out" "$WORK/err" srun "${ONE[@]}" "$TOPO_RUN" -- "$CASES" mpi-progress comm-reuse
if [[ $RC -eq 0 && $(tail -1 "$WORK/out") == "2 passed, 0 failed" ]]; then
  ok "preload-cases mpi-progress comm-reuse: $(tail -1 "$WORK/out")"
else bad "preload-cases mpi-progress comm-reuse" "exit $RC" "$(cat "$WORK/out")" "$(head -4 "$WORK/err")"; fi

# check_cases NAME EXPECTED CALLS ARGS... -- SRUN_ARGS...: preload-cases (or $CASES_PROG) ARGS under
# topo-run passes EXPECTED cases ("N passed, 0 failed") within a minute, and every call in
# CALLS took topo-run's path at least once (the statistics, printed at finalize).
check_cases() {
  local name=$1 expected=$2 calls=$3 args=() c missing=""; shift 3
  while [[ $1 != -- ]]; do args+=("$1"); shift; done
  shift
  T=60 run "$WORK/out" "$WORK/err" env TOPO_RUN_STATS=1 srun "$@" "$TOPO_RUN" -- "${CASES_PROG:-$CASES}" "${args[@]}"
  for c in $calls; do took_our_path "$WORK/err" "$c" || missing+=" $c"; done
  if [[ $RC -ne 0 || $(tail -1 "$WORK/out") != "$expected" ]]; then
    bad "$name" "exit $RC" "$(tail -3 "$WORK/out")" "$(grep -v '^ok\|stats' "$WORK/err" | head -4)"
  elif [[ -n $missing ]]; then
    bad "$name: not on topo-run's path:$missing" "$(grep stats "$WORK/err" | head -8)"
  else
    ok "$name: $(tail -1 "$WORK/out")"
  fi
}
# Legal programs that hung or went wrong under the library (each case once hung or failed
# on the code before its fix): a nonblocking collective's start that waited for the other
# ranks (rank 0 starts, then sends to rank 1, which starts only after receiving), on world
# and on fresh duplicates, with a large MPI_Ibcast in flight elsewhere; a duplicate freed
# with a collective in flight on it; MPI_BOTTOM in MPI_Allgather on some ranks only, and in
# MPI_Bcast (under MPICH, whose MPI_Pack refuses a null buffer, both aborted); the
# program's attribute copy callbacks run on the library's own communicators; the library's
# own MPI_Comm_split (colors and keys gathered through the parent's context, then
# MPI_Comm_create_group, or MPI_Comm_create on one node of Open MPI) gives communicators
# congruent to MPI's split, with the parent's
# error handler (MPICH's create_group sets none by itself). And up to 20
# nonblocking collectives in flight on four communicators, with point-to-point messages in
# the same request arrays, completed by every Wait and Test form.
check_cases "preload-cases local-start free-in-flight bottom attr-copy split nb-stress, 1 node x 2" "24 passed, 0 failed" \
  "MPI_Ibcast MPI_Ireduce MPI_Iallreduce MPI_Ibarrier MPI_Iallgather MPI_Allgather MPI_Bcast" \
  --quick local-start free-in-flight bottom attr-copy split nb-stress -- "${ONE[@]}"
# check_nb_first NAME SRUN_ARGS...: communicators not congruent to world whose collectives
# are all nonblocking (preload-cases nb-first): the results right and the same as without
# topo-run, and after the first ones (which go to MPI) their contexts set up in the
# creating call, so that most of their calls take topo-run's path.
check_nb_first() {
  local name=$1; shift
  T=60 run "$WORK/native.out" "$WORK/native.err" srun "$@" "$CASES" --quick nb-first
  T=60 run "$WORK/out" "$WORK/err" env TOPO_RUN_STATS=1 srun "$@" "$TOPO_RUN" -- "$CASES" --quick nb-first
  local ours handed
  ours=$(sed -n 's/.*rank 0 .*by communicator: .*\(split\|node\) \([0-9]*\) topo-run.*/\2/p' "$WORK/err" | head -1)
  handed=$(sed -n 's/.*rank 0 .*MPI_Iallreduce: [0-9]* topo-run, \([0-9]*\) MPI.*/\1/p' "$WORK/err" | head -1)
  if [[ $RC -ne 0 || $(tail -1 "$WORK/out") != "1 passed, 0 failed" ]]; then
    bad "$name" "exit $RC" "$(tail -3 "$WORK/out")" "$(grep -v '^ok\|stats' "$WORK/err" | head -4)"
  elif [[ "$(digest "$WORK/out")" != "$(digest "$WORK/native.out")" ]]; then
    bad "$name: results differ from MPI's own"
  elif ! grep -q "stats: rank 0.*set up in the call that created the communicator, after communicators whose first collective was nonblocking" "$WORK/err" \
      || [[ -z $ours || $ours -lt 25 ]]; then
    bad "$name: contexts not set up in the creating call" "$(grep 'stats: rank 0' "$WORK/err" | head -8)"
  else
    ok "$name: $ours calls on such communicators on topo-run's path, MPI_Iallreduce handed to MPI ${handed:-?} times of 12, same $(digest "$WORK/out")"
  fi
}
check_nb_first "preload-cases nb-first, 1 node x 2" "${ONE[@]}"
# MPI_INT renamed on rank 0 alone (MPI_Type_set_name is local): recognised by its handle,
# every rank takes the same path (by name, the ranks split and hung). In a run of its own,
# so that no earlier call has put MPI_INT in the library's type cache.
check_cases "preload-cases renamed-type, 1 node x 2" "1 passed, 0 failed" \
  "MPI_Allreduce MPI_Reduce MPI_Bcast MPI_Allgather" renamed-type -- "${ONE[@]}"
# MPI initialised and finalised through PMPI_Init and PMPI_Finalize, unseen by the
# library (as Fortran and mpi_f08 programs do): the first calls are nonblocking ones on
# world, which must not set the library up (the setup is collective, and hung in the
# start); the teardown runs from the MPI_COMM_SELF attribute MPI deletes first in its
# finalize, so the statistics are printed.
check_cases "preload-cases --pmpi-init --pmpi-finalize local-start, 1 node x 2" "16 passed, 0 failed" \
  "MPI_Ibcast MPI_Iallgather" --quick --pmpi-init --pmpi-finalize local-start -- "${ONE[@]}"

# An mpi4py program (NumPy buffers and pickled objects, blocking and nonblocking, on world,
# a duplicate and two splits) started as `topo-run -- python3 app.py`, with no flag: the
# launcher asks Debian's python3 where mpi4py is and preloads the library for the MPI its
# extension module needs; mpi4py's default MPI_THREAD_MULTIPLE; and the same at
# MPI_THREAD_SERIALIZED. The same verdict as without topo-run, and its calls on topo-run's
# path, those on a duplicate with only nonblocking collectives included (no communicator
# without a context: "other").
for level in "" serialized; do
  T=90 run "$WORK/out" "$WORK/err" env TOPO_RUN_STATS=1 srun "${ONE[@]}" "$TOPO_RUN" -v -- \
    /usr/bin/python3 "$ROOT/examples/python/mpi4py-cases.py" ${level:+--thread-level "$level"}
  if [[ $RC -eq 0 && $(tail -1 "$WORK/out") == "mpi4py: OK" ]] && took_our_path "$WORK/err" MPI_Allreduce \
     && took_our_path "$WORK/err" MPI_Iallgather && took_our_path "$WORK/err" MPI_Bcast \
     && grep -q "by communicator: .*duplicate [1-9][0-9]* topo-run, 0 MPI" "$WORK/err" \
     && ! grep -Eq "by communicator: .*other [0-9]+ topo-run, [1-9]" "$WORK/err" \
     && grep -q "preloading .*(/usr/bin/python3 (Python) needs libmpi.so.40" "$WORK/err"; then
    ok "mpi4py program, no flag, ${level:-default (multiple)} thread level: OK, preloaded, on topo-run's path"
  else bad "mpi4py program, ${level:-default} thread level" "exit $RC" "$(tail -2 "$WORK/out")" "$(grep -v '^ok' "$WORK/err" | head -6)"; fi
done

# Communicators freed through mpi_f08's PMPI_Comm_free (not intercepted): MPI reuses
# their handles for communicators that are not congruent to world, which must not inherit
# the old contexts (they did, with wrong broadcasts, while contexts were keyed by handle).
# The program finalizes through mpi_f08's PMPI_Finalize as well: the statistics printed at the teardown
# show that it ran (it did not, before the MPI_COMM_SELF hook).
T=60 run "$WORK/out" "$WORK/err" env TOPO_RUN_STATS=1 srun "${ONE[@]}" "$TOPO_RUN" -- "$F08PROG"
if [[ $RC -eq 0 && $(tail -1 "$WORK/out") == "20 passed, 0 failed" ]] && took_our_path "$WORK/err" MPI_Bcast; then
  ok "communicators freed through mpi_f08's PMPI_Comm_free, handles reused: $(tail -1 "$WORK/out")"
else bad "communicators freed through mpi_f08's PMPI_Comm_free" "exit $RC" "$(cat "$WORK/out")" "$(head -4 "$WORK/err")"; fi

# The launcher's decision.
run "$WORK/out" "$WORK/err" srun -N1 -n1 --mpi=pmix --cpu-bind=cores "$TOPO_RUN" -v -- "$BIN/coll-check" --quick
if [[ $RC -eq 0 ]] && grep -q "not preloading the PMPI library: .*coll-check calls topo-runtime itself" "$WORK/err"; then
  ok "a program that calls topo-runtime itself is not preloaded"
else bad "coll-check must not be preloaded" "exit $RC" "$(grep -i preload "$WORK/err" | head -3)"; fi
run "$WORK/out" "$WORK/err" srun -N1 -n1 --mpi=pmix --cpu-bind=cores "$TOPO_RUN" -v -- "$CPROG" --quick
if [[ $RC -eq 0 ]] && grep -q "preloading .*libtopo_preload.so (.*preload-check needs libmpi.so" "$WORK/err"; then
  ok "an MPI program is preloaded"
else bad "the C program must be preloaded" "exit $RC" "$(grep -i preload "$WORK/err" | head -3)"; fi
run "$WORK/out" "$WORK/err" env TOPO_RUN_STATS=1 srun "${ONE[@]}" "$TOPO_RUN" --no-preload -- "$CPROG" --quick
if [[ $RC -eq 0 ]] && passed_line "$WORK/out" && ! grep -q "topo-run: stats" "$WORK/err"; then
  ok "--no-preload: MPI's own collectives, correct results"
else bad "--no-preload" "exit $RC" "$(head -3 "$WORK/err")"; fi
# The user's own LD_PRELOAD is kept, after the library.
run "$WORK/out" "$WORK/err" env LD_PRELOAD=libm.so.6 srun -N1 -n1 --mpi=pmix --cpu-bind=cores \
  "$TOPO_RUN" --preload -- sh -c 'echo "LD_PRELOAD=$LD_PRELOAD"'
if [[ $RC -eq 0 ]] && grep -Eq "^LD_PRELOAD=$BIN/libtopo_preload.so:libm.so.6$" "$WORK/out"; then
  ok "--preload prepends the library and keeps the user's LD_PRELOAD"
else bad "LD_PRELOAD composition" "exit $RC" "$(cat "$WORK/out" "$WORK/err" | head -3)"; fi
run "$WORK/out" "$WORK/err" env TOPO_RUN_PRELOAD_LIB=/nonexistent/libtopo_preload.so \
  srun -N1 -n1 --mpi=pmix --cpu-bind=cores "$TOPO_RUN" --preload -- "$CPROG" --quick
if [[ $RC -eq 14 ]] && grep -q "topo-run: error: --preload: libtopo_preload.so not found (looked at /nonexistent/libtopo_preload.so)" "$WORK/err"; then
  ok "--preload without the library: exit 14 naming where it looked"
else bad "--preload without the library" "exit $RC" "$(head -3 "$WORK/err")"; fi
run "$WORK/out" "$WORK/err" env TOPO_RUN_PRELOAD=maybe srun -N1 -n1 --mpi=pmix --cpu-bind=cores "$TOPO_RUN" -- "$CPROG" --quick
if [[ $RC -eq 2 ]] && grep -q 'TOPO_RUN_PRELOAD="maybe" is not one of' "$WORK/err"; then
  ok "a bad TOPO_RUN_PRELOAD: exit 2"
else bad "a bad TOPO_RUN_PRELOAD" "exit $RC" "$(head -3 "$WORK/err")"; fi

# Faults.
# MPI_THREAD_MULTIPLE: a single-threaded program at that level takes topo-run's path as
# at any other, with the same results.
run "$WORK/out" "$WORK/err" env TOPO_RUN_STATS=1 srun "${ONE[@]}" "$TOPO_RUN" -- "$CPROG" --quick --thread-multiple
if [[ $RC -eq 0 ]] && passed_line "$WORK/out" && ! grep -q "warning: MPI_THREAD_MULTIPLE" "$WORK/err" \
   && grep -q "MPI_Allreduce: [1-9][0-9]* topo-run" "$WORK/err" && ! grep -q "topo-run inactive" "$WORK/err"; then
  ok "MPI_THREAD_MULTIPLE, one thread: topo-run's path, correct results ($(grep -o 'MPI_Allreduce: [0-9]* topo-run' "$WORK/err" | head -1))"
else bad "MPI_THREAD_MULTIPLE, one thread" "exit $RC" "$(head -3 "$WORK/err")"; fi
run "$WORK/out" "$WORK/err" srun "${ONE[@]}" "$TOPO_RUN" --preload -- \
  sh -c 'TOPO_RUN_PLAN="v4;corrupted" exec "$0" --quick' "$CPROG"
if [[ $RC -ne 0 ]] && grep -q "error: cannot set up topo-run's collectives: .*aborting the job (exit code 9)" "$WORK/err" \
   && ! grep -q passed "$WORK/out"; then
  ok "a corrupted plan in the environment: a clear error (exit $RC)"
else bad "a corrupted plan" "exit $RC" "$(head -4 "$WORK/err")"; fi
# An internal error (a simulated panic) in one rank's Fortran call: the program gets
# MPI_ERR_INTERN through MPI_ERRORS_RETURN and aborts; the call is not run again through
# MPI while the peers are inside topo-run's collective.
for call in MPI_Bcast MPI_Reduce MPI_Allreduce MPI_Barrier; do
  T=60 run "$WORK/out" "$WORK/err" srun "${ONE[@]}" sh -c \
    'if [ "$SLURM_PROCID" = 1 ]; then export TOPO_RUN_FAULT=panic:$0; fi; exec "$1" -- "$2"' \
    "$call" "$TOPO_RUN" "$IEPROG"
  upper=$(tr '[:lower:]' '[:upper:]' <<<"$call")
  if [[ $RC -ne 0 ]] && grep -q "^rank 1: $upper returned error class" "$WORK/out" \
     && grep -q "internal error in the PMPI library: simulated internal error" "$WORK/err"; then
    ok "Fortran $upper: an internal error reaches the program (exit $RC)"
  else bad "Fortran $upper with an internal error" "exit $RC" "$(cat "$WORK/out")" "$(grep topo-run "$WORK/err" | head -3)"; fi
done

# check_killed NAME CALL PROG_AND_ARGS... -- SRUN_ARGS...: a rank killed by the program's
# own fault switch: rank 0 names it and CALL within a minute, the job fails, and nothing is
# left in /dev/shm.
check_killed() {
  local name=$1 call=$2; shift 2
  local prog=() t0=$SECONDS
  while [[ $1 != -- ]]; do prog+=("$1"); shift; done
  shift
  run "$WORK/out" "$WORK/err" srun "$@" "$TOPO_RUN" -- "${prog[@]}"
  if [[ $RC -ne 0 ]] && grep -Eq "rank 0 on .*: $call failed: rank 1 on node .* died during $call" "$WORK/err" \
     && (( $(shm_leftovers) == 0 )) && (( SECONDS - t0 < 60 )); then
    ok "$name: rank 0 names it ($((SECONDS - t0)) s, exit $RC, nothing left in /dev/shm)"
  else bad "$name" "exit $RC after $((SECONDS - t0)) s" "$(head -6 "$WORK/err")"; fi
}

check_killed "a rank killed mid-collective" MPI_Allreduce "$CPROG" --die 1 -- "${ONE[@]}"

# The same on a duplicate of world whose context is on the node's lanes: the members
# waiting for a lane's claim or inside it name the dead rank too.
check_killed "a rank killed mid-collective on a context on the node's lanes" MPI_Allreduce \
  "$CPROG" --die 1 --on-dup -- "${ONE[@]}" --export=ALL,TOPO_RUN_MAX_COMMS=1

check_killed "a rank killed while a nonblocking collective is in flight" MPI_Iallreduce \
  "$NBPROG" --die 1 -- "${ONE[@]}"

check_killed "a rank killed while rank 0 is blocked in MPI_Recv with an MPI_Ibcast in flight" MPI_Ibcast \
  "$NBPROG" --die-in-recv 1 -- "${ONE[@]}"

# The fault cases under MPICH, through the MPICH build of the library: a rank killed
# mid-collective, a corrupted plan, /dev/shm too small.
MONE=(-N1 -n2 --mpi=pmi2 --cpu-bind=cores)
check_killed "MPICH: a rank killed mid-collective" MPI_Allreduce "$MCPROG" --die 1 -- "${MONE[@]}"
run "$WORK/out" "$WORK/err" env TOPO_RUN_PRELOAD_LIB="$MPICH_LIB" srun "${MONE[@]}" "$TOPO_RUN" --preload -- \
  sh -c 'TOPO_RUN_PLAN="v4;corrupted" exec "$0" --quick' "$MCPROG"
if [[ $RC -ne 0 ]] && grep -q "error: cannot set up topo-run's collectives: .*aborting the job (exit code 9)" "$WORK/err" \
   && ! grep -q passed "$WORK/out"; then
  ok "MPICH: a corrupted plan in the environment: a clear error (exit $RC)"
else bad "MPICH: a corrupted plan" "exit $RC" "$(head -4 "$WORK/err")"; fi
# The legal programs that hung, under MPICH (no progress hook: its own waits advance the
# library's requests through MPIX_Grequest_start).
CASES_PROG=$MCASES check_cases "MPICH: preload-cases local-start free-in-flight bottom attr-copy split nb-stress, 1 node x 2 (srun --mpi=pmi2)" \
  "24 passed, 0 failed" "MPI_Ibcast MPI_Iallgather MPI_Allgather" --quick local-start free-in-flight bottom attr-copy split nb-stress \
  -- "${MONE[@]}" "$MPICH_GENERIC"
CASES_PROG=$MCASES check_cases "MPICH: preload-cases renamed-type, 1 node x 2 (srun --mpi=pmi2)" \
  "1 passed, 0 failed" "MPI_Allreduce MPI_Reduce MPI_Bcast MPI_Allgather" renamed-type -- "${MONE[@]}" "$MPICH_GENERIC"
CASES_PROG=$MCASES check_cases "MPICH: preload-cases --pmpi-init --pmpi-finalize local-start, 1 node x 2 (srun --mpi=pmi2)" \
  "16 passed, 0 failed" "MPI_Ibcast MPI_Iallgather" --quick --pmpi-init --pmpi-finalize local-start -- "${MONE[@]}" "$MPICH_GENERIC"
mkdir -p "$WORK/tinyshm" && mount -t tmpfs -o size=16k tmpfs "$WORK/tinyshm"
run "$WORK/out" "$WORK/err" env TOPO_RUN_SHM_DIR="$WORK/tinyshm" TOPO_RUN_STATS=1 \
  srun "${MONE[@]}" "$MPICH_GENERIC" "$TOPO_RUN" -- "$MCPROG" --quick
if [[ $RC -eq 0 ]] && passed_line "$WORK/out" \
   && grep -Eq "warning: rank 0 on .*: shared-memory segment $WORK/tinyshm/topo-run.*No space left.*collectives use MPI's own" "$WORK/err" \
   && grep -q "MPI_Allreduce: 0 topo-run, [0-9]* MPI ([0-9]* topo-run inactive)" "$WORK/err"; then
  ok "MPICH: shared memory too small: one warning, MPI's own collectives, correct results"
else bad "MPICH: shared memory too small" "exit $RC" "$(grep -v '^ok' "$WORK/err" | head -4)"; fi
umount "$WORK/tinyshm"

echo "== 2 emulated nodes"
start_cluster 2
TWO=(-N2 -n4 --exclusive --mpi=pmix --cpu-bind=cores)
export OMPI_MCA_mpi_yield_when_idle=1
check_c "C, 2 nodes x 2 ranks" "${TWO[@]}"
check_nb "C nonblocking, 2 nodes x 2 ranks" "${TWO[@]}"
check_f "Fortran, 2 nodes x 2 ranks" "${TWO[@]}"
# Communicators of every kind (a duplicate, the node's, parities, halves, reversed, a
# group's half, a Cartesian grid and its rows and columns, an intercommunicator's merge):
# every blocking call on topo-run's path, none handed to MPI for want of a context.
check_prog "C communicators of every kind, 2 nodes x 2 ranks" "$COMMSPROG" \
  "MPI_Bcast MPI_Reduce MPI_Allreduce MPI_Barrier MPI_Allgather" "" "${TWO[@]}"
if grep -q "communicator without a topo-run context" "$WORK/topo.err"; then
  bad "C communicators of every kind: calls handed to MPI for want of a context" "$(grep stats "$WORK/topo.err" | head -6)"
elif ! grep -Eq "topo-run: stats: rank 0.*by communicator: .*node [1-9][0-9]* topo-run, 0 MPI; split [1-9][0-9]* topo-run, 0 MPI" "$WORK/topo.err"; then
  bad "C communicators of every kind: the statistics by communicator kind" "$(grep 'by communicator' "$WORK/topo.err" | head -2)"
else
  ok "C communicators of every kind: $(grep -o 'by communicator: .*' "$WORK/topo.err" | head -1)"
fi
# The same on 2 nodes x 5 ranks (3 + 2, oversubscribed, two ranks per core on node1):
# node1's plans list `core`, node2's do not, and a context over both nodes unites the
# members' levels (it aborted the job with "its plan lists other levels than rank 0's").
OVER2=(env OMPI_MCA_mpi_yield_when_idle=1 salloc -N2 -n4 --quiet srun -O -n5 --mpi=pmix
  --cpu-bind=map_cpu:0,1)
name="C communicators of every kind, 2 nodes x 5 ranks (3 + 2 oversubscribed, different levels per node)"
run "$WORK/native.out" "$WORK/native.err" "${OVER2[@]}" "$COMMSPROG" --quick
run "$WORK/topo.out" "$WORK/topo.err" env TOPO_RUN_STATS=1 "${OVER2[@]}" "$TOPO_RUN" --spin 0 -- "$COMMSPROG" --quick
if [[ $RC -ne 0 ]] || ! passed_line "$WORK/native.out" || ! passed_line "$WORK/topo.out"; then
  bad "$name" "exit $RC: $(tail -1 "$WORK/native.out") / $(tail -1 "$WORK/topo.out")" "$(grep -v '^ok' "$WORK/topo.err" | head -4)"
elif [[ "$(digest "$WORK/topo.out")" != "$(digest "$WORK/native.out")" ]]; then
  bad "$name: results differ from MPI's own"
elif ! grep -Eq "topo-run: stats: rank 0.*by communicator: .*node [1-9][0-9]* topo-run, 0 MPI; split [1-9][0-9]* topo-run, 0 MPI" "$WORK/topo.err"; then
  bad "$name: calls on split or node communicators handed to MPI" "$(grep 'by communicator' "$WORK/topo.err" | head -2)"
else
  ok "$name: $(tail -1 "$WORK/topo.out"), same $(digest "$WORK/topo.out"), $(grep -o 'by communicator: .*' "$WORK/topo.err" | head -1)"
fi
# The same with room for one segment per process: the other contexts on the node's lanes,
# their node steps through a lane and their network steps over MPI.
check_prog "C communicators of every kind, 2 nodes x 2 ranks, TOPO_RUN_MAX_COMMS=1" "$COMMSPROG" \
  "MPI_Bcast MPI_Reduce MPI_Allreduce MPI_Barrier MPI_Allgather" "$LANES_USED" "${TWO[@]}" \
  --export=ALL,TOPO_RUN_MAX_COMMS=1
all_ours "C communicators of every kind, 2 nodes x 2 ranks, TOPO_RUN_MAX_COMMS=1" \
  "communicator without a topo-run context\|no room for another context"
check_live "live-comms, 200 reversed splits alive at once, 2 nodes x 2" 200 reversed "${TWO[@]}"
# The same in Fortran, through each binding: every call on topo-run's path (each
# communicator has two ranks or more here).
for b in mpifh mpi f08; do
  check_prog "Fortran communicators of every kind, 2 nodes x 2 ranks, through $b" "${FCOMMS[$b]}" \
    "$ALL_CALLS" "" "${TWO[@]}"
  all_ours "Fortran communicators of every kind through $b" " MPI ("
done
# MPI_THREAD_MULTIPLE: four threads per rank, each on a communicator of its own (a duplicate,
# parities, world reversed, halves), set up and used at the same time: every call of them on
# topo-run's path. With this section's OMPI_MCA_mpi_yield_when_idle=1 and the kernel's
# autogroups on, the scheduler starves one emulated node's ranks that share a core with the
# other's (7 of 20 runs hung; 0 of 85 with autogroups off: slurm/dev-cluster turns them off,
# docs/preload.md "Known problems"). Where the cluster could not turn them off, the program
# runs with Open MPI's default busy polling (0 of 130 hung).
yield_here=1
[[ $(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo 0) == 0 ]] || yield_here=0
OMPI_MCA_mpi_yield_when_idle=$yield_here check_prog "C at MPI_THREAD_MULTIPLE, four threads on four communicators, 2 nodes x 2 ranks" "$THREADSPROG" \
  "$THREADS_CALLS" "" "${TWO[@]}"
all_ours "C at MPI_THREAD_MULTIPLE" "communicator without a topo-run context\|no room for another context\|topo-run inactive"
# With the progress thread too, where the kernel's autogroups are off (with them on, ranks of
# the two emulated nodes on one core starve each other: 4 of 4 runs hung, 10 of 10 passed
# with them off; docs/runtime.md, "The progress thread").
if [[ $yield_here == 1 ]]; then
  check_threads_pt "C at MPI_THREAD_MULTIPLE with the progress thread, 2 nodes x 2 ranks" "${TWO[@]}"
else
  echo "skip C at MPI_THREAD_MULTIPLE with the progress thread, 2 nodes x 2 ranks (the kernel's autogroups are on)"
fi
check_cases "preload-cases local-start free-in-flight bottom attr-copy split nb-stress, 2 nodes x 2" "24 passed, 0 failed" \
  "MPI_Ibcast MPI_Ireduce MPI_Iallreduce MPI_Ibarrier MPI_Iallgather MPI_Allgather" \
  --quick local-start free-in-flight bottom attr-copy split nb-stress -- "${TWO[@]}"
check_nb_first "preload-cases nb-first, 2 nodes x 2" "${TWO[@]}"
RANKS=4 NODES=2 check_profile "the collective profile of a known program, 2 nodes x 2 ranks" topo "${TWO[@]}"
RANKS=4 NODES=2 check_profile "the collective profile with MPI's own collectives (--native), 2 nodes x 2 ranks" native "${TWO[@]}"
# A profile that cannot be written: a warning that names the file, the program's own exit.
run "$WORK/topo.out" "$WORK/topo.err" srun "${TWO[@]}" "$TOPO_RUN" --profile /nonexistent/dir/p.json -- "$PROFPROG"
if [[ $RC -ne 0 ]] || ! passed_line "$WORK/topo.out"; then
  bad "a profile that cannot be written: the program failed" "exit $RC" "$(head -4 "$WORK/topo.err")"
elif ! grep -q "topo-run: warning: cannot write the profile to /nonexistent/dir/p.json" "$WORK/topo.err"; then
  bad "a profile that cannot be written: no warning" "$(head -4 "$WORK/topo.err")"
else
  ok "a profile that cannot be written: $(grep -o 'cannot write the profile.*' "$WORK/topo.err" | head -1 | cut -c1-90)..., exit 0"
fi
check_mpich "MPICH C program through the MPICH-built PMPI library, 2 nodes x 2 (srun --mpi=pmi2)" 4 \
  -N2 -n4 --exclusive --mpi=pmi2 --cpu-bind=cores
# MPICH busy-polls without yielding: 4 ranks on 2 cores pay scheduler slices in every call
# (preload-check --quick took 90-100 s a run here), so its C program runs --brief (every
# path, fewer repetitions; the Open MPI runs above cover --quick on 2 nodes).
check_mpich_progs "2 nodes x 2 ranks (srun --mpi=pmi2)" --brief -N2 -n4 --exclusive --mpi=pmi2 --cpu-bind=cores
# The hierarchical Allgather (up, an exchange among the node leaders, down): blocking, on
# topo-run's path; its nonblocking form is MPI's own, with the reason in the statistics.
check_prog "C, 2 nodes x 2 ranks, hierarchical Allgather (TOPO_RUN_ALLGATHER=hier:ring)" "$CPROG" \
  "MPI_Allgather" "" "${TWO[@]}" --export=ALL,TOPO_RUN_ALLGATHER=hier:ring
check_prog "C nonblocking, 2 nodes x 2 ranks, hierarchical Allgather (TOPO_RUN_ALLGATHER=hier)" "$NBPROG" \
  "MPI_Ibcast MPI_Iallreduce" "no nonblocking form of the chosen algorithm" "${TWO[@]}" \
  --export=ALL,TOPO_RUN_ALLGATHER=hier

echo "== 4 emulated nodes"
start_cluster 4
FOUR=(-N4 -n8 --exclusive --mpi=pmix --cpu-bind=cores --export=ALL,TOPO_RUN_SPIN=0)
check_c "C, 4 nodes x 2 ranks" "${FOUR[@]}"
check_nb "C nonblocking, 4 nodes x 2 ranks" "${FOUR[@]}"

stop_cluster
summary
