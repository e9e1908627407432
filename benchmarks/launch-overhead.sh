#!/usr/bin/env bash
# What topo-run adds to a launch.
#
#   benchmarks/launch-overhead.sh [RUNS]     (default 21; needs root for the dev cluster)
#
# 1. On the dev cluster (1 node): `srun --mpi=pmix -n 2 topo-run -- true` against
#    `srun --mpi=pmix -n 2 true`, interleaved, RUNS times each; medians and ratio.
# 2. One verbose launch, to show where topo-run's own time goes.
# 3. topo-run alone in a fake Slurm environment of 1,024 nodes x 128 tasks (131,072 ranks;
#    discovery from Slurm's variables, a synthetic 128-core hwloc topology, a 3-level
#    network map), RUNS times; median.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-21}
cargo build --release --locked -p topo-run >/dev/null 2>&1
TR=$PWD/target/release/topo-run
slurm/dev-cluster start 1 >/dev/null

ms() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000 )); }
median() { sort -n | awk '{a[NR]=$1} END {m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2; printf "%.1f", m / 1000}'; }

plain=(); wrapped=()
for _ in $(seq "$RUNS"); do
  plain+=("$(ms timeout 60 slurm/dev-cluster exec srun --mpi=pmix -n 2 true)")
  wrapped+=("$(ms timeout 60 slurm/dev-cluster exec srun --mpi=pmix -n 2 "$TR" -- true)")
done
p=$(printf '%s\n' "${plain[@]}" | median); w=$(printf '%s\n' "${wrapped[@]}" | median)
echo "srun --mpi=pmix -n 2 true:                median $p ms over $RUNS runs"
echo "srun --mpi=pmix -n 2 topo-run -- true:    median $w ms over $RUNS runs"
awk -v p="$p" -v w="$w" 'BEGIN { printf "added: %.1f ms per launch, ratio %.2f\n", w - p, w / p }'

echo
echo "== where the time goes (one launch, topo-run -v)"
timeout 60 slurm/dev-cluster exec srun --mpi=pmix -n 2 "$TR" -v -- true 2>&1 | sort

echo
echo "== fake Slurm environment: 1,024 nodes x 128 tasks = 131,072 ranks (rank 0)"
masks=$(python3 -c "print(','.join(hex(1 << i) for i in range(128)))")
fake=(env -i PATH="$PATH"
  HWLOC_SYNTHETIC="pack:2 numa:4 l3:1 core:16 pu:1"
  SLURM_PROCID=0 SLURM_NTASKS=131072 SLURM_LOCALID=0 SLURMD_NODENAME=node0001
  SLURM_STEP_NODELIST='node[0001-1024]' SLURM_STEP_TASKS_PER_NODE='128(x1024)'
  SLURM_JOB_ID=1 SLURM_STEP_ID=0 SLURM_CPU_BIND_TYPE=mask_cpu: SLURM_CPU_BIND_LIST="$masks"
  taskset -c 0 "$TR" --network-map benchmarks/maps/fake-1024.conf)
"${fake[@]}" --show -- true
times=()
for _ in $(seq "$RUNS"); do times+=("$(ms "${fake[@]}" -- true)"); done
echo "topo-run -- true, 131,072 ranks: median $(printf '%s\n' "${times[@]}" | median) ms over $RUNS runs"
"${fake[@]}" -v -- true 2>&1 | sed 's/^/  /'
