#!/usr/bin/env bash
# topo-run against each of Open MPI's collective components, on the dev cluster.
#
#   benchmarks/components.sh [RUNS] [COLL_BENCH_OPTION...]     (default 5 runs; needs root)
#
# Runs `coll-bench --csv` under `srun --mpi=pmix -N1 -n2 --cpu-bind=cores topo-run` (with
# NODES=2: `-N2 -n4 --exclusive`, 2 emulated nodes of 2 ranks on this machine's cores, with
# `--spin 0` and Open MPI yielding when idle, as the tests run them) with
# Open MPI's default selection (coll/tuned), with coll/sm preferred and with coll/han
# preferred (their MCA priority variables raised above tuned's 30), the three in turn,
# RUNS times. Each run times topo-run and the component side by side in the same job.
# Prints one table: per op and size, the median over runs of topo-run's time (over every
# run of the three) and of each component's; per component, the median over runs of
# topo-run's time over the component's measured in the same job (runs can differ in
# speed, the jobs' own ratios do not mix them); and the worst of the three, the ratio to
# the best component. The cache-line floor of each run (coll-bench's first line) is
# printed too: this machine changes speed between runs, and the floor says in which
# state a run was. Each row ends with the range over the runs of each run's ratio to its
# best component and a verdict: ahead (worst at most 1.00), parity (above, but some run at
# most 1.00: the gap lies inside the spread of interleaved runs) or behind (every run above).
# In every iteration the two columns take turns going first (coll-bench's default since
# 2026-12-05; --topo-first for the old fixed order, which favoured MPI's column by up to
# 1.5 x in some rows). With --control both columns run MPI's own collective: the ratios
# then show how far the measurement itself leans and spreads, row by row.
# Extra options go to coll-bench (for example --max 1048576, --vary, or --comm reversed to
# run both sides on world in reversed order: dup, node, parity, half and reversed are the
# communicators coll-bench can make). Without --ops it
# runs every collective coll-bench has: barrier, bcast, reduce, allreduce and allgather
# (coll/sm has no allgather of its own; Open MPI then takes tuned's). TR and BENCH name
# another build's topo-run and coll-bench, to compare two builds run after run.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
shift || true
case " $* " in
  *" --ops "* | *" --ops="*) ;;
  *) set -- --ops barrier,bcast,reduce,allreduce,allgather "$@" ;;
esac
cargo build --release --locked -p topo-run -p topo-examples >/dev/null 2>&1
TR=${TR:-$PWD/target/release/topo-run}
BENCH=${BENCH:-$PWD/target/release/coll-bench}
NODES=${NODES:-1}
JOB=(-N1 -n2)
TOPO_OPTS=()
YIELD=()
if [[ $NODES -gt 1 ]]; then
  JOB=(-N"$NODES" -n$((2 * NODES)) --exclusive)
  TOPO_OPTS=(--spin 0)
  YIELD=(OMPI_MCA_mpi_yield_when_idle=1)
fi
slurm/dev-cluster start "$NODES" >/dev/null
OUT=$(mktemp -d "${TMPDIR:-/tmp}/topo-run-components.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

declare -A MCA=(
  [tuned]=""
  [sm]="OMPI_MCA_coll_sm_priority=100"
  [han]="OMPI_MCA_coll_han_priority=100"
)
for run in $(seq "$RUNS"); do
  for c in tuned sm han; do
    # shellcheck disable=SC2086  # MCA[$c] is empty or one NAME=VALUE word
    timeout 1200 slurm/dev-cluster exec env ${MCA[$c]} "${YIELD[@]}" srun "${JOB[@]}" --mpi=pmix \
      --cpu-bind=cores "$TR" "${TOPO_OPTS[@]}" -- "$BENCH" --csv "$@" >"$OUT/$c.$run.csv" 2>"$OUT/$c.$run.err" \
      || { echo "components.sh: the $c run $run failed:" >&2; cat "$OUT/$c.$run.err" >&2; exit 1; }
    # No floor where the communicator has one rank per node (--comm parity on 2 nodes).
    floor=$(grep -o 'takes [0-9]* ns' "$OUT/$c.$run.err" | head -1 | tr -dc '0-9' || true)
    echo "run $run, $c: cache line ${floor:-?} ns one way" >&2
  done
done

python3 - "$OUT" "$RUNS" <<'EOF'
import csv, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
comps = ["tuned", "sm", "han"]
topo, native, ratio = {}, {c: {} for c in comps}, {c: {} for c in comps}
for c in comps:
    for r in range(1, runs + 1):
        for row in csv.DictReader(open(f"{out}/{c}.{r}.csv")):
            key = (row["op"], int(row["bytes"]))
            t, m = float(row["topo_us"]), float(row["native_us"])
            topo.setdefault(key, []).append(t)
            native[c].setdefault(key, []).append(m)
            ratio[c].setdefault(key, []).append(t / m)
order = {"barrier": 0, "bcast": 1, "reduce": 2, "allreduce": 3, "allgather": 4}
med = statistics.median
print(f"{'op':<10} {'bytes':>9} {'topo_us':>8} " + " ".join(f"{c + '_us':>8}" for c in comps)
      + " " + " ".join(f"{'/' + c:>7}" for c in comps) + f" {'worst':>6} {'runs':>11} verdict")
worst = (0.0, None)
verdicts = {}
for key in sorted(topo, key=lambda k: (order.get(k[0], 9), k[1])):
    r = {c: med(ratio[c][key]) for c in comps}
    w = max(r.values())
    worst = max(worst, (w, key))
    # Run by run, the ratio to the best component of that run (the highest of its three).
    per_run = [max(ratio[c][key][i] for c in comps) for i in range(runs)]
    lo, hi = min(per_run), max(per_run)
    verdict = "ahead" if w <= 1.0 else ("parity" if lo <= 1.0 else "behind")
    verdicts[verdict] = verdicts.get(verdict, 0) + 1
    print(f"{key[0]:<10} {key[1]:>9} {med(topo[key]):>8.3f} "
          + " ".join(f"{med(native[c][key]):>8.3f}" for c in comps) + " "
          + " ".join(f"{r[c]:>7.2f}" for c in comps) + f" {w:>6.2f} {lo:>5.2f}-{hi:<5.2f} {verdict}")
print(f"times: medians over the runs (topo-run's over all {3 * runs}); /tuned, /sm, /han: the "
      f"median over {runs} runs of topo-run's time over the component's in the same job; "
      f"worst: the highest of the three (the ratio to the best component); runs: the lowest "
      f"and highest over the runs of each run's ratio to its best component; verdict: ahead "
      f"where worst is at most 1.00, parity where it is above but some run was at most 1.00 "
      f"(the gap lies inside the spread of the runs), behind where every run was above. "
      f"Highest: {worst[0]:.2f} ({worst[1][0]} {worst[1][1]} bytes). "
      + ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items())))
EOF
