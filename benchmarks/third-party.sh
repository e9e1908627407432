#!/usr/bin/env bash
# Third-party test suites through topo-run's PMPI library, unmodified, on the dev cluster:
# MPICH's collective tests (test/mpi/coll of Debian's mpich source package) and mpi4py's
# test suite (the sdist of the installed python3-mpi4py, from PyPI). Each test runs
# without topo-run and under it, in turn; a test that passes without topo-run must pass
# under it. Prints one line per test that differs, a summary, and the share of the
# collective calls of rank 0 that took topo-run's path (TOPO_RUN_STATS), with the reasons
# for the others.
#
#   benchmarks/third-party.sh [mpich-coll|mpi4py]...     (default both; needs root)
#
# Environment:
#   MPI=openmpi|mpich   which MPI builds and runs the MPICH tests (default openmpi; mpich
#                       runs them with srun --mpi=pmi2 and the MPICH-built library)
#   NODES=N             emulated nodes (default 1); the MPICH tests then run N x 2 slots
#                       with srun -O (their test list asks for 1 to 10 ranks)
#   MAXNP=N             skip MPICH tests of more than N ranks (default 8)
#   ONLY=REGEX          run only the MPICH tests whose name matches
#   T=SECONDS           time allowed for one test run (default 90)
#
# The sources are fetched into $TOPO_RUN_THIRD_PARTY (default ~/.cache/topo-run/third-party)
# once: `apt-get source` through a private source list (no change to the system's apt
# configuration) and `pip download`. Nothing of them is kept in this repository. The
# emulated nodes of one machine share its cores: with more ranks than cores Open MPI is
# told to yield when idle, and topo-run runs with --spin 0.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SUITES=("$@")
[[ ${#SUITES[@]} -gt 0 ]] || SUITES=(mpich-coll mpi4py)
MPI=${MPI:-openmpi}
NODES=${NODES:-1}
MAXNP=${MAXNP:-8}
ONLY=${ONLY:-.}
T=${T:-90}
CACHE=${TOPO_RUN_THIRD_PARTY:-$HOME/.cache/topo-run/third-party}
mkdir -p "$CACHE"

cargo build --release --locked -p topo-run -p topo-preload >/dev/null 2>&1
TR=$ROOT/target/release/topo-run
if [[ $MPI == mpich ]]; then
  MPICC=mpicc.mpich CARGO_TARGET_DIR=target/mpich cargo build --release --locked -p topo-preload >/dev/null 2>&1
  CC=mpicc.mpich
  LAUNCH=(--mpi=pmi2)
  ENVS=(MPIR_CVAR_DEVICE_COLLECTIVES=none)
else
  CC=mpicc
  LAUNCH=(--mpi=pmix)
  ENVS=(OMPI_MCA_mpi_yield_when_idle=1)
fi
slurm/dev-cluster start "$NODES" >/dev/null
OUT=$(mktemp -d "${TMPDIR:-/tmp}/topo-run-third-party.XXXXXX")
trap '[[ -n ${KEEP:-} ]] || rm -rf "$OUT"' EXIT

# stats FILE...: the share of rank 0's collective calls on topo-run's path, and why not.
stats() {
  python3 - "$@" <<'EOF'
import collections, re, sys
ours = theirs = 0
why = collections.Counter()
for path in sys.argv[1:]:
    for line in open(path, errors="replace"):
        m = re.search(r"stats: rank 0 on \S+: MPI_\w+: (\d+) topo-run, (\d+) MPI(?: \((.*)\))?", line)
        if not m:
            continue
        ours += int(m.group(1))
        theirs += int(m.group(2))
        for part in (m.group(3) or "").split(", "):
            if part:
                n, reason = part.split(" ", 1)
                why[reason] += int(n)
total = ours + theirs
if total:
    print(f"  calls of rank 0 on topo-run's path: {ours} of {total} ({100 * ours / total:.0f} %)")
    print("  handed to MPI: " + (", ".join(f"{n} {r}" for r, n in why.most_common()) or "none"))
EOF
}

mpich_coll() {
  local src=$CACHE/mpich
  if [[ ! -d $src/test/mpi/coll ]]; then
    local apt=$CACHE/apt
    mkdir -p "$apt/lists/partial"
    echo "deb-src http://deb.debian.org/debian bookworm main" >"$apt/sources.list"
    local o=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o "Dir::Etc::sourceparts=-"
      -o "Dir::State::Lists=$apt/lists")
    apt-get "${o[@]}" update -q >/dev/null
    (cd "$CACHE" && apt-get "${o[@]}" source --download-only mpich >/dev/null 2>&1)
    rm -rf "$src" && mkdir -p "$src"
    tar -xf "$CACHE"/mpich_*.orig.tar.* -C "$src" --strip-components=1
  fi
  local t=$src/test/mpi bin=$OUT/mpich-coll-$MPI
  mkdir -p "$bin"
  # The configure-made headers the tests include, for this machine (Debian 12, x86-64).
  printf '%s\n' '#define HAVE_STDLIB_H 1' '#define HAVE_STRING_H 1' '#define HAVE_STDINT_H 1' \
    '#define HAVE_INTTYPES_H 1' '#define HAVE_UNISTD_H 1' '#define HAVE_SYS_TIME_H 1' \
    '#define HAVE_SYS_RESOURCE_H 1' '#define HAVE_GETRUSAGE 1' '#define HAVE_USLEEP 1' \
    '#define HAVE_STRDUP 1' '#define HAVE_STDARG_H 1' '#define HAVE_LONG_LONG 1' \
    '#define HAVE_LONG_DOUBLE 1' '#define HAVE_PTHREAD_H 1' '#define HAVE_MPI_WIN_CREATE 1' \
    '#define HAVE_MPI_IO 1' '#define THREAD_PACKAGE_NAME THREAD_PACKAGE_POSIX' \
    '#define SIZEOF_INT 4' '#define SIZEOF_LONG 8' '#define SIZEOF_VOID_P 8' \
    '#define POINTERINT_t long' >"$bin/mpitestconf.h"
  printf '%s\n' '#define HAVE_STDLIB_H 1' '#define HAVE_STRING_H 1' '#define HAVE_STDINT_H 1' \
    >"$t/dtpools/dtpoolsconf.h"
  local inc=(-I"$bin" -I"$t/include" -I"$t/dtpools/include") objs=() dtp=() u o
  for u in util/mtest.c util/mtest_common.c util/mtest_single.c util/dtypes.c; do
    o=$bin/$(basename "$u" .c).o
    if "$CC" -O1 -w -c "${inc[@]}" "$t/$u" -o "$o" 2>>"$bin/build.log"; then objs+=("$o"); fi
  done
  # The datatype pools a few tests use (one of their files does not build with Open MPI:
  # it calls functions MPI-3.0 removed; those tests are then left out).
  for u in "$t"/dtpools/src/*.c; do
    o=$bin/$(basename "$u" .c).o
    if "$CC" -O1 -w -c "${inc[@]}" "$u" -o "$o" 2>>"$bin/build.log"; then dtp+=("$o"); fi
  done
  local built=0 skipped=() f n
  for f in "$t"/coll/*.c; do
    n=$(basename "$f" .c)
    if "$CC" -O1 -w "${inc[@]}" "$f" "${objs[@]}" -o "$bin/$n" -lm 2>>"$bin/build.log" \
      || "$CC" -O1 -w "${inc[@]}" "$f" "${objs[@]}" "${dtp[@]}" -o "$bin/$n" -lm 2>>"$bin/build.log"; then
      built=$((built + 1))
    else skipped+=("$n"); fi
  done
  echo "MPICH coll tests ($(basename "$CACHE"/mpich_*.dsc .dsc)), $MPI, $NODES node(s), up to $MAXNP ranks: $built built${skipped:+, not built with this MPI: ${skipped[*]}}"
  local total=0 same=0 both_fail=0 better=0 worse=0 name np rest args envs
  while read -r name np rest; do
    [[ -x $bin/$name && $name =~ $ONLY && $np -le $MAXNP ]] || continue
    args=$(grep -o 'arg=[^ ]*' <<<"$rest" | sed 's/^arg=//' | tr '\n' ' ' || true)
    envs=$(grep -o 'env=[^ ]*' <<<"$rest" | sed 's/^env=//' | tr '\n' ' ' || true)
    local job=(salloc -N"$NODES" -n$((2 * NODES)) --quiet srun -O -n"$np" "${LAUNCH[@]}" --cpu-bind=map_cpu:0,1)
    local m rc_native rc_topo
    for m in native topo; do
      local pre=()
      [[ $m == topo ]] && pre=("$TR" --spin 0 --)
      # shellcheck disable=SC2086  # $envs and $args are lists of words from the test list
      (cd "$bin" && timeout "$T" "$ROOT/slurm/dev-cluster" exec env $envs "${ENVS[@]}" TOPO_RUN_STATS=1 \
        "${job[@]}" "${pre[@]}" "$bin/$name" $args) >"$OUT/$m.out" 2>&1 </dev/null && rc=0 || rc=$?
      if [[ $rc -eq 0 ]] && grep -q "No Errors" "$OUT/$m.out"; then rc=0; elif [[ $rc -eq 0 ]]; then rc=1; fi
      [[ $m == native ]] && rc_native=$rc || rc_topo=$rc
    done
    grep "stats: rank 0 " "$OUT/topo.out" >>"$OUT/mpich.stats" || true
    total=$((total + 1))
    if [[ $rc_native -eq 0 && $rc_topo -eq 0 ]]; then same=$((same + 1))
    elif [[ $rc_native -ne 0 && $rc_topo -ne 0 ]]; then
      both_fail=$((both_fail + 1))
      echo "  fails with and without topo-run: $name $np $args(exit $rc_native / $rc_topo)"
    elif [[ $rc_native -ne 0 ]]; then
      better=$((better + 1))
      echo "  fails without topo-run only: $name $np $args(exit $rc_native; under topo-run: passed)"
      sed 's/^/      /' "$OUT/native.out" | grep -v "stats:" | head -3
    else
      worse=$((worse + 1))
      echo "  FAILS UNDER TOPO-RUN ONLY: $name $np $args(exit $rc_topo)"
      sed 's/^/      /' "$OUT/topo.out" | grep -v "stats:" | head -6
    fi
  done < <(grep -v '^#' "$t/coll/testlist.in" | grep -v '^@' | grep -v '^$')
  echo "  $total runs: $same pass both ways, $both_fail fail both ways (MPI's own result)," \
    "$better fail without topo-run only, $worse fail under topo-run only"
  [[ -f $OUT/mpich.stats ]] && stats "$OUT/mpich.stats"
  [[ $worse -eq 0 ]]
}

mpi4py_tests() {
  local version
  version=$(/usr/bin/python3 -c 'import mpi4py; print(mpi4py.__version__)')
  local src=$CACHE/mpi4py-$version
  if [[ ! -d $src/test ]]; then
    (cd "$CACHE" && pip download --quiet --no-binary :all: --no-deps "mpi4py==$version" -d . >/dev/null)
    tar -xzf "$CACHE/mpi4py-$version.tar.gz" -C "$CACHE"
  fi
  local job=(srun -N"$NODES" -n$((2 * NODES)) --mpi=pmix --cpu-bind=cores)
  [[ $NODES -gt 1 ]] && job+=(--exclusive)
  echo "mpi4py $version test suite (at mpi4py's default thread level), $NODES node(s) x 2 ranks, Open MPI:"
  local m ok=0
  for m in native topo; do
    local pre=()
    [[ $m == topo ]] && pre=("$TR" --spin 0 --)
    # Spawning and dynamic processes need a launcher of MPI's own (not Slurm's srun).
    (cd "$src/test" && timeout 1200 "$ROOT/slurm/dev-cluster" exec env OMPI_MCA_mpi_yield_when_idle=1 \
      TOPO_RUN_STATS=1 "${job[@]}" "${pre[@]}" /usr/bin/python3 runtests.py --no-builddir -q \
      -e test_spawn -e test_dynproc) >"$OUT/py.$m" 2>&1 </dev/null || true
    echo "  $([[ $m == native ]] && echo "without topo-run" || echo "under topo-run  "): $(grep -E '^(Ran|OK|FAILED)' "$OUT/py.$m" | sort -u | tr '\n' ' ')"
  done
  if grep -q '^OK' "$OUT/py.topo" || ! grep -q '^OK' "$OUT/py.native"; then ok=1; fi
  stats "$OUT/py.topo"
  [[ $ok -eq 1 ]]
}

status=0
for s in "${SUITES[@]}"; do
  case $s in
    mpich-coll) mpich_coll || status=1 ;;
    mpi4py) mpi4py_tests || status=1 ;;
    *) echo "third-party.sh: unknown suite '$s' (mpich-coll, mpi4py)" >&2; exit 2 ;;
  esac
done
exit $status
