#!/usr/bin/env bash
# Validates `topo-run simulate`'s cost model on the dev cluster, where every rank has a
# core of its own: 1 node x 2 ranks, and 2 nodes x 1 rank (each rank bound to a core of the
# host of its own; the emulated nodes talk over TCP on one host). It calibrates the model
# there (`topo-run simulate --calibrate`: the classes inside a node through topo-run's
# queues, between the nodes through MPI), measures topo-run's collectives and Open MPI's
# with `coll-bench --chain --vary` (each call starts when the previous one's data has
# arrived, so a call's time is the collective's latency, which is what the simulator
# predicts; and each call sends new data, as an application's does, not data the other
# rank's cache still holds from the call before), and prints the predictions beside the
# medians of the runs as one markdown table, with the error (predicted / measured - 1)
# and a summary line per side.
#
#   bash benchmarks/validate-model.sh [--runs N] [--sizes LIST] [--ops LIST] [--bin DIR]
#
#   --runs   coll-bench runs per job (default 3); the table takes their median
#   --sizes  message sizes (default 8,1K,4K,64K,1M)
#   --ops    collectives (default bcast,reduce,allreduce,allgather,barrier)
#   --bin    where topo-run and coll-bench are (default target/release)
#
# It starts and stops the dev cluster (slurm/dev-cluster) itself: about 3 minutes with
# three runs. The models and the measurements stay in a scratch directory, printed first.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=3 sizes=8,1K,4K,64K,1M ops=bcast,reduce,allreduce,allgather,barrier bin=target/release
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=$2 ;;
    --sizes) sizes=$2 ;;
    --ops) ops=$2 ;;
    --bin) bin=$2 ;;
    *) echo "validate-model.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
bin=$(realpath "$bin")
for b in topo-run topo-run-simulate coll-bench; do
  [[ -x $bin/$b ]] || { echo "validate-model.sh: $bin/$b missing (cargo build --release)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/validate-model.XXXXXX)
echo "scratch: $work" >&2
dc=slurm/dev-cluster
map=$PWD/slurm/maps/dev-cluster.yaml
# The largest size asked for, in bytes, for coll-bench's --max.
max=$(python3 -c "import sys; print(max(int(s[:-1]) * {'K': 1024, 'M': 1 << 20}[s[-1]] if s[-1] in 'KM' else int(s) for s in sys.argv[1].split(',')))" "$sizes")
# Each rank bound to the host's CPU numbered like its node (node1: 0, node2: 1), so that
# ranks of different emulated nodes never share a core.
bind=(sh -c 'exec taskset -c "$SLURM_NODEID" "$@"' sh)

bench() { # JOB NODES RANKS SRUN-BIND...
  local job=$1 nodes=$2 ranks=$3
  shift 3
  for r in $(seq "$runs"); do
    timeout 900 $dc exec srun -N"$nodes" -n"$ranks" --mpi=pmix "$@" "$bin/topo-run" -- \
      "$bin/coll-bench" --chain --vary --ops "$ops" --min 8 --max "$max" --csv >"$work/$job.$r.csv" 2>>"$work/err"
  done
}

$dc stop >/dev/null 2>&1 || true
timeout 300 $dc start 1 >&2
timeout 300 $dc exec srun -N1 -n2 --mpi=pmix --cpu-bind=cores \
  "$bin/topo-run" simulate --calibrate "$work/one.model" >/dev/null 2>>"$work/err"
bench 1x2 1 2 --cpu-bind=cores
$dc stop >/dev/null
timeout 300 $dc start 2 >&2
timeout 300 $dc exec srun -N2 -n2 --mpi=pmix --cpu-bind=none "${bind[@]}" \
  "$bin/topo-run" simulate --calibrate "$work/net.model" --network-map "$map" >/dev/null 2>>"$work/err"
bench 2x1 2 2 --cpu-bind=none "${bind[@]}"
$dc stop >/dev/null

# The model: one.model's classes inside a node, copy, reduce and call; net.model's classes
# between nodes and the network interface.
{
  echo "version 1"
  grep -E '^link (l2|l3|numa|socket|node) ' "$work/one.model"
  grep -E '^(copy|reduce|call) ' "$work/one.model"
  grep -E '^link (leaf|spine|world) ' "$work/net.model"
  grep -E '^nic ' "$work/net.model"
} >"$work/valid.model"
for job in 1x2 2x1; do
  "$bin/topo-run" simulate --job "examples/jobs/dev-cluster-$job.yaml" --network-map "$map" \
    --model "$work/valid.model" --ops "$ops" --sizes "$sizes" --format json >"$work/$job.json"
done

python3 - "$work" "$runs" <<'PYEOF'
import csv, json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
rows, errors = [], {"topo-run": [], "flat": []}
print("| job | op | bytes | topo-run predicted (us) | measured (us) | error "
      "| best flat algorithm | predicted (us) | Open MPI measured (us) | error |")
print("|---|---|---|---|---|---|---|---|---|---|")
for job in ("1x2", "2x1"):
    measured = {}
    for r in range(1, runs + 1):
        for line in csv.reader(open(f"{work}/{job}.{r}.csv")):
            if len(line) == 6 and line[0] != "op":
                measured.setdefault((line[0], int(line[1])), []).append((float(line[3]), float(line[4])))
    pred = json.load(open(f"{work}/{job}.json"))["predictions"]
    cases = []
    for p in pred:
        key = (p["op"], p["bytes"])
        if key not in cases:
            cases.append(key)
    for op, size in cases:
        here = [p for p in pred if (p["op"], p["bytes"]) == (op, size) and "outcome" in p]
        # coll-bench times the blocking calls: compare their prediction.
        topo = next(p for p in here if p["algorithm"] == "topo-run blocking")
        flat = min((p for p in here if not p["algorithm"].startswith("topo-run")),
                   key=lambda p: p["outcome"]["time_us"])
        m = measured.get((op, size))
        if not m:
            continue
        mt = statistics.median(x for x, _ in m)
        mn = statistics.median(y for _, y in m)
        pt, pf = topo["outcome"]["time_us"], flat["outcome"]["time_us"]
        et, ef = pt / mt - 1, pf / mn - 1
        errors["topo-run"].append(et)
        errors["flat"].append(ef)
        print(f"| {job} | {op} | {size} | {pt:.2f} | {mt:.2f} | {et:+.0%} "
              f"| {flat['algorithm']} | {pf:.2f} | {mn:.2f} | {ef:+.0%} |")
print()
for side, es in errors.items():
    inside = sum(abs(e) <= 0.30 for e in es)
    print(f"{side}: {inside} of {len(es)} within +-30 %, errors {min(es):+.0%} to {max(es):+.0%}")
PYEOF
