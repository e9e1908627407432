#!/usr/bin/env bash
# Real MPI applications natively and under topo-run, interleaved, on the private dev
# cluster: LAMMPS (Lennard-Jones melt, copper EAM, and the solvated peptide of Debian's
# lammps-examples: CHARMM force field, long-range electrostatics by PPPM), HPCC (HPL, PTRANS, MPIRandomAccess,
# MPIFFT, ...), Quantum ESPRESSO pw.x (bulk silicon, k-point pools with -nk 2, a
# pseudopotential made by ld1.x) and an mpi4py program, all Debian's, linked against the
# same Open MPI.
#
#   bash benchmarks/apps/run.sh [--tiny] [--runs N] [--nodes N] [--per-node N]
#                               [--apps LIST] [--out DIR] [--bin DIR]
#
# Each run of an application is made twice, in alternating order: natively (`topo-run
# --native`: the PMPI library loaded, every collective MPI's own) and under topo-run, both
# with `--profile`. The harness checks that the results agree (LAMMPS's thermo output,
# HPCC's own verification, QE's total energy, the mpi4py program's checksum) and writes
# DIR/apps.md (the table: median times and their ratio, the share of collective calls on
# topo-run's path, the profiles' collective time both ways) and DIR/apps.svg (the ratios).
# --tiny: small inputs, one run each way (the README's test command runs this through
# tests/e2e/apps.sh). Default: 5 runs, 1 node x 2 ranks, every application.
#
# These machines have 2 cores: with 2 ranks per node the applications' compute dominates
# and their collectives are a few percent of the time, so the ratio of whole runs is
# parity within noise; the profiles say how much of the time was in collectives at all.
# `topo-run simulate --profile` predicts the collective time at scale (see DIR/apps.md).
#
# Needs root (the dev cluster) and installs lammps, hpcc and quantum-espresso if missing.
# Exits 1 if a run fails or results disagree.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
IN="$ROOT/benchmarks/apps/inputs"
TINY=0 RUNS=5 NODES=1 PER_NODE=2 APPS="lammps-melt,lammps-eam,lammps-peptide,hpcc,qe,mpi4py"
OUT="$ROOT/benchmarks/apps/out" BIN="$ROOT/target/release"
while (($#)); do
  case $1 in
    --tiny) TINY=1; RUNS=1 ;;
    --runs) RUNS=$2; shift ;;
    --nodes) NODES=$2; shift ;;
    --per-node) PER_NODE=$2; shift ;;
    --apps) APPS=$2; shift ;;
    --out) OUT=$2; shift ;;
    --bin) BIN=$2; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed 's/^# \{0,1\}//;/^set -uo/d'; exit 0 ;;
    *) echo "apps: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
BIN="$(cd "$BIN" && pwd)"
TOPO_RUN="$BIN/topo-run"
[[ -x $TOPO_RUN && -e $BIN/libtopo_preload.so ]] \
  || { echo "apps: $BIN has no topo-run or libtopo_preload.so (cargo build --release -p topo-run -p topo-preload)" >&2; exit 2; }
RANKS=$((NODES * PER_NODE))
T=$((TINY ? 120 : 900))  # seconds allowed for one run
CLUSTER="$ROOT/slurm/dev-cluster"
export DEV_CLUSTER_DIR="${DEV_CLUSTER_DIR:-${TMPDIR:-/tmp}/topo-run-dev-cluster}"

# The applications, from Debian.
need=()
for p in lammps lammps-examples hpcc quantum-espresso python3-mpi4py python3-numpy; do
  [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == "install ok installed" ]] || need+=("$p")
done
if ((${#need[@]})); then
  (($(id -u) == 0)) || { echo "apps: install as root: apt-get install ${need[*]}" >&2; exit 2; }
  echo "apps: installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null \
    || { echo "apps: apt-get install ${need[*]} failed" >&2; exit 2; }
fi

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
WORK="$OUT/work"
rm -rf "$WORK"
mkdir -p "$WORK"
"$CLUSTER" start "$NODES" >"$WORK/cluster.log" 2>&1 || { cat "$WORK/cluster.log"; exit 1; }
trap '"$CLUSTER" stop >/dev/null 2>&1' EXIT

SRUN=(srun -N"$NODES" -n"$RANKS" --exclusive --mpi=pmix --cpu-bind=cores)
# Several emulated nodes share this machine's cores: Open MPI yields while it waits.
((NODES > 1)) && export OMPI_MCA_mpi_yield_when_idle=1

# Sizes: tiny (the test command) and the benchmark's.
if ((TINY)); then
  MELT=(6 100) EAM=(5 50) PEPTIDE=20 HPL_N=400 QE_ECUT=10 QE_K=2 PY=(2000 50)
else
  MELT=(16 500) EAM=(12 200) PEPTIDE=300 HPL_N=4000 QE_ECUT=24 QE_K=6 PY=(200000 500)
fi
PEPTIDE_DIR=/usr/share/lammps/examples/peptide
# HPCC's process grid: P x Q = ranks, P <= Q.
P=1
for ((p = 1; p * p <= RANKS; p++)); do ((RANKS % p == 0)) && P=$p; done
Q=$((RANKS / P))

# prepare APP DIR: the application's input in DIR.
prepare() {
  local app=$1 dir=$2
  mkdir -p "$dir"
  case $app in
    lammps-melt) cp "$IN/in.melt" "$dir/" ;;
    lammps-eam) cp "$IN/in.eam" "$dir/" ;;
    lammps-peptide) sed "s/^run[[:space:]].*/run $PEPTIDE/" "$PEPTIDE_DIR/in.peptide" >"$dir/in.peptide"
        cp "$PEPTIDE_DIR/data.peptide" "$dir/" ;;
    hpcc) sed -e "s/^HPL_NB /80 /" -e "s/^HPL_N /$HPL_N /" -e "s/^HPL_P /$P /" -e "s/^HPL_Q /$Q /" \
            "$IN/hpccinf.txt" >"$dir/hpccinf.txt" ;;
    qe) sed -e "s/ECUT/$QE_ECUT/" -e "s/KGRID/$QE_K/g" "$IN/si.scf.in" >"$dir/si.scf.in"
        cp "$WORK/Si.pz-tm.UPF" "$dir/" ;;
    mpi4py) cp "$IN/mpi4py-app.py" "$dir/" ;;
  esac
}

# command APP: the application's command line (run in its directory).
command_of() {
  case $1 in
    lammps-melt) echo lmp -in in.melt -var n "${MELT[0]}" -var steps "${MELT[1]}" -log log.lammps ;;
    lammps-eam) echo lmp -in in.eam -var n "${EAM[0]}" -var steps "${EAM[1]}" -log log.lammps ;;
    lammps-peptide) echo lmp -in in.peptide -log log.lammps ;;
    hpcc) echo hpcc ;;
    qe) echo pw.x -nk 2 -in si.scf.in ;;
    mpi4py) echo /usr/bin/python3 mpi4py-app.py "${PY[0]}" "${PY[1]}" ;;
  esac
}

# result APP DIR: the run's result, as one text to compare between runs.
result_of() {
  local app=$1 dir=$2
  case $app in
    lammps-*) # the thermo table (the peptide's multi-line style: without the CPU time)
      awk '/^ *Step |^-+ Step /{on=1} on&&/^Loop time/{on=0} on' "$dir/log.lammps" \
        | sed 's/CPU = *[0-9.]* (sec)//' ;;
    hpcc) # HPCC's own verdicts: no check failed, and its error counts (its residuals, and
      # how many PTRANS lines it prints, differ from run to run, natively too)
      echo "FAILED $(grep -c 'FAILED\|Failure' "$dir/hpccoutf.txt")"
      grep -E "tests completed and failed|_Errors=" "$dir/hpccoutf.txt"
      grep -q "End of HPC Challenge tests" "$dir/hpccoutf.txt" || echo "HPCC did not finish" ;;
    qe) grep "^!" "$dir/stdout" ;;
    mpi4py) grep "^checksum" "$dir/stdout" ;;
  esac
}

if [[ ,$APPS, == *,qe,* ]]; then
  (cd "$WORK" && ld1.x <"$IN/si.ld1" >ld1.out 2>&1) && [[ -s $WORK/Si.pz-tm.UPF ]] \
    || { echo "apps: ld1.x could not make the silicon pseudopotential" >&2; tail -5 "$WORK/ld1.out" >&2; exit 1; }
fi

fail=0
IFS=, read -r -a app_list <<<"$APPS"
: >"$WORK/runs.tsv"
for ((r = 1; r <= RUNS; r++)); do
  for app in "${app_list[@]}"; do
    ways=(native topo)
    ((r % 2 == 0)) && ways=(topo native)
    for way in "${ways[@]}"; do
      dir="$WORK/$app/$way.$r"
      prepare "$app" "$dir"
      extra=()
      [[ $way == native ]] && extra=(--native)
      t0=$(date +%s.%N)
      # shellcheck disable=SC2046 # the command's words
      (cd "$dir" && timeout "$T" "$CLUSTER" exec "${SRUN[@]}" "$TOPO_RUN" --profile "$dir/profile.json" \
        "${extra[@]}" -- $(command_of "$app") >"$dir/stdout" 2>"$dir/stderr")
      rc=$?
      t1=$(date +%s.%N)
      if ((rc != 0)) || [[ ! -s $dir/profile.json ]]; then
        echo "apps: FAIL $app ($way, run $r): exit $rc$([[ -s $dir/profile.json ]] || echo ', no profile')"
        tail -5 "$dir/stderr" | sed 's/^/     /'
        fail=1
        continue
      fi
      result_of "$app" "$dir" >"$dir/result"
      printf '%s\t%s\t%s\t%s\t%s\n' "$app" "$way" "$r" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" "$dir" >>"$WORK/runs.tsv"
    done
  done
done

TOPO_RUN="$TOPO_RUN" python3 "$ROOT/benchmarks/apps/report.py" "$WORK/runs.tsv" "$OUT" "$NODES" "$PER_NODE" "$TINY" || fail=1
exit $fail
