#!/usr/bin/env bash
# End-to-end test of `topo-run simulate` on the private Slurm cluster: `--calibrate` as a
# job step of 2 nodes x 2 ranks measures the links inside a node and between the two
# emulated nodes (under different leaf switches of the dev cluster's map: `spine`) and
# writes a model file, which the simulator then reads to predict the same job. Runs as
# root. Every srun runs under `timeout`.
#
#   tests/e2e/simulate.sh [BIN_DIR]     (BIN_DIR holds topo-run and topo-run-simulate)
#
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$(cd "${1:-$ROOT/target/release}" && pwd)"
TOPO_RUN="$BIN/topo-run"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/topo-run-e2e-simulate.XXXXXX")"
T=120
# shellcheck source=tests/e2e/lib.sh
source "$ROOT/tests/e2e/lib.sh"

for b in "$TOPO_RUN" "$BIN/topo-run-simulate"; do
  [[ -x $b ]] || { echo "simulate.sh: $b is not built (cargo build --release -p topo-run -p topo-simulate)" >&2; exit 2; }
done
cleanup() { stop_cluster; rm -rf "$WORK"; }
trap cleanup EXIT
MAP="$ROOT/slurm/maps/dev-cluster.yaml"

# The scale guard (issue "Faster than flat at every scale"): on 1,024 nodes x 128 ranks
# under leaf, spine and core switches, with the default model, topo-run's predicted 8-byte
# Allreduce and Barrier take at most the best flat algorithm's time, and the map makes
# neither slower than without it. Before the network part ran over the node leaders alone,
# the map made them 1.79 and 1.65 x the flat algorithms.
if timeout 300 bash "$ROOT/benchmarks/simulate-scale.sh" --nodes 1024 --rpn 128 --maps map,none \
     --ops allreduce,barrier --sizes 8 --bin "$BIN" >"$WORK/scale" 2>"$WORK/err"; then
  verdict=$(awk -F'|' '$2 ~ /1024 x 128/ {
      gsub(/ /, "", $4); gsub(/ /, "", $6); rows++
      if ($12 + 0 > 1.0) print "over 1.0: " $0
      t[$4 "," $6] = ($8 + 0 > $9 + 0) ? $8 + 0 : $9 + 0 }
    END {
      if (rows != 4) print "expected 4 rows, got " rows
      for (op in t) { split(op, k, ","); if (k[1] == "map" && t[op] > t["none," k[2]]) print "the map makes " k[2] " slower" } }' "$WORK/scale")
  if [[ -z $verdict ]]; then
    ok "1,024 nodes x 128: 8-byte Allreduce and Barrier at most the best flat algorithm, the map no slower ($(awk -F'|' '$2 ~ /1024/ {printf "%s %s %s;", $4, $6, $12}' "$WORK/scale" | tr -s ' '))"
  else
    bad "1,024 nodes x 128 against the flat algorithms" "$verdict" "$(cat "$WORK/scale")"
  fi
else
  bad "benchmarks/simulate-scale.sh on 1,024 nodes x 128" "$(tail -3 "$WORK/err")"
fi

# Few ranks per node: on 128 nodes x 16 and x 32, block and cyclic, the small Allreduce
# (recursive doubling over every rank in the hierarchy's order) and the Barrier (the flat
# dissemination, nodes interleaved) take at most the best flat algorithm's time. Through
# the node's levels they took up to 1.05 and 1.03 x.
if timeout 300 bash "$ROOT/benchmarks/simulate-scale.sh" --nodes 128 --rpn 16,32 --placements block,cyclic \
     --maps map --ops allreduce,barrier --sizes 8 --bin "$BIN" >"$WORK/few" 2>"$WORK/err"; then
  verdict=$(awk -F'|' '$2 ~ /128 x/ { rows++; if ($12 + 0 > 1.0) print "over 1.0: " $0 }
    END { if (rows != 8) print "expected 8 rows, got " rows }' "$WORK/few")
  if [[ -z $verdict ]]; then
    ok "128 nodes x 16 and x 32: Allreduce of 8 B and Barrier at most the best flat algorithm ($(awk -F'|' '$2 ~ /128 x/ {printf "%s %s %s %s;", $2, $3, $6, $12}' "$WORK/few" | tr -s ' '))"
  else
    bad "128 nodes x 16 and x 32, small Allreduce and Barrier against the flat algorithms" "$verdict" "$(cat "$WORK/few")"
  fi
else
  bad "benchmarks/simulate-scale.sh on 128 nodes x 16 and x 32" "$(tail -3 "$WORK/err")"
fi

# Large messages: on 128 nodes x 128 ranks, block and cyclic, topo-run's Allreduce of 64
# KiB and 1 MiB (Rabenseifner's in the hierarchy's order) takes at most the best flat
# algorithm's time. Before, its schedule reduced and broadcast the whole message through
# the levels: up to 6.6 x Rabenseifner's.
if timeout 300 bash "$ROOT/benchmarks/simulate-scale.sh" --nodes 128 --rpn 128 --placements block,cyclic \
     --maps map --ops allreduce --sizes 64K,1M --bin "$BIN" >"$WORK/large" 2>"$WORK/err"; then
  verdict=$(awk -F'|' '$2 ~ /128 x 128/ { rows++; if ($12 + 0 > 1.0) print "over 1.0: " $0 }
    END { if (rows != 4) print "expected 4 rows, got " rows }' "$WORK/large")
  if [[ -z $verdict ]]; then
    ok "128 nodes x 128: Allreduce of 64 KiB and 1 MiB at most the best flat algorithm ($(awk -F'|' '$2 ~ /128 x/ {printf "%s %s %s;", $3, $7, $12}' "$WORK/large" | tr -s ' '))"
  else
    bad "128 nodes x 128, large Allreduce against the flat algorithms" "$verdict" "$(cat "$WORK/large")"
  fi
else
  bad "benchmarks/simulate-scale.sh on 128 nodes x 128" "$(tail -3 "$WORK/err")"
fi

# Reduce_scatter_block of 8 and 256-byte blocks on 16 nodes x 32, block and cyclic
# placement: recursive halving in the hierarchy's order at most the best flat algorithm
# (the Allreduce's form took 1.11 and 1.76 x of 8-byte blocks).
if timeout 300 bash "$ROOT/benchmarks/simulate-scale.sh" --nodes 16 --rpn 32 --maps map \
     --placements block,cyclic --ops reduce_scatter --sizes 8,256 --bin "$BIN" \
     >"$WORK/rs" 2>"$WORK/err"; then
  verdict=$(awk -F'|' '$2 ~ / x 32/ { rows++; if ($12 + 0 > 1.0) print "over 1.0: " $0 }
    END { if (rows != 4) print "expected 4 rows, got " rows }' "$WORK/rs")
  if [[ -z $verdict ]]; then
    ok "16 nodes x 32, block and cyclic: Reduce_scatter_block of 8 and 256 B at most the best flat algorithm ($(awk -F'|' '$2 ~ / x 32/ {printf "%s %s %s;", $3, $7, $12}' "$WORK/rs" | tr -s ' '))"
  else
    bad "16 nodes x 32, Reduce_scatter_block against the flat algorithms" "$verdict" "$(cat "$WORK/rs")"
  fi
else
  bad "benchmarks/simulate-scale.sh --ops reduce_scatter on 16 nodes x 32" "$(tail -3 "$WORK/err")"
fi

# The rows that were last above 1.0 on 16 and 128 nodes x 32, with the map, on the default
# model and a network 5 x slower: the Allreduce of 1 MiB on 16 nodes with block placement
# (1.23 x the ring with the message whole; Rabenseifner's in overlapping pieces now), of 64
# KiB under cyclic placement (1.009 with the kept half copied in a round of its own), and
# the Allgather of 8 B per rank under cyclic placement (1.13 x with the switch-aware order,
# whose first exchange crosses the network; small blocks take the order without switches).
if timeout 300 bash "$ROOT/benchmarks/simulate-scale.sh" --nodes 16 --rpn 32 --maps map \
     --models default,slow-net --ops allreduce --sizes 1M --bin "$BIN" >"$WORK/last" 2>"$WORK/err" &&
   timeout 300 bash "$ROOT/benchmarks/simulate-scale.sh" --nodes 128 --rpn 32 --placements cyclic \
     --maps map --models default,slow-net --ops allreduce,allgather --sizes 8,64K \
     --bin "$BIN" >>"$WORK/last" 2>"$WORK/err"; then
  verdict=$(awk -F'|' '$2 ~ / x 32/ { rows++; if ($12 + 0 > 1.0) print "over 1.0: " $0 }
    END { if (rows != 10) print "expected 10 rows, got " rows }' "$WORK/last")
  if [[ -z $verdict ]]; then
    ok "16 nodes x 32 block (1 MiB Allreduce) and 128 x 32 cyclic (8 B and 64 KiB Allreduce and Allgather), both models: at most the best flat algorithm (worst $(awk -F'|' '$2 ~ / x 32/ {print $12}' "$WORK/last" | sort -n | tail -1 | tr -d ' '))"
  else
    bad "16 and 128 nodes x 32, Allreduce and Allgather against the flat algorithms" "$verdict" "$(cat "$WORK/last")"
  fi
else
  bad "benchmarks/simulate-scale.sh on 16 and 128 nodes x 32" "$(tail -3 "$WORK/err")"
fi

start_cluster 2
run "$WORK/out" "$WORK/err" srun -N2 -n4 --mpi=pmix --cpu-bind=cores \
  "$TOPO_RUN" simulate --calibrate "$WORK/dev.model" --network-map "$MAP"
if [[ $RC -ne 0 || ! -s $WORK/dev.model ]]; then
  give_up "calibrate on 2 nodes x 2" "exit $RC" "$(tail -4 "$WORK/err")"
fi
# Rank 0 measured 1 rank on its node and 2 on the other, under the other leaf switch, through
# MPI; and the rank on its node again through topo-run's queues, which give the classes
# inside a node.
if grep -Eq '^#   0-1 +node +MPI ' "$WORK/dev.model" \
   && (( $(grep -Ec '^#   0-[23] +spine +MPI ' "$WORK/dev.model") == 2 )) \
   && grep -Eq '^#   0-1 +node +queues ' "$WORK/dev.model" \
   && grep -q "^# The classes inside a node are topo-run's queues" "$WORK/dev.model"; then
  ok "calibrate on 2 nodes x 2: pairs classed node and spine, the node's through topo-run's queues ($(grep -c '^#   0-' "$WORK/dev.model") rows)"
else
  bad "calibrate: pair classes" "$(grep '^#   ' "$WORK/dev.model")"
fi
if grep -Eq '^link node .* points=1KiB:[0-9.e-]+us,4KiB:' "$WORK/dev.model"; then
  ok "calibrate: the sizes between 8 B and 1 MiB are the links' points"
else
  bad "calibrate: points" "$(grep '^link node' "$WORK/dev.model")"
fi
# Every class has a measured, positive latency and bandwidth. (Inside an emulated node
# Open MPI's path is as slow as between them here, so their order is not checked.)
bad_links=$(awk '/^link / { split($3, a, "="); split($4, b, "=");
  if (a[2] + 0 <= 0 || b[2] + 0 <= 0) print }' "$WORK/dev.model")
node_alpha=$(sed -n 's/^link node *alpha=\([0-9.e-]*\)us.*/\1/p' "$WORK/dev.model")
spine_alpha=$(sed -n 's/^link spine *alpha=\([0-9.e-]*\)us.*/\1/p' "$WORK/dev.model")
if [[ -z $bad_links && -n $node_alpha && -n $spine_alpha ]] \
   && (( $(grep -c '^link ' "$WORK/dev.model") == 8 )); then
  ok "calibrate: 8 classes with positive values (node ${node_alpha} us, spine ${spine_alpha} us)"
else
  bad "calibrate: link values" "$bad_links" "$(grep '^link' "$WORK/dev.model")"
fi
# The simulator reads the file it wrote.
if timeout "$T" "$TOPO_RUN" simulate --job "$ROOT/examples/jobs/dev-cluster-2x2.yaml" \
     --network-map "$MAP" --model "$WORK/dev.model" --ops allreduce --sizes 8 >"$WORK/pred" 2>"$WORK/err" \
   && grep -Eq '^allreduce +8 +topo-run' "$WORK/pred"; then
  ok "the calibrated model predicts the same job: $(grep -E '^allreduce +8 +topo-run' "$WORK/pred" | tr -s ' ')"
else
  bad "simulate with the calibrated model" "$(tail -3 "$WORK/err")"
fi
# Two ranks on one node: the call overhead from topo-run's chained broadcasts.
run "$WORK/out" "$WORK/err" srun -N1 -n2 --mpi=pmix --cpu-bind=cores \
  "$TOPO_RUN" simulate --calibrate "$WORK/pair.model"
if [[ $RC -eq 0 ]] && grep -q "^# topo-run's 8-byte broadcasts chained on the two ranks" "$WORK/pair.model" \
   && grep -Eq '^call +overhead=[0-9.e-]+us$' "$WORK/pair.model"; then
  ok "calibrate on 1 node x 2: $(grep '^call' "$WORK/pair.model" | tr -s ' ') from chained broadcasts"
else
  bad "calibrate on 1 node x 2: call overhead" "exit $RC" "$(tail -3 "$WORK/err")" "$(grep '^#\|^call' "$WORK/pair.model")"
fi
# One rank cannot calibrate: a clear message and exit 2.
run "$WORK/out" "$WORK/err" srun -N1 -n1 --mpi=pmix "$TOPO_RUN" simulate --calibrate "$WORK/one.model"
if [[ $RC -eq 2 ]] && grep -q 'needs at least 2 ranks' "$WORK/err"; then
  ok "calibrate with 1 rank: exit 2 and the fix"
else
  bad "calibrate with 1 rank" "exit $RC" "$(tail -3 "$WORK/err")"
fi

stop_cluster
summary
